//! What a sweep would cost before it is submitted (`sweep submit --dry-run`,
//! `POST /api/v1/sweeps/estimate`): the sweep prepared exactly as a submission prepares it,
//! written and rolled back by the store (so the jobs and the results reuse would take are
//! the submission's own), and the searches left priced at what searches of the same engine
//! on the same suite and limit cost in its newest sweeps.

use std::collections::BTreeMap;

use sweep_domain::limit::Limit;
use sweep_domain::spec::{SweepConfig, SweepSpec};
use sweep_domain::table::SearchReport;
use sweep_domain::wire::{Estimate, EstimateCell, StageEstimate};

use sweep_domain::auth::Role;

use super::{Submissions, SubmitError};
use crate::service::auth::{Caller, Need, Principal};
use crate::store::{NewSweep, PlannedSweep, SearchCost};

impl Submissions {
    /// What submitting `config` now would make and cost; nothing is stored (an upload or a
    /// git fetch the source needs is kept, as for a submission).
    pub async fn estimate(
        &self,
        caller: &Caller,
        config: SweepConfig,
    ) -> Result<Estimate, SubmitError> {
        self.shared.auth.require(caller, Need::Submit)?;
        // It writes (and rolls back) a whole sweep: paced like a submission.
        self.shared.auth.spend_write(caller)?;
        let new = self.prepare(caller, config).await?;
        self.estimate_new(&new).await
    }

    /// The estimate of a prepared sweep.
    async fn estimate_new(&self, new: &NewSweep) -> Result<Estimate, SubmitError> {
        let planned = self.shared.store.plan_sweep(new).await?;
        let costs = self.shared.store.search_costs(&new.spec.engine).await?;
        let sizes = self.catalog.current().suite_sizes();
        Ok(estimate_of(
            &new.spec,
            new.builds.len(),
            new.search.as_ref(),
            &planned,
            &costs,
            &sizes,
        ))
    }

    /// Why `new`, submitted by `principal`, must wait for an admin's approval: its estimate is
    /// over the operator's limit, or there is none. `None` when it may run at once: no limit
    /// set, an admin's or a local run's sweep, or an estimate within the limit.
    pub(super) async fn hold_for(
        &self,
        principal: Option<&Principal>,
        new: &NewSweep,
    ) -> Result<Option<String>, SubmitError> {
        let Some(limit) = self.approve_over_engine_hours else {
            return Ok(None);
        };
        if principal.is_none_or(|p| p.role == Role::Admin) {
            return Ok(None);
        }
        let estimate = self.estimate_new(new).await?;
        Ok(match estimate.engine_seconds {
            None => Some(format!(
                "no estimate (no earlier search of {} on {}); the operator has an admin approve sweeps over {limit} engine-hours",
                estimate.engine,
                estimate.unmeasured.join(", ")
            )),
            Some(s) if s > limit * 3600.0 => Some(format!(
                "estimated {:.2} engine-hours, over the {limit} the operator lets a submitter run without an admin's approval",
                s / 3600.0
            )),
            Some(_) => None,
        })
    }
}

/// The estimate of `spec` (of `builds` builds; `search`, its search's first step as the
/// sweep was prepared with it) from what the store planned and what earlier searches cost.
fn estimate_of(
    spec: &SweepSpec,
    builds: usize,
    search: Option<&SearchReport>,
    planned: &PlannedSweep,
    costs: &[SearchCost],
    sizes: &BTreeMap<String, usize>,
) -> Estimate {
    let cells = first_stage_cells(spec, planned, costs);
    let later_stages = later_stages(spec, costs, sizes);
    let search_rest = search.and_then(|first| search_rest(spec, first, costs, sizes));
    let speed = speed_cell(spec, builds, search, costs);
    let every = cells
        .iter()
        .chain(later_stages.iter().flat_map(|s| &s.cells))
        .chain(search_rest.iter().flat_map(|s| &s.cells))
        .chain(speed.iter());
    let mut unmeasured: Vec<String> = Vec::new();
    for c in every
        .clone()
        .filter(|c| c.mean_ms.is_none() && c.to_search > 0)
    {
        let at = format!("{} at {}", c.suite, c.limit);
        if !unmeasured.contains(&at) {
            unmeasured.push(at);
        }
    }
    let engine_seconds = unmeasured.is_empty().then(|| {
        every
            .map(|c| c.to_search as f64 * c.mean_ms.unwrap_or(0.0) / 1000.0)
            .sum()
    });
    Estimate {
        name: spec.name.clone(),
        engine: spec.engine.clone(),
        existing: planned.existing,
        builds: builds as u64,
        jobs: planned.jobs,
        cross_checks: planned.checks,
        positions: planned.positions,
        reused: planned.reused,
        to_search: planned.positions.saturating_sub(planned.reused),
        cells,
        later_stages,
        search_rest,
        speed,
        engine_seconds,
        unmeasured,
    }
}

/// A `[speed]`'s searches as one cell: each variant planned now (of `builds`, or of a
/// search's first step) runs `repeats` pairs of both builds over the speed positions.
fn speed_cell(
    spec: &SweepSpec,
    builds: usize,
    search: Option<&SearchReport>,
    costs: &[SearchCost],
) -> Option<EstimateCell> {
    let speed = spec.speed.as_ref()?;
    let variants = match search {
        Some(first) => first
            .planned
            .iter()
            .filter(|c| **c != spec.baseline.name)
            .count(),
        None => builds.saturating_sub(1),
    } as u64;
    let searches = variants * 2 * u64::from(speed.repeats) * u64::from(speed.count);
    Some(cell(costs, &speed.suite, speed.limit, searches))
}

/// One cell of an estimate: `to_search` searches of `suite` at `limit`, priced at `costs`.
fn cell(costs: &[SearchCost], suite: &str, limit: Limit, to_search: u64) -> EstimateCell {
    let cost = costs
        .iter()
        .find(|c| c.suite == suite && c.limit == limit && c.searches > 0);
    EstimateCell {
        suite: suite.to_string(),
        limit,
        to_search,
        mean_ms: cost.map(|c| c.ms as f64 / c.searches as f64),
        measured: cost.map_or(0, |c| c.searches),
    }
}

/// The first stage's cells, in the spec's order of limits and suites, with what the store
/// found left to search in each.
fn first_stage_cells(
    spec: &SweepSpec,
    planned: &PlannedSweep,
    costs: &[SearchCost],
) -> Vec<EstimateCell> {
    let mut cells = Vec::new();
    for &limit in &spec.limits {
        for suite in &spec.suites {
            let left = planned
                .cells
                .iter()
                .find(|(s, l, _)| s == suite && *l == limit)
                .map_or(0, |c| c.2);
            cells.push(cell(costs, suite, limit, left));
        }
    }
    cells
}

/// A search's cells past its `first` step, counted at most: every other cell of the grid on
/// every position of the first stage, nothing reused.
fn search_rest(
    spec: &SweepSpec,
    first: &SearchReport,
    costs: &[SearchCost],
    sizes: &BTreeMap<String, usize>,
) -> Option<StageEstimate> {
    spec.search.as_ref()?;
    let rest = spec.variants.len().saturating_sub(first.planned.len()) as u64;
    let mut cells = Vec::new();
    for &limit in &spec.limits {
        for suite in &spec.suites {
            let n = sizes.get(suite).copied().unwrap_or(0) as u64;
            cells.push(cell(costs, suite, limit, n * rest));
        }
    }
    Some(StageEstimate {
        stage: 1,
        positions: cells.iter().map(|c| c.to_search).sum(),
        cells,
    })
}

/// A staged sweep's later stages, counted at most: the baseline and the variants each
/// promotes, on every position of its suites, nothing reused.
fn later_stages(
    spec: &SweepSpec,
    costs: &[SearchCost],
    sizes: &BTreeMap<String, usize>,
) -> Vec<StageEstimate> {
    spec.stages
        .iter()
        .enumerate()
        .map(|(i, stage)| {
            let runs = u64::from(stage.promote) + 1;
            let mut cells = Vec::new();
            for &limit in &stage.limits {
                for suite in &stage.suites {
                    let n = sizes.get(suite).copied().unwrap_or(0) as u64;
                    cells.push(cell(costs, suite, limit, n * runs));
                }
            }
            StageEstimate {
                stage: i as u32 + 2,
                positions: cells.iter().map(|c| c.to_search).sum(),
                cells,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweep_domain::spec::{BaselineConfig, Stage};

    fn spec(stages: Vec<Stage>) -> SweepSpec {
        SweepSpec {
            search: None,
            priority: Default::default(),
            speed: None,
            name: "s".into(),
            engine: "e".into(),
            knobs: vec!["K".into()],
            variants: Vec::new(),
            limits: vec![Limit::Depth(6)],
            suites: vec!["a".into(), "b".into()],
            stages,
            chunk_size: 10,
            baseline: BaselineConfig::default(),
            description: String::new(),
            counters: Vec::new(),
            recompute: false,
            cross_check: sweep_domain::crosscheck::share::Share(0.0),
            cross_check_min: 0,
        }
    }

    fn cost(suite: &str, depth: u32, ms: u64, searches: u64) -> SearchCost {
        SearchCost {
            suite: suite.into(),
            limit: Limit::Depth(depth),
            ms,
            searches,
        }
    }

    #[test]
    fn speed_jobs_are_priced_as_searches_too() {
        let planned = PlannedSweep {
            existing: None,
            jobs: 2,
            checks: 0,
            positions: 100,
            reused: 0,
            cells: vec![("a".into(), Limit::Depth(6), 100)],
        };
        let mut timed = spec(Vec::new());
        timed.speed = Some(sweep_domain::spec::SpeedSpec {
            suite: "a".into(),
            count: 4,
            repeats: 10,
            limit: Limit::Depth(6),
        });
        let costs = [cost("a", 6, 2_000, 100)];
        let sizes = BTreeMap::from([("a".into(), 50)]);
        // Three builds: two variants x 2 x 10 pairs x 4 positions, at 20 ms each.
        let e = estimate_of(&timed, 3, None, &planned, &costs, &sizes);
        let speed = e.speed.as_ref().unwrap();
        assert_eq!((speed.to_search, speed.mean_ms), (160, Some(20.0)));
        assert_eq!(e.engine_seconds, Some(100.0 * 0.02 + 160.0 * 0.02));
        // Unmeasured there: no estimate, and the cell is named.
        let e = estimate_of(&timed, 3, None, &planned, &[], &sizes);
        assert_eq!(e.engine_seconds, None);
    }

    #[test]
    fn searches_left_are_priced_at_the_mean_of_earlier_ones() {
        let planned = PlannedSweep {
            existing: None,
            jobs: 6,
            checks: 2,
            positions: 300,
            reused: 100,
            cells: vec![
                ("a".into(), Limit::Depth(6), 100),
                ("b".into(), Limit::Depth(6), 100),
            ],
        };
        let costs = [
            cost("a", 6, 2_000, 100),
            cost("b", 6, 500, 10),
            cost("a", 7, 1, 1),
        ];
        let sizes = BTreeMap::from([("a".into(), 50), ("b".into(), 100)]);
        let e = estimate_of(&spec(Vec::new()), 3, None, &planned, &costs, &sizes);
        assert_eq!(e.to_search, 200);
        assert_eq!(e.cells[0].mean_ms, Some(20.0));
        assert_eq!(e.cells[1].measured, 10);
        // 100 x 20 ms + 100 x 50 ms.
        assert_eq!(e.engine_seconds, Some(7.0));
        assert!(e.unmeasured.is_empty());

        // A later stage: at most (promote + 1) builds on its suite; unmeasured, so no total.
        let staged = spec(vec![Stage {
            suites: vec!["b".into()],
            limits: vec![Limit::Depth(9)],
            promote: 2,
            max_solved_loss: 0,
        }]);
        let e = estimate_of(&staged, 3, None, &planned, &costs, &sizes);
        assert_eq!(e.later_stages[0].stage, 2);
        assert_eq!(e.later_stages[0].positions, 300);
        assert_eq!(e.engine_seconds, None);
        assert_eq!(e.unmeasured, ["b at depth 9"]);

        // A search over a 2 x 3 grid: its first step plans K's line through the start (2
        // cells); the other 4 cells are counted at most, on every position of a and b.
        let mut searched = spec(Vec::new());
        searched.knobs = vec!["K".into(), "L".into()];
        for k in 0..2 {
            for l in 0..3 {
                searched.variants.push(sweep_domain::spec::Variant {
                    name: format!("K={k},L={l}"),
                    defines: BTreeMap::from([("K".into(), k), ("L".into(), l)]),
                    source: None,
                });
            }
        }
        searched.search = Some(sweep_domain::spec::Search {
            strategy: "coordinate".into(),
            max_rounds: 3,
            max_solved_loss: 0,
            start: "K=0,L=0".into(),
        });
        let search = searched.search.as_ref().unwrap();
        // As `prepare` plans it.
        let first =
            sweep_domain::table::walk(search, &searched.knobs, &searched.variants, &[], &[]);
        let e = estimate_of(&searched, 7, Some(&first), &planned, &costs, &sizes);
        let rest = e.search_rest.expect("a search's rest");
        assert_eq!(rest.positions, 4 * 150);
        // The first stage's 7 s, then a's 200 searches at 20 ms and b's 400 at 50 ms.
        assert_eq!(e.engine_seconds, Some(7.0 + 200.0 * 0.02 + 400.0 * 0.05));
    }
}
