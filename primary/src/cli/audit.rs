//! `orrery audit`: the audit log (who started or canceled which command,
//! and every refusal), from the primary with `--primary` (`GET /v1/audit`,
//! an admin's token), else from the local store.

use std::process::ExitCode;

use serde_json::{json, Value};

use super::remote::RemoteArgs;
use super::remote_cmds::encode;
use super::stack_cmds::Common;
use super::Output;
use orrery_primary::http::utc;
use orrery_primary::state::AuditFilter;

#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// Only records of this stack.
    #[arg(long)]
    pub stack: Option<String>,
    /// Only records of this principal.
    #[arg(long)]
    pub principal: Option<String>,
    /// Only records at or after this time (Unix milliseconds).
    #[arg(long)]
    pub since: Option<i64>,
    /// How many of the latest records (1 to 1000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

pub async fn audit_cmd(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let records: Vec<Value> = match args.remote.remote(&args.common.data_dir)? {
        Some(remote) => {
            let mut query = format!("/v1/audit?limit={}", args.limit);
            for (key, value) in [("stack", &args.stack), ("principal", &args.principal)] {
                if let Some(value) = value {
                    query.push_str(&format!("&{key}={}", encode(value)));
                }
            }
            if let Some(since) = args.since {
                query.push_str(&format!("&since={since}"));
            }
            let answer = remote.get(&query)?;
            answer["records"].as_array().cloned().unwrap_or_default()
        }
        None => {
            let store = args.common.open_store()?;
            let records = store.audit(&AuditFilter {
                stack: args.stack.clone(),
                principal: args.principal.clone(),
                since_ms: args.since,
                before: None,
                limit: args.limit,
            })?;
            records
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<_, _>>()?
        }
    };
    match args.common.output {
        Output::Json => println!("{}", json!({ "records": records })),
        Output::Ndjson => {
            for record in &records {
                println!("{record}");
            }
        }
        Output::Text => {
            println!(
                "{:>8}  {:<19}  {:<20}  {:<12}  {:<16}  {:<36}  OUTCOME",
                "ID", "TIME (UTC)", "PRINCIPAL", "ACTION", "STACK", "COMMAND"
            );
            for record in &records {
                println!("{}", line(record));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn line(r: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let count = r["count"].as_u64().unwrap_or(1);
    let outcome = match count {
        1 => text(&r["outcome"]),
        n => format!("{} (x{n})", text(&r["outcome"])),
    };
    format!(
        "{:>8}  {:<19}  {:<20}  {:<12}  {:<16}  {:<36}  {outcome}",
        r["id"].as_i64().unwrap_or_default(),
        r["time_ms"].as_i64().map_or("-".into(), utc),
        text(&r["principal"]),
        text(&r["action"]),
        text(&r["stack"]),
        text(&r["command_id"]),
    )
}
