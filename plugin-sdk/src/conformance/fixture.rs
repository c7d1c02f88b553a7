//! Conformance fixtures: what to create, update and replace per resource type.

use std::path::{Path, PathBuf};

use orrery_schema::{PropertyMap, Target, Value};
use serde::Deserialize;

/// Placeholder in fixture strings replaced by a fresh temporary directory.
pub const TEMPDIR_PLACEHOLDER: &str = "{{tempdir}}";

/// One resource type's fixture, read from a JSON file:
///
/// ```json
/// {"resource_type": "Local::Fs::File",
///  "target": {"name": "conformance", "config": {"root": "{{tempdir}}"}},
///  "create": {"path": "conf-file.txt", "content": "hello"},
///  "update": {"content": "world"},
///  "replace": {"path": "conf-other.txt"}}
/// ```
///
/// `update` and `replace` are merged over `create`. `update` must change
/// only in-place fields; `replace` must change a create-only field.
#[derive(Clone, Debug, Deserialize)]
pub struct Fixture {
    /// The resource type exercised.
    pub resource_type: String,
    /// The target to use; `{{tempdir}}` in its config becomes a temp dir.
    pub target: Target,
    /// Properties to create.
    pub create: PropertyMap,
    /// In-place changes, merged over `create`.
    #[serde(default)]
    pub update: PropertyMap,
    /// A create-only change, merged over `create`; absent skips that check.
    #[serde(default)]
    pub replace: Option<PropertyMap>,
    /// The identifier fields the concurrency check appends `-c0`, `-c1`,
    /// ... to; absent means every string identifier field. A child type
    /// names only its own (a schema's `name`, not its `database`), since
    /// its parent must exist.
    #[serde(default)]
    pub vary: Option<Vec<String>>,
    /// The file it came from.
    #[serde(skip)]
    pub source: PathBuf,
}

/// Why fixtures could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    /// The directory or a file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a valid fixture.
    #[error("{path}: not a valid fixture: {source}")]
    Parse {
        /// The path.
        path: PathBuf,
        /// The parse error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The directory holds no fixtures.
    #[error("no *.json fixtures in {0}")]
    Empty(PathBuf),
}

/// Loads every `*.json` fixture in `dir`, sorted by file name.
///
/// # Errors
///
/// [`FixtureError::Read`] when `dir` or a file in it cannot be read;
/// [`FixtureError::Parse`] when a file is not a valid fixture;
/// [`FixtureError::Empty`] when `dir` holds no `*.json` file.
pub fn load_fixtures(dir: &Path) -> Result<Vec<Fixture>, FixtureError> {
    let read = |path: &Path, source| FixtureError::Read {
        path: path.to_owned(),
        source,
    };
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read(dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(FixtureError::Empty(dir.to_owned()));
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|e| read(&path, e))?;
            let mut fixture: Fixture =
                serde_json::from_str(&text).map_err(|source| FixtureError::Parse {
                    path: path.clone(),
                    source,
                })?;
            fixture.source = path;
            Ok(fixture)
        })
        .collect()
}

/// Replaces the temp-dir placeholder in every string of `value`.
pub(crate) fn substitute(value: &mut Value, tempdir: &str) {
    match value {
        Value::String(s) if s.contains(TEMPDIR_PLACEHOLDER) => {
            *s = s.replace(TEMPDIR_PLACEHOLDER, tempdir);
        }
        Value::List(items) => items.iter_mut().for_each(|v| substitute(v, tempdir)),
        Value::Map(map) => map.values_mut().for_each(|v| substitute(v, tempdir)),
        _ => {}
    }
}

/// `base` with `changes` applied on top.
pub(crate) fn merged(base: &PropertyMap, changes: &PropertyMap) -> PropertyMap {
    let mut out = base.clone();
    out.extend(changes.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}
