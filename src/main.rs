//! `sweep`: one binary, several roles. Parsing and wiring only; the work is in the crates.

mod cli;
mod commands;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    if !matches!(
        cli.command,
        cli::Command::Run(_) | cli::Command::Worker(_) | cli::Command::Coordinator(_)
    ) {
        // A command that prints and ends (`sweep status 1 | head -1`) ends quietly, as other
        // Unix tools do, when its reader goes away. Rust ignores SIGPIPE, so `println!` would
        // panic instead. Commands that run engines keep ignoring it: a write to an engine
        // that died must be an error to handle, not the death of the worker.
        // SAFETY: setting a signal's disposition to its default before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // Commands whose stdout is the product keep stderr to what the user asked for.
    let quiet = matches!(
        cli.command,
        cli::Command::Run(_) | cli::Command::Suite { .. }
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
            eprintln!("error: {}", chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error with its causes, `outer: inner: ...`, leaving out a cause whose text the message
/// so far already says (some libraries repeat their source in their own message, e.g.
/// `error returned from database: database "x" does not exist` over `database "x" does not
/// exist`).
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
