//! `orrery status` and `orrery inventory`.

use std::process::ExitCode;

use anyhow::bail;

use super::stack_cmds::Common;
use super::Output;

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The command's id; the latest command when absent.
    pub command: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
pub struct InventoryArgs {
    /// Only this stack's resources.
    #[arg(long)]
    pub stack: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

pub fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let Some(command) = store.command(args.command.as_deref())? else {
        bail!(
            "no such command{}",
            args.command.map(|c| format!(" `{c}`")).unwrap_or_default()
        );
    };
    if args.common.output == Output::Json {
        println!("{}", serde_json::to_string(&command)?);
    } else {
        println!(
            "command {} ({} of stack `{}`): {}",
            command.id, command.kind, command.stack, command.status
        );
        for op in &command.operations {
            let err = match (&op.error_code, &op.message) {
                (Some(code), Some(m)) => format!(" {code}: {m}"),
                (Some(code), None) => format!(" {code}"),
                _ => String::new(),
            };
            println!(
                "  {:<8} {:<30} {:<18} attempts {}{err}",
                op.operation, op.label, op.status, op.attempts
            );
        }
    }
    Ok(match command.status.as_str() {
        "completed" => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

pub fn inventory(args: InventoryArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let resources = store.resources(args.stack.as_deref())?;
    if args.common.output == Output::Json {
        let rows: Vec<serde_json::Value> = resources
            .iter()
            .map(|r| {
                serde_json::json!({"stack": r.stack, "label": r.label, "type": r.resource_type,
                    "target": r.target, "plugin": r.plugin, "native_id": r.native_id,
                    "managed": r.managed, "version": r.version,
                    "properties": serde_json::to_value(&r.properties).unwrap_or_default()})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        for r in &resources {
            println!(
                "{:<16} {:<28} {:<24} {:<12} {}",
                r.stack, r.label, r.resource_type, r.target, r.native_id
            );
        }
        println!("{} resources", resources.len());
    }
    Ok(ExitCode::SUCCESS)
}
