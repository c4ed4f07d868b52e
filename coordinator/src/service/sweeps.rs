//! Sweeps as a whole: submitting one (resolve its source, validate, plan, store), listing,
//! reading one's details, cancelling.

use anyhow::Context;
use sweep_domain::auth::Role;
use sweep_domain::engine::{DeclaredKnob, EngineDef};
use sweep_domain::plan;
use sweep_domain::spec::{SweepConfig, SweepSpec};
use sweep_domain::wire::{Submitted, SweepDetail, SweepSummary};
use sweep_domain::FieldError;

use super::auth::{Need, Principal};
use super::{check_declared_knobs, Caller, ResolvedSource, Service, ServiceError};
use crate::catalog::{Catalog, Engine};
use crate::store::{Created, NewSweep, Owner, SweepRecord};

impl Service {
    /// Sweeps, newest first (at most `limit`, capped at 1,000).
    pub async fn list(
        &self,
        caller: &Caller,
        limit: u32,
    ) -> Result<Vec<SweepSummary>, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        Ok(self.store.list_sweeps(limit.min(1000)).await?)
    }

    /// Cancels a sweep: open jobs are closed, workers learn it at their next call. Submitters
    /// cancel their own sweeps, admins any; a finished sweep cannot be cancelled.
    pub async fn cancel(&self, caller: &Caller, id: i64) -> Result<(), ServiceError> {
        let principal = self.auth.require(caller, Need::Submit)?;
        self.auth.spend_write(caller)?;
        let rec = self.store.sweep(id).await?;
        if let Some(p) = principal {
            check_may_cancel(p, &rec)?;
        }
        if rec.summary.state.is_final() {
            return Err(FieldError::new(
                "id",
                format!(
                    "sweep {id} is {}; only a queued or running sweep can be cancelled",
                    rec.summary.state.as_str()
                ),
            )
            .into());
        }
        self.store.cancel_sweep(id).await?;
        self.audit(caller, "cancel", format!("sweep {id}"), rec.summary.name)
            .await?;
        tracing::info!(sweep_id = id, "sweep cancelled");
        Ok(())
    }

    /// `NotFound` unless sweep `id` exists.
    pub async fn exists(&self, caller: &Caller, id: i64) -> Result<(), ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        self.store.sweep(id).await?;
        Ok(())
    }

    /// Validates and stores a sweep; returns its id and job count. An identical sweep (same
    /// engine, source and spec) that is still queued or running is returned instead of a
    /// second copy, flagged `existing`.
    pub async fn submit(
        &self,
        caller: &Caller,
        config: SweepConfig,
    ) -> Result<Submitted, ServiceError> {
        self.auth.require(caller, Need::Submit)?;
        self.auth.spend_write(caller)?;
        let catalog = self.catalog();
        let engine = catalog.engines.get(&config.engine).cloned();
        let declared = config.knobs.clone();
        // The source first (the registered directory, an upload or a git commit), then the
        // spec is validated; an unknown engine is left to validation to name.
        let resolved = match &engine {
            Some(engine) => self.resolve_source(caller, &config, engine).await?,
            None => None,
        };
        // The definition the sweep stores: the registered one as it is now plus the declared
        // knobs (later updates of the engine never reach it).
        let (spec, engine_def) =
            config.validate_with_engine(&catalog.engine_defs(), &catalog.suite_sizes())?;
        if let (false, Some(engine), Some(resolved)) = (declared.is_empty(), &engine, &resolved) {
            check_knobs_in_source(engine, declared, resolved).await?;
        }
        let new = new_sweep(&catalog, spec, engine_def, resolved, caller.owner());
        let created = self.store.create_sweep_unless_running(&new).await?;
        self.note_submitted(caller, &new, &created).await?;
        let Created {
            id,
            jobs,
            existing,
            reused,
        } = created;
        Ok(Submitted {
            id,
            jobs,
            existing,
            reused,
        })
    }

    /// Logs a submission, and audits it unless it found the identical sweep still running.
    async fn note_submitted(
        &self,
        caller: &Caller,
        new: &NewSweep,
        created: &Created,
    ) -> Result<(), ServiceError> {
        let Created {
            id, jobs, reused, ..
        } = *created;
        let name = &new.spec.name;
        if created.existing {
            tracing::info!(sweep_id = id, %name, "identical sweep still running: not submitted again");
            return Ok(());
        }
        self.audit(caller, "submit", format!("sweep {id}"), name.clone())
            .await?;
        tracing::info!(sweep_id = id, jobs, reused, %name, "sweep submitted");
        Ok(())
    }

    /// The newest sweep with exactly this config that has not finished, if any: re-running the
    /// same local command continues it instead of starting over.
    pub async fn find_unfinished(&self, config: &SweepConfig) -> Result<Option<i64>, ServiceError> {
        let catalog = self.catalog();
        let spec = config
            .clone()
            .validate(&catalog.engine_defs(), &catalog.suite_sizes())?;
        for summary in self.store.list_sweeps(1000).await? {
            if summary.state.is_final() {
                continue;
            }
            let rec = self.store.sweep(summary.id).await?;
            // With `[source] sha256`, the same spec on other code is another sweep.
            let asked = config.source.as_ref().and_then(|s| s.sha256.as_deref());
            if rec.spec == spec && (asked.is_none() || asked == rec.source_sha256.as_deref()) {
                return Ok(Some(summary.id));
            }
        }
        Ok(None)
    }

    /// Everything about a sweep.
    pub async fn detail(&self, caller: &Caller, id: i64) -> Result<SweepDetail, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        let _turn = self.read_turn().await?;
        let rec = self.store.sweep(id).await?;
        let mut builds = rec.builds;
        let mut records = self
            .store
            .build_records(id, sweep_domain::wire::MAX_BUILD_RECORDS as u32)
            .await?;
        for b in &mut builds {
            if let Some((list, total)) = records.remove(&b.name) {
                b.records = list;
                b.records_total = total;
            }
        }
        Ok(SweepDetail {
            progress: self.store.progress(id).await?,
            active_workers: self.store.active_workers(id).await?,
            active_builds: self.store.active_builds(id).await?,
            errors: self.store.position_errors(id, 100).await?,
            cross_checks: self
                .store
                .cross_checks(id, sweep_domain::crosscheck::MAX_LISTED)
                .await?,
            summary: rec.summary,
            spec: rec.spec,
            source_sha256: rec.source_sha256.unwrap_or_default(),
            builds,
        })
    }
}

/// Refuses a submitter cancelling a sweep someone else submitted (admins cancel any).
fn check_may_cancel(p: &Principal, rec: &SweepRecord) -> Result<(), ServiceError> {
    if p.role == Role::Admin || rec.submitter_token == Some(p.token_id) {
        return Ok(());
    }
    Err(ServiceError::Forbidden(format!(
        "sweep {} was submitted by {}; only its submitter or an admin may cancel it",
        rec.summary.id,
        rec.summary.submitter.as_deref().unwrap_or("someone else")
    )))
}

/// Declared knobs must be in the source that will be built: checked on the archive itself,
/// before the sweep is stored.
async fn check_knobs_in_source(
    engine: &Engine,
    declared: Vec<DeclaredKnob>,
    resolved: &ResolvedSource,
) -> Result<(), ServiceError> {
    let registered = engine.def.clone();
    let archive = resolved.archive.clone();
    tokio::task::spawn_blocking(move || check_declared_knobs(&registered, &declared, &archive))
        .await
        .context("declared knobs task")??;
    Ok(())
}

/// The sweep to store: its builds, its jobs' chunks and its suites planned from `spec`, on
/// the resolved source (none for a binary-only engine).
fn new_sweep(
    catalog: &Catalog,
    spec: SweepSpec,
    engine_def: EngineDef,
    resolved: Option<ResolvedSource>,
    submitter: Option<Owner>,
) -> NewSweep {
    let (source_sha256, origin) = match resolved {
        Some(r) => (Some(r.sha256), r.origin),
        None => (None, Default::default()),
    };
    NewSweep {
        builds: plan::builds(&spec),
        chunks: plan::chunks(&spec, &catalog.suite_sizes()),
        suite_ids: spec.suites.iter().map(|s| catalog.suites[s].id).collect(),
        engine_def,
        source_sha256,
        origin,
        spec,
        submitter,
    }
}
