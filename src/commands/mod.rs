//! One function per subcommand.

mod api;
mod client;
mod compare;
mod engine;
mod local;
mod positions;
mod print;
mod progress;
mod run;
mod serve;
mod source;
mod suite;
mod token;
mod transfer;
mod wait;

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::cli::{Command, LogFormat, Source, SuiteCommand};

/// Logs go to stderr so stdout stays clean for ids and tables. A local run is quiet by default
/// (its progress display says what matters); servers log every job. As JSON, each line carries
/// the fields of the spans it happened in (a job's `sweep_id`, `job_id`, `worker_id`), so a
/// log collector can filter by them.
pub fn init_tracing(verbose: u8, quiet: bool, format: LogFormat) {
    let default = match verbose {
        0 if quiet => "warn,sweep::commands=info",
        0 => "info,sqlx=warn,tower_http=warn",
        1 => "debug,sqlx=warn,hyper=info",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

/// Runs a subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Coordinator(args) => serve::coordinator(args).await,
        Command::Worker(args) => serve::worker(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Compare(args) => compare::compare(args).await,
        Command::Submit {
            file,
            sources,
            force,
            dry_run,
            json,
            remote,
            wait,
        } => {
            let api = api::Api::remote(&remote)?;
            if dry_run {
                return client::estimate(&api, &file, &sources, force, json).await;
            }
            client::submit(&api, &file, &sources, force, wait.format()).await
        }
        Command::Status {
            id,
            source,
            json,
            wait,
        } => status(id, &source, json, wait.format()).await,
        Command::Table { id, source, format } => match local_database(&source) {
            Some(db) => local::table(db, id, &format).await,
            None => client::table(&api(&source)?, id, &format).await,
        },
        Command::Export { id, source, output } => match local_database(&source) {
            Some(db) => transfer::export(Some(db), None, id, output.as_deref()).await,
            None => transfer::export(None, Some(&api(&source)?), id, output.as_deref()).await,
        },
        Command::Import { file, source } => match local_database(&source) {
            Some(db) => transfer::import(Some(db), None, &file).await,
            None => transfer::import(None, Some(&api(&source)?), &file).await,
        },
        Command::Delete { id, source } => match local_database(&source) {
            Some(db) => transfer::delete(Some(db), None, id).await,
            None => transfer::delete(None, Some(&api(&source)?), id).await,
        },
        Command::Cancel { id, source } => match local_database(&source) {
            Some(db) => local::cancel(db, id).await,
            None => client::cancel(&api(&source)?, id).await,
        },
        Command::Retry { id, build, source } => match local_database(&source) {
            Some(db) => local::retry(db, id, &build).await,
            None => client::retry(&api(&source)?, id, &build).await,
        },
        Command::Approve { id, remote } => {
            client::approve(&api::Api::remote(&remote)?, id, None).await
        }
        Command::Reject { id, why, remote } => {
            client::approve(&api::Api::remote(&remote)?, id, Some(&why)).await
        }
        Command::Audit { source, limit } => match local_database(&source) {
            Some(db) => local::audit(db, limit).await,
            None => client::audit(&api(&source)?, limit).await,
        },
        Command::List { source } => match local_database(&source) {
            Some(db) => local::list(db).await,
            None => client::list(&api(&source)?).await,
        },
        Command::Token { command } => token::run(command).await,
        Command::Engine { command } => engine::run(command).await,
        Command::Suite {
            command: SuiteCommand::Derive(args),
        } => suite::derive(args).await,
        Command::Schema { engine } => {
            print_out(&if engine {
                sweep_domain::schema::engine_definition_schema_text()
            } else {
                sweep_domain::schema::sweep_config_schema_text()
            });
            Ok(ExitCode::SUCCESS)
        }
        Command::Positions(args) => positions::run(args).await,
        Command::Completions { shell } => {
            let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut command, "sweep", &mut out);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `sweep status`: from a database, or a coordinator (there also followed with `--wait`).
async fn status(
    id: i64,
    source: &Source,
    json: bool,
    wait_format: Option<&str>,
) -> anyhow::Result<ExitCode> {
    match (local_database(source), wait_format) {
        (Some(_), Some(_)) => {
            anyhow::bail!("--wait follows a sweep on a coordinator; it does not read --database")
        }
        (Some(db), None) => local::status(db, id, json).await,
        (None, Some(format)) => wait::follow(&api(source)?, id, format).await,
        (None, None) => client::status(&api(source)?, id, json).await,
    }
}

/// The database a read command was pointed at with `--database`, if any. It wins over
/// `SWEEP_COORDINATOR`; when that is set too, a note on stderr says which one is used.
pub(crate) fn local_database(source: &Source) -> Option<&str> {
    let db = source.database.as_deref()?;
    if let Some(url) = std::env::var("SWEEP_COORDINATOR")
        .ok()
        .filter(|u| !u.is_empty())
    {
        eprintln!(
            "note: reading the database {} (--database); SWEEP_COORDINATOR={url} is not used",
            sweep_coordinator::store::redact(db)
        );
    }
    Some(db)
}

/// Writes a command's product to stdout. A reader that went away (`sweep run ... | head`)
/// is not an error: the rest is dropped quietly.
pub(crate) fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// The coordinator a client command talks to.
pub(crate) fn api(source: &Source) -> anyhow::Result<api::Api> {
    api::Api::of(source)
}

/// A token cancelled on Ctrl-C or SIGTERM.
pub fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutting down");
        t.cancel();
    });
    token
}
