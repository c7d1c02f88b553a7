//! The configuration file: every option of every `orrery` command can be
//! set in a TOML file, then overridden by environment variables, then by
//! flags.
//!
//! The file's keys are the options' environment variables without the
//! `ORRERY_` prefix, in lower case: `data_dir`, `database_url`, `nats_url`,
//! `listen`, `plugin_dir`, `log_json`, … figment merges the file with the
//! environment; whatever the environment does not set is exported for clap
//! to read as its `env` default. The file is `--config FILE`, or
//! `$ORRERY_CONFIG`, or `orrery.toml` in the working directory if present.

use std::path::PathBuf;

use figment::providers::{Env, Format, Toml};
use figment::value::{Dict, Value};
use figment::Figment;

/// Finds the configuration file named by `--config`, `$ORRERY_CONFIG` or
/// `./orrery.toml`.
fn config_path(args: &[String]) -> Option<PathBuf> {
    let flag = args
        .iter()
        .position(|a| a == "--config")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let inline = args
        .iter()
        .find_map(|a| a.strip_prefix("--config=").map(str::to_owned));
    flag.or(inline)
        .or_else(|| std::env::var("ORRERY_CONFIG").ok())
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("orrery.toml")).filter(|p| p.is_file()))
}

/// Loads the file (if any) under the environment and exports the merged
/// values as `ORRERY_*` variables for clap. Must run before other threads
/// start.
pub fn load(args: &[String]) -> Result<(), String> {
    let Some(path) = config_path(args) else {
        return Ok(());
    };
    if !path.is_file() {
        return Err(format!(
            "configuration file {} does not exist",
            path.display()
        ));
    }
    let merged: Dict = Figment::new()
        .merge(Toml::file_exact(&path))
        .merge(Env::prefixed("ORRERY_"))
        .extract()
        .map_err(|e| format!("configuration file {}: {e}", path.display()))?;
    for (key, value) in merged {
        let var = format!("ORRERY_{}", key.to_uppercase());
        if std::env::var_os(&var).is_some() {
            continue;
        }
        let text = match value {
            Value::String(_, s) => s,
            Value::Bool(_, b) => b.to_string(),
            Value::Num(_, n) => n
                .to_f64()
                .map(|f| {
                    if f.fract() == 0.0 {
                        format!("{}", f as i64)
                    } else {
                        f.to_string()
                    }
                })
                .unwrap_or_default(),
            other => {
                return Err(format!(
                "configuration file {}: `{key}` must be a string, number or boolean, not {other:?}",
                path.display()
            ))
            }
        };
        // SAFETY: called from `main` before the runtime or any other thread exists.
        unsafe { std::env::set_var(var, text) };
    }
    Ok(())
}
