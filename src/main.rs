//! `sweep`: one binary, several roles. Parsing and wiring only; the work is in the crates.

mod cli;
mod commands;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    // Commands whose stdout is the product keep stderr to what the user asked for.
    let quiet = matches!(
        cli.command,
        cli::Command::Run { .. } | cli::Command::Suite { .. }
    );
    let json_logs = cli.command.log_format() == cli::LogFormat::Json;
    commands::init_tracing(cli.verbose, quiet, cli.command.log_format());
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::dispatch(cli.command)) {
        Ok(code) => code,
        // With JSON logs the failure is one more JSON line, so collectors see it.
        Err(e) if json_logs => {
            tracing::error!(error = format!("{e:#}"), "command failed");
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
