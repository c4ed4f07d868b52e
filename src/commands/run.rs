//! `sweep run`: a whole sweep in one process. An in-process coordinator (on the embedded
//! SQLite file by default) and a local worker talk over loopback HTTP, exactly as in
//! distributed mode, so there is one code path to trust.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sweep_coordinator::service::Caller;
use sweep_coordinator::snapshot::SnapshotRules;
use sweep_coordinator::{store, Application, CoordinatorConfig};
use sweep_domain::auth::Role;
use sweep_domain::spec::{SourceConfig, SweepConfig};
use sweep_domain::table::render::{render, Format};
use sweep_worker::{Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;

use super::progress::ProgressView;
use super::shutdown_token;

/// Options of `sweep run`.
pub struct RunArgs {
    /// Sweep config file (unless resuming by id).
    pub config: Option<PathBuf>,
    /// Sweep id to resume.
    pub resume: Option<i64>,
    /// Store URL or SQLite path.
    pub database: String,
    /// Engine processes.
    pub cores: usize,
    /// Final table format.
    pub format: Format,
    /// Keep the HTTP API on this address during the run.
    pub serve: Option<SocketAddr>,
    /// Serve HTTPS on `serve` (only with it).
    pub tls: Option<sweep_coordinator::tls::TlsSettings>,
    /// Build and source cache.
    pub cache_dir: PathBuf,
    /// Engine definitions.
    pub engines_dir: PathBuf,
    /// Suites.
    pub suites_dir: PathBuf,
    /// Sweep this directory instead of the engine definition's source.
    pub source_dir: Option<PathBuf>,
    /// Measure every position again instead of reusing earlier sweeps' results.
    pub force: bool,
    /// Logs are JSON: progress and the closing notes go out as log events, never as bars or
    /// plain lines, so every stderr line parses.
    pub json_logs: bool,
}

/// Runs (or resumes) a sweep and prints its table.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Everything that can be checked without the database is, before the database file is
    // created: a typo'd config name must not leave a new ./sweep.db behind.
    let parsed = match &args.config {
        Some(path) if args.resume.is_none() => Some(read_config(path, args.source_dir.is_some())?),
        _ => None,
    };
    if let Some(id) = args.resume {
        let file = args
            .database
            .strip_prefix("sqlite:")
            .unwrap_or(&args.database);
        if !args.database.contains("://") && !std::path::Path::new(file).exists() {
            anyhow::bail!("no database at {file} to resume sweep {id} from (give its --database)");
        }
    }
    for (dir, flag, what) in [
        (&args.engines_dir, "--engines-dir", "engine definitions"),
        (&args.suites_dir, "--suites-dir", "EPD suites"),
    ] {
        if !dir.is_dir() {
            anyhow::bail!(
                "{}: no directory of {what} here (relative paths are from the current \
                 directory: run from a Sweep checkout, or give {flag})",
                dir.display()
            );
        }
    }
    if std::env::var_os("DATABASE_URL").is_some() && args.database == "./sweep.db" {
        tracing::info!(
            "DATABASE_URL is set but not used: a local run keeps to ./sweep.db unless --database names another"
        );
    }
    let shutdown = shutdown_token();
    let store = store::connect(&args.database)
        .await
        .with_context(|| format!("opening the database {}", store::redact(&args.database)))?;
    let listen = args
        .serve
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut config = CoordinatorConfig::new(args.database.clone(), listen);
    config.engines_dir = args.engines_dir.clone();
    config.suites_dir = args.suites_dir.clone();
    config.tls = args.tls.clone();
    let mut app = Application::build_with_store(config, store).await?;
    let service = app.service().clone();
    let url = app.url();
    if args.serve.is_some() {
        tracing::info!(%url, "HTTP API up for the run; remote workers may join");
    }
    // The local worker has no CA to check the served certificate against (nor is it issued
    // for a loopback address), so with TLS it gets a plain port of its own on loopback.
    let local_url = if args.tls.is_some() {
        app.add_loopback_listener().await?
    } else {
        url
    };

    let id = match (args.resume, &args.config) {
        (Some(id), _) => {
            service.exists(&Caller::Local, id).await.map_err(|e| {
                anyhow::anyhow!("{e} in {} (--resume)", store::redact(&args.database))
            })?;
            id
        }
        (None, Some(path)) => {
            let mut sweep_config = parsed.expect("parsed above when not resuming");
            sweep_config.recompute |= args.force;
            if let Some(dir) = &args.source_dir {
                let def = service
                    .catalog()
                    .engines
                    .get(&sweep_config.engine)
                    .and_then(|e| e.def.source.clone())
                    .with_context(|| {
                        format!(
                            "--source: engine `{}` is not a registered source engine",
                            sweep_config.engine
                        )
                    })?;
                let snap = super::source::snapshot(dir, SnapshotRules::of(&def, true)).await?;
                service
                    .put_source(&Caller::Local, &snap.sha256, snap.archive)
                    .await
                    .with_context(|| format!("storing the snapshot of {}", dir.display()))?;
                sweep_config.source = Some(SourceConfig {
                    sha256: Some(snap.sha256),
                    ..SourceConfig::default()
                });
            }
            let existing = service
                .find_unfinished(&sweep_config)
                .await
                .with_context(|| path.display().to_string())?;
            match existing {
                Some(id) => {
                    tracing::info!(
                        sweep_id = id,
                        "resuming the unfinished sweep with this config"
                    );
                    id
                }
                None => {
                    let submitted = service
                        .submit(&Caller::Local, sweep_config)
                        .await
                        .with_context(|| path.display().to_string())?;
                    tracing::info!(
                        sweep_id = submitted.id,
                        jobs = submitted.jobs,
                        reused = submitted.reused,
                        "sweep created"
                    );
                    submitted.id
                }
            }
        }
        (None, None) => anyhow::bail!("give a sweep config file or --resume ID"),
    };

    let server_stop = CancellationToken::new();
    let server = tokio::spawn(app.run_until_stopped(server_stop.clone()));
    let worker_stop = CancellationToken::new();
    let mut worker_config = WorkerConfig::new(local_url, args.cache_dir.clone());
    worker_config.cores = args.cores;
    // The in-process worker's token lives only in this process: a local run needs no setup.
    worker_config.token = Some(service.local_token(Role::Worker, "local-run"));
    worker_config.name = format!("{}-local", worker_config.host);
    // The in-process coordinator serves this machine's own engine definitions: their build
    // programs and engine binaries are the user's own choice, so the local worker allows them.
    for def in service.catalog().engine_defs().values() {
        let (allowed, wanted) = if def.is_binary_only() {
            (&mut worker_config.engine_binaries, Some(&def.binary))
        } else {
            let program = def.build.as_ref().and_then(|b| b.command.first());
            (&mut worker_config.build_programs, program)
        };
        if let Some(wanted) = wanted {
            if !allowed.contains(wanted) {
                allowed.push(wanted.clone());
            }
        }
    }
    let worker = tokio::spawn(Worker::new(worker_config).run(worker_stop.clone()));

    let mut view = if args.json_logs {
        ProgressView::lines()
    } else {
        ProgressView::new()
    };
    let outcome = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break None,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        match service.detail(&Caller::Local, id).await {
            Ok(detail) => {
                view.update(&detail);
                if detail.summary.state.is_final() {
                    break Some(detail);
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading progress"),
        }
    };
    view.finish();

    // The worker first, so its last results still reach the coordinator.
    worker_stop.cancel();
    match tokio::time::timeout(Duration::from_secs(10), worker).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = ?e, "worker stopped with an error"),
        Err(_) => tracing::warn!("worker did not stop within 10 s"),
        _ => {}
    }
    server_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;

    let detail = match outcome {
        Some(detail) => detail,
        None => {
            let detail = service.detail(&Caller::Local, id).await.ok();
            match detail {
                // Ctrl-C as the last results came in: the sweep is over, say so.
                Some(d) if d.summary.state.is_final() => d,
                d => {
                    let (done, total) = d
                        .map(|d| (d.summary.positions_done, d.summary.positions_total))
                        .unwrap_or_default();
                    note(
                        args.json_logs,
                        id,
                        format!("interrupted: sweep {id} has {done}/{total} positions; run the same command again (or `sweep run --resume {id}`) to continue"),
                    );
                    return Ok(ExitCode::from(super::wait::EXIT_INTERRUPTED));
                }
            }
        }
    };
    let table = service.table(&Caller::Local, id).await?;
    super::print_out(&render(&table, args.format));
    for b in detail.builds.iter().filter(|b| b.build_error.is_some()) {
        let output = b.build_error.as_deref().unwrap_or("");
        note(
            args.json_logs,
            id,
            format!("build {} failed:\n{output}", b.name),
        );
    }
    for e in &detail.errors {
        let line = format!("error: {} {} {}: {}", e.build, e.suite, e.position, e.error);
        note(args.json_logs, id, line);
    }
    for line in detail.cross_checks.lines() {
        note(args.json_logs, id, line);
    }
    if let Some(line) = reuse_note(&table) {
        note(args.json_logs, id, line);
    }
    note(
        args.json_logs,
        id,
        format!("sweep {id}: {}", detail.summary.state.as_str()),
    );
    // The same codes as `submit --wait`: 0 only for `done`.
    Ok(super::wait::exit_code(detail.summary.state))
}

/// A closing note of a run on stderr: a plain line, or a log event when logs are JSON (so a
/// log collector gets every line as JSON).
fn note(json_logs: bool, sweep_id: i64, message: String) {
    if json_logs {
        tracing::info!(sweep_id, "{message}");
    } else {
        eprintln!("{message}");
    }
}

/// How many of the table's results came from earlier sweeps, when any did: those positions
/// were not searched again (`--force` searches them).
fn reuse_note(table: &sweep_domain::table::Table) -> Option<String> {
    let cells = table
        .tables
        .iter()
        .flat_map(|t| &t.rows)
        .map(|r| &r.combined);
    let (reused, done) = cells.fold((0, 0), |(r, d), c| (r + c.reused, d + c.done));
    (reused > 0).then(|| {
        format!(
            "{reused} of {done} results reused from earlier sweeps of the same builds \
             (not searched again; --force searches them)"
        )
    })
}

/// Reads and parses the sweep config, naming the file in any error.
fn read_config(path: &std::path::Path, with_source: bool) -> anyhow::Result<SweepConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if with_source {
        return super::source::config_for_source(path, &text);
    }
    SweepConfig::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
