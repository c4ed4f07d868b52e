//! The one [`Store`] implementation, over the narrow [`Backend`] trait each database
//! implements. What is the same on both (every read but a table's sums, tokens, the audit
//! log, engines, cancelling, retrying a build) is written once in the shared modules and
//! called from here; a backend supplies its connections, its clock, how it locks rows, and
//! the calls whose statements or locking truly differ: the worker protocol's hot path
//! (Postgres: set-based statements under `FOR UPDATE SKIP LOCKED`; SQLite: one writer under
//! `BEGIN IMMEDIATE`), writing a sweep, snapshots and suites, and the metrics gauges.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};
use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::provenance::BuildReport;
use sweep_domain::table::{sums_of, CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{
    ActiveWorker, BatchAck, BuildFailure, HeldLease, JobLease, JobReport, PositionError, Progress,
    RegisterWorker, SweepSummary, WorkerInfo,
};

use super::sql::{Reads, Tx};
use super::{
    auth, checks, engines, provenance, reads, workers, Clock, Created, JobOutcome, NewAudit,
    NewSweep, Store, StoreGauges, StoreResult, StoredEngine, StoredToken, SweepRecord,
};

/// A database as the store sees it. Each method without a body is the backend's own version
/// of the [`Store`] method of the same name (documented there).
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
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

    /// See [`Store::gauges`].
    async fn gauges(&self, alive_within: Duration) -> StoreResult<StoreGauges>;
    /// See [`Store::put_snapshot`].
    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()>;
    /// See [`Store::snapshot`].
    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>>;
    /// See [`Store::has_snapshot`].
    async fn has_snapshot(&self, sha256: &str) -> StoreResult<bool>;
    /// See [`Store::put_suite`].
    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64>;
    /// See [`Store::create_sweep_unless_running`].
    async fn create_sweep_unless_running(&self, sweep: &NewSweep) -> StoreResult<Created>;
    /// See [`Store::register_worker`].
    async fn register_worker(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
    ) -> StoreResult<i64>;
    /// See [`Store::lease_jobs`].
    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>>;
    /// See [`Store::heartbeat_many`].
    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>>;
    /// See [`Store::release_leases`].
    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>>;
    /// See [`Store::report_many`].
    async fn report_many(
        &self,
        worker_id: i64,
        reports: &[JobReport],
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>>;
    /// See [`Store::build_failed`].
    async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck>;
    /// See [`Store::record_build`].
    async fn record_build(&self, job_id: i64, report: &BuildReport) -> StoreResult<()>;
    /// See [`Store::worker_checks`].
    async fn worker_checks(&self, workers: &[i64]) -> StoreResult<BTreeMap<i64, (u64, u64)>>;

    /// See [`Store::build_results`]: here from every result of the sweep, unless the backend
    /// selects them next to the data.
    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ResultRow>> {
        let mut rows = reads::results(self.reader(), id).await?;
        rows.retain(|r| r.limit == limit && builds.contains(&r.build));
        Ok(rows)
    }

    /// See [`Store::table_sums`]: here [`sums_of`] every result of the sweep, unless the
    /// backend sums next to the data.
    async fn table_sums(
        &self,
        id: i64,
        baseline: &str,
    ) -> StoreResult<BTreeMap<SumsKey, CellSums>> {
        Ok(sums_of(&reads::results(self.reader(), id).await?, baseline))
    }
}

#[async_trait]
impl<B: Backend> Store for B {
    fn clock(&self) -> &Clock {
        Backend::clock(self)
    }

    async fn ping(&self) -> StoreResult<()> {
        self.reader().row("SELECT 1 AS one", &[]).await?;
        Ok(())
    }

    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()> {
        Backend::put_snapshot(self, sha256, archive).await
    }

    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
        Backend::snapshot(self, sha256).await
    }

    async fn has_snapshot(&self, sha256: &str) -> StoreResult<bool> {
        Backend::has_snapshot(self, sha256).await
    }

    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64> {
        Backend::put_suite(self, suite).await
    }

    async fn create_sweep_unless_running(&self, sweep: &NewSweep) -> StoreResult<Created> {
        Backend::create_sweep_unless_running(self, sweep).await
    }

    async fn list_sweeps(&self, limit: u32) -> StoreResult<Vec<SweepSummary>> {
        reads::list(self.reader(), limit).await
    }

    async fn sweep(&self, id: i64) -> StoreResult<SweepRecord> {
        reads::sweep(self.reader(), id).await
    }

    async fn progress(&self, id: i64) -> StoreResult<Vec<Progress>> {
        reads::progress(self.reader(), id).await
    }

    async fn active_workers(&self, id: i64) -> StoreResult<Vec<ActiveWorker>> {
        reads::active_workers(self.reader(), Backend::clock(self), id).await
    }

    async fn active_builds(&self, id: i64) -> StoreResult<Vec<String>> {
        reads::active_builds(self.reader(), Backend::clock(self), id).await
    }

    async fn position_errors(&self, id: i64, limit: u32) -> StoreResult<Vec<PositionError>> {
        reads::position_errors(self.reader(), id, limit).await
    }

    async fn results(&self, id: i64) -> StoreResult<Vec<ResultRow>> {
        reads::results(self.reader(), id).await
    }

    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ResultRow>> {
        Backend::build_results(self, id, builds, limit).await
    }

    async fn table_sums(
        &self,
        id: i64,
        baseline: &str,
    ) -> StoreResult<BTreeMap<SumsKey, CellSums>> {
        Backend::table_sums(self, id, baseline).await
    }

    async fn sweep_suite(&self, id: i64, suite: &str) -> StoreResult<Suite> {
        reads::sweep_suite(self.reader(), id, suite).await
    }

    async fn cancel_sweep(&self, id: i64) -> StoreResult<()> {
        auth::cancel(self, id).await
    }

    async fn retry_build(&self, id: i64, build: &str) -> StoreResult<u64> {
        auth::retry_build(self, id, build).await
    }

    async fn create_token(&self, name: &str, role: Role, hash: &str) -> StoreResult<i64> {
        auth::create_token(self, name, role, hash).await
    }

    async fn token_by_hash(&self, hash: &str) -> StoreResult<Option<StoredToken>> {
        auth::token_by_hash(self.reader(), hash).await
    }

    async fn tokens(&self) -> StoreResult<Vec<TokenInfo>> {
        auth::tokens(self.reader()).await
    }

    async fn revoke_token(&self, name: &str) -> StoreResult<TokenInfo> {
        auth::revoke_token(self, name).await
    }

    async fn audit(&self, entry: &NewAudit) -> StoreResult<()> {
        auth::audit(self, entry).await
    }

    async fn audit_log(&self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        auth::audit_log(self.reader(), limit).await
    }

    async fn put_engine(
        &self,
        name: &str,
        definition: &str,
        updated_by: &str,
    ) -> StoreResult<(StoredEngine, bool)> {
        engines::put_engine(self, name, definition, updated_by).await
    }

    async fn engines(&self) -> StoreResult<Vec<StoredEngine>> {
        engines::engines(self.reader()).await
    }

    async fn gauges(&self, alive_within: Duration) -> StoreResult<StoreGauges> {
        Backend::gauges(self, alive_within).await
    }

    async fn register_worker(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
    ) -> StoreResult<i64> {
        Backend::register_worker(self, worker, token_id).await
    }

    async fn worker_token(&self, worker_id: i64) -> StoreResult<Option<i64>> {
        auth::worker_token(self.reader(), worker_id).await
    }

    async fn workers(&self, seen_within: Duration, limit: u32) -> StoreResult<Vec<WorkerInfo>> {
        workers::workers(self.reader(), Backend::clock(self), seen_within, limit).await
    }

    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>> {
        Backend::lease_jobs(self, worker_id, max, lease, max_attempts).await
    }

    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>> {
        Backend::heartbeat_many(self, worker_id, leases, lease).await
    }

    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>> {
        Backend::release_leases(self, worker_id, leases).await
    }

    async fn report_many(
        &self,
        worker_id: i64,
        reports: &[JobReport],
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>> {
        Backend::report_many(self, worker_id, reports, lease, max_attempts).await
    }

    async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<BatchAck> {
        Backend::build_failed(self, job_id, failure, lease, max_attempts).await
    }

    async fn record_build(&self, job_id: i64, report: &BuildReport) -> StoreResult<()> {
        Backend::record_build(self, job_id, report).await
    }

    async fn build_records(
        &self,
        id: i64,
        per_build: u32,
    ) -> StoreResult<provenance::BuildRecords> {
        provenance::build_records(self.reader(), id, per_build).await
    }

    async fn cross_checks(&self, id: i64, listed: u32) -> StoreResult<CrossChecks> {
        checks::summary(self.reader(), id, listed).await
    }

    async fn worker_checks(&self, workers: &[i64]) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
        Backend::worker_checks(self, workers).await
    }
}
