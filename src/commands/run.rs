//! `sweep run`: a whole sweep in one process. An in-process coordinator (on the embedded
//! SQLite file by default) and a local worker talk over loopback HTTP, exactly as in
//! distributed mode, so there is one code path to trust.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sweep_coordinator::service::{Caller, Service};
use sweep_coordinator::snapshot::SnapshotRules;
use sweep_coordinator::tls::TlsSettings;
use sweep_coordinator::{database, store, Application, CoordinatorConfig};
use sweep_domain::auth::Role;
use sweep_domain::spec::SweepConfig;
use sweep_domain::table::render::{render, Format};
use sweep_domain::wire::SweepDetail;
use sweep_worker::{Worker, WorkerConfig};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::progress::ProgressView;
use super::serve::tls_settings;
use super::shutdown_token;
use crate::cli::{
    all_cores, paths, CatalogDirs, LogFormat, RunArgs, SourceArgs, DEFAULT_RUN_DATABASE,
};

/// What `sweep run` was given, checked before the database is opened: a typo'd config name
/// must not leave a new ./sweep.db behind.
struct Checked {
    /// The config file and what it says (unless resuming).
    config: Option<(PathBuf, SweepConfig)>,
    /// Engine processes.
    cores: usize,
    /// Final table format.
    format: Format,
    /// HTTPS on `--serve`.
    tls: Option<TlsSettings>,
    /// Logs are JSON: progress and the closing notes go out as log events, never as bars or
    /// plain lines, so every stderr line parses.
    json_logs: bool,
}

/// Runs (or resumes) a sweep and prints its table.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    run_with(args, None).await
}

/// Runs a sweep as [`run`] does, on `config` (a config file and what it was made into, e.g.
/// by `sweep compare`) instead of the file `args` name, when given.
pub async fn run_with(
    args: RunArgs,
    config: Option<(PathBuf, SweepConfig)>,
) -> anyhow::Result<ExitCode> {
    let Checked {
        config,
        cores,
        format,
        tls,
        json_logs,
    } = check(&args, config)?;
    let shutdown = shutdown_token();
    let (app, local_url) = start_coordinator(&args, tls).await?;
    let service = app.service().clone();
    if args.dry_run {
        return estimate(&service, &args, config).await;
    }
    let id = sweep_to_run(&service, &args, config).await?;

    let server_stop = CancellationToken::new();
    let server = tokio::spawn(app.run_until_stopped(server_stop.clone()));
    let worker_stop = CancellationToken::new();
    let mut worker_config = local_worker(&service, local_url, &args.cache_dir, cores);
    worker_config.sandbox = args.sandbox.into();
    worker_config.sandbox_read_only = args.sandbox_ro.clone();
    let worker = tokio::spawn(Worker::new(worker_config).run(worker_stop.clone()));
    let outcome = follow(&service, id, &shutdown, json_logs).await;

    // The worker first, so its last results still reach the coordinator.
    stop_worker(worker_stop, worker).await;
    server_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;

    match ended(&service, id, outcome, json_logs).await {
        Some(detail) => report(&service, id, &detail, format, json_logs).await,
        None => Ok(ExitCode::from(super::wait::EXIT_INTERRUPTED)),
    }
}

/// Checks everything that can be checked without the database, and parses the config
/// (unless `given`).
fn check(args: &RunArgs, given: Option<(PathBuf, SweepConfig)>) -> anyhow::Result<Checked> {
    let cores = args.cores.unwrap_or_else(all_cores);
    if cores == 0 {
        anyhow::bail!("--cores must be at least 1");
    }
    if args.tls.tls_cert.is_some() && args.serve.is_none() {
        anyhow::bail!("--tls-cert and --tls-key need --serve (a run without it serves nothing outside the process)");
    }
    let format = args.format.parse().map_err(anyhow::Error::msg)?;
    let tls = tls_settings(&args.tls)?;
    let config = match &args.config {
        _ if given.is_some() => given,
        Some(path) if args.resume.is_none() => {
            Some((path.clone(), read_config(path, args.sources.dir.is_some())?))
        }
        _ => None,
    };
    if args.resume.is_some() && args.sources.any() {
        anyhow::bail!("--source and --variant-source go with a config, not --resume (the sweep keeps the code it was submitted with)");
    }
    if let Some(id) = args.resume {
        let file = args
            .database
            .strip_prefix("sqlite:")
            .unwrap_or(&args.database);
        if !args.database.contains("://") && !Path::new(file).exists() {
            anyhow::bail!("no database at {file} to resume sweep {id} from (give its --database)");
        }
    }
    check_dirs(&args.dirs)?;
    if std::env::var_os("DATABASE_URL").is_some() && is_default_database(&args.database) {
        tracing::info!(
            "DATABASE_URL is set but not used: a local run keeps to ./sweep.db unless --database names another"
        );
    }
    Ok(Checked {
        config,
        cores,
        format,
        tls,
        json_logs: args.log.log_format == LogFormat::Json,
    })
}

/// Whether `database` is the default `./sweep.db`, which the parser made absolute.
fn is_default_database(database: &str) -> bool {
    paths::database(DEFAULT_RUN_DATABASE).is_ok_and(|default| default == database)
}

/// Refuses engine and suite directories that are not there, naming the flag that moves them.
fn check_dirs(dirs: &CatalogDirs) -> anyhow::Result<()> {
    for (dir, flag, what) in [
        (&dirs.engines_dir, "--engines-dir", "engine definitions"),
        (&dirs.suites_dir, "--suites-dir", "EPD suites"),
    ] {
        if !dir.is_dir() {
            anyhow::bail!(
                "{}: no directory of {what} here (relative paths are from the current \
                 directory: run from a Sweep checkout, or give {flag})",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The in-process coordinator on the run's database (also serving `--serve` when given), and
/// the URL its local worker talks to.
async fn start_coordinator(
    args: &RunArgs,
    tls: Option<TlsSettings>,
) -> anyhow::Result<(Application, String)> {
    let db = database::connect(&args.database)
        .await
        .with_context(|| format!("opening the database {}", store::redact(&args.database)))?;
    let listen = args
        .serve
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let mut config = CoordinatorConfig::new(args.database.clone(), listen);
    config.engines_dir = args.dirs.engines_dir.clone();
    config.suites_dir = args.dirs.suites_dir.clone();
    config.git = args.git.settings();
    let https = tls.is_some();
    config.tls = tls;
    let mut app = Application::build_with_database(config, db).await?;
    let url = app.url();
    if args.serve.is_some() {
        tracing::info!(%url, "HTTP API up for the run; remote workers may join");
    }
    // The local worker has no CA to check the served certificate against (nor is it issued
    // for a loopback address), so with TLS it gets a plain port of its own on loopback.
    let local_url = if https {
        app.add_loopback_listener().await?
    } else {
        url
    };
    Ok((app, local_url))
}

/// The sweep this run follows: the one resumed, else the unfinished one of the same config
/// (running the same command again continues it), else a new one.
async fn sweep_to_run(
    service: &Service,
    args: &RunArgs,
    config: Option<(PathBuf, SweepConfig)>,
) -> anyhow::Result<i64> {
    match (args.resume, config) {
        (Some(id), _) => {
            service
                .reads()
                .exists(&Caller::Local, id)
                .await
                .map_err(|e| {
                    let message = format!("{e} in {} (--resume)", store::redact(&args.database));
                    anyhow::Error::new(e).context(message)
                })?;
            Ok(id)
        }
        (None, Some((path, config))) => submit_or_continue(service, args, &path, config).await,
        (None, None) => anyhow::bail!("give a sweep config file or --resume ID"),
    }
}

/// `--dry-run`: prints what `config` would make and cost on the run's database; runs nothing.
async fn estimate(
    service: &Service,
    args: &RunArgs,
    config: Option<(PathBuf, SweepConfig)>,
) -> anyhow::Result<ExitCode> {
    let Some((path, mut config)) = config else {
        anyhow::bail!("--dry-run needs a sweep config file");
    };
    config.recompute |= args.force;
    store_sources(service, &path, &mut config, &args.sources).await?;
    let estimate = service
        .submissions()
        .estimate(&Caller::Local, config)
        .await
        .with_context(|| path.display().to_string())?;
    super::print::print_estimate(&estimate);
    Ok(ExitCode::SUCCESS)
}

/// The unfinished sweep of `config` if there is one, else a new one submitted.
async fn submit_or_continue(
    service: &Service,
    args: &RunArgs,
    path: &Path,
    mut config: SweepConfig,
) -> anyhow::Result<i64> {
    config.recompute |= args.force;
    store_sources(service, path, &mut config, &args.sources).await?;
    let existing = service
        .submissions()
        .find_unfinished(&config)
        .await
        .with_context(|| path.display().to_string())?;
    if let Some(id) = existing {
        tracing::info!(
            sweep_id = id,
            "resuming the unfinished sweep with this config"
        );
        return Ok(id);
    }
    let submitted = service
        .submissions()
        .submit(&Caller::Local, config)
        .await
        .with_context(|| path.display().to_string())?;
    tracing::info!(
        sweep_id = submitted.id,
        jobs = submitted.jobs,
        reused = submitted.reused,
        "sweep created"
    );
    Ok(submitted.id)
}

/// Snapshots the directories of `--source` and `--variant-source` by the rules of the
/// config's engine definition, stores them, and names them in `config` (of `file`).
async fn store_sources(
    service: &Service,
    file: &Path,
    config: &mut SweepConfig,
    sources: &SourceArgs,
) -> anyhow::Result<()> {
    if !sources.any() {
        return Ok(());
    }
    let engine = &config.engine;
    let def = service
        .catalog()
        .engines
        .get(engine)
        .and_then(|e| e.def.source.clone())
        .with_context(|| {
            format!(
                "--source, --variant-source: engine `{engine}` is not a registered source engine"
            )
        })?;
    let rules = SnapshotRules::of(&def, true);
    for (target, snap) in super::source::snapshots(sources, &rules).await? {
        service
            .submissions()
            .put_source(&Caller::Local, &snap.sha256, snap.archive)
            .await
            .with_context(|| format!("storing the snapshot of {target}"))?;
        super::source::name_in(file, config, &target, snap.sha256)?;
    }
    Ok(())
}

/// The in-process worker's settings, on `url` with `cores` engine processes.
fn local_worker(service: &Service, url: String, cache_dir: &Path, cores: usize) -> WorkerConfig {
    let mut config = WorkerConfig::new(url, cache_dir.to_path_buf());
    config.cores = cores;
    // The in-process worker's token lives only in this process: a local run needs no setup.
    config.token = Some(service.admin().local_token(Role::Worker, "local-run"));
    config.name = format!("{}-local", config.host);
    // The in-process coordinator serves this machine's own engine definitions: their build
    // programs and engine binaries are the user's own choice, so the local worker allows them.
    for def in service.catalog().engine_defs().values() {
        let (allowed, wanted) = if def.is_binary_only() {
            (&mut config.engine_binaries, Some(&def.binary))
        } else {
            let program = def.build.as_ref().and_then(|b| b.command.first());
            (&mut config.build_programs, program)
        };
        if let Some(wanted) = wanted {
            if !allowed.contains(wanted) {
                allowed.push(wanted.clone());
            }
        }
    }
    config
}

/// Shows the sweep's progress until it ends (its final detail) or Ctrl-C (`None`).
async fn follow(
    service: &Service,
    id: i64,
    shutdown: &CancellationToken,
    json_logs: bool,
) -> Option<SweepDetail> {
    let mut view = if json_logs {
        ProgressView::lines()
    } else {
        ProgressView::new()
    };
    let outcome = loop {
        tokio::select! {
            _ = shutdown.cancelled() => break None,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
        match service.reads().detail(&Caller::Local, id).await {
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
    outcome
}

/// Stops the local worker (it reports what it finished, and gives back the rest), waiting
/// for it at most 10 s.
async fn stop_worker(stop: CancellationToken, worker: JoinHandle<anyhow::Result<()>>) {
    stop.cancel();
    match tokio::time::timeout(Duration::from_secs(10), worker).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = ?e, "worker stopped with an error"),
        Err(_) => tracing::warn!("worker did not stop within 10 s"),
        _ => {}
    }
}

/// The sweep's detail once it has ended; `None`, after saying how to continue, when the run
/// was interrupted before it did.
async fn ended(
    service: &Service,
    id: i64,
    outcome: Option<SweepDetail>,
    json_logs: bool,
) -> Option<SweepDetail> {
    if outcome.is_some() {
        return outcome;
    }
    match service.reads().detail(&Caller::Local, id).await.ok() {
        // Ctrl-C as the last results came in: the sweep is over, say so.
        Some(d) if d.summary.state.is_final() => Some(d),
        d => {
            let (done, total) = d
                .map(|d| (d.summary.positions_done, d.summary.positions_total))
                .unwrap_or_default();
            note(
                json_logs,
                id,
                format!("interrupted: sweep {id} has {done}/{total} positions; run the same command again (or `sweep run --resume {id}`) to continue"),
            );
            None
        }
    }
}

/// Prints the ended sweep's table on stdout and its closing notes (failed builds, errors,
/// cross-checks, reuse, state) on stderr; the exit code of its state.
async fn report(
    service: &Service,
    id: i64,
    detail: &SweepDetail,
    format: Format,
    json_logs: bool,
) -> anyhow::Result<ExitCode> {
    let table = service.reads().table(&Caller::Local, id).await?;
    super::print_out(&render(&table, format));
    for b in detail.builds.iter().filter(|b| b.build_error.is_some()) {
        let output = b.build_error.as_deref().unwrap_or("");
        note(json_logs, id, format!("build {} failed:\n{output}", b.name));
    }
    for e in &detail.errors {
        let line = format!("error: {} {} {}: {}", e.build, e.suite, e.position, e.error);
        note(json_logs, id, line);
    }
    for line in detail.cross_checks.lines() {
        note(json_logs, id, line);
    }
    if let Some(line) = reuse_note(&table) {
        note(json_logs, id, line);
    }
    note(
        json_logs,
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

/// How many of the table's results came from earlier sweeps (or, in a staged sweep, from
/// its earlier stages), when any did: those positions were not searched again (`--force`
/// searches them).
fn reuse_note(table: &sweep_domain::table::Table) -> Option<String> {
    let staged = !table.stages.is_empty();
    let tables: Vec<&sweep_domain::table::LimitTable> = if staged {
        table.stages.iter().flat_map(|s| &s.tables).collect()
    } else {
        table.tables.iter().collect()
    };
    let cells = tables.iter().flat_map(|t| &t.rows).map(|r| &r.combined);
    let (reused, done) = cells.fold((0, 0), |(r, d), c| (r + c.reused, d + c.done));
    let from = if staged {
        "earlier sweeps or earlier stages"
    } else {
        "earlier sweeps"
    };
    (reused > 0).then(|| {
        format!(
            "{reused} of {done} results reused from {from} of the same builds \
             (not searched again; --force searches them)"
        )
    })
}

/// Reads and parses the sweep config, naming the file in any error.
fn read_config(path: &Path, with_source: bool) -> anyhow::Result<SweepConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if with_source {
        return super::source::config_for_source(path, &text);
    }
    SweepConfig::from_toml(&text).with_context(|| path.display().to_string())
}
