//! Long-running roles: coordinator and worker.

use std::process::ExitCode;
use std::time::Duration;

use sweep_coordinator::service::LeaseSettings;
use sweep_coordinator::tls::{TlsError, TlsSettings};
use sweep_coordinator::webhooks::WebhookSettings;
use sweep_coordinator::{Application, CoordinatorConfig};
use sweep_worker::{Worker, WorkerConfig};

use super::api::base_url;
use super::shutdown_token;
use crate::cli::{all_cores, CoordinatorArgs, Remote, ServerTls, WorkerArgs};

/// Loads `--tls-cert`/`--tls-key` (clap makes sure both or neither are given); an error
/// names the flag and the file.
pub fn tls_settings(args: &ServerTls) -> anyhow::Result<Option<TlsSettings>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    TlsSettings::from_pem_files(cert, key)
        .map(Some)
        .map_err(|e| match e {
            TlsError::Cert { .. } => anyhow::Error::new(e).context("--tls-cert"),
            TlsError::Key { .. } => anyhow::Error::new(e).context("--tls-key"),
            TlsError::Pair { .. } => anyhow::Error::new(e).context("--tls-cert/--tls-key"),
        })
}

/// Runs a coordinator until Ctrl-C/SIGTERM.
pub async fn coordinator(args: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    let tls = tls_settings(&args.tls)?;
    if args.max_in_flight == 0 {
        anyhow::bail!("--max-in-flight must be at least 1");
    }
    let mut config = CoordinatorConfig::new(args.database, args.listen);
    config.engines_dir = args.dirs.engines_dir;
    config.suites_dir = args.dirs.suites_dir;
    config.leases = LeaseSettings::new(Duration::from_secs(args.lease_secs), args.max_attempts);
    config.max_in_flight = args.max_in_flight;
    config.max_workers_per_token = args.max_workers_per_token;
    config.public_read = args.public_read;
    config.tls = tls;
    config.git = args.git.settings();
    config.webhooks = WebhookSettings::parse(&args.webhooks, args.webhook_secret)?;
    config.approve_over_engine_hours = args.approve_over_engine_hours;
    config.high_priority_for = args.high_priority_for.clone();
    config.retention = match (args.keep_finished_days, &args.archive_dir) {
        (Some(days), Some(dir)) => Some(sweep_coordinator::service::RetentionSettings {
            keep: Duration::from_secs_f64(days * 86_400.0),
            archive_dir: dir.clone(),
        }),
        _ => None,
    };
    let app = Application::build(config).await?;
    // The one line on stdout, for scripts and tests (with port 0 they cannot know the port):
    // logs go to stderr.
    println!("{}", serde_json::json!({ "listening": app.url() }));
    app.run_until_stopped(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a worker until Ctrl-C/SIGTERM.
pub async fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let cores = args.cores.unwrap_or_else(all_cores);
    if cores == 0 {
        anyhow::bail!("--cores must be at least 1");
    }
    let Remote {
        coordinator,
        credentials,
    } = args.remote;
    let mut config = WorkerConfig::new(base_url(&coordinator), args.cache_dir);
    config.cores = cores;
    config.token = credentials.token;
    config.ca_cert = credentials.ca_cert;
    if let Some(name) = args.name {
        config.name = name;
    }
    config.build_programs = args.allow_build_programs;
    config.engine_binaries = args.allow_engine_binaries;
    config.sandbox = args.sandbox.into();
    config.sandbox_read_only = args.sandbox_ro;
    config.exit_when_idle = args
        .exit_when_idle
        .then(|| Duration::from_secs(args.idle_secs));
    config.max_jobs = args.max_jobs;
    Worker::new(config).run(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}
