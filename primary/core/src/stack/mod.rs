//! Stack documents: what a person writes. Parsing (YAML or JSON), then
//! validation against the plugins' announced schemas into a dependency
//! graph. Pure: reading the file is the caller's business.
//!
//! ```yaml
//! stack: quickstart
//! targets:
//!   - name: home
//!     plugin: local
//!     config: { root: "${stack_dir}/demo" }
//! resources:
//!   - label: app
//!     type: Local::Fs::Directory
//!     target: home
//!     properties: { path: app }
//!   - label: readme
//!     type: Local::Fs::File
//!     target: home
//!     properties:
//!       path: "${app.path}/README"
//!       content: hello
//! ```

mod error;
mod expr;
mod graph;
mod keys;
pub mod limits;

use std::collections::BTreeMap;

use orrery_schema::{PropertyMap, Value};
use serde::Deserialize;

pub use error::{Problem, StackError};
pub use expr::{Expr, Part, Reference};
pub use graph::{validate, Catalog, Graph};
pub use limits::{Limit, Limits};

/// A target: a plugin and its configuration for one place resources live.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetDecl {
    /// Unique name; also the NATS subject token, so no dots or spaces.
    pub name: String,
    /// The plugin serving it.
    pub plugin: String,
    /// The plugin's configuration for it.
    pub config: PropertyMap,
}

/// A resource as declared.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDecl {
    /// Unique label within the stack.
    pub label: String,
    /// Resource type, as announced by the target's plugin.
    pub resource_type: String,
    /// The target's name.
    pub target: String,
    /// Desired properties.
    pub properties: BTreeMap<String, Expr>,
    /// The line of the declaration, where it could be found.
    pub line: Option<usize>,
}

/// A parsed stack document.
#[derive(Clone, Debug, PartialEq)]
pub struct Stack {
    /// The stack's name: its identity in the state store.
    pub name: String,
    /// Where it came from, for messages.
    pub source: String,
    /// Targets.
    pub targets: Vec<TargetDecl>,
    /// Resources.
    pub resources: Vec<ResourceDecl>,
}

impl Stack {
    /// The target named `name`.
    pub fn target(&self, name: &str) -> Option<&TargetDecl> {
        self.targets.iter().find(|t| t.name == name)
    }

    /// The resource labelled `label`.
    pub fn resource(&self, label: &str) -> Option<&ResourceDecl> {
        self.resources.iter().find(|r| r.label == label)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    stack: String,
    #[serde(default)]
    targets: Vec<TargetDoc>,
    #[serde(default)]
    resources: Vec<ResourceDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    name: String,
    plugin: String,
    #[serde(default)]
    config: PropertyMap,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceDoc {
    label: String,
    #[serde(rename = "type")]
    resource_type: String,
    target: String,
    #[serde(default)]
    properties: PropertyMap,
}

/// Every key each part of a document accepts, by part (`document`,
/// `target`, `resource`), as the parser knows them: `docs/stacks.md` is
/// checked against this.
pub fn accepted_keys() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("document", keys::fields_of::<Document>()),
        ("target", keys::fields_of::<TargetDoc>()),
        ("resource", keys::fields_of::<ResourceDoc>()),
    ]
}

/// Parses a stack document. `source` names it in errors (a file path);
/// JSON is accepted too (it is YAML). `stack_dir` is the value of the
/// built-in variable `${stack_dir}`.
///
/// The document is first held to the default [`Limits`] (16 MiB of text,
/// 64 levels of nesting, 10,000 aliases, 1,000,000 nodes and 32 MiB of
/// scalars once aliases are expanded; see [`limits`]): past one, the error
/// is [`Problem::TooLarge`] naming the line, and nothing was built.
pub fn parse(source: &str, text: &str, stack_dir: &str) -> Result<Stack, StackError> {
    parse_with_limits(source, text, stack_dir, &Limits::default())
}

/// [`parse`] with other limits.
pub fn parse_with_limits(
    source: &str,
    text: &str,
    stack_dir: &str,
    limits: &Limits,
) -> Result<Stack, StackError> {
    limits::check(text, limits).map_err(|refusal| {
        let (line, problem) = match refusal {
            limits::Refusal::Limit { line, limit } => (line, Problem::TooLarge(limit)),
            limits::Refusal::Syntax { line, message } => (Some(line), Problem::Syntax(message)),
        };
        StackError {
            file: source.to_owned(),
            line,
            resource: None,
            problem,
        }
    })?;
    let doc: Document = serde_norway::from_str(text).map_err(|e| StackError {
        file: source.to_owned(),
        line: e.location().map(|l| l.line()),
        resource: None,
        problem: Problem::Syntax(e.to_string()),
    })?;
    let vars = BTreeMap::from([("stack_dir".to_owned(), stack_dir.to_owned())]);
    // One pass over the text: looking each label up separately would make
    // parsing quadratic in the number of resources.
    let lines = label_lines(text);
    let line_of = |label: &str| lines.get(label).copied();
    let at = |label: Option<&str>, problem| StackError {
        file: source.to_owned(),
        line: label.and_then(line_of),
        resource: label.map(str::to_owned),
        problem,
    };
    let mut targets = Vec::new();
    for t in doc.targets {
        let mut config = PropertyMap::new();
        for (k, v) in t.config {
            // Targets cannot reference resources; only variables are expanded.
            match Expr::from_value(v, &vars) {
                Ok(Expr::Literal(v)) => {
                    config.insert(k, v);
                }
                Ok(_) => {
                    return Err(at(
                        None,
                        Problem::Syntax(format!(
                            "target `{}`: config `{k}` cannot reference a resource",
                            t.name
                        )),
                    ))
                }
                Err(e) => {
                    return Err(at(
                        None,
                        Problem::Syntax(format!("target `{}`: {}", t.name, e.0)),
                    ))
                }
            }
        }
        targets.push(TargetDecl {
            name: t.name,
            plugin: t.plugin,
            config,
        });
    }
    let mut resources = Vec::new();
    for r in doc.resources {
        let mut properties = BTreeMap::new();
        for (k, v) in r.properties {
            let expr = Expr::from_value(v, &vars).map_err(|e| {
                at(
                    Some(&r.label),
                    Problem::Syntax(format!("property `{k}`: {}", e.0)),
                )
            })?;
            properties.insert(k, expr);
        }
        resources.push(ResourceDecl {
            line: line_of(&r.label),
            label: r.label,
            resource_type: r.resource_type,
            target: r.target,
            properties,
        });
    }
    Ok(Stack {
        name: doc.stack,
        source: source.to_owned(),
        targets,
        resources,
    })
}

/// The line declaring each label, found by its `label:` key (YAML) or
/// `"label":` (JSON); the first declaration wins.
fn label_lines(text: &str) -> std::collections::HashMap<&str, usize> {
    let mut out = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim_start().trim_start_matches("- ").trim_start();
        let value = l
            .strip_prefix("label:")
            .or_else(|| l.strip_prefix("\"label\":"))
            .map(|v| {
                v.trim()
                    .trim_end_matches(',')
                    .trim_matches(|c| c == '"' || c == '\'')
            });
        if let Some(label) = value {
            out.entry(label).or_insert(i + 1);
        }
    }
    out
}

/// A literal property value, if the expression has no reference.
pub fn literal(expr: &Expr) -> Option<&Value> {
    match expr {
        Expr::Literal(v) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod alias_tests {
    use super::*;

    const HEAD: &str = "stack: s\ntargets:\n  - name: home\n    plugin: local\nresources:\n";

    /// Issue #14's shape: one anchored list aliased 200 times, and that
    /// list of copies aliased again, in a ~600 KB document.
    fn bomb() -> String {
        let seed = vec!["x"; 150_000].join(", ");
        let copies = vec!["*a"; 200].join(", ");
        let again = vec!["*b"; 200].join(", ");
        format!(
            "{HEAD}  - label: bomb\n    type: T\n    target: home\n    properties:\n      seed: &a [{seed}]\n      copies: &b [{copies}]\n      again: [{again}]\n"
        )
    }

    #[test]
    fn an_alias_bomb_is_refused_on_the_line_that_passes_the_limit() {
        let text = bomb();
        assert!(text.len() > 450_000, "{}", text.len());
        let e = parse("bomb.yaml", &text, "/").unwrap_err();
        assert_eq!(
            e.problem,
            Problem::TooLarge(Limit::Nodes {
                max: limits::MAX_NODES
            })
        );
        assert_eq!(e.line, Some(11), "{e}");
        assert_eq!(
            e.to_string(),
            "bomb.yaml:11: the document expands to more than 1000000 nodes once its aliases are resolved"
        );
    }

    #[test]
    fn a_few_aliases_still_parse() {
        let text = format!(
            "{HEAD}  - label: a\n    type: T\n    target: home\n    properties: &p {{ path: a, tags: &t [x, y] }}\n  - label: b\n    type: T\n    target: home\n    properties: {{ path: b, tags: *t }}\n"
        );
        let stack = parse("s.yaml", &text, "/").unwrap();
        assert_eq!(
            stack.resources[1].properties["tags"],
            stack.resources[0].properties["tags"]
        );
        assert_eq!(stack.resources[1].line, Some(10));
    }

    #[test]
    fn limits_are_applied_as_given() {
        let text = format!("{HEAD}  - label: a\n    type: T\n    target: home\n");
        let tight = Limits {
            max_nodes: 5,
            ..Limits::default()
        };
        let e = parse_with_limits("s.yaml", &text, "/", &tight).unwrap_err();
        assert_eq!(e.problem, Problem::TooLarge(Limit::Nodes { max: 5 }));
        assert_eq!(e.line, Some(3));
        assert!(parse("s.yaml", &text, "/").is_ok());
    }

    #[test]
    fn syntax_errors_name_the_file_and_line() {
        let text = format!("{HEAD}  - label: a\n    type: T: U\n    target: home\n");
        let e = parse("bad.yaml", &text, "/").unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad.yaml:7: mapping values are not allowed in this context at line 7 column 12"
        );
        // An unclosed list is found where the text ends.
        let text = format!("{HEAD}  - label: [unclosed\n");
        let e = parse("bad.yaml", &text, "/").unwrap_err();
        assert!(matches!(e.problem, Problem::Syntax(_)), "{e:?}");
        assert_eq!(e.line, Some(7), "{e}");
    }

    #[test]
    fn shape_errors_from_the_deserializer_name_the_line() {
        let text = format!("{HEAD}  - label: a\n    type: T\n    target: home\n    colour: blue\n");
        let e = parse("bad.yaml", &text, "/").unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
    }
}
