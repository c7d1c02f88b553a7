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
    cli::init_logging(args.log_json);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::run(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
