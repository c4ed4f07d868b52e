//! The store: everything the coordinator keeps, as rows and the SQL that reads and writes
//! them, behind one interface with a Postgres implementation and a SQLite one for local mode.
//! HTTP handlers never see SQL. The worker protocol's engine (claims, batching, affinity,
//! heartbeats, uploads, and what it keeps in memory) is not here but in `crate::queue`, which
//! works on the rows through `backend::Backend`; nothing here calls it.
//!
//! Layout: this file holds the interface (`Store`, and `BackendCalls` for what each database
//! writes its own way); `records` the values it takes and gives, `error` its error type,
//! `migrations` each backend's migrations and the check of a database opened as it is, `url`
//! what a log may show of a database URL. `postgres/` and `sqlite/` implement it, each split
//! the same way (connections, sweeps, reuse, the hot multi-row writes, workers); opening one
//! by URL is `crate::database`'s. Everything that is a rule rather than SQL is written once
//! and shared: `state` derives a sweep's state, `job` checks leases and assembles them,
//! `batch` validates result batches, `retry` says when a failing position or build is retried
//! and when it fails for good, `reuse` which earlier results a new sweep takes instead of
//! running them, and `work` how a cancelled sweep's or failed build's open work is closed.

mod announce;
mod any_backend;
mod auth;
pub(crate) mod backend;
pub(crate) mod batch;
pub(crate) mod checks;
pub(crate) mod clock;
mod deletion;
mod engines;
mod error;
mod estimates;
mod gauges;
pub(crate) mod job;
mod migrations;
pub mod postgres;
pub mod provenance;
mod reads;
mod records;
pub(crate) mod retry;
mod reuse;
pub(crate) mod rows;
pub(crate) mod sources;
pub mod speed;
pub(crate) mod sql;
pub mod sqlite;
pub(crate) mod stages;
mod state;
pub(crate) mod sweeps;
mod transfer;
mod url;
pub(crate) mod work;
pub(crate) mod workers;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};
use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::table::{BuildBench, CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{
    ActiveWorker, PositionError, Progress, RegisterWorker, SweepSummary, WorkerInfo,
};

pub use clock::Clock;
pub use error::{StoreError, StoreResult};
pub use estimates::{BuildCost, SearchCost};
pub use records::{
    Created, NewAudit, NewSearchStep, NewStage, NewSweep, Owner, PoolGauge, StoreGauges,
    StoredEngine, StoredToken, SweepRecord, WorkerCap,
};
pub use sweeps::PlannedSweep;
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
    /// Whether sweep `id` exists (one primary-key probe).
    async fn sweep_exists(&self, id: i64) -> StoreResult<bool>;
    /// Deletes sweep `id` whole (see `store/deletion.rs`); returns the results it had, or
    /// `None` when there is no such sweep.
    async fn delete_sweep(&self, id: i64) -> StoreResult<Option<u64>>;
    /// Sweep `id` read out whole for its export file (see [`crate::transfer`]), without its
    /// snapshots and suites (the caller adds them).
    async fn export_sweep(&self, id: i64) -> StoreResult<crate::transfer::SweepExport>;
    /// The snapshots sweep `id`'s builds build (its source's and its variants' own).
    async fn sweep_snapshots(&self, id: i64) -> StoreResult<Vec<String>>;
    /// Writes an export as a new, ended sweep submitted by `submitter`, its suites stored
    /// already (`suite_ids`, in the spec's order); `label` says where it came from. Returns
    /// its id.
    async fn import_sweep(
        &self,
        export: &crate::transfer::SweepExport,
        suite_ids: Vec<i64>,
        submitter: Option<Owner>,
        label: &str,
    ) -> StoreResult<i64>;
    /// Sweep `id`'s speed runs by build name (builds whose speed job has ended).
    async fn speed_runs(&self, id: i64) -> StoreResult<BTreeMap<String, speed::BuildSpeed>>;

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
    /// Each build's bench of sweep `id` by build name (see
    /// [`sweep_domain::table::BuildBench`]); builds without a bench record are left out.
    async fn build_benches(&self, id: i64) -> StoreResult<BTreeMap<String, BuildBench>>;
    /// Jobs by state, workers seen within `alive_within`, and pool occupancy: what a
    /// `/metrics` scrape shows. Cheap at any size: counts over indexes, no table scans.
    async fn gauges(&self, alive_within: Duration) -> StoreResult<StoreGauges>;
    /// Sweeps not announced to the operator's webhooks yet (running ones among them), oldest
    /// first, at most `limit`, as listed; sweeps stored before webhooks existed count as
    /// announced.
    async fn sweeps_to_announce(&self, limit: u32) -> StoreResult<Vec<SweepSummary>>;
    /// Marks sweep `id` announced: `true` for the one call that marked it (on any
    /// coordinator sharing the database), whose caller sends the events; `false` after.
    async fn claim_announcement(&self, id: i64) -> StoreResult<bool>;
    /// Sweeps that ended (were announced) before `cutoff`, oldest id first, at most `limit`:
    /// what the retention archives and deletes.
    async fn sweeps_ended_before(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> StoreResult<Vec<i64>>;
    /// For each of `workers` that took part in cross-checks (measuring the original or the
    /// check), over all sweeps: (checks, mismatches).
    async fn worker_checks(&self, workers: &[i64]) -> StoreResult<BTreeMap<i64, (u64, u64)>>;
    /// Staged sweeps whose work is all done while they have stages left to add (not
    /// cancelled), oldest first, at most `limit`: (id, stages left).
    async fn stages_due(&self, limit: u32) -> StoreResult<Vec<(i64, u32)>>;
    /// Records the decision of a finished stage of sweep `id` and adds the next stage's jobs
    /// (none when the stage failed or promoted nobody: the sweep then ends), in one
    /// transaction; `false`, with nothing written, when the sweep no longer has
    /// `stage.stages_left` stages left (another call added it) or was cancelled.
    async fn add_stage(&self, id: i64, stage: &NewStage) -> StoreResult<bool>;
    /// Records where sweep `id`'s search stands and gives its `next` cells jobs on the
    /// first stage's positions, in one transaction; once the search has ended, closes it (a
    /// failed search ends the sweep). `false`, with nothing written, when the search no
    /// longer has `step.planned_before` cells planned (another call added the step), has
    /// ended, or the sweep was cancelled.
    async fn add_search_step(&self, id: i64, step: &NewSearchStep) -> StoreResult<bool>;
    /// What writing `sweep` would make, written and rolled back: nothing is kept (see
    /// [`PlannedSweep`]).
    async fn plan_sweep(&self, sweep: &NewSweep) -> StoreResult<PlannedSweep>;
    /// What one search of `engine` cost in its newest sweeps, per suite (by name) and limit:
    /// (suite, limit, engine milliseconds summed, measured results), over measured (not
    /// copied) valid results of its last [`COST_SWEEPS`] sweeps.
    async fn search_costs(&self, engine: &str) -> StoreResult<Vec<SearchCost>>;
    /// What each build of sweep `id` cost, per suite and limit: engine milliseconds of its
    /// results, and of those measured in this sweep (not taken from earlier ones).
    async fn build_costs(&self, id: i64) -> StoreResult<Vec<BuildCost>>;
    /// Lets sweep `id`, held for approval, run: its builds' cursors are added. `false` when
    /// it is not waiting for approval (never held, decided already, or cancelled).
    async fn approve_sweep(&self, id: i64) -> StoreResult<bool>;
    /// Rejects sweep `id`, held for approval, saying `why`: it is cancelled. `false` when it
    /// is not waiting for approval.
    async fn reject_sweep(&self, id: i64, why: &str) -> StoreResult<bool>;
}

/// How many of an engine's newest sweeps its search costs are read from.
pub const COST_SWEEPS: u32 = 10;

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
