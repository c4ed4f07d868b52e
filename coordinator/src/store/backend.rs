//! What the shared store code needs of a database ([`Backend`]): its connections, its clock,
//! its SQL dialect where portable SQL cannot say it (lists of ids, a lease's jobs), how it
//! locks rows, and the few statements whose fast form differs (multi-row writes). The calls
//! whose statements truly differ it implements itself ([`BackendCalls`]). The
//! [`Store`](super::Store) every backend gets is written over this in `any_backend`, and the
//! worker queue (`crate::queue`, which keeps its in-memory state itself) over it too.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::batch::Checked;
use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::sql::{Reads, Tx};
use super::BackendCalls;
use super::{Clock, StoreResult};

/// A lease row to write: one lease call's jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewLease {
    /// The worker it goes to.
    pub worker_id: i64,
    /// Its jobs, in the order handed out (at most 64).
    pub jobs: Vec<i64>,
    /// When it expires unless renewed.
    pub expires_at: DateTime<Utc>,
}

/// The jobs of one build a sweep's submission inserted: ids `first` to `last`, `count` of
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobRange {
    /// The build.
    pub build_id: i64,
    /// Its first job.
    pub first: i64,
    /// Its last job.
    pub last: i64,
    /// How many.
    pub count: i64,
}

/// A build's cursor as a claim locked it (`build_queue`), with the first queued jobs past it.
#[derive(Debug, Clone)]
pub(crate) struct LockedCursor {
    /// The build.
    pub build_id: i64,
    /// The next job id the cursor stands at.
    pub next_job: i64,
    /// The build's last job (its range ends there).
    pub last_job: i64,
    /// Jobs left at or after the cursor.
    pub remaining: i64,
    /// Up to the number asked of queued work jobs from `next_job` on, in id order.
    pub jobs: Vec<JobRow>,
}

/// One measured position of an upload, as `results` or `cross_checks` stores it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measurement<'a> {
    /// Its job.
    pub job: &'a JobRow,
    /// The worker that measured it.
    pub worker_id: i64,
    /// The lease it was measured under.
    pub attempt: i64,
    /// What was measured, checked.
    pub c: &'a Checked,
}

/// What the shared store code needs of a database, beside the calls it implements itself
/// ([`BackendCalls`]): its read pool, write transactions, clock, dialect and locking.
#[async_trait]
pub(crate) trait Backend: BackendCalls + Clone {
    /// The pool plain reads go to.
    type Reader: Reads;
    /// A write transaction.
    type Tx: Tx;
    /// `ORDER BY` of a build's recorded failures, newest first (the order they were counted).
    const NEWEST_FAILURE_FIRST: &'static str;
    /// Whether a claim deals workers jobs of the builds they already have first (build
    /// affinity: distributed workers compile few variants each; Postgres), or deals the queue
    /// in job order, round-robin over the builds, which keeps them level (SQLite: a local
    /// run's one worker has every build).
    const BUILD_AFFINITY: bool;
    /// Appended to a `SELECT` that reads rows of `alias` the transaction then changes:
    /// Postgres locks them (`FOR UPDATE OF alias`); SQLite's write transaction already holds
    /// the file's lock, so nothing.
    fn lock_rows(alias: &str) -> String;
    /// Appended to a `SELECT` of rows of `alias` a claim takes: Postgres locks them and skips
    /// those another transaction holds (`FOR UPDATE OF alias SKIP LOCKED`); SQLite, nothing.
    fn skip_locked(alias: &str) -> String;
    /// The test "is one of the list `param`" (a [`super::sql::Value::Ints`]), after an
    /// integer expression: Postgres `= ANY(param)`, SQLite `IN (SELECT value FROM
    /// json_each(param))`.
    fn in_list(param: &str) -> String;
    /// Appended to `FROM leases <lease>`: one row per job of the lease row, `u.value` (the
    /// job) and `u.key` (its bit in `closed`, from 0). Postgres unnests the array; SQLite
    /// walks the JSON array (`json_each`, whose columns these are).
    fn lease_jobs(lease: &str) -> String;
    /// The read pool.
    fn reader(&self) -> &Self::Reader;
    /// The occupancy of the store's connection pools, for `/metrics`.
    fn pools(&self) -> Vec<super::PoolGauge>;
    /// Starts a write transaction.
    async fn begin(&self) -> StoreResult<Self::Tx>;
    /// Starts a write transaction of the worker protocol (an upload, heartbeats, leases given
    /// back): Postgres plans its statements without sequential scans, which they never need,
    /// so statistics gathered while a table was nearly empty (a new database) cannot turn a
    /// lookup into a scan of a table that has grown since.
    async fn begin_hot(&self) -> StoreResult<Self::Tx>;
    /// Starts a claim's write transaction: as [`Backend::begin_hot`], and Postgres commits it
    /// without waiting for the disk (a claim lost in a crash of Postgres itself only puts its
    /// jobs back in the queue).
    async fn begin_claim(&self) -> StoreResult<Self::Tx>;
    /// The store's clock (see [`Clock`]).
    fn clock(&self) -> &Clock;
    /// The time a row written at `now` records in its `created_at` (or `reported_at`) column
    /// when the statement sets it: SQLite records the store's clock (`Some(now)`); Postgres
    /// leaves the column to its default, the database's `now()` (`None`).
    fn written_at(now: DateTime<Utc>) -> Option<DateTime<Utc>>;
    /// Makes concurrent transactions naming the same `key` (hex, such as a sha256: a sweep
    /// identity, the hash of a binary of a sweep) wait for each other inside `tx`: Postgres
    /// takes a transaction-scoped advisory lock named by the key's first 60 bits; SQLite's
    /// write transaction already holds the file's write lock.
    async fn lock_key(&self, tx: &mut Self::Tx, key: &str) -> StoreResult<()>;
    /// Inserts a new sweep's jobs of one kind, in the order given (their ids follow it: work
    /// jobs come build by build, so each build's are one range of ids); for work jobs, keeps
    /// each build's range on the build (`first_job`, `last_job`). Returns each build's range
    /// and how many jobs it got. Postgres: one set-based statement; SQLite: a row at a time
    /// inside its write transaction.
    async fn insert_jobs(
        &self,
        tx: &mut Self::Tx,
        sweep_id: i64,
        kind: JobKind,
        jobs: &[NewJob],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<JobRange>>;
    /// The earlier rows of `query` (`reuse::RESULT_CANDIDATES` or `CHECK_CANDIDATES`) of
    /// builds with a fingerprint of `wanted`, outside sweep `id` (Postgres: one statement
    /// over all fingerprints; SQLite: one per fingerprint).
    async fn reuse_candidates(
        &self,
        tx: &mut Self::Tx,
        query: &str,
        wanted: &[&str],
        id: i64,
    ) -> StoreResult<Vec<Prior>>;
    /// Copies the earlier results `results` into sweep `id` (a row already there is kept),
    /// closing the work jobs they complete; then the earlier cross-checks `checks`, each
    /// judged against the result just copied for its position, closing the check jobs that
    /// took one. Returns how many results were copied.
    async fn copy_earlier(
        &self,
        tx: &mut Self::Tx,
        id: i64,
        results: &[CopyRow],
        checks: &[CopyRow],
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// Runs after a new sweep of `jobs` jobs committed: Postgres refreshes the planner's
    /// statistics after a large one.
    async fn sweep_written(&self, jobs: u64) -> StoreResult<()>;
    /// For each `(build, n)`: locks the build's cursor unless another claim holds it (which
    /// is skipped, not waited for) and reads up to `n` queued work jobs past it, in id order:
    /// one statement on Postgres, so a claim's first jobs of a build cost one round trip.
    /// Builds without a cursor (no fresh work) are absent.
    async fn lock_cursors(
        &self,
        tx: &mut Self::Tx,
        wants: &[(i64, i64)],
    ) -> StoreResult<Vec<LockedCursor>>;
    /// For each `(build, after, last, n)`: up to `n` queued work jobs of the build with ids
    /// from `after` to `last` (its range), in id order (a walk of the primary key): more of a
    /// locked cursor's jobs.
    async fn jobs_after(
        &self,
        tx: &mut Self::Tx,
        wants: &[(i64, i64, i64, i64)],
    ) -> StoreResult<Vec<JobRow>>;
    /// Sets each `(build, next_job, remaining)` cursor of `build_queue`.
    async fn set_cursors(&self, tx: &mut Self::Tx, rows: &[(i64, i64, i64)]) -> StoreResult<()>;
    /// Inserts lease rows; returns their ids, in the order given.
    async fn insert_leases(&self, tx: &mut Self::Tx, rows: &[NewLease]) -> StoreResult<Vec<i64>>;
    /// Sets each `(id, closed, expires_at)` lease row.
    async fn set_leases(
        &self,
        tx: &mut Self::Tx,
        rows: &[(i64, i64, DateTime<Utc>)],
    ) -> StoreResult<()>;
    /// Inserts results (the verdict the coordinator judged), ignoring positions that already
    /// have one; returns the job of each row inserted.
    async fn insert_results(
        &self,
        tx: &mut Self::Tx,
        rows: &[Measurement<'_>],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>>;
    /// Inserts cross-check measurements, each with its original's worker and whether it
    /// mismatches the original (both without error, nodes or move differ), ignoring
    /// positions already checked; returns the job of each row inserted.
    async fn insert_checks(
        &self,
        tx: &mut Self::Tx,
        rows: &[Measurement<'_>],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>>;
}
