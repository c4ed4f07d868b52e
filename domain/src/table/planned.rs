//! Which builds a sweep has planned on each of its stages so far: the one rule the table
//! (which rows a stage shows) and the progress (which cells count) read alike. Every build
//! runs the first stage, or with a search the baseline and the cells the search asked for;
//! a later stage runs the baseline and the variants the stage before promoted, once it has
//! decided.

use super::model::{Promotion, SearchReport};
use crate::limit::Limit;
use crate::spec::SweepSpec;

/// A sweep's stages as planned so far.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    spec: &'a SweepSpec,
    decisions: &'a [(u32, Promotion)],
    search: Option<&'a SearchReport>,
}

impl<'a> Planned<'a> {
    /// `spec` with the decisions of its finished stages (by stage, from 0) and where its
    /// search stands.
    pub fn new(
        spec: &'a SweepSpec,
        decisions: &'a [(u32, Promotion)],
        search: Option<&'a SearchReport>,
    ) -> Self {
        Self {
            spec,
            decisions,
            search,
        }
    }

    /// Whether stage `k`'s builds are chosen: the first stage's always; a later one's once
    /// the stage before has promoted someone.
    pub fn chosen(&self, k: usize) -> bool {
        k == 0 || self.promoted_into(k).is_some()
    }

    /// Whether `build` runs stage `k` (never while its builds are not chosen).
    pub fn runs(&self, k: usize, build: &str) -> bool {
        let baseline = build == self.spec.baseline.name;
        match (k, self.search) {
            (0, None) => true,
            (0, Some(r)) => baseline || r.planned.iter().any(|c| c == build),
            _ => self
                .promoted_into(k)
                .is_some_and(|p| baseline || p.iter().any(|c| c == build)),
        }
    }

    /// Whether `build` is planned on `suite` at `limit` in any stage.
    pub fn measures(&self, build: &str, suite: &str, limit: &Limit) -> bool {
        (0..self.spec.stage_count()).any(|k| {
            self.spec.stage(k).is_some_and(|view| {
                view.suites.iter().any(|s| s == suite)
                    && view.limits.contains(limit)
                    && self.runs(k, build)
            })
        })
    }

    /// The variants promoted into stage `k` (from 1), once the stage before has decided and
    /// promoted someone.
    fn promoted_into(&self, k: usize) -> Option<&'a [String]> {
        let (_, d) = self.decisions.iter().find(|(s, _)| *s as usize + 1 == k)?;
        (!d.promoted.is_empty()).then_some(d.promoted.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{BaselineConfig, Search, Stage};

    /// Variants A, B, C on suite `a` at depth 5, then stage 2 on `b` at depth 5.
    fn spec() -> SweepSpec {
        SweepSpec {
            name: "s".into(),
            engine: "e".into(),
            knobs: vec!["K".into()],
            variants: Vec::new(),
            limits: vec![Limit::Depth(5)],
            suites: vec!["a".into()],
            stages: vec![Stage {
                suites: vec!["b".into()],
                limits: vec![Limit::Depth(5)],
                promote: 1,
                max_solved_loss: 0,
            }],
            search: None,
            priority: Default::default(),
            speed: None,
            chunk_size: 4,
            baseline: BaselineConfig::default(),
            description: String::new(),
            counters: Vec::new(),
            recompute: false,
            cross_check: crate::crosscheck::share::Share(0.0),
            cross_check_min: 0,
        }
    }

    fn promoted(names: &[&str]) -> Promotion {
        Promotion {
            promoted: names.iter().map(|n| n.to_string()).collect(),
            eligible: Vec::new(),
            standings: Vec::new(),
            failed: None,
        }
    }

    #[test]
    fn later_stages_run_the_baseline_and_the_promoted_once_decided() {
        let spec = spec();
        let d5 = Limit::Depth(5);
        let none = Planned::new(&spec, &[], None);
        assert!(none.chosen(0) && none.runs(0, "B"));
        assert!(!none.chosen(1) && !none.runs(1, "head_reference"));
        assert!(none.measures("B", "a", &d5) && !none.measures("B", "b", &d5));

        let decided = [(0, promoted(&["B"]))];
        let p = Planned::new(&spec, &decided, None);
        assert!(p.chosen(1));
        assert!(p.runs(1, "head_reference") && p.runs(1, "B") && !p.runs(1, "A"));
        assert!(p.measures("B", "b", &d5) && !p.measures("A", "b", &d5));
        assert!(!p.measures("B", "b", &Limit::Depth(6)));

        // A stage that promoted nobody (it failed) leaves the next one unchosen.
        let failed = [(0, promoted(&[]))];
        assert!(!Planned::new(&spec, &failed, None).chosen(1));
    }

    #[test]
    fn a_search_plans_the_baseline_and_its_cells_in_the_first_stage() {
        let mut spec = spec();
        let search = Search {
            strategy: "coordinate".into(),
            max_rounds: 3,
            max_solved_loss: 0,
            start: "A".into(),
        };
        spec.search = Some(search.clone());
        // No grid to walk: the replay says so rather than failing.
        let mut report = crate::table::walk(&search, &spec.knobs, &[], &[], &[]);
        assert!(report.finished && report.failed.is_some(), "{report:?}");
        report.planned = vec!["A".into(), "C".into()];
        let p = Planned::new(&spec, &[], Some(&report));
        assert!(p.runs(0, "head_reference") && p.runs(0, "A") && p.runs(0, "C"));
        assert!(!p.runs(0, "B"));
        assert!(!p.measures("B", "a", &Limit::Depth(5)));
    }
}
