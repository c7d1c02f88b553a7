//! `orrery`: the command-line interface.

use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if let Err(e) = cli::config_file::load(&argv) {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    let args = cli::Cli::parse();
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
    match runtime.block_on(cli::run(args, telemetry.metrics())) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
