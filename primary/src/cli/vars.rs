//! `--var`, `--var-file` and `ORRERY_VAR_<name>`: parameter values for a
//! stack document, read here at the binary's edge and handed to the pure
//! parser as a map.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use orrery_primary::service::StackInputs;
use orrery_primary::stack::{self, Limits, Problem, Supplied};
use orrery_schema::Value;

/// Environment variables holding parameter values start with this.
pub const ENV_PREFIX: &str = "ORRERY_VAR_";

/// Parameter values for a stack document.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct VarArgs {
    /// Give parameter NAME a value (read as its type: a number,
    /// true/false, YAML/JSON for a list or map). Repeatable; wins over
    /// --var-file and ORRERY_VAR_<NAME>.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A YAML or JSON map of parameter values. Repeatable; later files win.
    #[arg(long = "var-file", value_name = "FILE")]
    pub var_files: Vec<PathBuf>,
}

impl VarArgs {
    /// The inputs for the document `file`: these values, the
    /// `ORRERY_VAR_*` environment, and `file()` reading beside it.
    pub fn inputs(&self, file: &Path) -> anyhow::Result<StackInputs> {
        let mut vars = BTreeMap::new();
        for path in &self.var_files {
            vars.extend(read_var_file(path)?);
        }
        for v in &self.vars {
            let Some((name, value)) = v.split_once('=') else {
                bail!("--var {v:?}: expected NAME=VALUE");
            };
            vars.insert(name.to_owned(), Supplied::Text(value.to_owned()));
        }
        let env = std::env::vars()
            .filter_map(|(k, v)| {
                k.strip_prefix(ENV_PREFIX)
                    .map(|name| (name.to_owned(), Supplied::Text(v)))
            })
            .collect();
        let files_dir = std::fs::canonicalize(file)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        Ok(StackInputs {
            vars,
            env,
            files_dir,
            files: None,
            // The local user is the operator: any stack's outputs.
            stack_reads: None,
            record_reads: None,
        })
    }
}

/// A `--var-file`: a map from parameter names to values.
fn read_var_file(path: &Path) -> anyhow::Result<BTreeMap<String, Supplied>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --var-file {}", path.display()))?;
    let values: BTreeMap<String, Value> =
        stack::yaml::read(&text, &Limits::default()).map_err(|e| match e.problem {
            Problem::TooLarge(_) => anyhow!("--var-file {}: {e}", path.display()),
            _ => anyhow!(
                "--var-file {}: not a map of parameter values: {e}",
                path.display()
            ),
        })?;
    Ok(values
        .into_iter()
        .map(|(k, v)| (k, Supplied::Value(v)))
        .collect())
}
