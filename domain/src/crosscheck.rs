//! Cross-checks (issue 10 item 4): a sampled share of positions is measured a second time,
//! on another worker when there is one and always in a fresh engine process, and compared
//! with the first measurement. A node count or best move that differs flags the position: on
//! the sweep, on its build's table row and on both workers involved, so one bad machine
//! (every check it touches mismatches) stands out from a nondeterministic engine (mismatches
//! spread over every worker).
//!
//! This module holds the pure parts: which positions are checked ([`sample`], [`plan`]),
//! the share type of the config ([`Share`]), what a mismatch is ([`is_mismatch`]), and the
//! wire types the API shows them with.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::limit::Limit;
use crate::plan::{BuildPlan, ChunkPlan};
use crate::stats::{seed_of, SplitMix64};

pub mod share;

pub use share::{
    count, default_min, is_default_min, planned, Share, DEFAULT_MIN, DEFAULT_SHARE, MAX_MIN,
};

/// The suite indices to check, sorted: [`count`] of them, drawn without replacement by a
/// partial Fisher-Yates shuffle driven by SplitMix64 from `seed`. Pure and deterministic: the
/// same arguments always give the same indices (a resubmitted sweep checks the same
/// positions).
pub fn sample(size: usize, share: f64, min: u32, seed: u64) -> Vec<u32> {
    let k = count(size, share, min);
    let mut pool: Vec<u32> = (0..size as u32).collect();
    let mut rng = SplitMix64(seed);
    for i in 0..k {
        let j = i + rng.below(size - i);
        pool.swap(i, j);
    }
    let mut picked = pool[..k].to_vec();
    picked.sort_unstable();
    picked
}

/// The seed of one build's checks of one suite: from the sweep's identity (so an identical
/// resubmission checks the same positions), the build's and the suite's names.
pub fn seed(identity: &str, build: &str, suite: &str) -> u64 {
    seed_of(&format!("{identity}\0{build}\0{suite}"))
}

/// One planned check: a position of a suite, for one build at one limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckPlan {
    /// Index into the sweep's builds.
    pub build: usize,
    /// Suite name.
    pub suite: String,
    /// Suite index of the position.
    pub index: u32,
    /// Search limit.
    pub limit: Limit,
}

/// Every check of a sweep, in the order they run (after all work): build by build, suite by
/// suite in the order of `chunks`, limit by limit, position by position. Suite sizes are
/// read from the chunks (which cover every suite without gaps).
pub fn plan(
    identity: &str,
    share: f64,
    min: u32,
    builds: &[BuildPlan],
    chunks: &[ChunkPlan],
    limits: &[Limit],
) -> Vec<CheckPlan> {
    let mut sizes: Vec<(String, usize)> = Vec::new();
    for c in chunks {
        match sizes.iter_mut().find(|(s, _)| *s == c.suite) {
            Some((_, n)) => *n = (*n).max((c.first + c.count) as usize),
            None => sizes.push((c.suite.clone(), (c.first + c.count) as usize)),
        }
    }
    let mut out = Vec::new();
    for (b, build) in builds.iter().enumerate() {
        for (suite, size) in &sizes {
            let picked = sample(*size, share, min, seed(identity, &build.name, suite));
            for &limit in limits {
                for &index in &picked {
                    out.push(CheckPlan {
                        build: b,
                        suite: suite.clone(),
                        index,
                        limit,
                    });
                }
            }
        }
    }
    out
}

/// A measurement as a cross-check compares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured<'a> {
    /// Nodes searched.
    pub nodes: u64,
    /// Best move.
    pub bestmove: &'a str,
    /// The measurement failed (its numbers mean nothing).
    pub failed: bool,
}

/// A mismatch: both measurements succeeded and their node counts or best moves differ. A
/// failed measurement is never a mismatch (it is counted as an error instead).
pub fn is_mismatch(original: &Measured<'_>, check: &Measured<'_>) -> bool {
    !original.failed
        && !check.failed
        && (original.nodes != check.nodes || original.bestmove != check.bestmove)
}

/// One side of a mismatching position: who measured what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckSide {
    /// The worker that measured it.
    pub worker_id: i64,
    /// Its name.
    pub worker: String,
    /// Nodes it counted.
    pub nodes: u64,
    /// The best move it found.
    pub bestmove: String,
}

/// A position whose cross-check disagreed with its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Mismatch {
    /// Build (table row).
    pub build: String,
    /// Suite.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Suite index of the position.
    pub index: u32,
    /// The suite's id of the position.
    pub position: String,
    /// The result the table counts.
    pub original: CheckSide,
    /// The second measurement, in a fresh engine process.
    pub check: CheckSide,
}

/// Cross-checks of one build at one limit: what its table row says of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildChecks {
    /// Build (table row).
    pub build: String,
    /// Search limit (table).
    pub limit: Limit,
    /// Checks finished (with or without error).
    pub done: u64,
    /// Checks that disagreed with their result.
    pub mismatches: u64,
}

/// A sweep's cross-checks: `GET /api/v1/sweeps/{id}` field `cross_checks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CrossChecks {
    /// Checks planned at submission.
    pub planned: u64,
    /// Checks finished (with or without error).
    pub done: u64,
    /// Checks whose second measurement failed (never a mismatch).
    pub errors: u64,
    /// Checks whose node count or best move differed from the result's.
    pub mismatches: u64,
    /// The mismatching positions (at most [`MAX_LISTED`], in build, suite, limit and index
    /// order).
    pub positions: Vec<Mismatch>,
    /// Per build and limit with finished checks, in the sweep's build order: checks done
    /// and mismatches.
    pub builds: Vec<BuildChecks>,
}

impl CrossChecks {
    /// What `sweep status` and a finished run print: a summary line (none when the sweep
    /// planned no checks), then one line per listed mismatch.
    pub fn lines(&self) -> Vec<String> {
        if self.planned == 0 {
            return Vec::new();
        }
        let mut out = vec![format!(
            "cross-checks: {}/{} done, {} mismatches, {} errors",
            self.done, self.planned, self.mismatches, self.errors
        )];
        for m in &self.positions {
            out.push(format!(
                "mismatch: {} {} {} #{} {}: nodes {} move {} on {} (#{}), nodes {} move {} on {} (#{}) in a fresh process",
                m.build,
                m.suite,
                m.limit,
                m.index,
                m.position,
                m.original.nodes,
                m.original.bestmove,
                m.original.worker,
                m.original.worker_id,
                m.check.nodes,
                m.check.bestmove,
                m.check.worker,
                m.check.worker_id,
            ));
        }
        if self.mismatches > self.positions.len() as u64 {
            out.push(format!(
                "({} more mismatches not listed)",
                self.mismatches - self.positions.len() as u64
            ));
        }
        out
    }
}

/// Most mismatching positions a sweep's detail lists.
pub const MAX_LISTED: u32 = 100;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn counts_follow_share_min_and_size() {
        assert_eq!(count(180, 0.02, 3), 4); // 3.6 rounded up
        assert_eq!(count(40, 0.02, 3), 3); // 0.8 -> 1, raised to the minimum
        assert_eq!(count(2, 0.02, 3), 2); // the minimum is capped at the size
        assert_eq!(count(1000, 0.5, 3), 500);
        assert_eq!(count(10, 1.0, 0), 10);
        assert_eq!(count(10, 0.0, 3), 0); // 0 turns checks off whatever the minimum
        assert_eq!(count(0, 0.5, 3), 0);
        assert_eq!(count(100, 0.01, 0), 1);
    }

    #[test]
    fn samples_are_sorted_distinct_in_range_and_deterministic() {
        for seed in [0, 1, 42, u64::MAX] {
            let s = sample(180, 0.05, 3, seed);
            assert_eq!(s.len(), 9);
            assert!(s.windows(2).all(|w| w[0] < w[1]), "sorted, distinct: {s:?}");
            assert!(s.iter().all(|&i| i < 180));
            assert_eq!(s, sample(180, 0.05, 3, seed));
        }
        assert_ne!(sample(180, 0.05, 3, 1), sample(180, 0.05, 3, 2));
        assert!(sample(180, 0.0, 3, 7).is_empty());
        assert_eq!(sample(2, 0.02, 3, 7), vec![0, 1]);
        assert_eq!(sample(5, 1.0, 3, 9), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn samples_spread_over_the_suite() {
        // Every index gets picked by some seed: no position is never checked.
        let mut seen = [false; 20];
        for seed in 0..200 {
            for i in sample(20, 0.1, 0, seed) {
                seen[i as usize] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn plans_every_build_suite_and_limit() {
        let builds: Vec<BuildPlan> = ["base", "v1"]
            .iter()
            .enumerate()
            .map(|(i, n)| BuildPlan {
                name: n.to_string(),
                defines: BTreeMap::new(),
                is_baseline: i == 0,
                source: None,
            })
            .collect();
        let chunks = vec![
            ChunkPlan {
                suite: "a".into(),
                first: 0,
                count: 10,
            },
            ChunkPlan {
                suite: "a".into(),
                first: 10,
                count: 5,
            },
            ChunkPlan {
                suite: "b".into(),
                first: 0,
                count: 2,
            },
        ];
        let limits = [Limit::Depth(3), Limit::Depth(5)];
        let p = plan("id", 0.02, 3, &builds, &chunks, &limits);
        // (3 of a + 2 of b) per build and limit.
        assert_eq!(p.len(), (3 + 2) * 2 * 2);
        assert_eq!(planned(0.02, 3, 2, &[15, 2], 2), p.len());
        assert!(p.iter().filter(|c| c.suite == "a").all(|c| c.index < 15));
        // The same positions at every limit.
        let at = |l: Limit| -> Vec<u32> {
            p.iter()
                .filter(|c| c.build == 1 && c.suite == "a" && c.limit == l)
                .map(|c| c.index)
                .collect()
        };
        assert_eq!(at(Limit::Depth(3)), at(Limit::Depth(5)));
        assert_eq!(p, plan("id", 0.02, 3, &builds, &chunks, &limits));
        assert!(plan("id", 0.0, 3, &builds, &chunks, &limits).is_empty());
    }

    #[test]
    fn mismatches_need_two_good_measurements() {
        let m = |nodes, bestmove, failed| Measured {
            nodes,
            bestmove,
            failed,
        };
        assert!(!is_mismatch(&m(10, "e2e4", false), &m(10, "e2e4", false)));
        assert!(is_mismatch(&m(10, "e2e4", false), &m(11, "e2e4", false)));
        assert!(is_mismatch(&m(10, "e2e4", false), &m(10, "d2d4", false)));
        assert!(!is_mismatch(&m(10, "e2e4", true), &m(11, "d2d4", false)));
        assert!(!is_mismatch(&m(10, "e2e4", false), &m(0, "", true)));
    }

    #[test]
    fn status_lines_name_both_measurements() {
        assert!(
            CrossChecks::default().lines().is_empty(),
            "no checks planned"
        );
        let side = |id, name: &str, nodes| CheckSide {
            worker_id: id,
            worker: name.into(),
            nodes,
            bestmove: "e2e4".into(),
        };
        let c = CrossChecks {
            planned: 6,
            done: 6,
            errors: 0,
            mismatches: 2,
            positions: vec![Mismatch {
                build: "K=1".into(),
                suite: "s".into(),
                limit: Limit::Depth(5),
                index: 7,
                position: "p7".into(),
                original: side(1, "w1", 100),
                check: side(2, "w2", 101),
            }],
            builds: vec![],
        };
        let lines = c.lines();
        assert_eq!(lines[0], "cross-checks: 6/6 done, 2 mismatches, 0 errors");
        assert_eq!(
            lines[1],
            "mismatch: K=1 s depth 5 #7 p7: nodes 100 move e2e4 on w1 (#1), nodes 101 move e2e4 on w2 (#2) in a fresh process"
        );
        assert_eq!(lines[2], "(1 more mismatches not listed)");
    }

    #[test]
    fn default_share_is_left_out_of_stored_specs() {
        assert!(Share::default().is_default());
        assert!(!Share(0.0).is_default());
        assert!(is_default_min(&default_min()));
    }
}
