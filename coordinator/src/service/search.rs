//! The steps of a sweep's search over its grid (`[search]`): once the cells it asked for
//! have all finished, the coordinator replays the search over the first stage's standings
//! ([`table::walk`]) and either gives the next cells jobs or closes the search, in one store
//! call whose claim makes several coordinators on one database add each step once. Run from
//! the same look as the stages ([`super::stages`]), so nobody has to come back for it.

use std::collections::BTreeMap;

use sweep_domain::plan;
use sweep_domain::table::{self, Promotion, SearchReport};

use super::reads::{Extras, ReadError};
use super::Service;
use crate::store::{NewSearchStep, SweepRecord};

impl Service {
    /// Replays `rec`'s open search and adds its next step; `true` when this call added it.
    pub(super) async fn add_search_step(&self, rec: &SweepRecord) -> Result<bool, ReadError> {
        let (Some(search), Some(before)) = (&rec.spec.search, &rec.search) else {
            return Ok(false);
        };
        let spec = &rec.spec;
        let standing = self
            .first_stage_standings(rec, search.max_solved_loss)
            .await?;
        let mut report = table::walk(
            search,
            &spec.knobs,
            &spec.variants,
            &standing.standings,
            &before.planned,
        );
        if let Some(why) = standing.failed {
            // A cell or the baseline failed for good: its standing is not to be trusted, and
            // the sweep ends here (done with errors), as a failed stage ends it.
            report = SearchReport {
                next: Vec::new(),
                finished: true,
                chosen: None,
                runner_up: None,
                failed: Some(why),
                planned: before.planned.clone(),
                ..report
            };
        }
        let sizes: BTreeMap<String, usize> = rec.suites.iter().cloned().collect();
        let step = NewSearchStep {
            planned_before: before.planned.len() as u32,
            chunks: plan::suite_chunks(&spec.suites, spec.chunk_size, &sizes),
            limits: spec.limits.clone(),
            recompute: spec.recompute,
            report,
        };
        let added = self
            .0
            .shared
            .store
            .add_search_step(rec.summary.id, &step)
            .await?;
        if added {
            log_step(rec.summary.id, &step.report);
        }
        Ok(added)
    }

    /// Every measured cell's standing in the first stage of `rec` (its table with paired
    /// statistics), under `max_solved_loss`.
    async fn first_stage_standings(
        &self,
        rec: &SweepRecord,
        max_solved_loss: u32,
    ) -> Result<Promotion, ReadError> {
        let extras = Extras {
            sums: self.0.shared.store.table_sums(rec.summary.id).await?,
            checks: None,
            benches: BTreeMap::new(),
        };
        let tables = self
            .reads()
            .stage_table(rec, 0, &extras, true)
            .await?
            .map(|t| t.tables)
            .unwrap_or_default();
        Ok(table::promote(
            &tables,
            &rec.spec.baseline.name,
            0,
            max_solved_loss,
        ))
    }
}

/// Logs the step sweep `id`'s search took.
fn log_step(id: i64, r: &SearchReport) {
    match (&r.failed, r.finished) {
        (Some(why), _) => tracing::warn!(sweep_id = id, why, "search failed: the sweep ends"),
        (None, true) => tracing::info!(
            sweep_id = id,
            chosen = ?r.chosen,
            steps = r.path.len(),
            cells = r.planned.len(),
            "search ended"
        ),
        (None, false) => {
            tracing::info!(sweep_id = id, next = ?r.next, "search step: the next cells are added")
        }
    }
}
