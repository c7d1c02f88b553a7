//! `orrery schema`: the JSON Schema of the stack document, with the
//! resource types of every plugin whose schemas are cached (or given), for
//! editors (docs/stacks.md, "Editor support").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(clap::Args, Debug)]
pub struct SchemaArgs {
    /// Write it to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The plugins' schemas (see `orrery validate --schemas`). Default:
    /// <data-dir>/schemas.json.
    #[arg(long, value_name = "FILE")]
    pub schemas: Option<PathBuf>,
    /// Directory of the embedded state store, where the schemas are cached.
    #[arg(long, env = "ORRERY_DATA_DIR", default_value = ".orrery")]
    pub data_dir: PathBuf,
}

pub fn schema_cmd(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let (catalog, from) = super::schema_cache::catalog(args.schemas.as_deref(), &args.data_dir)?;
    if catalog.plugins().next().is_none() {
        eprintln!(
            "warning: no plugin schemas in {}: resource properties are not described (run `orrery plan FILE` once to cache them, or give --schemas FILE)",
            from.display()
        );
    }
    let schema = orrery_stack::json_schema::stack_schema(&catalog);
    let text = serde_json::to_string_pretty(&schema)? + "\n";
    match &args.output {
        Some(file) => std::fs::write(file, text)
            .with_context(|| format!("cannot write {}", file.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
