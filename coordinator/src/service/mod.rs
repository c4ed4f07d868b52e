//! The coordinator's use cases, between the HTTP adapters and the store, in four parts, each
//! a type of its own with an error of its own:
//!
//! - [`submit`] ([`Submissions`], [`SubmitError`]): submitting and cancelling sweeps, their
//!   sources (uploads, and resolving a config's source), engines added at runtime, declared
//!   knobs;
//! - [`protocol`] ([`Protocol`], [`ProtocolError`]): the worker protocol: register, lease,
//!   heartbeat, give back, upload, build reports, source downloads;
//! - [`reads`] ([`Reads`], [`ReadError`]): sweep lists and details, tables and positions,
//!   derived suites, the workers page, the catalog, `/metrics` and the health check, under
//!   the bound on reads at once;
//! - [`admin`] ([`Admin`], [`AdminError`]): tokens, the audit log, build retries.
//!
//! They are apart because they differ in who calls them, what they hold and how they fail:
//! only the protocol loses leases or refuses a token's next worker, only reads wait for a turn
//! (so a flood of them never starves the protocol), only submissions run git; each part holds
//! what it uses and its error names only its own failures. Each part sorts the store's errors
//! into its own error inside the service, so `http/error.rs` maps each part's error to a
//! status once and no store type reaches a handler.
//!
//! Shared by all: who may do what (`auth.rs`: [`Caller`], [`Principal`], `Need`, and the
//! [`Denied`], [`RateLimited`] and [`AuthError`] failures), the store handle, metrics and live
//! catalog (`shared.rs`), and the database being [`Unavailable`] (`failure.rs`). This file
//! holds the thin [`Service`] that builds the four parts from one set of [`Options`], so the
//! server and the CLI construct it in one place, and [`LeaseSettings`].

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::Catalog;
use crate::database::Database;
use crate::git::GitSettings;
use crate::metrics::Metrics;

pub mod admin;
mod announce;
mod auth;
mod failure;
pub mod protocol;
pub mod reads;
mod retention;
mod search;
mod shared;
mod stages;
pub mod submit;

pub use admin::{Admin, AdminError, MAX_AUDIT_ENTRIES};
pub use announce::EventSink;
use auth::Auth;
pub(crate) use auth::Need;
pub use auth::{AuthError, Caller, Denied, Principal, RateLimited, TOKEN_TTL};
pub use failure::Unavailable;
pub use protocol::{AuthorizedWorker, Protocol, ProtocolError, DEFAULT_MAX_WORKERS_PER_TOKEN};
pub use reads::{
    ReadError, Reads, DEFAULT_MAX_READS, DEFAULT_PAGE_SIZE, DEFAULT_WORKERS_LISTED, MAX_PAGE_SIZE,
    MAX_WORKERS_LISTED, READ_WAIT, WORKERS_SEEN_WITHIN,
};
pub use retention::RetentionSettings;
use shared::{LiveCatalog, Shared};
pub use submit::{
    check_declared_knobs, EngineAdded, ResolvedSource, Submissions, SubmitError, Uploaded,
};

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

/// How a [`Service`] is set up beyond its store and catalog.
#[derive(Debug, Clone)]
pub struct Options {
    /// Lease timing and attempts (the worker protocol's, and what `/metrics` counts as live).
    pub leases: LeaseSettings,
    /// Anonymous callers may read sweeps, tables, engines and suites (writes always need a
    /// token).
    pub public_read: bool,
    /// Read use cases in progress at once, at most (at least one); the rest wait up to
    /// [`READ_WAIT`], then fail with [`ReadError::Busy`].
    pub max_reads: usize,
    /// Live workers one token may hold (at least one): one more registration is refused until
    /// one of them stops or goes stale.
    pub max_workers_per_token: u32,
    /// How git sources are fetched and resolved (default: none allowed, see
    /// [`crate::git::GitSettings`]).
    pub git: GitSettings,
    /// A submitter's sweep whose estimate is over this many engine-hours (or cannot be
    /// estimated) waits for an admin's approval (`None`: every sweep runs at once).
    pub approve_over_engine_hours: Option<f64>,
    /// Roles besides admin whose tokens may submit `priority = "high"` sweeps.
    pub high_priority_for: Vec<sweep_domain::auth::Role>,
}

impl Default for Options {
    /// Default leases, no anonymous reads, [`DEFAULT_MAX_READS`],
    /// [`DEFAULT_MAX_WORKERS_PER_TOKEN`], no git sources.
    fn default() -> Self {
        Self {
            leases: LeaseSettings::default(),
            public_read: false,
            max_reads: DEFAULT_MAX_READS,
            max_workers_per_token: DEFAULT_MAX_WORKERS_PER_TOKEN,
            git: GitSettings::default(),
            approve_over_engine_hours: None,
            high_priority_for: Vec::new(),
        }
    }
}

/// The coordinator's use cases: the four parts, built together over one store, one set of
/// tokens and metrics, one live catalog. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Service(Arc<Parts>);

/// What a [`Service`] holds.
struct Parts {
    shared: Shared,
    catalog: Arc<LiveCatalog>,
    submissions: Submissions,
    protocol: Protocol,
    reads: Reads,
    admin: Admin,
}

impl Service {
    /// A service over `db` with these engines, suites and lease settings, and the other
    /// [`Options`] at their defaults.
    pub fn new(db: Database, catalog: Arc<Catalog>, leases: LeaseSettings) -> Self {
        let options = Options {
            leases,
            ..Options::default()
        };
        Self::with_options(db, catalog, options)
    }

    /// A service over `db` with these engines and suites, set up by `options`.
    pub fn with_options(db: Database, catalog: Arc<Catalog>, options: Options) -> Self {
        let metrics = Arc::<Metrics>::default();
        let auth = Arc::new(Auth::new(
            options.public_read,
            metrics.token_lookups.clone(),
        ));
        let shared = Shared {
            store: db.store,
            auth,
            metrics,
        };
        let catalog = Arc::new(LiveCatalog::new(catalog));
        let reads = Reads::new(shared.clone(), catalog.clone(), &options);
        Self(Arc::new(Parts {
            protocol: Protocol::new(shared.clone(), db.queue, &options),
            admin: Admin::new(shared.clone(), reads.tables()),
            submissions: Submissions::new(
                shared.clone(),
                catalog.clone(),
                options.git,
                options.approve_over_engine_hours,
                options.high_priority_for,
                reads.tables(),
            ),
            reads,
            shared,
            catalog,
        }))
    }

    /// Submitting and cancelling sweeps, sources, engines added at runtime.
    pub fn submissions(&self) -> &Submissions {
        &self.0.submissions
    }

    /// The worker protocol.
    pub fn protocol(&self) -> &Protocol {
        &self.0.protocol
    }

    /// Sweeps, tables, positions, derived suites, workers, catalog, metrics: read.
    pub fn reads(&self) -> &Reads {
        &self.0.reads
    }

    /// Tokens, the audit log, build retries.
    pub fn admin(&self) -> &Admin {
        &self.0.admin
    }

    /// The caller a request's bearer token (or its absence) makes;
    /// [`AuthError::Unauthenticated`] for an unknown or revoked token.
    pub async fn authenticate(&self, bearer: Option<&str>) -> Result<Caller, AuthError> {
        let shared = &self.0.shared;
        shared
            .auth
            .authenticate(shared.store.as_ref(), bearer)
            .await
    }

    /// Checks that `caller` may do what `need` says: for an adapter to answer 401 or 403
    /// before it parses a request's input. The use case checks again (the same pure check), so
    /// this is never what keeps a caller out.
    pub(crate) fn authorize(&self, caller: &Caller, need: Need) -> Result<(), Denied> {
        self.0.shared.auth.require(caller, need).map(|_| ())
    }

    /// Whether anonymous callers may read sweeps, tables, engines and suites
    /// (`--public-read`): what lets a request without a token on to a read's route.
    pub(crate) fn anonymous_reads(&self) -> bool {
        self.0.shared.auth.public_read
    }

    /// The engines and suites as they are now. A use case takes one snapshot and keeps it, so
    /// an engine added meanwhile never mixes two definitions into one answer.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.0.catalog.current()
    }

    /// The counters the service bumps, for the HTTP layer's request latencies.
    pub fn metrics(&self) -> &Metrics {
        &self.0.shared.metrics
    }
}
