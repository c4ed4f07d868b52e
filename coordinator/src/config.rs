//! Coordinator settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a coordinator needs to start.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Postgres URL (`postgres://...`).
    pub database_url: String,
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Directory of engine definitions (`*.toml`).
    pub engines_dir: PathBuf,
    /// Directory of suites (`*.epd`).
    pub suites_dir: PathBuf,
    /// How long a lease lives without a heartbeat or report.
    pub lease: Duration,
    /// How often workers should heartbeat (well under `lease`).
    pub heartbeat: Duration,
    /// Attempts a position or a build gets before it is marked failed.
    pub max_attempts: u32,
}

impl CoordinatorConfig {
    /// Defaults for the repository layout: `configs/engines`, `suites`, 30 s leases, 3 attempts.
    pub fn new(database_url: impl Into<String>, listen: SocketAddr) -> Self {
        let leases = crate::service::LeaseSettings::default();
        Self {
            database_url: database_url.into(),
            listen,
            engines_dir: PathBuf::from("configs/engines"),
            suites_dir: PathBuf::from("suites"),
            lease: leases.lease,
            heartbeat: leases.heartbeat,
            max_attempts: leases.max_attempts,
        }
    }
}
