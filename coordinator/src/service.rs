//! The coordinator's use cases, between the HTTP adapters and the store: submitting a sweep
//! (validate, snapshot, plan, store) and reading it back as details and tables.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sweep_domain::plan::{self, BuildPlan};
use sweep_domain::spec::SweepConfig;
use sweep_domain::table::{self, PositionsReport, Table};
use sweep_domain::wire::{Submitted, SweepDetail};

use crate::catalog::Catalog;
use crate::http::error::ApiError;
use crate::snapshot::snapshot_dir;
use crate::store::{NewSweep, Store, SweepRecord};

/// Lease timing handed to workers, and how often a failing position or build is retried.
#[derive(Debug, Clone, Copy)]
pub struct LeaseSettings {
    /// A lease lives this long without a heartbeat or report.
    pub lease: Duration,
    /// Workers heartbeat this often.
    pub heartbeat: Duration,
    /// A position that errored this many times (on different workers when there are several)
    /// is recorded as failed instead of being retried; a build that failed on this many
    /// workers (or on every live worker, if fewer) fails its variant.
    pub max_attempts: u32,
}

impl Default for LeaseSettings {
    /// 30 s leases, heartbeats every 5 s, 3 attempts.
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(5),
            max_attempts: 3,
        }
    }
}

/// Shared state of the coordinator.
#[derive(Clone)]
pub struct Service {
    /// Storage.
    pub store: Arc<dyn Store>,
    /// Engines and suites.
    pub catalog: Arc<Catalog>,
    /// Lease timing.
    pub leases: LeaseSettings,
}

impl Service {
    /// Validates and stores a sweep; returns its id and job count.
    pub async fn submit(&self, config: SweepConfig) -> Result<Submitted, ApiError> {
        let spec = config.validate(&self.catalog.engine_defs(), &self.catalog.suite_sizes())?;
        let engine = self.catalog.engines[&spec.engine].clone();
        // A binary-only engine has no source: its sweeps store no snapshot.
        let source_sha256 = match (engine.source_dir, engine.def.source) {
            (Some(dir), Some(source)) => {
                let snapshot =
                    tokio::task::spawn_blocking(move || snapshot_dir(&dir, &source.exclude))
                        .await
                        .context("snapshot task")?
                        .context("archiving the engine source")?;
                self.store
                    .put_snapshot(&snapshot.sha256, &snapshot.archive)
                    .await?;
                Some(snapshot.sha256)
            }
            _ => None,
        };
        let sizes = self.catalog.suite_sizes();
        let new = NewSweep {
            builds: plan::builds(&spec),
            chunks: plan::chunks(&spec, &sizes),
            suite_ids: spec
                .suites
                .iter()
                .map(|s| self.catalog.suites[s].id)
                .collect(),
            engine_def: self.catalog.engines[&spec.engine].def.clone(),
            source_sha256,
            spec,
        };
        let (id, jobs) = self.store.create_sweep(&new).await?;
        tracing::info!(sweep_id = id, jobs, name = %new.spec.name, "sweep submitted");
        Ok(Submitted { id, jobs })
    }

    /// The newest sweep with exactly this config that has not finished, if any: re-running the
    /// same local command continues it instead of starting over.
    pub async fn find_unfinished(&self, config: &SweepConfig) -> Result<Option<i64>, ApiError> {
        let spec = config
            .clone()
            .validate(&self.catalog.engine_defs(), &self.catalog.suite_sizes())?;
        for summary in self.store.list_sweeps(1000).await? {
            if summary.state.is_final() {
                continue;
            }
            if self.store.sweep(summary.id).await?.spec == spec {
                return Ok(Some(summary.id));
            }
        }
        Ok(None)
    }

    /// Everything about a sweep.
    pub async fn detail(&self, id: i64) -> Result<SweepDetail, ApiError> {
        let rec = self.store.sweep(id).await?;
        Ok(SweepDetail {
            progress: self.store.progress(id).await?,
            active_workers: self.store.active_workers(id).await?,
            errors: self.store.position_errors(id, 100).await?,
            summary: rec.summary,
            spec: rec.spec,
            source_sha256: rec.source_sha256.unwrap_or_default(),
            builds: rec.builds,
        })
    }

    /// The delta table of a sweep.
    pub async fn table(&self, id: i64) -> Result<Table, ApiError> {
        let rec = self.store.sweep(id).await?;
        let results = self.store.results(id).await?;
        let (builds, suites, sizes) = plan_of(&rec);
        Ok(table::build_table(
            &rec.spec.knob,
            rec.spec.depth,
            &builds,
            &suites,
            &sizes,
            &results,
        ))
    }

    /// Per-position results of `build` beside the baseline's.
    pub async fn positions(
        &self,
        id: i64,
        build: Option<&str>,
    ) -> Result<PositionsReport, ApiError> {
        let rec = self.store.sweep(id).await?;
        let (builds, suites, _) = plan_of(&rec);
        let baseline = rec.spec.baseline.name.clone();
        let build = match build {
            Some(b) if builds.iter().any(|x| x.name == b) => b.to_string(),
            Some(b) => {
                let names: Vec<&str> = builds.iter().map(|x| x.name.as_str()).collect();
                return Err(ApiError::Invalid(sweep_domain::FieldError::new(
                    "build",
                    format!(
                        "no build `{b}` in sweep {id} (builds: {})",
                        names.join(", ")
                    ),
                )));
            }
            // Without a build, show the first variant (or the baseline if it is alone).
            None => builds.get(1).unwrap_or(&builds[0]).name.clone(),
        };
        let results = self.store.results(id).await?;
        Ok(table::compare_positions(
            &build, &baseline, &suites, &results,
        ))
    }
}

type Planned = (
    Vec<BuildPlan>,
    Vec<String>,
    std::collections::BTreeMap<String, usize>,
);

fn plan_of(rec: &SweepRecord) -> Planned {
    let builds = rec
        .builds
        .iter()
        .map(|b| BuildPlan {
            name: b.name.clone(),
            defines: b.defines.clone(),
            is_baseline: b.is_baseline,
        })
        .collect();
    let suites = rec.suites.iter().map(|(n, _)| n.clone()).collect();
    let sizes = rec.suites.iter().cloned().collect();
    (builds, suites, sizes)
}
