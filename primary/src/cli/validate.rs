//! `orrery validate FILE`: checks a stack document offline, against the
//! plugins' schemas from the cache (or `--schemas`), starting no plugin.
//!
//! Exit codes: 0 valid, 1 invalid (every problem printed), 2 could not
//! check (no schema known for a plugin the document needs, an unreadable
//! file).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use orrery_primary::plan::Mode;
use orrery_primary::service::Engine;
use orrery_primary::stack::{self, StackError};

use super::render_error;
use super::vars::VarArgs;

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// The stack document (YAML or JSON).
    pub file: PathBuf,
    /// The plugins' schemas: a JSON array of announcements (the format of
    /// <data-dir>/schemas.json, which every plan, apply or destroy that
    /// starts plugins updates). Default: that cache.
    #[arg(long, value_name = "FILE")]
    pub schemas: Option<PathBuf>,
    /// Directory of the embedded state store, where the schemas are cached.
    #[arg(long, env = "ORRERY_DATA_DIR", default_value = ".orrery")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub vars: VarArgs,
}

/// Could not check: said on stderr, exit 2.
fn cannot_check(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: cannot check: {message}");
    ExitCode::from(2)
}

pub fn validate_cmd(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let doc = match super::stack_cmds::read_document(&args.file, Mode::Reconcile, Engine::Embedded)
    {
        Ok(doc) => doc,
        Err(e) => return Ok(cannot_check(format!("{e:#}"))),
    };
    let invalid = |errors: Vec<StackError>| {
        let errors = stack::locate_all(errors, &doc.text);
        let read = |file: &str| (file == doc.source).then(|| doc.text.clone());
        eprint!(
            "{}",
            render_error::render_all(&errors, &read, render_error::colour())
        );
        Ok(ExitCode::from(1))
    };
    let stack = match args.vars.inputs(&args.file)?.parse(&doc) {
        Ok(stack) => stack,
        Err(e) => return invalid(vec![e]),
    };
    let (catalog, from) =
        match super::schema_cache::catalog(args.schemas.as_deref(), &args.data_dir) {
            Ok(c) => c,
            Err(e) => return Ok(cannot_check(format!("{e:#}"))),
        };
    let needed: BTreeSet<&str> = stack.targets.iter().map(|t| t.plugin.as_str()).collect();
    let missing: Vec<String> = needed
        .into_iter()
        .filter(|p| catalog.plugin(p).is_none())
        .map(|p| format!("`{p}`"))
        .collect();
    if !missing.is_empty() {
        return Ok(cannot_check(format!(
            "no schema of plugin {} in {}: run `orrery plan {}` once where the plugin can start (it caches the schemas it learns in {}), or give them with --schemas FILE",
            missing.join(", "),
            from.display(),
            args.file.display(),
            super::schema_cache::path(&args.data_dir).display(),
        )));
    }
    match stack::validate(&stack, &catalog) {
        Ok(_) => {
            let count = |n: usize, what: &str| match n {
                1 => format!("1 {what}"),
                n => format!("{n} {what}s"),
            };
            println!(
                "{}: valid ({} on {})",
                args.file.display(),
                count(stack.resources.len(), "resource"),
                count(stack.targets.len(), "target")
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(errors) => invalid(errors),
    }
}
