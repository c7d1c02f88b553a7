//! # orrery-stack
//!
//! The stack language: what a person writes. A document (YAML, so JSON
//! too) is read within [`Limits`] by one reader ([`yaml`]), its
//! parameters, variables, expressions, modules and instances evaluated,
//! then validated against the plugins' announced schemas into a
//! dependency graph ([`validate`]); [`json_schema`] describes it for
//! editors. Pure, as `orrery-core` is: reading files is the caller's
//! business (through readers handed in), and nothing here reads a clock.
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

mod body;
mod error;
pub mod eval;
mod expr;
mod functions;
mod graph;
mod instances;
pub mod json_schema;
mod keys;
pub mod limits;
mod locate;
pub mod modules;
mod params;
mod syntax;
mod variables;
pub mod yaml;

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

pub use orrery_schema::secret_looking_key;
use orrery_schema::{PropertyMap, Value};
use serde::Deserialize;

pub use error::{Position, Problem, StackError};
pub use eval::{EvalError, FileReader, Known, StackOutputs};
pub use expr::{Expr, Part, Reference};
pub use functions::FUNCTIONS;
pub use graph::{validate, Catalog, Graph};
pub use instances::{address, MAX_INSTANCES};
pub use limits::{Limit, Limits};
pub use locate::{locate_all, MAX_LOCATED};
pub use modules::{ModuleUse, Origin};
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
    /// The plugin's identifier of an existing resource to adopt (`import:`)
    /// when the stack has no record of this one: it is read and recorded
    /// instead of created.
    pub import: Option<String>,
    /// Declared inside a module: its file (where `line` is) and the uses
    /// that led to it. `None` in the stack's own document.
    pub origin: Option<std::sync::Arc<Origin>>,
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

/// An entry of `moved:`: the resource recorded at `from` is the one the
/// document now declares at `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveDecl {
    /// The address it was recorded at.
    pub from: String,
    /// Its address now.
    pub to: String,
    /// The line of the entry.
    pub line: Option<usize>,
}

impl MoveDecl {
    /// A move from `from` to `to`, declared on no particular line.
    pub fn new(from: &str, to: &str) -> MoveDecl {
        MoveDecl {
            from: from.to_owned(),
            to: to.to_owned(),
            line: None,
        }
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
    /// Resources re-addressed since they were recorded, in order.
    pub moved: Vec<MoveDecl>,
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
    modules: Vec<modules::ModuleUseDoc>,
    #[serde(default)]
    resources: Vec<ResourceDoc>,
    #[serde(default)]
    moved: Vec<MovedDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MovedDoc {
    from: String,
    to: String,
}

#[derive(Clone, Deserialize)]
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

#[derive(Clone, Deserialize)]
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
    #[serde(default)]
    import: Option<String>,
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
        ("module_use", keys::fields_of::<modules::ModuleUseDoc>()),
        ("module", keys::fields_of::<modules::ModuleDoc>()),
        ("moved", keys::fields_of::<MovedDoc>()),
    ]
}

/// Parses a stack document. `source` names it in errors (a file path);
/// JSON is accepted too (it is YAML). `stack_dir` is the value of
/// `${stack_dir}`. Parameters take their defaults and `file()` reads
/// nothing; [`parse_with_inputs`] gives values and a file reader.
///
/// The document is read ([`yaml`]) within the default [`Limits`] (16 MiB
/// of text, 64 levels of nesting, 10,000 aliases, 1,000,000 nodes and
/// 32 MiB of scalars once aliases are expanded; see [`limits`]): past one,
/// the error is [`Problem::TooLarge`] naming the line, and the read stops
/// there.
pub fn parse(source: &str, text: &str, stack_dir: &str) -> Result<Stack, StackError> {
    parse_with(
        source,
        text,
        stack_dir,
        &Limits::default(),
        &Inputs::default(),
    )
}

/// The name a document gives its stack (`stack:`), read without
/// evaluating anything else: parameters, variables, `count`, `for_each`,
/// modules and other stacks' outputs are left alone, so a caller can
/// decide who may act on the stack before paying for the rest. The text is
/// held to the same [`Limits`] as [`parse`].
pub fn stack_name(source: &str, text: &str) -> Result<String, StackError> {
    #[derive(Deserialize)]
    struct NameOnly {
        stack: String,
    }
    yaml::read::<NameOnly>(text, &Limits::default())
        .map(|doc| doc.stack)
        .map_err(|e| unread(source, e))
}

/// A document that could not be read, as the error of `source`.
fn unread(source: &str, e: yaml::ReadError) -> StackError {
    StackError {
        file: source.to_owned(),
        line: e.line,
        position: e.position,
        resource: None,
        problem: e.problem,
    }
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
    let doc: Document = yaml::read(text, limits).map_err(|e| unread(source, e))?;
    // A document that reads files (`file()`, modules) does not alone say
    // what was applied.
    let read_files = &Cell::new(false);
    let files = |path: &str| {
        read_files.set(true);
        (inputs.files)(path)
    };
    // So does one that reads other stacks' outputs.
    let stacks = inputs.stacks.map(|read| {
        move |name: &str| {
            read_files.set(true);
            read(name)
        }
    });
    let stacks_reader = stacks.as_ref().map(|f| f as eval::StackOutputs<'_>);
    let budget = eval::Budget::default();
    let mut ctx = body::Ctx::new(source, stack_dir, limits, &files, stacks_reader, &budget);
    // The document's own path, for spotting a module that uses it.
    let own = source.rsplit('/').next().unwrap_or(source).to_owned();
    let place = body::Place {
        source: source.to_owned(),
        text,
        lines: body::Lines::of(text),
        path: String::new(),
        prefix: String::new(),
        uses: Vec::new(),
        chain: vec![own],
    };
    let evaluated = body::evaluate(
        &mut ctx,
        body::Body {
            parameters: &doc.parameters,
            variables: &doc.variables,
            targets: &doc.targets,
            modules: &doc.modules,
            resources: &doc.resources,
            outputs: &doc.outputs,
        },
        &place,
        body::Values::Given(inputs),
    )?;
    let moved_lines = moved_lines(text);
    let moved = doc
        .moved
        .into_iter()
        .enumerate()
        .map(|(i, m)| MoveDecl {
            from: m.from,
            to: m.to,
            line: moved_lines.get(i).copied(),
        })
        .collect();
    Ok(Stack {
        moved,
        outputs: evaluated.outputs,
        name: doc.stack,
        source: source.to_owned(),
        targets: ctx.targets,
        resources: ctx.resources,
        parameters: evaluated.parameters,
        supplied: evaluated.supplied || read_files.get(),
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
        if env.secret.get() && !secret_looking_key(k) {
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

/// The line of each entry of the top-level `moved:` list, in order.
fn moved_lines(text: &str) -> Vec<usize> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if !line.starts_with([' ', '\t', '#', '-']) && !line.is_empty() {
            inside = line.starts_with("moved:");
            continue;
        }
        if inside && line.trim_start().starts_with("- ") {
            out.push(i + 1);
        }
    }
    out
}

/// The line of `key:` one level inside the top-level `section:` map.
pub(crate) fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
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
pub(crate) fn label_lines(text: &str) -> std::collections::HashMap<String, usize> {
    let mut out = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(label) = declared(line, "label:", "\"label\":") {
            if !out.contains_key(label) {
                out.insert(label.to_owned(), i + 1);
            }
        }
    }
    out
}

/// The value a line declares under `yaml_key` (`name:`) or `json_key`
/// (`"name":`), list dashes, quotes and a JSON comma taken off.
pub(crate) fn declared<'t>(line: &'t str, yaml_key: &str, json_key: &str) -> Option<&'t str> {
    // `strip_prefix` in a loop rather than `trim_start_matches("- ")`,
    // which builds a substring searcher for every line of the document.
    let mut l = line.trim_start();
    while let Some(rest) = l.strip_prefix("- ") {
        l = rest;
    }
    let l = l.trim_start();
    let value = l
        .strip_prefix(yaml_key)
        .or_else(|| l.strip_prefix(json_key))?;
    Some(
        value
            .trim()
            .trim_end_matches(',')
            .trim_matches(|c| c == '"' || c == '\''),
    )
}

/// A literal property value, if the expression has no reference.
pub fn literal(expr: &Expr) -> Option<&Value> {
    match expr {
        Expr::Literal(v) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod test_support;

/// The tests' time origin: the one clock read in this crate, test-only.
#[cfg(test)]
mod test_clock {
    #[allow(clippy::disallowed_methods)]
    pub(crate) fn epoch() -> std::time::Instant {
        std::time::Instant::now()
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

#[cfg(test)]
mod module_tests;

#[cfg(test)]
mod cross_stack_tests;
