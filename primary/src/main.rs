//! `orrery`: the command-line interface.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

mod cli;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let values = match cli::config_file::load(&argv) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let (command, unused) = cli::config_file::with_defaults(cli::Cli::command(), &values);
    for var in unused {
        let key = var.trim_start_matches("ORRERY_").to_lowercase();
        eprintln!("warning: configuration file key `{key}` sets no option; ignored");
    }
    let args = match cli::Cli::from_arg_matches(&command.get_matches_from(&argv)) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    // Declared before the runtime, dropped after it: queued spans are
    // flushed once every task has ended.
    let telemetry = match cli::init_telemetry(&args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: telemetry: {e:#}");
            return ExitCode::from(1);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(cli::run(args, telemetry.metrics()));
    // Output that could not be written (a full disk, not a reader that went
    // away) is a failure of the command, however it ended otherwise.
    if let Some(why) = cli::stdout_failure() {
        eprintln!("error: cannot write to standard output: {why}");
        return ExitCode::from(1);
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            match cli::render_error::stack_errors(&e, cli::render_error::colour()) {
                Some(rendered) => eprint!("{rendered}"),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::from(1)
        }
    }
}
