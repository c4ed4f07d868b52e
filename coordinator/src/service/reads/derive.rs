//! Derived suites: a sub-suite of one of a sweep's suites, selected from one build's results.

use sweep_domain::derive::{derive_suite, DeriveError, DeriveRequest, Derived, Provenance};
use sweep_domain::wire::BuildStatus;
use sweep_domain::FieldError;

use super::tables::{is_finished, limit_of};
use super::{ReadError, Reads};
use crate::service::auth::{Caller, Need};
use crate::store::SweepRecord;

impl Reads {
    /// A sub-suite of one of the sweep's suites, selected by `request.rule` from the results
    /// of `request.build`, as EPD text (see [`derive_suite`]). Refuses an unknown build or
    /// suite, a build that failed to compile, and a sweep whose jobs are not all closed unless
    /// `request.partial`.
    pub async fn derive(
        &self,
        caller: &Caller,
        id: i64,
        request: &DeriveRequest,
    ) -> Result<Derived, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        request.rule.validate()?;
        let store = &self.shared.store;
        let rec = store.sweep(id).await?;
        let build = derivable_build(&rec, request)?;
        let limit = limit_of(&rec, request.limit)?;
        let suite = store.sweep_suite(id, &request.suite).await?;
        let mut results = store.results(id).await?;
        results.retain(|r| r.limit == limit);
        let provenance = Provenance {
            sweep_id: id,
            sweep_name: rec.summary.name.clone(),
            sweep_state: rec.summary.state,
            engine: rec.spec.engine.clone(),
            defines: build.defines.clone(),
            limit,
        };
        let derived =
            derive_suite(&suite, &results, request, &provenance).map_err(|e| match e {
                DeriveError::Invalid(field) => ReadError::Invalid(field),
                other => ReadError::Internal(anyhow::Error::new(other)),
            })?;
        tracing::info!(
            sweep_id = id,
            build = %request.build,
            suite = %request.suite,
            selected = derived.selected.len(),
            skipped_errors = derived.skipped_errors,
            skipped_missing = derived.skipped_missing,
            "suite derived"
        );
        Ok(derived)
    }
}

/// The build `request` derives from, once the sweep is checked to allow it: the build is the
/// sweep's and compiled, the suite is the sweep's, and the sweep has finished unless the
/// request accepts a partial one.
fn derivable_build<'a>(
    rec: &'a SweepRecord,
    request: &DeriveRequest,
) -> Result<&'a BuildStatus, ReadError> {
    let id = rec.summary.id;
    let Some(build) = rec.builds.iter().find(|b| b.name == request.build) else {
        let names: Vec<&str> = rec.builds.iter().map(|b| b.name.as_str()).collect();
        return Err(FieldError::new(
            "build",
            format!(
                "no build `{}` in sweep {id} (builds: {})",
                request.build,
                names.join(", ")
            ),
        )
        .into());
    };
    if build.build_error.is_some() {
        return Err(FieldError::new(
            "build",
            format!(
                "build `{}` failed to compile, so it has no results",
                build.name
            ),
        )
        .into());
    }
    if !rec.suites.iter().any(|(name, _)| *name == request.suite) {
        let names: Vec<&str> = rec.suites.iter().map(|(n, _)| n.as_str()).collect();
        return Err(FieldError::new(
            "suite",
            format!(
                "no suite `{}` in sweep {id} (suites: {})",
                request.suite,
                names.join(", ")
            ),
        )
        .into());
    }
    // Failed means every job is closed too (the baseline did not build); the requested build
    // compiled, so its results are complete.
    let state = rec.summary.state;
    if !is_finished(state) && !request.partial {
        return Err(FieldError::new(
            "partial",
            format!(
                "sweep {id} is {}, not finished: wait for it, or derive from the positions \
                 with a result so far with partial (--partial)",
                state.as_str()
            ),
        )
        .into());
    }
    Ok(build)
}
