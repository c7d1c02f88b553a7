//! `orrery inventory` (`status` is in `remote_cmds.rs`, both modes).

use std::process::ExitCode;

use super::stack_cmds::Common;

#[derive(clap::Args, Debug)]
pub struct InventoryArgs {
    /// Only this stack's resources.
    #[arg(long)]
    pub stack: Option<String>,
    /// Only discovered resources no stack manages (`orrery discover`).
    #[arg(long, conflicts_with = "stack")]
    pub unmanaged: bool,
    #[command(flatten)]
    pub common: Common,
}

pub fn inventory(args: InventoryArgs) -> anyhow::Result<ExitCode> {
    use orrery_primary::discovery::{core::is_discovered, Drift};
    let store = args.common.open_store()?;
    // Discovered resources have their own view; tombstones of resources
    // deleted out of band stay in their stack's, marked.
    let resources: Vec<_> = store
        .resources(args.stack.as_deref())?
        .into_iter()
        .filter(|r| is_discovered(r) == args.unmanaged)
        .collect();
    if args.common.output.is_json() {
        let rows: Vec<serde_json::Value> = resources
            .iter()
            .map(|r| {
                serde_json::json!({"stack": r.stack, "label": r.label, "type": r.resource_type,
                    "target": r.target, "plugin": r.plugin, "native_id": r.native_id,
                    "managed": r.managed, "version": r.version,
                    "drift": Drift::of(r).map(|d| d.describe()),
                    "properties": serde_json::to_value(&r.properties).unwrap_or_default()})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        for r in &resources {
            let drift = Drift::of(r)
                .map(|d| format!("  DRIFT: {}", d.describe()))
                .unwrap_or_default();
            println!(
                "{:<16} {:<28} {:<24} {:<12} {}{drift}",
                r.stack, r.label, r.resource_type, r.target, r.native_id
            );
        }
        let drifted = resources.iter().filter(|r| Drift::of(r).is_some()).count();
        let kind = if args.unmanaged { " unmanaged" } else { "" };
        if drifted > 0 {
            println!("{}{kind} resources, {drifted} drifted", resources.len());
        } else {
            println!("{}{kind} resources", resources.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
