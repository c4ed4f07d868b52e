//! The store: everything the coordinator keeps, behind one interface with a Postgres
//! implementation and a SQLite one for local mode. HTTP handlers never see SQL.
//!
//! Layout: this file holds the interface and its types; `postgres/` and `sqlite/` implement
//! it, each split the same way (sources, sweeps, leases, reports). Everything that is a rule
//! rather than SQL is written once and shared: `state` derives a sweep's state, `job`
//! checks leases and assembles them, `batch` validates result batches, `retry` says
//! when a failing position or build is retried and when it fails for good, and `reuse`
//! which earlier results a new sweep takes instead of running them.

mod any_backend;
mod auth;
mod backend;
mod batch;
mod build_failures;
mod checks;
mod clock;
mod engines;
mod gauges;
mod job;
mod postgres;
mod protocol;
pub mod provenance;
mod reads;
mod retry;
mod reuse;
mod rows;
mod sources;
mod sql;
mod sqlite;
mod state;
mod sweeps;
mod workers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};
use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::plan::{BuildPlan, ChunkPlan};
use sweep_domain::provenance::BuildReport;
use sweep_domain::source::SourceOrigin;
use sweep_domain::spec::SweepSpec;
use sweep_domain::table::{BuildBench, CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{
    ActiveWorker, BatchAck, BuildFailure, BuildStatus, HeldLease, JobLease, JobReport, LeaseStatus,
    PositionError, Progress, RegisterWorker, SweepSummary, WorkerInfo,
};

pub use clock::Clock;
pub use postgres::statements as pg_statements;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// `url` with its password, if it has one, replaced by `***`: what error messages and logs
/// may show of a database URL.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// Opens the store a database URL names: `postgres://` or `postgresql://` is Postgres; a
/// `sqlite:` URL or a plain file path is SQLite (the file is created if missing). Migrations
/// are applied either way.
pub async fn connect(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else {
        // A typo'd scheme would otherwise become a SQLite file named after the URL.
        anyhow::bail!(
            "unsupported database URL `{}`: use postgres://, sqlite: or a file path",
            redact(url)
        )
    }
}

/// Opens an existing database as it is, for commands that read it (`sweep list --database`
/// and the like): nothing is created or migrated. `postgres://` is Postgres; a `sqlite:` URL
/// or a file path is SQLite.
pub async fn open_existing(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::open_existing(url).await?))
    } else if url.starts_with("sqlite:") || !url.contains("://") {
        Ok(Arc::new(SqliteStore::open_existing(url).await?))
    } else {
        anyhow::bail!(
            "unsupported database URL `{}`: use postgres://, sqlite: or a file path",
            redact(url)
        )
    }
}

/// Checks a database's applied migrations (`applied`, from `_sqlx_migrations`, which
/// `has_table` says exists) against those this build knows, for a database opened without
/// migrating: `db` (as it may be shown) is not a Sweep database, is older (needs migrations a
/// writing command applies) or newer than this build.
pub(crate) fn check_migrations(
    db: &str,
    has_table: bool,
    applied: &[i64],
    known: &sqlx::migrate::Migrator,
) -> anyhow::Result<()> {
    if !has_table {
        anyhow::bail!("{db} is not a Sweep database (it has no migrations table)");
    }
    let known: Vec<i64> = known
        .iter()
        .filter(|m| m.migration_type.is_up_migration())
        .map(|m| m.version)
        .collect();
    if let Some(newer) = applied.iter().find(|v| !known.contains(v)) {
        anyhow::bail!(
            "{db} was written by a newer Sweep (its migration {newer} is unknown to this one): \
             read it with that version"
        );
    }
    let missing: Vec<String> = known
        .iter()
        .filter(|v| !applied.contains(v))
        .map(|v| v.to_string())
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{db} is a Sweep database of an older version and needs migration ({} not applied); \
             reading commands leave it as it is: open it once with a command that writes, e.g. \
             `sweep coordinator --database {db}` or `sweep run --resume ID --database {db}`",
            missing.join(", ")
        );
    }
    Ok(())
}

/// A 128-bit sum as the `u64` the wire carries: past `u64::MAX` it saturates, never wraps.
pub(crate) fn saturating_u64(sum: u128) -> u64 {
    u64::try_from(sum).unwrap_or(u64::MAX)
}

/// A result's stored counters (a JSON object of name -> count, or NULL) as a map. Both
/// backends store what [`batch`] wrote, so anything else is a damaged row.
pub(crate) fn counters_of(json: Option<String>) -> StoreResult<BTreeMap<String, u64>> {
    match json {
        None => Ok(BTreeMap::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| StoreError::Internal(anyhow::anyhow!("stored counters `{text}`: {e}"))),
    }
}

/// Errors callers branch on; everything else is `Internal`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such sweep, job or snapshot.
    #[error("{0} not found")]
    NotFound(String),
    /// The worker does not hold this job's lease (any more).
    #[error("job {job_id}: lease not held by worker {worker_id} at attempt {attempt}")]
    LeaseLost {
        /// Job.
        job_id: i64,
        /// Worker that reported.
        worker_id: i64,
        /// The lease (attempt) it named.
        attempt: i64,
    },
    /// The request is well-formed but contradicts the stored state (e.g. a result for a
    /// position outside the job).
    #[error("{0}")]
    Invalid(String),
    /// The registering token already holds this many live workers (see [`WorkerCap`]).
    #[error("the token already holds {limit} live workers")]
    TooManyWorkers {
        /// Live workers a token may hold.
        limit: u32,
        /// A lease: the longest a place stays taken by a worker that went away.
        lease: Duration,
    },
    /// The database cannot be reached or timed out, or it rolled the transaction back to
    /// break a deadlock or a serialization conflict; the request can be retried.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
                StoreError::Unavailable(e)
            }
            sqlx::Error::Database(ref db)
                if db
                    .code()
                    .is_some_and(|c| c.starts_with("57") || c.starts_with("08")) =>
            {
                // Class 57 (operator intervention: shutdown, statement timeout) and 08
                // (connection exception) are passing conditions.
                StoreError::Unavailable(e)
            }
            // Class 40: the transaction was rolled back (a deadlock's victim, a serialization
            // failure) and left nothing behind; the same call again may well succeed.
            sqlx::Error::Database(ref db) if rolled_back(db.as_ref()) => StoreError::Unavailable(e),
            other => StoreError::Internal(anyhow::Error::new(other)),
        }
    }
}

impl StoreError {
    /// Whether the database rolled the transaction back to break a deadlock or a
    /// serialization conflict (SQLSTATE class 40): nothing of it was kept, and running it
    /// again is expected to succeed once the other transaction is through.
    pub(crate) fn rolled_back(&self) -> bool {
        matches!(self, StoreError::Unavailable(sqlx::Error::Database(db)) if rolled_back(db.as_ref()))
    }
}

/// Whether the database error is of SQLSTATE class 40 (transaction rollback).
fn rolled_back(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.code().is_some_and(|c| c.starts_with("40"))
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// What became of one job of a worker's upload or heartbeat (see [`Store::report_many`] and
/// [`Store::heartbeat_many`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobOutcome {
    /// `Held`: stored (or renewed) and the lease renewed; `Cancelled`: stored, but the sweep
    /// was cancelled; `Lost`: the worker does not hold the job (or it does not exist), nothing
    /// was stored for it.
    pub status: LeaseStatus,
    /// Results newly stored (recorded failures included); 0 for heartbeats.
    pub accepted: u32,
    /// Results already stored earlier; 0 for heartbeats.
    pub duplicates: u32,
}

impl JobOutcome {
    /// The outcome of a job whose lease the worker does not hold.
    pub const LOST: JobOutcome = JobOutcome {
        status: LeaseStatus::Lost,
        accepted: 0,
        duplicates: 0,
    };

    /// The outcome of a job whose lease the worker held (and gave back, or renewed).
    pub const HELD: JobOutcome = JobOutcome {
        status: LeaseStatus::Held,
        accepted: 0,
        duplicates: 0,
    };

    /// The outcome of one job's store call: a lost lease or an unknown job is that job's
    /// `Lost`; any other error is the whole call's.
    pub(crate) fn of(stored: StoreResult<BatchAck>) -> StoreResult<JobOutcome> {
        match stored {
            Ok(ack) => Ok(JobOutcome {
                status: if ack.cancelled {
                    LeaseStatus::Cancelled
                } else {
                    LeaseStatus::Held
                },
                accepted: ack.accepted,
                duplicates: ack.duplicates,
            }),
            Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => Ok(JobOutcome::LOST),
            Err(e) => Err(e),
        }
    }
}

/// A sweep ready to be written: the validated spec and its plan.
#[derive(Debug, Clone)]
pub struct NewSweep {
    /// Validated spec.
    pub spec: SweepSpec,
    /// Engine definition as it was at submission (later edits do not affect the sweep).
    pub engine_def: EngineDef,
    /// Source snapshot hash (the snapshot must already be stored); `None` for a binary-only
    /// engine.
    pub source_sha256: Option<String>,
    /// Where the source came from (registered, uploaded, git).
    pub origin: SourceOrigin,
    /// Suite ids (stored versions), in the spec's order.
    pub suite_ids: Vec<i64>,
    /// Builds, baseline first.
    pub builds: Vec<BuildPlan>,
    /// Chunks of every suite.
    pub chunks: Vec<ChunkPlan>,
    /// The token that submitted it (`None` for a local run's in-process submit).
    pub submitter: Option<Owner>,
}

/// A token as the owner of something (a sweep it submitted, a worker it registered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Token id (negative for a local run's in-memory token).
    pub token_id: i64,
    /// Token name.
    pub name: String,
}

/// A live (not revoked) token, as a request presenting it is authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Role.
    pub role: Role,
}

/// An audit log entry to write (the store stamps id and time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAudit {
    /// Token name, or `local`.
    pub actor: String,
    /// The actor's role.
    pub role: String,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub target: String,
    /// More about it.
    pub detail: String,
}

impl NewSweep {
    /// The sweep's identity (see [`SweepSpec::identity`]): same engine, source and spec.
    pub fn identity(&self) -> String {
        self.spec.identity(self.source_sha256.as_deref())
    }
}

/// An engine definition added over the API, as stored (see `migrations/*/0009_engines.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEngine {
    /// Engine name (the definition's `name`).
    pub name: String,
    /// The definition's TOML text as the admin sent it.
    pub definition: String,
    /// When it was last added or updated.
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// The token name (or `local`) that last added or updated it.
    pub updated_by: String,
}

/// What [`Store::create_sweep_unless_running`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The sweep: the new one, or the identical one already queued or running.
    pub id: i64,
    /// Its jobs.
    pub jobs: u64,
    /// `id` is an identical sweep that was still queued or running; nothing was written.
    pub existing: bool,
    /// Results the new sweep took from earlier sweeps instead of running them (0 for an
    /// existing sweep, and when the spec says `recompute`).
    pub reused: u64,
}

/// A stored sweep, as the read side needs it.
#[derive(Debug, Clone)]
pub struct SweepRecord {
    /// Summary (state derived from its jobs).
    pub summary: SweepSummary,
    /// Spec.
    pub spec: SweepSpec,
    /// Engine definition at submission.
    pub engine_def: EngineDef,
    /// Snapshot hash; `None` for a binary-only engine.
    pub source_sha256: Option<String>,
    /// Where the source came from (registered, uploaded, git).
    pub origin: SourceOrigin,
    /// Builds in order, with build errors.
    pub builds: Vec<BuildStatus>,
    /// (suite name, number of positions), in the spec's order.
    pub suites: Vec<(String, usize)>,
    /// The sha256 of each suite version the sweep ran, by suite name.
    pub suite_sha256: BTreeMap<String, String>,
    /// Id of the token that submitted it, if one did.
    pub submitter_token: Option<i64>,
}

/// What `/metrics` reads from the store at each scrape (see [`Store::gauges`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// (job state, jobs in it), for the states that have jobs.
    pub jobs_by_state: Vec<(String, i64)>,
    /// Workers seen within the window asked for that have not stopped since.
    pub workers_alive: i64,
    /// Cross-checks stored that disagreed with their result, over all sweeps.
    pub cross_check_mismatches: i64,
    /// The store's connection pools.
    pub pools: Vec<PoolGauge>,
}

/// One connection pool's occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolGauge {
    /// Which pool (`main` for Postgres; `writer` and `reader` for SQLite).
    pub name: &'static str,
    /// Connections open (in use or idle).
    pub size: u32,
    /// Connections open and idle.
    pub idle: u32,
    /// Connections the pool may open at most.
    pub max: u32,
}

impl PoolGauge {
    /// The occupancy of `pool` now.
    pub(crate) fn of<DB: sqlx::Database>(name: &'static str, pool: &sqlx::Pool<DB>) -> Self {
        Self {
            name,
            size: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        }
    }
}

/// Everything the store does. Implementations must make leasing safe with several
/// coordinators on one database, and result writes idempotent. The calls each database
/// makes in its own way are [`BackendCalls`]; the rest is implemented once, over any
/// backend (`store/backend.rs`).
#[async_trait]
pub trait Store: BackendCalls {
    /// The clock every time the store compares or writes comes from; tests move it forward
    /// instead of sleeping.
    fn clock(&self) -> &Clock;
    /// Checks that the database answers.
    async fn ping(&self) -> StoreResult<()>;
    /// Lists sweeps, newest first.
    async fn list_sweeps(&self, limit: u32) -> StoreResult<Vec<SweepSummary>>;
    /// Reads one sweep.
    async fn sweep(&self, id: i64) -> StoreResult<SweepRecord>;
    /// Progress per build and suite.
    async fn progress(&self, id: i64) -> StoreResult<Vec<Progress>>;
    /// The sums a delta table is made of, per (build, limit, suite) with results, against
    /// the sweep's baseline (what [`sweep_domain::table::sums_of`] makes of its results),
    /// kept summed by the database as results arrive.
    async fn table_sums(&self, id: i64) -> StoreResult<BTreeMap<SumsKey, CellSums>>;
    /// Workers holding live leases on the sweep's jobs.
    async fn active_workers(&self, id: i64) -> StoreResult<Vec<ActiveWorker>>;
    /// Names of the builds with a job under a live lease, in the sweep's build order.
    async fn active_builds(&self, id: i64) -> StoreResult<Vec<String>>;
    /// Position errors (at most `limit`): final ones (a result with an error), and positions
    /// that failed but will be retried, whose error says how often they failed so far.
    async fn position_errors(&self, id: i64, limit: u32) -> StoreResult<Vec<PositionError>>;
    /// Every result of the sweep.
    async fn results(&self, id: i64) -> StoreResult<Vec<ResultRow>>;
    /// The suite version sweep `id` ran under the name `suite`, positions included (later
    /// versions of a suite file do not change it); [`StoreError::NotFound`] when the sweep
    /// does not exist or ran no suite of that name.
    async fn sweep_suite(&self, id: i64, suite: &str) -> StoreResult<Suite>;
    /// Cancels a sweep: open jobs are closed, workers learn it at their next call.
    async fn cancel_sweep(&self, id: i64) -> StoreResult<()>;
    /// Gives a build that failed to compile another chance: its build error and recorded
    /// failures are cleared (every worker may try it again) and its failed jobs are queued
    /// again; returns how many. [`StoreError::NotFound`] for an unknown sweep or build,
    /// [`StoreError::Invalid`] when the build has not failed or the sweep was cancelled.
    async fn retry_build(&self, id: i64, build: &str) -> StoreResult<u64>;

    /// Stores a new token by the sha256 of its secret; returns its id.
    /// [`StoreError::Invalid`] when a token not revoked has that name.
    async fn create_token(&self, name: &str, role: Role, hash: &str) -> StoreResult<i64>;
    /// The token not revoked whose secret hashes to `hash`, if any.
    async fn token_by_hash(&self, hash: &str) -> StoreResult<Option<StoredToken>>;
    /// Every token, revoked ones included, oldest first.
    async fn tokens(&self) -> StoreResult<Vec<TokenInfo>>;
    /// Revokes the live token named `name`; [`StoreError::NotFound`] when there is none.
    async fn revoke_token(&self, name: &str) -> StoreResult<TokenInfo>;
    /// Appends to the audit log.
    async fn audit(&self, entry: &NewAudit) -> StoreResult<()>;
    /// The newest `limit` audit log entries, newest first.
    async fn audit_log(&self, limit: u32) -> StoreResult<Vec<AuditEntry>>;

    /// Stores an engine definition under `name`, replacing any stored one; returns the row
    /// and whether it is new (no definition of that name was stored).
    async fn put_engine(
        &self,
        name: &str,
        definition: &str,
        updated_by: &str,
    ) -> StoreResult<(StoredEngine, bool)>;
    /// Every stored engine definition, by name.
    async fn engines(&self) -> StoreResult<Vec<StoredEngine>>;
    /// The id of the token that registered a worker (`None`: registered before tokens
    /// existed); [`StoreError::NotFound`] when no such worker is registered.
    async fn worker_token(&self, worker_id: i64) -> StoreResult<Option<i64>>;
    /// The workers seen within `seen_within`, most recently seen first, at most `limit`:
    /// each with the unexpired leases it holds and the results it stored in the last minute.
    async fn workers(&self, seen_within: Duration, limit: u32) -> StoreResult<Vec<WorkerInfo>>;
    /// The first `per_build` build records of each build of sweep `id` (oldest first) and how
    /// many each build has.
    async fn build_records(&self, id: i64, per_build: u32)
        -> StoreResult<provenance::BuildRecords>;
    /// Sweep `id`'s cross-checks (see [`sweep_domain::crosscheck`]): planned, done, errors,
    /// mismatches per (build, limit), and the first `listed` mismatching positions.
    async fn cross_checks(&self, id: i64, listed: u32) -> StoreResult<CrossChecks>;

    /// Stores a source snapshot (no-op if the hash is present).
    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()>;
    /// Reads a snapshot.
    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>>;
    /// Whether a snapshot is stored (without reading it).
    async fn has_snapshot(&self, sha256: &str) -> StoreResult<bool>;
    /// Keeps that token `token_id` uploaded the stored snapshot `sha256`.
    async fn add_snapshot_uploader(&self, sha256: &str, token_id: i64) -> StoreResult<()>;
    /// Whether token `token_id` may read snapshot `sha256` now: it uploaded it, submitted a
    /// sweep that uses it, or registered a worker holding a lease of a job of such a sweep.
    async fn may_read_snapshot(&self, sha256: &str, token_id: i64) -> StoreResult<bool>;

    /// Stores a suite version (no-op if name and hash are present); returns its id.
    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64>;

    /// Writes a sweep with its builds and jobs in one transaction, unless a sweep with the
    /// same [`NewSweep::identity`] is still queued or running: then that sweep (the newest
    /// such) is returned and nothing is written. Concurrent identical calls make one sweep.
    async fn create_sweep_unless_running(&self, sweep: &NewSweep) -> StoreResult<Created>;
    /// Records that the job's build failed on the reporting worker, which is never leased
    /// that build again. Once `min(max_attempts, live workers)` distinct workers failed it
    /// (live: seen within the last `lease`), the build gets its build error and its open jobs
    /// are closed as failed; until then the job goes back to the queue for another worker.
    async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck>;
    /// Keeps how a worker got the binary of `job_id`'s build (the worker must hold the job's
    /// lease at `report.attempt`, else `LeaseLost`); the first report per (build, worker) stays.
    /// A bench total that differs from the one another worker reported earlier for the same
    /// binary in the sweep is returned as the mismatch, in words: the worker is then refused
    /// the build as by [`Store::build_failed`] (with `lease` and `max_attempts`).
    async fn record_build(
        &self,
        job_id: i64,
        report: &BuildReport,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Option<String>>;
    /// Each build's bench of sweep `id` by build name (see
    /// [`sweep_domain::table::BuildBench`]); builds without a bench record are left out.
    async fn build_benches(&self, id: i64) -> StoreResult<BTreeMap<String, BuildBench>>;
    /// Jobs by state, workers seen within `alive_within`, and pool occupancy: what a
    /// `/metrics` scrape shows. Cheap at any size: counts over indexes, no table scans.
    async fn gauges(&self, alive_within: Duration) -> StoreResult<StoreGauges>;
    /// For each of `workers` that took part in cross-checks (measuring the original or the
    /// check), over all sweeps: (checks, mismatches).
    async fn worker_checks(&self, workers: &[i64]) -> StoreResult<BTreeMap<i64, (u64, u64)>>;

    /// Leases up to `max` jobs to `worker_id` (jobs of expired leases and jobs given back
    /// first, then fresh work), never of a build it failed to compile, and jobs it saw a
    /// position fail on only after all others; one lease row for them all, whose id is the
    /// attempt every later call about them names. [`StoreError::NotFound`] when the worker
    /// is not registered.
    ///
    /// First it judges again, against the workers live now (seen within the last `lease`),
    /// every build that failed on some workers but was not failed yet and still has work
    /// waiting, and fails those that now fail by the rule of [`Store::build_failed`] (with
    /// `max_attempts`): when the workers that had not tried died, those left all failed
    /// the build, and nobody could ever take its jobs.
    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>>;
    /// Renews every lease of one worker heartbeat (the worker must hold each job under the
    /// lease it names), and marks the worker seen. Returns one outcome per lease in request
    /// order: a lease the worker does not hold (or an unknown job) is `Lost` and does not fail
    /// the others. [`StoreError::NotFound`] (and nothing written) when the worker is not
    /// registered.
    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>>;
    /// Gives back the leases of `worker_id` named in `leases` (the worker is stopping): each
    /// job it still holds under that lease is queued again, so any worker may take it at once
    /// (under a new lease: late reports naming the old one are refused). The worker no longer
    /// counts as live (for cross-checks, stalled builds, listings) until it is next marked
    /// seen. One outcome per lease in request order: `Held` when released, `Lost` when it was
    /// not held; `leases` may be empty (a stopping worker that held nothing).
    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>>;
    /// Stores every job report of one worker upload in one transaction, and marks the worker
    /// seen.
    ///
    /// Each report's results are stored idempotently and renew the job's lease; a `finished`
    /// report ends the lease's hold on the job, which is complete when every position has a
    /// result and is queued again otherwise.
    ///
    /// A result with an error is one failed try of its position (recorded once per job
    /// attempt, so a re-sent batch does not count twice): the position stays without a result,
    /// and is leased again (preferably to another worker) until it has failed `max_attempts`
    /// times; then it gets a final result carrying the reasons. Recorded failures count as
    /// accepted in the outcome.
    ///
    /// Returns one outcome per report in request order: a report whose lease is lost (or
    /// whose job is unknown) is `Lost`, stores nothing, and does not fail the others. Invalid input in any report fails the whole
    /// call with [`StoreError::Invalid`] and stores nothing; an unregistered worker fails it
    /// with [`StoreError::NotFound`].
    async fn report_many(
        &self,
        worker_id: i64,
        reports: Arc<[JobReport]>,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>>;
}

/// The part of [`Store`] each database implements itself, because its statements differ:
/// registering a worker and reading a few builds' results. (The worker protocol and writing a sweep are shared, over the few
/// primitives that differ in `Backend`.) Callers use them through [`Store`].
#[async_trait]
pub trait BackendCalls: Send + Sync + 'static {
    /// The results of the named builds at one search limit (what a per-position comparison
    /// needs).
    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ResultRow>>;
    /// Registers a worker under the token that registered it; returns its id. With a `cap`
    /// and a token, [`StoreError::TooManyWorkers`] when the token already holds
    /// `cap.max_live` live workers (registrations of one token wait for each other, so
    /// concurrent ones never pass the cap together).
    async fn register_worker_capped(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
        cap: Option<WorkerCap>,
    ) -> StoreResult<i64>;
    /// Registers a worker under the token that registered it, however many that token holds
    /// (local commands and tests); returns its id.
    async fn register_worker(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
    ) -> StoreResult<i64> {
        self.register_worker_capped(worker, token_id, None).await
    }
}

/// How many live workers one token may hold (see [`BackendCalls::register_worker_capped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerCap {
    /// Live workers a token may hold at once.
    pub max_live: u32,
    /// A worker is live while seen within this (a lease) and not stopped since, the rule
    /// every liveness question asks (`store::workers::live`): a worker that went away frees
    /// its place a lease after it was last seen, one that stopped at once.
    pub lease: Duration,
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://sweep:s3cret@db:5432/sweep"),
            "postgres://sweep:***@db:5432/sweep"
        );
        assert_eq!(
            redact("postgres://sweep@db/sweep"),
            "postgres://sweep@db/sweep"
        );
        assert_eq!(redact("postgres://u:p@ss@db/x"), "postgres://u:***@db/x");
        assert_eq!(redact("/tmp/sweep.db"), "/tmp/sweep.db");
    }
}
