//! The coordinator's use cases, between the HTTP adapters and the store, by responsibility:
//! sweeps (submit, list, details, cancel: `sweeps.rs`), their tables and positions
//! (`tables.rs`), derived suites (`derive.rs`), sources (`sources.rs`), engines added at
//! runtime (`engines.rs`), the worker protocol (`workers.rs`), tokens, audit log and catalog
//! (`access.rs`), who may do what (`auth.rs`) and `/metrics` (`monitor.rs`). This file holds
//! what they share: the [`Service`], its settings and [`ServiceError`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use sweep_domain::table::Table;
use sweep_domain::FieldError;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::catalog::Catalog;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};

mod access;
mod auth;
mod derive;
mod engines;
mod knobs;
mod monitor;
mod sources;
mod sweeps;
mod tables;
mod workers;

pub use knobs::check_declared_knobs;

use auth::Auth;
pub(crate) use auth::Need;
pub use auth::{Caller, Principal, TOKEN_TTL};
pub use engines::EngineAdded;
pub use sources::{ResolvedSource, Uploaded};
pub use workers::{
    AuthorizedWorker, DEFAULT_MAX_WORKERS_PER_TOKEN, DEFAULT_WORKERS_LISTED, MAX_WORKERS_LISTED,
    WORKERS_SEEN_WITHIN,
};

/// Why a use case did not succeed. Callers branch on it: the HTTP layer maps it to a status
/// in `http/error.rs` alone; the CLI prints it with its cause chain.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The store refused (not found, lease lost, invalid) or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No token, or an unknown or revoked one, where one is needed.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The token's role (or ownership) does not allow this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The token made too many writes; it may try again after this many seconds.
    #[error("too many writes; retry after {retry_after_secs} s")]
    RateLimited {
        /// Seconds until the next write is allowed.
        retry_after_secs: u64,
    },
    /// Too many reads at once: the caller should retry shortly (the worker protocol keeps
    /// its share of the database meanwhile).
    #[error("too many reads at once; retry later")]
    Busy,
    /// Every turn of git work is taken (see [`crate::git::GitPool`]): the caller should
    /// retry shortly; one slow fetch never queues submissions without bound.
    #[error("too many git sources being fetched at once; retry later")]
    GitBusy,
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Lease timing handed to workers, and how often a failing position or build is retried.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSettings {
    /// A lease lives this long without a heartbeat or report.
    pub lease: Duration,
    /// Workers heartbeat this often.
    pub heartbeat: Duration,
    /// A position that errored this many times (on different workers when there are several)
    /// is recorded as failed instead of being retried; a build that failed on this many
    /// workers (or on every live worker, if fewer) of this many tokens (or every live token,
    /// if fewer) fails its variant.
    pub max_attempts: u32,
}

impl LeaseSettings {
    /// The one rule for lease settings: leases of `lease` (at least a second), heartbeats six
    /// times a lease (at least a second apart) so one lost heartbeat never costs a job, and
    /// at least one attempt.
    pub fn new(lease: Duration, max_attempts: u32) -> Self {
        let lease = lease.max(Duration::from_secs(1));
        Self {
            lease,
            heartbeat: (lease / 6).max(Duration::from_secs(1)),
            max_attempts: max_attempts.max(1),
        }
    }
}

impl Default for LeaseSettings {
    /// 30 s leases, heartbeats every 5 s, 3 attempts.
    fn default() -> Self {
        Self::new(Duration::from_secs(30), 3)
    }
}

/// Shared state of the coordinator.
#[derive(Clone)]
pub struct Service {
    /// Storage: only the service speaks to it.
    store: Arc<dyn Store>,
    /// Engines and suites: replaced whole when an engine is added (see [`Service::catalog`]).
    catalog: Arc<RwLock<Arc<Catalog>>>,
    /// Held while an engine is stored and swapped in, so concurrent adds land in the catalog
    /// in the order they reached the database.
    engine_writes: Arc<tokio::sync::Mutex<()>>,
    /// Lease timing.
    pub leases: LeaseSettings,
    /// Tables of finished sweeps, which can no longer change.
    tables: Arc<Mutex<HashMap<i64, Arc<Table>>>>,
    /// Tokens, worker ownership, write budgets.
    auth: Arc<Auth>,
    /// Read use cases in progress at most (see [`Service::with_read_limit`]).
    reads: Arc<Semaphore>,
    /// Where git sources are fetched and resolved, within bounds (see [`crate::git`]).
    git: Arc<crate::git::GitPool>,
    /// What `/metrics` shows: counted here, where the events happen.
    metrics: Arc<Metrics>,
    /// Live workers one token may hold (see [`Service::with_max_workers_per_token`]).
    max_workers_per_token: u32,
}

/// Read use cases (list, detail, table, positions, derive) in progress at once by default:
/// half of the Postgres pool's 16 connections, so however many reads arrive, the worker
/// protocol (leases, heartbeats, uploads) always finds a connection.
pub const DEFAULT_MAX_READS: usize = 8;

/// How long a read over the bound waits for a turn before it is answered 503 with
/// `Retry-After`.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// Rows of a positions page when the caller names no page size, and the most it may name.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// See [`DEFAULT_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 5000;

impl Service {
    /// A service over `store` with these engines, suites and lease settings.
    pub fn new(store: Arc<dyn Store>, catalog: Arc<Catalog>, leases: LeaseSettings) -> Self {
        let metrics = Arc::<Metrics>::default();
        Self {
            store,
            catalog: Arc::new(RwLock::new(catalog)),
            engine_writes: Arc::default(),
            leases,
            tables: Arc::default(),
            auth: Arc::new(Auth::new(false, metrics.token_lookups.clone())),
            reads: Arc::new(Semaphore::new(DEFAULT_MAX_READS)),
            git: Arc::new(crate::git::GitPool::new(Default::default())),
            metrics,
            max_workers_per_token: DEFAULT_MAX_WORKERS_PER_TOKEN,
        }
    }

    /// The same service letting one token hold at most `max` live workers (at least one):
    /// one more registration is refused until one of them stops or goes stale.
    pub fn with_max_workers_per_token(mut self, max: u32) -> Self {
        self.max_workers_per_token = max.max(1);
        self
    }

    /// The same service running git for git sources by `settings` (default: none allowed,
    /// see [`crate::git::GitSettings`]).
    pub fn with_git(mut self, settings: crate::git::GitSettings) -> Self {
        self.git = Arc::new(crate::git::GitPool::new(settings));
        self
    }

    /// The same service with at most `max_reads` read use cases in progress at once (at least
    /// one); the rest wait up to [`READ_WAIT`], then fail with [`ServiceError::Busy`].
    pub fn with_read_limit(mut self, max_reads: usize) -> Self {
        self.reads = Arc::new(Semaphore::new(max_reads.max(1)));
        self
    }

    /// A turn for one read use case, held while it uses the database.
    async fn read_turn(&self) -> Result<SemaphorePermit<'_>, ServiceError> {
        match tokio::time::timeout(READ_WAIT, self.reads.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Timed out, or (never: it is not closed) the semaphore was closed.
            _ => Err(ServiceError::Busy),
        }
    }

    /// The same service, letting anonymous callers read sweeps, tables, engines and suites
    /// when `public_read` (writes always need a token).
    pub fn with_public_read(mut self, public_read: bool) -> Self {
        let lookups = self.metrics.token_lookups.clone();
        self.auth = Arc::new(Auth::new(public_read, lookups));
        self
    }

    /// The caller a request's bearer token (or its absence) makes;
    /// [`ServiceError::Unauthenticated`] for an unknown or revoked token.
    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, ServiceError> {
        self.auth.authenticate(self.store.as_ref(), bearer).await
    }

    /// Checks that `caller` may do what `need` says: for an adapter to answer 401 or 403
    /// before it parses a request's input. The use case checks again (the same pure check), so
    /// this is never what keeps a caller out.
    pub(crate) fn authorize(&self, caller: &Caller, need: Need) -> Result<(), ServiceError> {
        self.auth.require(caller, need).map(|_| ())
    }

    /// The engines and suites as they are now. A use case takes one snapshot and keeps it, so
    /// an engine added meanwhile never mixes two definitions into one answer.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().expect("catalog lock").clone()
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<(), ServiceError> {
        Ok(self.store.ping().await?)
    }
}
