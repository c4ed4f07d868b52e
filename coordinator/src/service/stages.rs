//! Adding the later stages of staged sweeps: every second the coordinator looks for staged
//! sweeps whose work is all done while stages are left, decides each one's promotion from
//! the finished stage's table (paired statistics included, [`table::promote`]) and adds the
//! next stage's jobs (or ends the sweep, when the stage failed) in one store call whose claim
//! makes several coordinators on one database add each stage once. Nobody has to come back
//! for it: a local run's in-process coordinator does it too.

use std::collections::BTreeMap;
use std::time::Duration;

use sweep_domain::plan;
use sweep_domain::table::{self, Promotion, SearchReport};
use tokio_util::sync::CancellationToken;

use super::reads::{Extras, ReadError};
use super::Service;
use crate::store::{NewStage, SweepRecord};

/// How often the coordinator looks for finished stages.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Sweeps with a stage due that one look takes at most (the oldest first).
const LOOKS_AT: u32 = 16;

impl Service {
    /// Adds stages as the stages before them finish, until `stop` fires (see the module
    /// doc).
    pub async fn add_stages_as_they_finish(&self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if let Err(e) = self.add_due_stages().await {
                tracing::warn!(error = %e, "adding the next stage of staged sweeps failed");
            }
        }
    }

    /// One look: decides and adds the next stage of every staged sweep that has one due;
    /// returns how many it added (or ended).
    pub async fn add_due_stages(&self) -> Result<usize, ReadError> {
        let store = &self.0.shared.store;
        let mut added = 0;
        for (id, left) in store.stages_due(LOOKS_AT).await? {
            let rec = store.sweep(id).await?;
            if rec.search.as_ref().is_some_and(|r| !r.finished) {
                added += usize::from(self.add_search_step(&rec).await?);
                continue;
            }
            let Some(stage) = self.next_stage(&rec, left).await? else {
                continue;
            };
            if store.add_stage(id, &stage).await? {
                added += 1;
                let decided = stage.decided + 1;
                match &stage.decision.failed {
                    Some(why) => tracing::warn!(
                        sweep_id = id,
                        stage = decided,
                        why,
                        "stage failed: the sweep ends"
                    ),
                    None => {
                        tracing::info!(sweep_id = id, stage = decided, promoted = ?stage.decision.promoted, "stage finished: the next one is added")
                    }
                }
            }
        }
        Ok(added)
    }

    /// The stage to add to `rec`, which has `left` stages left: the decision of the stage
    /// that finished, and what the next one runs.
    async fn next_stage(
        &self,
        rec: &SweepRecord,
        left: u32,
    ) -> Result<Option<NewStage>, ReadError> {
        let spec = &rec.spec;
        let Some(next) = spec
            .stage_count()
            .checked_sub(left as usize)
            .filter(|n| *n >= 1)
        else {
            return Ok(None);
        };
        let Some(view) = spec.stage(next) else {
            return Ok(None);
        };
        let rule = view
            .promotion
            .expect("a later stage has its promotion rule");
        let decided = next - 1;
        let extras = Extras {
            sums: self.0.shared.store.table_sums(rec.summary.id).await?,
            checks: None,
            benches: BTreeMap::new(),
        };
        let baseline = &spec.baseline.name;
        let decision = match self
            .reads()
            .stage_table(rec, decided, &extras, true)
            .await?
        {
            Some(t) => {
                // After a search, its own rule decides who is eligible.
                let max_loss = match (&spec.search, decided) {
                    (Some(search), 0) => search.max_solved_loss,
                    _ => rule.max_solved_loss,
                };
                let mut d = table::promote(&t.tables, baseline, rule.promote as usize, max_loss);
                if decided == 0 {
                    choice_first(&mut d, rec.search.as_ref(), rule.promote as usize);
                }
                d
            }
            None => Promotion {
                promoted: Vec::new(),
                eligible: Vec::new(),
                standings: Vec::new(),
                failed: Some(format!("stage {} ran no variant", decided + 1)),
            },
        };
        let sizes: BTreeMap<String, usize> = rec.suites.iter().cloned().collect();
        let mut builds = vec![baseline.clone()];
        builds.extend(decision.promoted.iter().cloned());
        Ok(Some(NewStage {
            stages_left: left,
            decided: decided as u32,
            builds,
            chunks: plan::suite_chunks(view.suites, spec.chunk_size, &sizes),
            limits: view.limits.to_vec(),
            recompute: spec.recompute,
            decision,
        }))
    }
}

/// After a search, the stage after it runs the search's choice first, then the best of the
/// other cells it measured (the runner-up, ...), so a search ending on a tie promotes what it
/// chose.
fn choice_first(decision: &mut Promotion, search: Option<&SearchReport>, n: usize) {
    let Some(chosen) = search.and_then(|r| r.chosen.as_ref()) else {
        return;
    };
    if decision.failed.is_some() || !decision.eligible.contains(chosen) {
        return;
    }
    decision.eligible.retain(|c| c != chosen);
    decision.eligible.insert(0, chosen.clone());
    decision.promoted = decision.eligible.iter().take(n).cloned().collect();
}
