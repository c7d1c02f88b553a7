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
pub mod eval;
mod expr;
mod functions;
mod graph;
mod instances;
mod keys;
pub mod limits;
mod locate;
mod params;
mod syntax;
mod variables;

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use orrery_schema::{PropertyMap, Value};
use serde::Deserialize;

pub use error::{Position, Problem, StackError};
pub use eval::{EvalError, FileReader, Known};
pub use expr::{Expr, Part, Reference};
pub use functions::FUNCTIONS;
pub use graph::{validate, Catalog, Graph};
pub use instances::{address, MAX_INSTANCES};
pub use limits::{Limit, Limits};
pub use locate::{locate_all, MAX_LOCATED};
pub use params::{Inputs, Kind, Supplied};
pub use syntax::Ast;

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
    /// Properties whose value came from a secret parameter: planned,
    /// shown and stored like write-only fields (hashed, never in clear).
    pub secret: BTreeSet<String>,
    /// Labels (or a `for_each`/`count` declaration's label, meaning all
    /// its instances) this resource depends on besides its references.
    pub depends_on: Vec<String>,
    /// A delete or replace of it is refused unless the command allows it.
    pub protect: bool,
    /// Fields whose changes are not planned once the resource exists.
    pub ignore_changes: BTreeSet<String>,
}

/// An output as declared.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputDecl {
    /// Its value, computed when the stack's resources are recorded.
    pub value: Expr,
    /// Declared `secret: true`, or computed from a secret parameter:
    /// shown masked and its value never stored.
    pub secret: bool,
}

impl ResourceDecl {
    /// Whether `field`'s value must never be stored or shown: the type
    /// says it is write-only or opaque, or it came from a secret parameter.
    pub fn is_secret(&self, field: &orrery_schema::FieldSchema) -> bool {
        field.hints.is_secret() || self.secret.contains(&field.name)
    }

    /// [`ResourceDecl::is_secret`] by field name, for a type that may
    /// not be known (`None`).
    pub fn is_secret_field(
        &self,
        schema: Option<&orrery_schema::ResourceSchema>,
        name: &str,
    ) -> bool {
        self.secret.contains(name)
            || schema
                .and_then(|s| s.field(name))
                .is_some_and(|f| f.hints.is_secret())
    }
}

/// A parsed stack document.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stack {
    /// The stack's name: its identity in the state store.
    pub name: String,
    /// Where it came from, for messages.
    pub source: String,
    /// Targets.
    pub targets: Vec<TargetDecl>,
    /// Resources.
    pub resources: Vec<ResourceDecl>,
    /// Every parameter's value.
    pub parameters: BTreeMap<String, Known>,
    /// Outputs, by name.
    pub outputs: BTreeMap<String, OutputDecl>,
    /// Whether a parameter took a value given by the caller rather than its
    /// default: then the document alone does not say what was applied.
    pub supplied: bool,
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
    parameters: BTreeMap<String, params::ParameterDoc>,
    #[serde(default)]
    variables: BTreeMap<String, Value>,
    #[serde(default)]
    outputs: BTreeMap<String, OutputDoc>,
    #[serde(default)]
    targets: Vec<TargetDoc>,
    #[serde(default)]
    resources: Vec<ResourceDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputDoc {
    value: Value,
    #[serde(default)]
    secret: bool,
    #[serde(default)]
    #[allow(dead_code)] // documentation for readers of the document
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetDoc {
    name: String,
    plugin: String,
    #[serde(default)]
    config: PropertyMap,
    #[serde(default)]
    for_each: Option<Value>,
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
    #[serde(default)]
    for_each: Option<Value>,
    #[serde(default)]
    count: Option<Value>,
    #[serde(default)]
    enabled: Option<Value>,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    protect: bool,
    #[serde(default)]
    ignore_changes: BTreeSet<String>,
}

/// Every key each part of a document accepts, by part (`document`,
/// `target`, `resource`), as the parser knows them: `docs/stacks.md` is
/// checked against this.
pub fn accepted_keys() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("document", keys::fields_of::<Document>()),
        ("target", keys::fields_of::<TargetDoc>()),
        ("resource", keys::fields_of::<ResourceDoc>()),
        ("parameter", keys::fields_of::<params::ParameterDoc>()),
        ("output", keys::fields_of::<OutputDoc>()),
    ]
}

/// Parses a stack document. `source` names it in errors (a file path);
/// JSON is accepted too (it is YAML). `stack_dir` is the value of
/// `${stack_dir}`. Parameters take their defaults and `file()` reads
/// nothing; [`parse_with_inputs`] gives values and a file reader.
///
/// The document is first held to the default [`Limits`] (16 MiB of text,
/// 64 levels of nesting, 10,000 aliases, 1,000,000 nodes and 32 MiB of
/// scalars once aliases are expanded; see [`limits`]): past one, the error
/// is [`Problem::TooLarge`] naming the line, and nothing was built.
pub fn parse(source: &str, text: &str, stack_dir: &str) -> Result<Stack, StackError> {
    parse_with(
        source,
        text,
        stack_dir,
        &Limits::default(),
        &Inputs::default(),
    )
}

/// [`parse`] with other limits.
pub fn parse_with_limits(
    source: &str,
    text: &str,
    stack_dir: &str,
    limits: &Limits,
) -> Result<Stack, StackError> {
    parse_with(source, text, stack_dir, limits, &Inputs::default())
}

/// [`parse`] with parameter values and a reader for `file()`.
pub fn parse_with_inputs(
    source: &str,
    text: &str,
    stack_dir: &str,
    inputs: &Inputs<'_>,
) -> Result<Stack, StackError> {
    parse_with(source, text, stack_dir, &Limits::default(), inputs)
}

fn parse_with(
    source: &str,
    text: &str,
    stack_dir: &str,
    limits: &Limits,
    inputs: &Inputs<'_>,
) -> Result<Stack, StackError> {
    limits::check(text, limits).map_err(|refusal| {
        let (line, problem) = match refusal {
            limits::Refusal::Limit { line, limit } => (line, Problem::TooLarge(limit)),
            limits::Refusal::Syntax { line, message } => (Some(line), Problem::Syntax(message)),
        };
        StackError {
            file: source.to_owned(),
            line,
            position: None,
            resource: None,
            problem,
        }
    })?;
    let doc: Document = serde_norway::from_str(text).map_err(|e| StackError {
        file: source.to_owned(),
        line: e.location().map(|l| l.line()),
        position: e.location().map(|l| {
            Box::new(error::Position {
                column: l.column(),
                span: l.index()..l.index(),
            })
        }),
        resource: None,
        problem: Problem::Syntax(e.to_string()),
    })?;
    // One pass over the text: looking each label up separately would make
    // parsing quadratic in the number of resources.
    let lines = label_lines(text);
    let line_of = |label: &str| lines.get(label).copied();
    let at = |label: Option<&str>, problem| StackError {
        file: source.to_owned(),
        line: label.and_then(line_of),
        position: None,
        resource: label.map(str::to_owned),
        problem,
    };
    let key_line = |section: &str, key: &str| key_line(text, section, key);
    let (parameters, supplied) =
        params::resolve(&doc.parameters, inputs).map_err(|e| StackError {
            file: source.to_owned(),
            line: key_line("parameters", &e.name),
            position: None,
            resource: None,
            problem: Problem::Parameter {
                name: e.name,
                message: e.message,
            },
        })?;
    // A document that reads files does not alone say what was applied.
    let read_files = Cell::new(false);
    let files = |path: &str| {
        read_files.set(true);
        (inputs.files)(path)
    };
    let no_vars = BTreeMap::new();
    let env = |vars| eval::Env {
        params: &parameters,
        vars,
        each: None,
        count: None,
        stack_dir,
        files: &files,
        secret: Cell::new(false),
    };
    let vars =
        variables::compute(&doc.variables, &env(&no_vars)).map_err(|(name, error)| StackError {
            file: source.to_owned(),
            line: key_line("variables", &name),
            position: None,
            resource: None,
            problem: Problem::Expression {
                at: format!("variable `{name}`"),
                error,
            },
        })?;
    let env = env(&vars);
    let too_many = |what: &str| {
        at(
            None,
            Problem::Expression {
                at: "`for_each`, `count`".to_owned(),
                error: EvalError::Limit(format!(
                    "the document expands to more than {MAX_INSTANCES} {what}"
                )),
            },
        )
    };
    let mut targets = Vec::new();
    for t in doc.targets {
        let copies =
            instances::expand(t.for_each.as_ref(), None, &env).map_err(|(key, error)| {
                at(
                    None,
                    Problem::Expression {
                        at: format!("target `{}`: `{key}`", t.name),
                        error,
                    },
                )
            })?;
        for copy in copies {
            let env = env.instance(copy.each.as_ref().map(|(k, v)| (k, v)), None);
            let name = instances::text_field(&t.name, "name", &env).map_err(|error| {
                at(
                    None,
                    Problem::Expression {
                        at: format!("target `{}`: `name`", t.name),
                        error,
                    },
                )
            })?;
            let config = target_config(&name, &t.config, &env).map_err(|p| at(None, p))?;
            targets.push(TargetDecl {
                name,
                plugin: t.plugin.clone(),
                config,
            });
            if targets.len() > MAX_INSTANCES {
                return Err(too_many("targets"));
            }
        }
    }
    let mut resources = Vec::new();
    for r in doc.resources {
        let line = line_of(&r.label);
        let fail = |at: String, error| StackError {
            file: source.to_owned(),
            line,
            position: None,
            resource: Some(r.label.clone()),
            problem: Problem::Expression { at, error },
        };
        let copies = instances::expand(r.for_each.as_ref(), r.count.as_ref(), &env)
            .map_err(|(key, error)| fail(format!("`{key}`"), error))?;
        for copy in copies {
            let env = env.instance(copy.each.as_ref().map(|(k, v)| (k, v)), copy.count);
            let label = format!("{}{}", r.label, copy.suffix);
            let fail = |at: String, error| StackError {
                resource: Some(label.clone()),
                ..fail(at, error)
            };
            if !instances::enabled(r.enabled.as_ref(), &env)
                .map_err(|e| fail("`enabled`".into(), e))?
            {
                continue;
            }
            let target = instances::text_field(&r.target, "target", &env)
                .map_err(|e| fail("`target`".into(), e))?;
            let mut properties = BTreeMap::new();
            let mut secret = BTreeSet::new();
            for (k, v) in &r.properties {
                env.secret.set(false);
                let expr = Expr::from_value(v.clone(), &env)
                    .map_err(|e| fail(format!("property `{k}`"), e))?;
                if env.secret.get() {
                    secret.insert(k.clone());
                }
                properties.insert(k.clone(), expr);
            }
            let mut depends_on = Vec::with_capacity(r.depends_on.len());
            for d in &r.depends_on {
                depends_on.push(
                    instances::text_field(d, "depends_on", &env)
                        .map_err(|e| fail("`depends_on`".into(), e))?,
                );
            }
            resources.push(ResourceDecl {
                line,
                label,
                resource_type: r.resource_type.clone(),
                target,
                properties,
                secret,
                depends_on,
                protect: r.protect,
                ignore_changes: r.ignore_changes.clone(),
            });
            if resources.len() > MAX_INSTANCES {
                return Err(too_many("resources"));
            }
        }
    }
    let mut outputs = BTreeMap::new();
    for (name, o) in doc.outputs {
        env.secret.set(false);
        let value = Expr::from_value(o.value, &env).map_err(|error| StackError {
            file: source.to_owned(),
            line: key_line("outputs", &name),
            position: None,
            resource: None,
            problem: Problem::Expression {
                at: format!("output `{name}`"),
                error,
            },
        })?;
        let secret = o.secret || env.secret.get();
        outputs.insert(name, OutputDecl { value, secret });
    }
    Ok(Stack {
        outputs,
        name: doc.stack,
        source: source.to_owned(),
        targets,
        resources,
        parameters,
        supplied: supplied || read_files.get(),
    })
}

/// A target's configuration, its expressions computed: none may
/// reference a resource, and a secret may only go under a key that is
/// kept out of the store.
fn target_config(
    name: &str,
    config: &PropertyMap,
    env: &eval::Env<'_>,
) -> Result<PropertyMap, Problem> {
    let mut out = PropertyMap::new();
    for (k, v) in config {
        env.secret.set(false);
        let expr = Expr::from_value(v.clone(), env).map_err(|error| Problem::Expression {
            at: format!("target `{name}`: config `{k}`"),
            error,
        })?;
        // Targets are recorded in the store; only keys that look secret
        // are kept out of it.
        if env.secret.get() && !crate::plan::secret_looking_key(k) {
            return Err(Problem::Syntax(format!(
                "target `{name}`: config `{k}` takes a secret parameter, but only keys that look secret (password, token, key, …) are kept out of the store"
            )));
        }
        match expr {
            Expr::Literal(v) => {
                out.insert(k.clone(), v);
            }
            _ => {
                return Err(Problem::Syntax(format!(
                    "target `{name}`: config `{k}` cannot reference a resource"
                )))
            }
        }
    }
    Ok(out)
}

/// The line of `key:` one level inside the top-level `section:` map.
fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if !line.starts_with([' ', '\t', '#']) && !line.is_empty() {
            inside = line.trim_end().strip_suffix(':') == Some(section)
                || line.starts_with(&format!("{section}:"));
            continue;
        }
        let l = line.trim_start();
        if inside
            && (l.strip_prefix(key).is_some_and(|r| r.starts_with(':'))
                || l.strip_prefix(&format!("\"{key}\""))
                    .is_some_and(|r| r.trim_start().starts_with(':')))
        {
            return Some(i + 1);
        }
    }
    None
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
