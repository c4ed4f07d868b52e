//! Long-running roles: coordinator and worker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sweep_coordinator::service::LeaseSettings;
use sweep_coordinator::tls::{TlsError, TlsSettings};
use sweep_coordinator::{Application, CoordinatorConfig};
use sweep_worker::{Worker, WorkerConfig};

use super::shutdown_token;
use crate::cli::ServerTls;

/// Options of `sweep coordinator`.
pub struct CoordinatorArgs {
    /// Store URL.
    pub database_url: String,
    /// Listen address.
    pub listen: SocketAddr,
    /// Engine definitions.
    pub engines_dir: PathBuf,
    /// Suites.
    pub suites_dir: PathBuf,
    /// Lease length in seconds.
    pub lease_secs: u64,
    /// Attempts per failing position or build.
    pub max_attempts: u32,
    /// Requests served at once.
    pub max_in_flight: usize,
    /// Anonymous clients may read.
    pub public_read: bool,
    /// HTTPS certificate and key, loaded.
    pub tls: Option<TlsSettings>,
}

/// Loads `--tls-cert`/`--tls-key` (clap makes sure both or neither are given); an error
/// names the flag and the file.
pub fn tls_settings(args: &ServerTls) -> anyhow::Result<Option<TlsSettings>> {
    let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
        return Ok(None);
    };
    TlsSettings::from_pem_files(cert, key)
        .map(Some)
        .map_err(|e| match e {
            TlsError::Cert { .. } => anyhow::anyhow!("--tls-cert: {e}"),
            TlsError::Key { .. } => anyhow::anyhow!("--tls-key: {e}"),
            TlsError::Pair { .. } => anyhow::anyhow!("--tls-cert/--tls-key: {e}"),
        })
}

/// Runs a coordinator until Ctrl-C/SIGTERM.
pub async fn coordinator(args: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    if args.max_in_flight == 0 {
        anyhow::bail!("--max-in-flight must be at least 1");
    }
    let mut config = CoordinatorConfig::new(args.database_url, args.listen);
    config.engines_dir = args.engines_dir;
    config.suites_dir = args.suites_dir;
    config.leases = LeaseSettings::new(Duration::from_secs(args.lease_secs), args.max_attempts);
    config.max_in_flight = args.max_in_flight;
    config.public_read = args.public_read;
    config.tls = args.tls;
    let app = Application::build(config).await?;
    // The one line on stdout, for scripts and tests (with port 0 they cannot know the port):
    // logs go to stderr.
    println!("{}", serde_json::json!({ "listening": app.url() }));
    app.run_until_stopped(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Options of `sweep worker`.
pub struct WorkerArgs {
    /// Coordinator base URL.
    pub coordinator: String,
    /// Worker token.
    pub token: Option<String>,
    /// CA bundle to trust for an https:// coordinator.
    pub ca_cert: Option<PathBuf>,
    /// Engine processes at once.
    pub cores: usize,
    /// Cache root.
    pub cache_dir: PathBuf,
    /// Worker name (default: the host name).
    pub name: Option<String>,
    /// Programs a build may start.
    pub build_programs: Vec<String>,
    /// Binary-only engines it may start.
    pub engine_binaries: Vec<String>,
    /// Exit once idle this long (`--exit-when-idle`, `--idle-secs`).
    pub exit_when_idle: Option<Duration>,
    /// Exit after this many jobs (`--max-jobs`).
    pub max_jobs: Option<u64>,
}

/// Runs a worker until Ctrl-C/SIGTERM.
pub async fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    if args.cores == 0 {
        anyhow::bail!("--cores must be at least 1");
    }
    let mut config = WorkerConfig::new(args.coordinator, args.cache_dir);
    config.cores = args.cores;
    config.token = args.token;
    config.ca_cert = args.ca_cert;
    if let Some(name) = args.name {
        config.name = name;
    }
    config.build_programs = args.build_programs;
    config.engine_binaries = args.engine_binaries;
    config.exit_when_idle = args.exit_when_idle;
    config.max_jobs = args.max_jobs;
    Worker::new(config).run(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}
