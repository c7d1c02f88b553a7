//! Argument parsing and dispatch of `orrery` subcommands.
//!
//! Exit codes: 0 success (for `plan`: no changes); 1 failure (an operation
//! failed, checks failed, or an error); 2 `plan` found changes.

use std::process::ExitCode;
use std::sync::Mutex;

use clap::{Parser, Subcommand};
use orrery_plugin_sdk::telemetry::{self, MetricsReader, Telemetry, TelemetryConfig};

/// Why standard output stopped taking what the commands print, once it
/// did: `None` while it takes it; a closed pipe (`orrery plan | head -1`)
/// is not kept (nobody reads, nothing is wrong).
static STDOUT_FAILED: Mutex<Option<Option<String>>> = Mutex::new(None);

/// Writes to standard output what the commands print, never panicking as
/// `println!` does when it cannot: once a write fails the rest of the
/// output is dropped and the command goes on to its end (an apply is not
/// abandoned halfway because its reader went away). A closed pipe ends
/// the output quietly; any other failure is reported when the command ends
/// ([`stdout_failure`]).
pub fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    use std::io::Write;
    let mut failed = STDOUT_FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if failed.is_some() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    if let Err(e) = written {
        *failed = Some((e.kind() != std::io::ErrorKind::BrokenPipe).then(|| e.to_string()));
    }
}

/// Why writing to standard output failed, other than a closed pipe.
pub fn stdout_failure() -> Option<String> {
    STDOUT_FAILED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .flatten()
}

// `println!` and `print!` for every command module below (a macro defined
// here is in scope in the modules declared after it): through
// `write_stdout`, so that output cut short by its reader is not a panic
// with a backtrace.
macro_rules! println {
    () => {
        $crate::cli::write_stdout(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*), true)
    };
}

macro_rules! print {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*), false)
    };
}

mod audit;
pub mod config_file;
mod discover;
mod duration;
mod extract;
mod fleet;
mod hub;
mod inspect;
mod output_cmd;
mod plugin_new;
mod plugin_test;
mod remote;
mod remote_cmds;
pub mod render_error;
mod saved_plan;
mod schema;
mod schema_cache;
mod server;
mod stack_cmds;
mod validate;
mod vars;

/// Orrery: an infrastructure-as-code runtime with plugins across hosts.
#[derive(Parser, Debug)]
#[command(name = "orrery", version, about)]
pub struct Cli {
    /// TOML configuration file (default: $ORRERY_CONFIG, else ./orrery.toml
    /// when present). Keys are option names as in the environment variables
    /// shown below without `ORRERY_`, e.g. `data_dir`, `nats_url`,
    /// `database_url`, `listen`. Flags override the environment, which
    /// overrides the file.
    #[arg(long, global = true)]
    pub config: Option<std::path::PathBuf>,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "ORRERY_LOG_JSON")]
    pub log_json: bool,
    /// OTLP/HTTP endpoint to export traces and metrics to, e.g.
    /// http://collector:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT; unset
    /// exports nothing).
    #[arg(long, global = true, env = "ORRERY_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Share of new traces recorded when exporting, 0 to 1 (default:
    /// $OTEL_TRACES_SAMPLER_ARG, else 1).
    #[arg(long, global = true, env = "ORRERY_TRACE_SAMPLING", value_parser = telemetry::parse_ratio)]
    pub trace_sampling: Option<f64>,
    #[command(subcommand)]
    command: Command,
}

/// How results are printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// For people.
    Text,
    /// For scripts: one JSON document.
    Json,
    /// For scripts following a command: `apply` and `destroy` print one
    /// event per line (`docs/http-api.md`, "Command events"); elsewhere
    /// the same as `json`.
    Ndjson,
}

impl Output {
    /// Whether the output is for scripts.
    pub fn is_json(self) -> bool {
        matches!(self, Output::Json | Output::Ndjson)
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the plan for a stack document, confirm, and apply it.
    Apply(stack_cmds::ApplyArgs),
    /// Show what applying a stack document would change. Exit 0 when
    /// nothing would, 2 when something would.
    Plan(stack_cmds::PlanArgs),
    /// Delete every resource of a stack.
    Destroy(stack_cmds::DestroyArgs),
    /// Check a stack document offline against the plugins' cached (or
    /// given) schemas, starting no plugin. Exit 0 when valid, 1 when
    /// invalid, 2 when it cannot be checked.
    Validate(validate::ValidateArgs),
    /// Write the JSON Schema of stack documents, with the resource types
    /// of the plugins whose schemas are cached, for editors.
    Schema(schema::SchemaArgs),
    /// Write a stack document (YAML) of a stack's recorded resources, or
    /// of discovered unmanaged ones, to reproduce or adopt them.
    Extract(extract::ExtractArgs),
    /// Show the outputs a stack's last apply recorded.
    Output(output_cmd::OutputArgs),
    /// Show a command's progress (the latest command by default); with
    /// --follow, follow it to its end.
    Status(remote_cmds::StatusArgs),
    /// Ask the primary to cancel a command (the running one by default):
    /// no new operation starts, those in flight finish (with --force: are
    /// no longer waited for; the next apply settles them).
    Cancel(remote_cmds::CancelArgs),
    /// The latest commands: kind, stack, who ran it, when, how long,
    /// operation counts, outcome.
    History(remote_cmds::HistoryArgs),
    /// The audit log: who started or canceled which command (with the
    /// plan's hash and the outcome), and every refusal (401, 403). With
    /// --primary, an admin's token reads it from the primary.
    Audit(audit::AuditArgs),
    /// List recorded resources.
    Inventory(inspect::InventoryArgs),
    /// List every discoverable resource on the targets of a stack (or of
    /// every stack) and record those no stack manages as unmanaged.
    Discover(discover::DiscoverArgs),
    /// Read managed resources and record what changed or was deleted out
    /// of band. Exit 0 when nothing drifted, 2 when something did.
    Drift(discover::DriftArgs),
    /// Adopt an existing (e.g. discovered) resource into a stack without
    /// recreating it.
    Import(discover::ImportArgs),
    /// List satellites with their plugins and load (from NATS service stats).
    Satellites(fleet::FleetArgs),
    /// Which satellites run which plugin versions.
    Plugins(fleet::FleetArgs),
    /// Work with plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// The plugin hub: keys, publish, search, info, versions, yank, lock, mirror.
    #[command(subcommand)]
    Hub(hub::HubCommand),
    /// Run the primary server: the HTTP API, plugins in embedded mode.
    Primary(server::Args),
    /// Embedded all-in-one: the primary's HTTP API with plugins running
    /// in-process under the same supervision as on a satellite; no NATS, no
    /// database server. The same as `primary` with its defaults, except
    /// that without --auth-tokens it generates an admin token at every start
    /// into <data-dir>/api-token (mode 0600) and prints where.
    Up(server::Args),
    /// Print the version and protocol of this build.
    Version,
}

#[derive(Subcommand, Debug)]
enum PluginCommand {
    /// Run the conformance suite against a plugin binary. Exit 0 when every
    /// check passes, 1 otherwise.
    Test(plugin_test::Args),
    /// Scaffold a plugin crate (one example type, conformance fixtures)
    /// outside the Orrery workspace.
    New(plugin_new::Args),
    /// Build a hub package (manifest + binary) from a plugin binary.
    Package(hub::PackageArgs),
}

/// Runs the parsed command; the exit code is the command's verdict.
/// `metrics` reads this process's metrics for the server's `/metrics`.
pub async fn run(cli: Cli, metrics: MetricsReader) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Apply(args) => stack_cmds::apply_cmd(args).await,
        Command::Plan(args) => stack_cmds::plan_cmd(args).await,
        Command::Destroy(args) => stack_cmds::destroy_cmd(args).await,
        Command::Validate(args) => validate::validate_cmd(args),
        Command::Schema(args) => schema::schema_cmd(args),
        Command::Extract(args) => extract::extract_cmd(args),
        Command::Output(args) => output_cmd::output_cmd(args),
        Command::Status(args) => remote_cmds::status(args).await,
        Command::Cancel(args) => remote_cmds::cancel(args).await,
        Command::History(args) => remote_cmds::history(args).await,
        Command::Audit(args) => audit::audit_cmd(args).await,
        Command::Inventory(args) => inspect::inventory(args),
        Command::Discover(args) => discover::discover_cmd(args).await,
        Command::Drift(args) => discover::drift_cmd(args).await,
        Command::Import(args) => discover::import_cmd(args).await,
        Command::Satellites(args) => fleet::satellites_cmd(args).await,
        Command::Plugins(args) => fleet::plugins_cmd(args).await,
        Command::Plugin(PluginCommand::Test(args)) => plugin_test::run(args).await,
        Command::Plugin(PluginCommand::New(args)) => plugin_new::run(args),
        Command::Plugin(PluginCommand::Package(args)) => hub::package_cmd(args).await,
        Command::Hub(command) => hub::run(command).await,
        Command::Primary(args) => server::run(args, server::Mode::Primary, metrics).await,
        Command::Up(args) => server::run(args, server::Mode::Up, metrics).await,
        Command::Version => {
            println!(
                "orrery {} (plugin protocol {})",
                env!("CARGO_PKG_VERSION"),
                orrery_schema::PROTOCOL_MAJOR
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Who runs this process, as recorded in the audit of the commands the
/// CLI runs: `$USER` (else `$LOGNAME`, else the uid).
/// The crash-resume tests' kill point: with `ORRERY_TEST_HANG_AT=<point>`
/// in the environment (`before_first_operation`, `before_finish`) a run
/// stops there for good, so a test can kill the process exactly there.
/// Read here, by the binary, so that no library reads it.
pub fn stop_point() -> Option<orrery_primary::apply::StopPoint> {
    let name = std::env::var("ORRERY_TEST_HANG_AT").ok()?;
    orrery_primary::apply::StopPoint::parse(&name)
}

pub fn local_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| {
            #[cfg(unix)]
            {
                use std::os::unix::fs::MetadataExt;
                // The uid that owns this process's /proc entry.
                std::fs::metadata("/proc/self")
                    .map(|m| format!("uid{}", m.uid()))
                    .unwrap_or_else(|_| "unknown".into())
            }
            #[cfg(not(unix))]
            {
                "unknown".into()
            }
        })
}

/// Logs to stderr, filtered by `RUST_LOG` (default: warnings); traces and
/// metrics over OTLP when an endpoint is configured.
pub fn init_telemetry(cli: &Cli) -> anyhow::Result<Telemetry> {
    let mut config = TelemetryConfig::from_env("orrery-primary")?.with_overrides(
        cli.otlp_endpoint.as_deref(),
        cli.trace_sampling,
        cli.log_json,
    );
    // Warnings only, but the command and operation spans (apply/ logs no
    // info events) so that every line of a command names its trace, and
    // the server's audit trail (`http::AUDIT`).
    config.default_log_filter = "warn,orrery_primary::apply=info,orrery_primary::audit=info".into();
    Ok(telemetry::init(&config)?)
}
