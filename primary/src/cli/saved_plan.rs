//! Saved plans (Terraform's `plan -out`): `orrery plan --out FILE` writes
//! one, `orrery apply FILE` plans again from it and runs only when the new
//! plan's hash is the saved one.
//!
//! A saved plan is one JSON object whose first key, `orrery_saved_plan`,
//! is the format's version: `apply` tells a saved plan from a stack
//! document by those opening bytes. It holds what planning again needs
//! (the document, the files it read, the parameter values, the mode, the
//! selection) and the plan itself with its hash. It never holds a secret:
//! `type: secret` parameters are named only and asked for again at apply
//! (the plan's keyed hash of their values tells whether they are the same),
//! and a document that gives a secret itself (a write-only field, a
//! secret-looking target config written out) is refused when saving.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use orrery_core::select::Selection;
use orrery_primary::service::view::{ConfirmedPlan, SecretsView};
use orrery_primary::service::{Engine, StackInputs};
use orrery_primary::stack::Supplied;
use orrery_primary::state::CommandDocument;

/// The version of the format this release writes and the newest it reads.
pub const FORMAT: u64 = 1;

/// The key that opens a saved plan and holds its format's version.
const VERSION_KEY: &str = "orrery_saved_plan";

/// The largest saved plan read: a document is at most 16 MiB, and what
/// it reads is bounded as a request's files are.
const MAX_BYTES: u64 = 256 << 20;

/// Why a saved plan cannot be read, written or applied.
#[derive(Debug, thiserror::Error)]
pub enum SavedPlanError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot write the saved plan {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is larger than a saved plan may be ({MAX_BYTES} bytes)")]
    TooLarge { path: String },
    #[error("{path} is neither a stack document nor a saved plan: it is not UTF-8 text")]
    Foreign { path: String },
    #[error("the saved plan {path} is truncated or corrupt ({reason}); plan again")]
    Corrupt { path: String, reason: String },
    #[error("the saved plan {path} has format {found}, newer than this orrery reads ({FORMAT}); apply it with the release that wrote it, or plan again")]
    Newer { path: String, found: u64 },
    #[error("refusing to save the plan: it would hold a secret in clear ({0}); give secrets through `type: secret` parameters, which a saved plan names but never holds (`orrery apply FILE` asks for them again)")]
    SecretInClear(String),
    #[error(
        "refusing to save the plan: the value of parameter `{0}` cannot be written as JSON ({1})"
    )]
    Unsaveable(String, String),
    #[error("the saved plan needs its secret parameter `{0}` again: give it with --var, --var-file or ORRERY_VAR_{0} (a saved plan never holds a secret)")]
    SecretMissing(String),
    #[error("the saved plan fixes parameter `{0}`; plan again to give it another value")]
    Fixed(String),
    #[error("a saved plan is applied as it was made: {0} cannot be given with it; plan again with it instead")]
    Option(&'static str),
}

/// A saved plan (see the module's documentation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SavedPlan {
    /// The format's version ([`FORMAT`]); first, so that a saved plan is
    /// told by its opening bytes.
    pub orrery_saved_plan: u64,
    /// Which release wrote it, for people.
    #[serde(default)]
    pub written_by: String,
    /// The stack's name.
    pub stack: String,
    /// `reconcile` or `patch`.
    pub mode: String,
    /// How errors name the document.
    pub source: String,
    /// The value of `${stack_dir}`.
    pub stack_dir: String,
    /// The document's text.
    pub document: String,
    /// What the document read (module sources, `file()`), by path.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Parameter values given as values (`--var-file`), secrets left out.
    #[serde(default)]
    pub vars: serde_json::Map<String, Value>,
    /// Parameter values given as text (`--var`, `ORRERY_VAR_*`), secrets
    /// left out.
    #[serde(default)]
    pub var_texts: BTreeMap<String, String>,
    /// The `type: secret` parameters, asked for again at apply.
    #[serde(default)]
    pub secret_parameters: Vec<String>,
    /// `--target`, `--exclude`, `--replace`.
    #[serde(default)]
    pub selection: Selection,
    /// The plan's hash: what `apply` requires of its new plan.
    pub plan_hash: String,
    /// The plan as `orrery plan --output json` prints it.
    pub plan: Value,
    /// Where it was read from, for messages.
    #[serde(skip)]
    path: String,
}

impl SavedPlan {
    /// The saved plan of `plan` (a `PlanView` as JSON), made of
    /// `document` with `given` (values by parameter name, as given) and
    /// the files it read. Refused when the document gives a secret itself;
    /// secret parameters' values are left out.
    pub fn new(
        document: &CommandDocument,
        files: BTreeMap<String, String>,
        given: BTreeMap<String, Supplied>,
        selection: Selection,
        plan: Value,
    ) -> Result<SavedPlan, SavedPlanError> {
        let text = |key: &str| plan[key].as_str().unwrap_or_default().to_owned();
        let secrets: SecretsView =
            serde_json::from_value(plan["secrets"].clone()).unwrap_or_default();
        if !secrets.in_text.is_empty() {
            return Err(SavedPlanError::SecretInClear(secrets.in_text.join("; ")));
        }
        let (mut vars, mut var_texts) = (serde_json::Map::new(), BTreeMap::new());
        for (name, value) in given {
            if secrets.parameters.contains(&name) {
                continue;
            }
            match value {
                Supplied::Text(text) => {
                    var_texts.insert(name, text);
                }
                Supplied::Value(value) => {
                    let json = serde_json::to_value(value)
                        .map_err(|e| SavedPlanError::Unsaveable(name.clone(), e.to_string()))?;
                    vars.insert(name, json);
                }
            }
        }
        Ok(SavedPlan {
            orrery_saved_plan: FORMAT,
            written_by: format!("orrery {}", env!("CARGO_PKG_VERSION")),
            stack: text("stack"),
            mode: document.mode.clone(),
            source: document.source.clone(),
            stack_dir: document.stack_dir.clone(),
            document: document.text.clone(),
            files,
            vars,
            var_texts,
            secret_parameters: secrets.parameters,
            selection,
            plan_hash: text("plan_hash"),
            plan,
            path: String::new(),
        })
    }

    /// Writes it to `path`, readable by its owner only (a temporary file
    /// beside it, renamed over it). `secrets` are values that must not
    /// appear in it (the secret parameters' values): a last check that
    /// none reached the document, a file or a parameter that is not
    /// secret.
    pub fn write(&self, path: &Path, secrets: &[String]) -> Result<(), SavedPlanError> {
        use std::os::unix::fs::OpenOptionsExt;
        let write_err = |source| SavedPlanError::Write {
            path: path.display().to_string(),
            source,
        };
        let bytes = serde_json::to_vec(self).map_err(|e| write_err(e.into()))?;
        for secret in secrets.iter().filter(|s| !s.is_empty()) {
            // As JSON writes it, without the quotes.
            let escaped = serde_json::to_string(secret).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if contains(&bytes, secret.as_bytes()) || contains(&bytes, escaped.as_bytes()) {
                return Err(SavedPlanError::SecretInClear(
                    "a secret parameter's value appears in the document, a file it reads or a parameter that is not secret".into(),
                ));
            }
        }
        let name = path
            .file_name()
            .map_or_else(|| "plan".to_owned(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(write_err)
    }

    /// Reads `path`: `None` when it is not a saved plan (a stack document,
    /// to be read as one), else the plan or why it cannot be used.
    pub fn read(path: &Path) -> Result<Option<SavedPlan>, SavedPlanError> {
        let shown = path.display().to_string();
        let read_err = |source| SavedPlanError::Read {
            path: shown.clone(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut bytes = Vec::new();
        file.take(MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(read_err)?;
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return Err(SavedPlanError::Foreign { path: shown });
        };
        let opening = text.trim_start().strip_prefix('{').map(str::trim_start);
        if !opening.is_some_and(|o| o.starts_with(&format!("\"{VERSION_KEY}\""))) {
            return Ok(None);
        }
        if bytes.len() as u64 > MAX_BYTES {
            return Err(SavedPlanError::TooLarge { path: shown });
        }
        let corrupt = |reason: String| SavedPlanError::Corrupt {
            path: shown.clone(),
            reason,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
        match value.get(VERSION_KEY).and_then(Value::as_u64) {
            Some(found) if found > FORMAT => {
                return Err(SavedPlanError::Newer { path: shown, found })
            }
            Some(0) | None => return Err(corrupt(format!("`{VERSION_KEY}` is not a version"))),
            Some(_) => {}
        }
        let mut saved: SavedPlan =
            serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
        if saved.plan.get("plan_hash").and_then(Value::as_str) != Some(saved.plan_hash.as_str()) {
            return Err(corrupt("its hash is not its plan's".into()));
        }
        if saved.plan.get("stack").and_then(Value::as_str) != Some(saved.stack.as_str()) {
            return Err(corrupt("its stack is not its plan's".into()));
        }
        saved.path = shown;
        Ok(Some(saved))
    }

    /// The document it was made of, as the service takes it.
    pub fn document(&self, engine: Engine) -> CommandDocument {
        CommandDocument {
            engine: engine.name().to_owned(),
            mode: self.mode.clone(),
            source: self.source.clone(),
            stack_dir: self.stack_dir.clone(),
            text: self.document.clone(),
            selection: Default::default(),
        }
    }

    /// The inputs to plan it again with: its values and files, and the
    /// secret parameters' values from `given` (`--var`, `--var-file`,
    /// `ORRERY_VAR_*` at apply), each of which must be there. A value
    /// given for a parameter it fixes is refused.
    pub fn inputs(&self, given: StackInputs) -> Result<StackInputs, SavedPlanError> {
        let mut vars = BTreeMap::new();
        for (name, value) in &self.vars {
            let value =
                serde_json::from_value(value.clone()).map_err(|e| SavedPlanError::Corrupt {
                    path: self.path.clone(),
                    reason: format!("parameter `{name}`: {e}"),
                })?;
            vars.insert(name.clone(), Supplied::Value(value));
        }
        for (name, text) in &self.var_texts {
            vars.insert(name.clone(), Supplied::Text(text.clone()));
        }
        if let Some(name) = given
            .vars
            .keys()
            .find(|n| !self.secret_parameters.contains(n))
        {
            return Err(SavedPlanError::Fixed(name.clone()));
        }
        let mut env = BTreeMap::new();
        for name in &self.secret_parameters {
            match (given.vars.get(name), given.env.get(name)) {
                (Some(value), _) => {
                    vars.insert(name.clone(), value.clone());
                }
                (None, Some(value)) => {
                    env.insert(name.clone(), value.clone());
                }
                (None, None) => return Err(SavedPlanError::SecretMissing(name.clone())),
            }
        }
        Ok(StackInputs {
            vars,
            env,
            files_dir: None,
            files: Some(Arc::new(self.files.clone())),
            stack_reads: None,
            record_reads: None,
        })
    }

    /// The plan as confirmed: it must run exactly.
    pub fn confirmed(&self) -> Result<ConfirmedPlan, SavedPlanError> {
        let mut confirmed: ConfirmedPlan = serde_json::from_value(confirmed_json(&self.plan))
            .map_err(|e| SavedPlanError::Corrupt {
                path: self.path.clone(),
                reason: format!("its plan: {e}"),
            })?;
        confirmed.exact = true;
        Ok(confirmed)
    }
}

/// What an apply sends of the plan it shows (`confirmed_plan`): its hash,
/// its changes (label, action, fields) and its other parts, for the
/// primary to run nothing the plan did not show and to name what differs.
pub fn confirmed_json(plan: &Value) -> Value {
    let changes: Vec<Value> = plan["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["action"] != "no-op")
        .map(|c| serde_json::json!({ "label": c["label"], "action": c["action"], "fields": c["fields"] }))
        .collect();
    let mut confirmed = serde_json::json!({ "plan_hash": plan["plan_hash"], "changes": changes });
    for part in ["moved", "imported", "protect", "outputs", "secrets"] {
        if let Some(shown) = plan.get(part) {
            confirmed[part] = shown.clone();
        }
    }
    confirmed
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}
