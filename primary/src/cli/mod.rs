//! Argument parsing and dispatch of `orrery` subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod plugin_test;

/// Orrery: an infrastructure-as-code runtime with plugins across hosts.
#[derive(Parser, Debug)]
#[command(name = "orrery", version, about)]
pub struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true, env = "ORRERY_LOG_JSON")]
    pub log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Work with plugins.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Print the version and protocol of this build.
    Version,
}

#[derive(Subcommand, Debug)]
enum PluginCommand {
    /// Run the conformance suite against a plugin binary.
    ///
    /// Exit code 0 when every check passes, 1 when any fails, 2 when the
    /// suite could not run.
    Test(plugin_test::Args),
}

/// Runs the parsed command; the exit code is the command's verdict.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Plugin(PluginCommand::Test(args)) => plugin_test::run(args).await,
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

/// Logs to stderr, filtered by `RUST_LOG` (default `warn`).
pub fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
