//! The configuration file: every option of every `orrery` command can be
//! set in a TOML file, then overridden by environment variables, then by
//! flags.
//!
//! The file's keys are the options' environment variables without the
//! `ORRERY_` prefix, in lower case: `data_dir`, `database_url`, `nats_url`,
//! `listen`, `plugin_dir`, `log_json`, … figment merges the file with the
//! environment; whatever the environment does not set becomes the default
//! value of the option (the argument whose `env` is that variable, or whose
//! name is the key), so clap still prefers the environment, then flags. The
//! file is `--config FILE`, or `$ORRERY_CONFIG`, or `orrery.toml` in the
//! working directory if present.
//!
//! Nothing is exported into the process's environment: a value from the
//! file (a database URL with its password) would otherwise be inherited by
//! every child process, plugins included.

use std::collections::{BTreeMap, BTreeSet};
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

/// Loads the file (if any) under the environment: the values the
/// environment does not set, by variable name (`ORRERY_DATA_DIR`), for
/// [`with_defaults`].
pub fn load(args: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let Some(path) = config_path(args) else {
        return Ok(out);
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
            // Integers as integers (`to_f64` is only for floats).
            Value::Num(_, n) => match (n.to_i128(), n.to_u128(), n.to_f64()) {
                (Some(i), _, _) => i.to_string(),
                (_, Some(u), _) => u.to_string(),
                (_, _, Some(f)) => f.to_string(),
                _ => String::new(),
            },
            other => {
                return Err(format!(
                "configuration file {}: `{key}` must be a string, number or boolean, not {other:?}",
                path.display()
            ))
            }
        };
        out.insert(var, text);
    }
    Ok(out)
}

/// `cmd` with each value of the file as the default of its option, in every
/// subcommand: the argument whose `env` is the value's variable, else the
/// one named like the key (`plugin_dir` → `--plugin-dir`). Returns the
/// variables that matched no option anywhere.
pub fn with_defaults(
    cmd: clap::Command,
    values: &BTreeMap<String, String>,
) -> (clap::Command, Vec<String>) {
    let mut used = BTreeSet::new();
    let cmd = apply(cmd, values, &mut used);
    let unused = values
        .keys()
        .filter(|k| !used.contains(*k))
        .cloned()
        .collect();
    (cmd, unused)
}

fn apply(
    mut cmd: clap::Command,
    values: &BTreeMap<String, String>,
    used: &mut BTreeSet<String>,
) -> clap::Command {
    let mut defaults = Vec::new();
    for arg in cmd.get_arguments() {
        let by_env = arg
            .get_env()
            .and_then(|e| e.to_str())
            .filter(|e| values.contains_key(*e))
            .map(str::to_owned);
        let by_name = format!("ORRERY_{}", arg.get_id().as_str().to_uppercase());
        let var = by_env.or_else(|| values.contains_key(&by_name).then_some(by_name));
        if let Some(var) = var {
            defaults.push((arg.get_id().clone(), var));
        }
    }
    for (id, var) in defaults {
        if let Some(text) = values.get(&var) {
            // Options live as long as the process; so do their defaults.
            let text: &'static str = Box::leak(text.clone().into_boxed_str());
            cmd = cmd.mut_arg(id, |a| a.default_value(text));
            used.insert(var);
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |sub| apply(sub, values, used));
    }
    cmd
}
