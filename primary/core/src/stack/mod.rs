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

use std::collections::BTreeMap;

use orrery_schema::{PropertyMap, Value};
use serde::Deserialize;

pub use error::{Problem, StackError};
pub use expr::{Expr, Part, Reference};
pub use graph::{validate, Catalog, Graph};

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

/// Parses a stack document. `source` names it in errors (a file path);
/// JSON is accepted too (it is YAML). `stack_dir` is the value of the
/// built-in variable `${stack_dir}`.
pub fn parse(source: &str, text: &str, stack_dir: &str) -> Result<Stack, StackError> {
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
