//! The store: everything the coordinator keeps, behind one interface with a Postgres
//! implementation and a SQLite one for local mode. HTTP handlers never see SQL.
//!
//! Layout: this file holds the interface (`Store`, and `BackendCalls` for what each database
//! writes its own way); `records` the values it takes and gives, `error` its error type, and
//! `connect` opens a database by URL. `postgres/` and `sqlite/` implement it, each split the
//! same way (sources, sweeps, leases, reports). Everything that is a rule
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
mod connect;
mod engines;
mod error;
mod gauges;
mod job;
mod migrations;
pub mod postgres;
mod protocol;
pub mod provenance;
mod reads;
mod records;
mod retry;
mod reuse;
mod rows;
mod sources;
mod sql;
pub mod sqlite;
mod state;
mod sweeps;
mod url;
mod workers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};
use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::provenance::BuildReport;
use sweep_domain::table::{BuildBench, CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{
    ActiveWorker, BatchAck, BuildFailure, HeldLease, JobLease, JobReport, PositionError, Progress,
    RegisterWorker, SweepSummary, WorkerInfo,
};

pub use clock::Clock;
pub use connect::{connect, open_existing};
pub use error::{StoreError, StoreResult};
pub use records::{
    Created, JobOutcome, NewAudit, NewSweep, Owner, PoolGauge, StoreGauges, StoredEngine,
    StoredToken, SweepRecord, WorkerCap,
};
pub use url::redact;

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
