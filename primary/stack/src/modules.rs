//! Modules: a stack-like file of parameters, variables, resources,
//! outputs (and further modules), used from a document's `modules:`
//! section. Where a module's file is, how deep they nest, and how an
//! error inside one names the chain of uses that led to it.

use std::collections::BTreeMap;

use orrery_schema::Value;
use serde::Deserialize;

use super::params::ParameterDoc;
use super::{OutputDoc, Problem, ResourceDoc, StackError};

/// Deepest nesting of modules in modules.
pub const MAX_MODULE_DEPTH: usize = 8;
/// Most module instances one document may expand to, across every level.
pub const MAX_MODULE_INSTANCES: usize = 10_000;

/// A module's file.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModuleDoc {
    #[serde(default)]
    pub parameters: BTreeMap<String, ParameterDoc>,
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    #[serde(default)]
    pub modules: Vec<ModuleUseDoc>,
    #[serde(default)]
    pub resources: Vec<ResourceDoc>,
    #[serde(default)]
    pub outputs: BTreeMap<String, OutputDoc>,
}

/// One entry of `modules:`: which module, with which parameter values.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModuleUseDoc {
    pub name: String,
    pub source: String,
    #[serde(default, rename = "with")]
    pub with_values: BTreeMap<String, Value>,
    #[serde(default)]
    pub for_each: Option<Value>,
    #[serde(default)]
    pub count: Option<Value>,
    #[serde(default)]
    pub enabled: Option<Value>,
}

/// One use of a module on the way from the document to a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleUse {
    /// The file holding the `modules:` entry.
    pub file: String,
    /// The entry's line in it.
    pub line: Option<usize>,
    /// The module instance's address in that file (`db`, `db["eu"]`).
    pub module: String,
}

/// Where a resource declared inside a module comes from: the module's
/// file, and the uses that led to it, outermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The module's file, for messages.
    pub file: String,
    /// The chain of uses, from the stack's document down.
    pub uses: Vec<ModuleUse>,
}

impl Origin {
    /// `error` (placed in the module's file) inside the chain of uses
    /// that led to it.
    pub fn wrap(&self, error: StackError) -> StackError {
        wrap_uses(&self.uses, error)
    }
}

/// `error` inside `uses`, outermost first.
pub(super) fn wrap_uses(uses: &[ModuleUse], error: StackError) -> StackError {
    uses.iter().rev().fold(error, |inner, u| StackError {
        file: u.file.clone(),
        line: u.line,
        position: None,
        resource: None,
        problem: Problem::InModule {
            module: u.module.clone(),
            error: Box::new(inner),
        },
    })
}

/// The path, relative to the stack's directory, of the module `source`
/// names from a file in `dir` (itself relative to the stack's directory).
/// Stack authors are not trusted: an absolute path, or one that climbs
/// out of the stack's directory, is refused.
pub(super) fn resolve_source(dir: &str, source: &str) -> Result<String, String> {
    if let Some(rest) = source.strip_prefix("hub:") {
        return Err(format!(
            "`hub:{rest}`: modules from the hub are not supported yet; use a path (`./modules/db.yaml`)"
        ));
    }
    if source.contains(':') || source.starts_with('/') || source.starts_with('\\') {
        return Err(format!(
            "`{source}`: a module's source is a path relative to the file using it"
        ));
    }
    join(dir, source).ok_or_else(|| format!("`{source}` leaves the stack's directory"))
}

/// `path` (relative, `/`-separated) from `dir`, `.` and `..` resolved;
/// `None` if it climbs above the top.
pub(super) fn join(dir: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in dir.split('/').chain(path.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// The directory of a stack-relative path.
pub(super) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The line of each `modules:` entry's `name:` in `text`, by name.
pub(super) fn use_lines(text: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if !line.starts_with([' ', '\t', '#', '-']) && !line.is_empty() {
            inside = line.starts_with("modules:");
            continue;
        }
        if !inside {
            continue;
        }
        if let Some(name) = super::declared(line, "name:", "\"name\":") {
            out.entry(name.to_owned()).or_insert(i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_stay_inside_the_stack_directory() {
        assert_eq!(resolve_source("", "./db.yaml").unwrap(), "db.yaml");
        assert_eq!(
            resolve_source("modules/net", "../db/main.yaml").unwrap(),
            "modules/db/main.yaml"
        );
        assert!(resolve_source("", "../x.yaml")
            .unwrap_err()
            .contains("leaves the stack's directory"));
        assert!(resolve_source("a", "./../../x.yaml").is_err());
        assert!(resolve_source("", "/etc/passwd").is_err());
        assert!(resolve_source("", "C:/x").is_err());
        assert!(resolve_source("", "hub:db@1.0")
            .unwrap_err()
            .contains("not supported yet"));
    }

    #[test]
    fn use_lines_are_found_in_the_modules_section_only() {
        let text = "targets:\n  - name: db\nmodules:\n  - name: db\n    source: ./db.yaml\n";
        assert_eq!(use_lines(text).get("db"), Some(&4));
    }
}
