//! `orrery plugin test`: the conformance suite against a plugin binary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use orrery_plugin_sdk::conformance::{run_binary, Options};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The plugin binary to start.
    binary: PathBuf,
    /// Directory of JSON fixtures, one per resource type.
    #[arg(long)]
    fixtures: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Seconds one call may take before it counts as hung.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = Options {
        call_timeout: Duration::from_secs(args.timeout),
        ..Options::default()
    };
    let report = run_binary(&args.binary, &args.fixtures, &options)
        .await
        .with_context(|| format!("cannot run the suite against {}", args.binary.display()))?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
