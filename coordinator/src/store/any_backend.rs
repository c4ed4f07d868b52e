//! The one [`Store`] implementation, for any [`Backend`]. What reads or writes the same on
//! both databases (every read, tokens, the audit log, engines, cancelling, retrying a build,
//! snapshots and suites, reading build records, writing a sweep) is written
//! once in the shared modules and called from here. A backend supplies its connections, its
//! clock, its dialect, how it locks rows and the few statements that differ ([`Backend`]),
//! and implements itself the calls whose statements truly differ ([`BackendCalls`]):
//! registration, a few builds' results and the metrics gauges.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};
use sweep_domain::crosscheck::CrossChecks;
use sweep_domain::epd::Suite;
use sweep_domain::table::{BuildBench, CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{ActiveWorker, PositionError, Progress, SweepSummary, WorkerInfo};

use super::backend::Backend;
use super::sql::{self, Reads};
use super::{
    announce, auth, checks, deletion, engines, estimates, gauges, provenance, reads, sources,
    speed, stages, sweeps, transfer, workers, BuildCost, Clock, Created, NewAudit, NewSearchStep,
    NewStage, NewSweep, Owner, PlannedSweep, SearchCost, Store, StoreResult, StoredEngine,
    StoredToken, SweepRecord,
};

#[async_trait]
impl<B: Backend> Store for B {
    fn clock(&self) -> &Clock {
        Backend::clock(self)
    }

    async fn ping(&self) -> StoreResult<()> {
        self.reader().row("SELECT 1 AS one", &[]).await?;
        Ok(())
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

    async fn table_sums(&self, id: i64) -> StoreResult<BTreeMap<SumsKey, CellSums>> {
        reads::table_sums(self.reader(), id).await
    }

    async fn active_workers(&self, id: i64) -> StoreResult<Vec<ActiveWorker>> {
        reads::active_workers(self, id).await
    }

    async fn active_builds(&self, id: i64) -> StoreResult<Vec<String>> {
        reads::active_builds(self, id).await
    }

    async fn position_errors(&self, id: i64, limit: u32) -> StoreResult<Vec<PositionError>> {
        reads::position_errors(self.reader(), id, limit).await
    }

    async fn results(&self, id: i64) -> StoreResult<Vec<ResultRow>> {
        reads::results(self.reader(), id).await
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

    async fn worker_token(&self, worker_id: i64) -> StoreResult<Option<i64>> {
        auth::worker_token(self.reader(), worker_id).await
    }

    async fn workers(&self, seen_within: Duration, limit: u32) -> StoreResult<Vec<WorkerInfo>> {
        workers::workers(self, seen_within, limit).await
    }

    async fn build_benches(&self, id: i64) -> StoreResult<BTreeMap<String, BuildBench>> {
        provenance::build_benches(self.reader(), id).await
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

    async fn sweep_exists(&self, id: i64) -> StoreResult<bool> {
        let row = self
            .reader()
            .row(
                "SELECT id FROM sweeps WHERE id = $1",
                &[sql::Value::Int(id)],
            )
            .await?;
        Ok(row.is_some())
    }

    async fn delete_sweep(&self, id: i64) -> StoreResult<Option<u64>> {
        deletion::delete_sweep(self, id).await
    }

    async fn export_sweep(&self, id: i64) -> StoreResult<crate::transfer::SweepExport> {
        transfer::export(self.reader(), id).await
    }

    async fn sweep_snapshots(&self, id: i64) -> StoreResult<Vec<String>> {
        transfer::snapshots_of(self.reader(), id).await
    }

    async fn import_sweep(
        &self,
        export: &crate::transfer::SweepExport,
        suite_ids: Vec<i64>,
        submitter: Option<Owner>,
        label: &str,
    ) -> StoreResult<i64> {
        transfer::import(self, export, suite_ids, submitter, label).await
    }

    async fn speed_runs(&self, id: i64) -> StoreResult<BTreeMap<String, speed::BuildSpeed>> {
        speed::speed_runs(self.reader(), id).await
    }

    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()> {
        sources::put_snapshot(self, sha256, archive).await
    }

    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
        sources::snapshot(self.reader(), sha256).await
    }

    async fn has_snapshot(&self, sha256: &str) -> StoreResult<bool> {
        sources::has_snapshot(self.reader(), sha256).await
    }

    async fn add_snapshot_uploader(&self, sha256: &str, token_id: i64) -> StoreResult<()> {
        sources::add_uploader(self, sha256, token_id).await
    }

    async fn may_read_snapshot(&self, sha256: &str, token_id: i64) -> StoreResult<bool> {
        let now = Backend::clock(self).now();
        sources::may_read_snapshot(self, sha256, token_id, now).await
    }

    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64> {
        sources::put_suite(self, suite).await
    }

    async fn create_sweep_unless_running(&self, sweep: &NewSweep) -> StoreResult<Created> {
        sweeps::create_unless_running(self, sweep).await
    }

    async fn gauges(&self, alive_within: Duration) -> StoreResult<super::StoreGauges> {
        gauges::gauges(self, alive_within).await
    }

    async fn sweeps_to_announce(&self, limit: u32) -> StoreResult<Vec<SweepSummary>> {
        announce::to_announce(self.reader(), limit).await
    }

    async fn claim_announcement(&self, id: i64) -> StoreResult<bool> {
        announce::claim(self, id).await
    }

    async fn sweeps_ended_before(
        &self,
        cutoff: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> StoreResult<Vec<i64>> {
        announce::ended_before(self.reader(), cutoff, limit).await
    }

    async fn stages_due(&self, limit: u32) -> StoreResult<Vec<(i64, u32)>> {
        stages::due(self.reader(), limit).await
    }

    async fn add_stage(&self, id: i64, stage: &NewStage) -> StoreResult<bool> {
        stages::add(self, id, stage).await
    }

    async fn add_search_step(&self, id: i64, step: &NewSearchStep) -> StoreResult<bool> {
        stages::add_search_step(self, id, step).await
    }

    async fn plan_sweep(&self, sweep: &NewSweep) -> StoreResult<PlannedSweep> {
        sweeps::plan_only(self, sweep).await
    }

    async fn search_costs(&self, engine: &str) -> StoreResult<Vec<SearchCost>> {
        estimates::search_costs(self.reader(), engine).await
    }

    async fn build_costs(&self, id: i64) -> StoreResult<Vec<BuildCost>> {
        estimates::build_costs(self.reader(), id).await
    }

    async fn approve_sweep(&self, id: i64) -> StoreResult<bool> {
        sweeps::approve(self, id).await
    }

    async fn reject_sweep(&self, id: i64, why: &str) -> StoreResult<bool> {
        sweeps::reject(self, id, why).await
    }

    async fn worker_checks(&self, workers: &[i64]) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
        checks::per_worker(self, workers).await
    }
}
