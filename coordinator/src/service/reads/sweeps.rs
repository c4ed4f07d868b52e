//! Sweeps as lists and details, the workers page, and the engine and suite catalog.

use sweep_domain::wire::{EngineInfo, SuiteInfo, SweepDetail, SweepSummary, WorkerList};
use sweep_domain::FieldError;

use super::{ReadError, Reads, MAX_WORKERS_LISTED, WORKERS_SEEN_WITHIN};
use crate::service::auth::{Caller, Need};

impl Reads {
    /// Sweeps, newest first (at most `limit`, capped at 1,000).
    pub async fn list(&self, caller: &Caller, limit: u32) -> Result<Vec<SweepSummary>, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        Ok(self.shared.store.list_sweeps(limit.min(1000)).await?)
    }

    /// `NotFound` unless sweep `id` exists.
    pub async fn exists(&self, caller: &Caller, id: i64) -> Result<(), ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        self.shared.store.sweep(id).await?;
        Ok(())
    }

    /// Everything about a sweep.
    pub async fn detail(&self, caller: &Caller, id: i64) -> Result<SweepDetail, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        let store = &self.shared.store;
        let rec = store.sweep(id).await?;
        let mut builds = rec.builds;
        let mut records = store
            .build_records(id, sweep_domain::wire::MAX_BUILD_RECORDS as u32)
            .await?;
        for b in &mut builds {
            if let Some((list, total)) = records.remove(&b.name) {
                b.records = list;
                b.records_total = total;
            }
        }
        Ok(SweepDetail {
            progress: store.progress(id).await?,
            active_workers: store.active_workers(id).await?,
            active_builds: store.active_builds(id).await?,
            errors: store.position_errors(id, 100).await?,
            cross_checks: store
                .cross_checks(id, sweep_domain::crosscheck::MAX_LISTED)
                .await?,
            summary: rec.summary,
            spec: rec.spec,
            source_sha256: rec.source_sha256.unwrap_or_default(),
            builds,
            imported_from: rec.imported_from,
        })
    }

    /// The workers seen within [`WORKERS_SEEN_WITHIN`], most recently seen first, at most
    /// `limit` (1 to [`MAX_WORKERS_LISTED`]): what each holds now and its results of the last
    /// minute. Anyone who may read sweeps may read this.
    pub async fn workers(&self, caller: &Caller, limit: u32) -> Result<WorkerList, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        if limit == 0 || limit > MAX_WORKERS_LISTED {
            return Err(
                FieldError::new("limit", format!("must be 1 to {MAX_WORKERS_LISTED}")).into(),
            );
        }
        let _turn = self.turn().await?;
        let store = &self.shared.store;
        let mut workers = store.workers(WORKERS_SEEN_WITHIN, limit).await?;
        let ids: Vec<i64> = workers.iter().map(|w| w.id).collect();
        let checks = store.worker_checks(&ids).await?;
        for w in &mut workers {
            if let Some(&(n, m)) = checks.get(&w.id) {
                w.checks = n;
                w.mismatches = m;
            }
        }
        Ok(WorkerList {
            workers,
            seen_within_secs: WORKERS_SEEN_WITHIN.as_secs(),
            limit,
        })
    }

    /// The engines sweeps may use.
    pub fn engines(&self, caller: &Caller) -> Result<Vec<EngineInfo>, ReadError> {
        self.shared.auth.require(caller, Need::Catalog)?;
        let catalog = self.catalog.current();
        Ok(catalog.engines.values().map(|e| e.info()).collect())
    }

    /// The suites sweeps may use.
    pub fn suites(&self, caller: &Caller) -> Result<Vec<SuiteInfo>, ReadError> {
        self.shared.auth.require(caller, Need::Catalog)?;
        Ok(self
            .catalog
            .current()
            .suites
            .values()
            .map(|s| SuiteInfo {
                name: s.suite.name.clone(),
                sha256: s.suite.sha256.clone(),
                positions: s.suite.positions.len(),
            })
            .collect())
    }
}
