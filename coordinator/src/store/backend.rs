//! What the shared store code needs of a database ([`Backend`]): its connections, its clock,
//! how it locks rows and the few steps of a shared call that differ. The calls whose
//! statements or locking truly differ it implements itself ([`BackendCalls`]). The
//! [`Store`](super::Store) every backend gets is written over this in `any_backend`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::sql::{Reads, Tx};
use super::BackendCalls;
use super::{Clock, StoreResult};

/// What the shared store code needs of a database, beside the calls it implements itself
/// ([`BackendCalls`]): its read pool, write transactions, clock, and how it locks rows.
#[async_trait]
pub(crate) trait Backend: BackendCalls {
    /// The pool plain reads go to.
    type Reader: Reads;
    /// A write transaction.
    type Tx: Tx;
    /// Appended to a `SELECT` that reads rows of `alias` the transaction then changes:
    /// Postgres locks them (`FOR UPDATE OF alias`); SQLite's write transaction already holds
    /// the file's lock, so nothing.
    fn lock_rows(alias: &str) -> String;
    /// The read pool.
    fn reader(&self) -> &Self::Reader;
    /// Starts a write transaction.
    async fn begin(&self) -> StoreResult<Self::Tx>;
    /// The store's clock (see [`Clock`]).
    fn clock(&self) -> &Clock;
    /// The time a row written at `now` records in its `created_at` (or `reported_at`) column
    /// when the statement sets it: SQLite records the store's clock (`Some(now)`); Postgres
    /// leaves the column to its default, the database's `now()` (`None`).
    fn written_at(now: DateTime<Utc>) -> Option<DateTime<Utc>>;
    /// Makes concurrent submissions of one sweep identity wait for each other inside `tx`:
    /// Postgres takes a transaction-scoped advisory lock; SQLite's write transaction already
    /// holds the file's write lock.
    async fn lock_identity(&self, tx: &mut Self::Tx, identity: &str) -> StoreResult<()>;
    /// Inserts a new sweep's jobs of one kind, in the order given (their ids follow it);
    /// returns how many. Postgres: one set-based statement; SQLite: a row at a time inside
    /// its write transaction.
    async fn insert_jobs(
        &self,
        tx: &mut Self::Tx,
        sweep_id: i64,
        kind: JobKind,
        jobs: &[NewJob],
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
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
    /// Copies the earlier results `results` into sweep `id` (a row already there is kept)
    /// and counts them into their jobs, closing those with every position; then the earlier
    /// cross-checks `checks`, each judged against the result just copied for its position,
    /// closing the check jobs that took one. Returns how many results were copied.
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
    /// Reads job `job_id` inside `tx` so that it stays as read until the commit (Postgres
    /// locks its row; SQLite's write transaction already excludes other writers);
    /// [`super::StoreError::NotFound`] when there is no such job.
    async fn job_for_update(&self, tx: &mut Self::Tx, job_id: i64) -> StoreResult<JobRow>;
}
