//! Coordinator settings.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::service::{LeaseSettings, DEFAULT_MAX_READS};
use crate::tls::TlsSettings;

/// Requests in flight by default, per class: a request no longer waits for a database
/// connection of its own (lease, heartbeat and upload calls that arrive together are served
/// by one transaction), so what waits is the queue for those transactions (p99 about 0.3 s
/// at 1,000 saturating workers on a 2-core machine). A bound below the worker count sheds
/// workers that the coordinator could serve, and each shed call sleeps out a `Retry-After`:
/// at 128, 1,000 workers got 30 % fewer lease calls/s through, waited 3.8 s at p99, and
/// some gave up (`bench/RESULTS.md`, session 25). Memory stays bounded by the body budget
/// (`server::BODY_BUDGET_BYTES`).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// Header and idle timeout by default: above any worker's heartbeat interval.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Body timeout by default: a worker's upload of 1,000 results (about 250 KB) or a source
/// snapshot at a modest link's pace arrives well within it.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// Lease length, heartbeat interval and attempts (see [`LeaseSettings::new`]).
    pub leases: LeaseSettings,
    /// Requests served at once, per class (the worker protocol, and everything else); one
    /// more of a class is answered at once with 503 and `Retry-After`
    /// instead of waiting seconds for a database connection.
    pub max_in_flight: usize,
    /// How long a connection may take to send a request's headers, and how long it may stay
    /// idle between requests, before it is closed (idle and half-open sockets would
    /// otherwise hold file descriptors forever).
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive once the request holds an in-flight
    /// slot; a slower one is answered 408 and its slot freed (see [`crate::server`]).
    pub body_timeout: Duration,
    /// Live workers one worker token may hold; one more registration is answered 429 until
    /// one of them stops or goes a lease without being seen.
    pub max_workers_per_token: u32,
    /// Anonymous clients may read sweeps, tables, engines and suites (writes always need a
    /// token).
    pub public_read: bool,
    /// Read use cases (sweep list, details, tables, positions, derived suites) served at
    /// once; more wait briefly, then are answered 503 with `Retry-After`, so reads never
    /// take the database connections the worker protocol needs.
    pub max_reads: usize,
    /// HTTPS with this certificate and key; `None` serves plain HTTP. A TLS handshake must
    /// finish within `header_timeout`.
    pub tls: Option<TlsSettings>,
    /// Git sources: which URLs may be fetched (none by default), and the bounds git runs
    /// under (time, size, how many at once; see [`crate::git::GitSettings`]).
    pub git: crate::git::GitSettings,
    /// Where to POST an event when a sweep ends, and the key events are signed with (none by
    /// default; see [`crate::webhooks`]).
    pub webhooks: crate::webhooks::WebhookSettings,
    /// A submitter's sweep estimated over this many engine-hours (or not estimable) waits
    /// for an admin's approval (none by default).
    pub approve_over_engine_hours: Option<f64>,
    /// Roles besides admin whose tokens may submit `priority = "high"` sweeps (none by
    /// default).
    pub high_priority_for: Vec<sweep_domain::auth::Role>,
    /// Archive (to export files) and delete ended sweeps after they have been kept this long
    /// (`None`, the default: kept for ever).
    pub retention: Option<crate::service::RetentionSettings>,
}

impl CoordinatorConfig {
    /// Defaults for the repository layout: `configs/engines`, `suites`, 30 s leases, 3 attempts,
    /// 128 requests in flight (per class, see [`crate::server`]), 30 s header and idle
    /// timeout, 30 s body timeout, 64 live workers per worker token, 8 reads at once, no anonymous reads, plain HTTP, no git sources, no webhooks, ended sweeps kept for ever.
    pub fn new(database_url: impl Into<String>, listen: SocketAddr) -> Self {
        Self {
            database_url: database_url.into(),
            listen,
            engines_dir: PathBuf::from("configs/engines"),
            suites_dir: PathBuf::from("suites"),
            leases: LeaseSettings::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_workers_per_token: crate::service::DEFAULT_MAX_WORKERS_PER_TOKEN,
            public_read: false,
            max_reads: DEFAULT_MAX_READS,
            tls: None,
            git: crate::git::GitSettings::default(),
            webhooks: crate::webhooks::WebhookSettings::default(),
            approve_over_engine_hours: None,
            high_priority_for: Vec::new(),
            retention: None,
        }
    }
}
