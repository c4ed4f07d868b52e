//! One function per subcommand.

mod client;
mod engine;
mod local;
mod positions;
mod progress;
mod run;
mod serve;
mod source;
mod suite;
mod token;
mod wait;

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::cli::{all_cores, Command, EngineCommand, LogFormat, Remote, Source, SuiteCommand};

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
        Command::Coordinator {
            database,
            listen,
            engines_dir,
            suites_dir,
            lease_secs,
            max_attempts,
            max_in_flight,
            public_read,
            tls,
            log: _,
        } => {
            serve::coordinator(serve::CoordinatorArgs {
                database_url: database,
                listen,
                engines_dir,
                suites_dir,
                lease_secs,
                max_attempts,
                max_in_flight,
                public_read,
                tls: serve::tls_settings(&tls)?,
            })
            .await
        }
        Command::Worker {
            remote,
            cores,
            cache_dir,
            name,
            exit_when_idle,
            idle_secs,
            max_jobs,
            allow_build_programs,
            allow_engine_binaries,
            log: _,
        } => {
            serve::worker(serve::WorkerArgs {
                coordinator: client::base_url(&remote.coordinator),
                token: remote.token,
                ca_cert: remote.ca_cert,
                cores: cores.unwrap_or_else(all_cores),
                cache_dir,
                name,
                exit_when_idle: exit_when_idle.then(|| std::time::Duration::from_secs(idle_secs)),
                max_jobs,
                build_programs: allow_build_programs,
                engine_binaries: allow_engine_binaries,
            })
            .await
        }
        Command::Run {
            config,
            resume,
            database,
            cores,
            format,
            serve,
            tls,
            cache_dir,
            engines_dir,
            suites_dir,
            source_dir,
            force,
            log,
        } => {
            let cores = cores.unwrap_or_else(all_cores);
            if cores == 0 {
                anyhow::bail!("--cores must be at least 1");
            }
            if tls.tls_cert.is_some() && serve.is_none() {
                anyhow::bail!("--tls-cert and --tls-key need --serve (a run without it serves nothing outside the process)");
            }
            run::run(run::RunArgs {
                config,
                resume,
                database,
                cores,
                format: format.parse().map_err(anyhow::Error::msg)?,
                serve,
                tls: serve::tls_settings(&tls)?,
                cache_dir,
                engines_dir,
                suites_dir,
                source_dir,
                force,
                json_logs: log.log_format == LogFormat::Json,
            })
            .await
        }
        Command::Submit {
            file,
            source_dir,
            force,
            remote,
            wait,
        } => {
            client::submit(
                &api_of(&remote)?,
                &file,
                source_dir.as_deref(),
                force,
                wait.format(),
            )
            .await
        }
        Command::Status {
            id,
            source,
            json,
            wait,
        } => match (local_database(&source), wait.format()) {
            (Some(_), Some(_)) => {
                anyhow::bail!(
                    "--wait follows a sweep on a coordinator; it does not read --database"
                )
            }
            (Some(db), None) => local::status(db, id, json).await,
            (None, Some(format)) => wait::follow(&api(&source)?, id, format).await,
            (None, None) => client::status(&api(&source)?, id, json).await,
        },
        Command::Table { id, source, format } => match local_database(&source) {
            Some(db) => local::table(db, id, &format).await,
            None => client::table(&api(&source)?, id, &format).await,
        },
        Command::Cancel { id, source } => match local_database(&source) {
            Some(db) => local::cancel(db, id).await,
            None => client::cancel(&api(&source)?, id).await,
        },
        Command::Retry { id, build, source } => match local_database(&source) {
            Some(db) => local::retry(db, id, &build).await,
            None => client::retry(&api(&source)?, id, &build).await,
        },
        Command::Audit { source, limit } => match local_database(&source) {
            Some(db) => local::audit(db, limit).await,
            None => client::audit(&api(&source)?, limit).await,
        },
        Command::List { source } => match local_database(&source) {
            Some(db) => local::list(db).await,
            None => client::list(&api(&source)?).await,
        },
        Command::Token { command } => token::run(command).await,
        Command::Engine {
            command: EngineCommand::Add { file, remote },
        } => engine::add(&api_of(&remote)?, &file).await,
        Command::Engine {
            command: EngineCommand::List { remote, json },
        } => engine::list(&api_of(&remote)?, json).await,
        Command::Suite {
            command: SuiteCommand::Derive(args),
        } => suite::derive(args).await,
        Command::Schema => {
            print_out(&sweep_domain::schema::sweep_config_schema_text());
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
pub(crate) fn api(source: &Source) -> anyhow::Result<client::Api> {
    client::Api::of(source)
}

fn api_of(remote: &Remote) -> anyhow::Result<client::Api> {
    client::Api::new(
        &remote.coordinator,
        remote.token.as_deref(),
        remote.ca_cert.as_deref(),
    )
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
