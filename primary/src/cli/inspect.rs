//! `orrery inventory` (`status` is in `remote_cmds.rs`, both modes).

use std::process::ExitCode;

use serde_json::{json, Value};

use super::remote::{Remote, RemoteArgs};
use super::stack_cmds::Common;
use orrery_primary::discovery::UNMANAGED_STACK;

#[derive(clap::Args, Debug)]
pub struct InventoryArgs {
    /// Only this stack's resources.
    #[arg(long)]
    pub stack: Option<String>,
    /// Only discovered resources no stack manages (`orrery discover`).
    #[arg(long, conflicts_with = "stack")]
    pub unmanaged: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

/// Page size of a remote listing: one page in memory at a time.
const PAGE: u32 = 1000;

/// Whether a row (as `GET /v1/resources` gives it) is a discovered
/// resource no stack manages (`discovery::core::is_discovered`).
fn is_discovered(row: &Value) -> bool {
    row["stack"] == UNMANAGED_STACK && row["managed"] == false
}

pub fn inventory(args: InventoryArgs) -> anyhow::Result<ExitCode> {
    // Discovered resources have their own view; tombstones of resources
    // deleted out of band stay in their stack's, marked.
    let rows: Vec<Value> = match args.remote.remote(&args.common.data_dir)? {
        Some(remote) => remote_rows(&remote, &args)?,
        None => local_rows(&args)?,
    }
    .into_iter()
    .filter(|r| is_discovered(r) == args.unmanaged)
    .collect();
    if args.common.output.is_json() {
        println!("{}", Value::Array(rows));
        return Ok(ExitCode::SUCCESS);
    }
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut drifted = 0;
    for r in &rows {
        let drift = match r["drift"].as_str() {
            Some(d) => {
                drifted += 1;
                format!("  DRIFT: {d}")
            }
            None => String::new(),
        };
        println!(
            "{:<16} {:<28} {:<24} {:<12} {}{drift}",
            text(&r["stack"]),
            text(&r["label"]),
            text(&r["type"]),
            text(&r["target"]),
            text(&r["native_id"])
        );
    }
    let kind = if args.unmanaged { " unmanaged" } else { "" };
    if drifted > 0 {
        println!("{}{kind} resources, {drifted} drifted", rows.len());
    } else {
        println!("{}{kind} resources", rows.len());
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows `GET /v1/resources` gives, from the local store.
fn local_rows(args: &InventoryArgs) -> anyhow::Result<Vec<Value>> {
    use orrery_primary::discovery::Drift;
    let store = args.common.open_store()?;
    let stack = match args.unmanaged {
        true => Some(UNMANAGED_STACK),
        false => args.stack.as_deref(),
    };
    Ok(store
        .resources(stack)?
        .iter()
        .map(|r| {
            json!({"stack": r.stack, "label": r.label, "type": r.resource_type,
                "target": r.target, "plugin": r.plugin, "native_id": r.native_id,
                "managed": r.managed, "version": r.version, "deps": r.deps,
                "properties": serde_json::to_value(&r.properties).unwrap_or_default(),
                "drift": Drift::of(r).map(|d| d.describe())})
        })
        .collect())
}

/// Every page of `GET /v1/resources` for `args`.
fn remote_rows(remote: &Remote, args: &InventoryArgs) -> anyhow::Result<Vec<Value>> {
    let stack = match args.unmanaged {
        true => Some(UNMANAGED_STACK),
        false => args.stack.as_deref(),
    };
    let mut query = format!("/v1/resources?limit={PAGE}");
    if let Some(stack) = stack {
        query.push_str(&format!("&stack={}", super::remote_cmds::encode(stack)));
    }
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("{query}&cursor={}", super::remote_cmds::encode(c)),
            None => query.clone(),
        };
        let mut page = remote.get(&path)?;
        if let Some(page_rows) = page["resources"].as_array_mut() {
            rows.append(page_rows);
        }
        match page["next_cursor"].as_str() {
            // A cursor that does not move would loop forever.
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            _ => return Ok(rows),
        }
    }
}
