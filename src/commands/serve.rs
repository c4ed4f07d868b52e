//! Long-running roles: coordinator and worker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sweep_coordinator::{Application, CoordinatorConfig};
use sweep_worker::{Worker, WorkerConfig};

use super::shutdown_token;

/// Runs a coordinator until Ctrl-C/SIGTERM.
pub async fn coordinator(
    database_url: String,
    listen: SocketAddr,
    engines_dir: PathBuf,
    suites_dir: PathBuf,
    lease_secs: u64,
) -> anyhow::Result<ExitCode> {
    let mut config = CoordinatorConfig::new(database_url, listen);
    config.engines_dir = engines_dir;
    config.suites_dir = suites_dir;
    config.lease = Duration::from_secs(lease_secs.max(1));
    config.heartbeat = Duration::from_secs((lease_secs / 6).max(1));
    let app = Application::build(config).await?;
    app.run_until_stopped(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a worker until Ctrl-C/SIGTERM.
pub async fn worker(
    coordinator: String,
    cores: usize,
    cache_dir: PathBuf,
    name: Option<String>,
) -> anyhow::Result<ExitCode> {
    if cores == 0 {
        anyhow::bail!("--cores must be at least 1");
    }
    let mut config = WorkerConfig::new(coordinator, cache_dir);
    config.cores = cores;
    if let Some(name) = name {
        config.name = name;
    }
    Worker::new(config).run(shutdown_token()).await?;
    Ok(ExitCode::SUCCESS)
}
