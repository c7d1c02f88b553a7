//! `orrery plugin test`: the conformance suite against a plugin binary.
//!
//! Exit codes (docs/plugin-authoring.md): 0 every check passed (warnings
//! allowed), 1 a check failed, 2 the suite could not run (no fixtures, the
//! binary cannot be executed, the plugin speaks another protocol major).
//! The report goes to stdout; errors and the plugin's stderr to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use orrery_plugin_sdk::conformance::{run_binary, Options, PluginStderr, STDERR_TAIL_BYTES};

/// Every check passed.
const PASSED: u8 = 0;
/// At least one check failed.
const FAILED: u8 = 1;
/// The suite could not run.
const NOT_RUN: u8 = 2;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit status: 0 when every check passes (warnings allowed), \
1 when a check fails, 2 when the suite cannot run (no fixtures, the binary cannot be \
executed, the plugin speaks another protocol major). The plugin's stderr (its last \
64 KiB) is printed on stderr when the run does not pass, or always with --show-logs."
)]
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
    /// Print the plugin's stderr (its last 64 KiB) even when every check
    /// passes; it is always printed when the run does not pass.
    #[arg(long)]
    show_logs: bool,
    /// Pass this variable of the environment on to the plugin (which starts
    /// with a cleared environment but for PATH, HOME, USER, LANG, LC_*, TZ,
    /// TMPDIR, RUST_LOG, OTEL_* and ORRERY_PLUGIN_*), as a satellite's
    /// `--plugin-env` does; repeat for several.
    #[arg(
        long = "plugin-env",
        value_name = "NAME",
        env = "ORRERY_PLUGIN_ENV",
        value_delimiter = ','
    )]
    plugin_env: Vec<String>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = Options {
        call_timeout: Duration::from_secs(args.timeout),
        env_allow: args.plugin_env.clone(),
        ..Options::default()
    };
    let run = run_binary(&args.binary, &args.fixtures, &options).await;
    let passed = run.passed();
    let code = match &run.result {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_text());
            }
            if passed {
                PASSED
            } else {
                FAILED
            }
        }
        Err(e) => {
            eprintln!("error: {}", error_chain(e));
            NOT_RUN
        }
    };
    if args.show_logs || !passed {
        print_stderr(&args.binary, &run.stderr);
    }
    Ok(ExitCode::from(code))
}

/// `error` and its causes, joined by `: `, each said once: a cause whose
/// text an outer message already includes is not repeated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = e.source();
    }
    out
}

fn print_stderr(binary: &std::path::Path, stderr: &PluginStderr) {
    let name = binary.display();
    if stderr.text.is_empty() {
        eprintln!("--- {name} wrote nothing on stderr ---");
        return;
    }
    if stderr.dropped_bytes > 0 {
        eprintln!(
            "--- stderr of {name}: its last {} KiB ({} earlier bytes not kept) ---",
            STDERR_TAIL_BYTES / 1024,
            stderr.dropped_bytes
        );
    } else {
        eprintln!("--- stderr of {name} ---");
    }
    eprint!("{}", stderr.text);
    if !stderr.text.ends_with('\n') {
        eprintln!();
    }
    eprintln!("--- end of stderr of {name} ---");
}
