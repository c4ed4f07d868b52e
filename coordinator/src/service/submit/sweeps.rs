//! Sweeps as a whole: submitting one (resolve its source, validate, plan, store), finding the
//! unfinished one of a config (a local run continues it), cancelling.

use anyhow::Context;
use sweep_domain::auth::Role;
use sweep_domain::engine::{DeclaredKnob, EngineDef};
use sweep_domain::plan;
use sweep_domain::spec::{Priority, SweepConfig, SweepSpec};
use sweep_domain::wire::Submitted;
use sweep_domain::FieldError;

use super::{check_declared_knobs, ResolvedSource, Submissions, SubmitError};
use crate::catalog::{Catalog, Engine};
use crate::service::auth::{Caller, Denied, Need, Principal};
use crate::store::{Created, NewSweep, Owner, SweepRecord};

impl Submissions {
    /// Cancels a sweep: open jobs are closed, workers learn it at their next call. Submitters
    /// cancel their own sweeps, admins any; a finished sweep cannot be cancelled.
    pub async fn cancel(&self, caller: &Caller, id: i64) -> Result<(), SubmitError> {
        let principal = self.shared.auth.require(caller, Need::Submit)?;
        self.shared.auth.spend_write(caller)?;
        let rec = self.shared.store.sweep(id).await?;
        if let Some(p) = principal {
            check_may_change(p, &rec, "cancel")?;
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
        self.shared.store.cancel_sweep(id).await?;
        self.shared
            .audit(caller, "cancel", format!("sweep {id}"), rec.summary.name)
            .await?;
        tracing::info!(sweep_id = id, "sweep cancelled");
        Ok(())
    }

    /// Validates and stores a sweep; returns its id and job count. An identical sweep (same
    /// engine, source and spec) that is still queued or running is returned instead of a
    /// second copy, flagged `existing`.
    pub async fn submit(
        &self,
        caller: &Caller,
        config: SweepConfig,
    ) -> Result<Submitted, SubmitError> {
        let principal = self.shared.auth.require(caller, Need::Submit)?;
        self.shared.auth.spend_write(caller)?;
        let mut new = self.prepare(caller, config).await?;
        self.check_priority(principal, &new)?;
        new.hold = self.hold_for(principal, &new).await?;
        let created = self.shared.store.create_sweep_unless_running(&new).await?;
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
            // The sweep found running was held (or not) when it was submitted.
            pending_approval: if existing { None } else { new.hold },
        })
    }

    /// Refuses a `high` priority sweep from a token whose role may not ask for one: admins
    /// may, and the roles the operator lists (`--high-priority-for`).
    fn check_priority(
        &self,
        principal: Option<&Principal>,
        new: &NewSweep,
    ) -> Result<(), SubmitError> {
        let Some(p) = principal else {
            return Ok(());
        };
        if new.spec.priority != Priority::High
            || p.role == Role::Admin
            || self.high_priority_for.contains(&p.role)
        {
            return Ok(());
        }
        Err(Denied::Forbidden(format!(
            "priority `high` is for admins (and the roles the operator allows with --high-priority-for); a {} token may ask for `normal` or `low`",
            p.role.as_str()
        ))
        .into())
    }

    /// The sweep `config` makes, as it would be stored: its source resolved (the registered
    /// directory, an upload or a git commit), its spec validated, its declared knobs found in
    /// the source, planned.
    pub(super) async fn prepare(
        &self,
        caller: &Caller,
        config: SweepConfig,
    ) -> Result<NewSweep, SubmitError> {
        let catalog = self.catalog.current();
        let engine = catalog.engines.get(&config.engine).cloned();
        let declared = config.knobs.clone();
        // The source first, then the spec is validated; an unknown engine is left to
        // validation to name.
        let resolved = match &engine {
            Some(engine) => self.resolve_source(caller, &config, engine).await?,
            None => None,
        };
        // The definition the sweep stores: the registered one as it is now plus the declared
        // knobs (later updates of the engine never reach it).
        let (mut spec, engine_def) =
            config.validate_with_engine(&catalog.engine_defs(), &catalog.suite_sizes())?;
        let variant_sources = match &engine {
            Some(engine) => {
                self.resolve_variant_sources(caller, &mut spec, engine)
                    .await?
            }
            None => Vec::new(),
        };
        if let (false, Some(engine)) = (declared.is_empty(), &engine) {
            for source in resolved.iter().chain(&variant_sources) {
                check_knobs_in_source(engine, declared.clone(), source).await?;
            }
        }
        Ok(new_sweep(
            &catalog,
            spec,
            engine_def,
            resolved,
            caller.owner(),
        ))
    }

    /// Logs a submission, and audits it unless it found the identical sweep still running.
    async fn note_submitted(
        &self,
        caller: &Caller,
        new: &NewSweep,
        created: &Created,
    ) -> Result<(), SubmitError> {
        let Created {
            id, jobs, reused, ..
        } = *created;
        let name = &new.spec.name;
        if created.existing {
            tracing::info!(sweep_id = id, %name, "identical sweep still running: not submitted again");
            return Ok(());
        }
        self.shared
            .audit(caller, "submit", format!("sweep {id}"), name.clone())
            .await?;
        match &new.hold {
            Some(why) => {
                tracing::info!(sweep_id = id, jobs, reused, %name, why, "sweep submitted, held for approval")
            }
            None => tracing::info!(sweep_id = id, jobs, reused, %name, "sweep submitted"),
        }
        Ok(())
    }

    /// The newest sweep with exactly this config that has not finished, if any: re-running the
    /// same local command continues it instead of starting over.
    pub async fn find_unfinished(&self, config: &SweepConfig) -> Result<Option<i64>, SubmitError> {
        let catalog = self.catalog.current();
        let spec = config
            .clone()
            .validate(&catalog.engine_defs(), &catalog.suite_sizes())?;
        // A variant's `rev` may have moved since: such a sweep is submitted anew, and takes
        // the results its unchanged builds already have (reuse).
        if spec.variants.iter().any(|v| v.source.is_some()) {
            return Ok(None);
        }
        for summary in self.shared.store.list_sweeps(1000).await? {
            if summary.state.is_final() {
                continue;
            }
            let rec = self.shared.store.sweep(summary.id).await?;
            // With `[source] sha256`, the same spec on other code is another sweep.
            let asked = config.source.as_ref().and_then(|s| s.sha256.as_deref());
            if rec.spec == spec && (asked.is_none() || asked == rec.source_sha256.as_deref()) {
                return Ok(Some(summary.id));
            }
        }
        Ok(None)
    }
}

/// Refuses a submitter cancelling (or deleting: `what`) a sweep someone else submitted
/// (admins may any).
pub(super) fn check_may_change(
    p: &Principal,
    rec: &SweepRecord,
    what: &str,
) -> Result<(), SubmitError> {
    if p.role == Role::Admin || rec.submitter_token == Some(p.token_id) {
        return Ok(());
    }
    Err(Denied::Forbidden(format!(
        "sweep {} was submitted by {}; only its submitter or an admin may {what} it",
        rec.summary.id,
        rec.summary.submitter.as_deref().unwrap_or("someone else")
    ))
    .into())
}

/// Declared knobs must be in the source that will be built: checked on the archive itself,
/// before the sweep is stored.
async fn check_knobs_in_source(
    engine: &Engine,
    declared: Vec<DeclaredKnob>,
    resolved: &ResolvedSource,
) -> Result<(), SubmitError> {
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
        search: spec
            .search
            .as_ref()
            .map(|s| sweep_domain::table::walk(s, &spec.knobs, &spec.variants, &[], &[])),
        builds: plan::builds(&spec),
        chunks: plan::chunks(&spec, &catalog.suite_sizes()),
        suite_ids: spec
            .all_suites()
            .iter()
            .map(|s| catalog.suites[s].id)
            .collect(),
        engine_def,
        source_sha256,
        origin,
        spec,
        submitter,
        hold: None,
    }
}
