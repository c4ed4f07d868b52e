//! A variant's speed against the baseline, from its speed job's pairs of runs (see
//! [`crate::spec::SpeedSpec`]): a node count says how much a variant searches, not what each
//! node costs, so a variant that searches fewer nodes can still be slower. Pure arithmetic
//! over what the worker measured; the coordinator stores the runs and calls [`speed_of`].
//!
//! Every ratio is a geometric mean of per-pair ratios (the pair ran back to back on one
//! worker, so machine drift cancels within a pair), and the time ratio's interval is the
//! same seeded bootstrap as the paired node statistics' ([`crate::stats`]).

use super::model::{RowSpeed, Table};
use crate::limit::Limit;
use crate::stats::{bootstrap_ci, mean, seed_of};
use crate::wire::SpeedRun;

/// The seed of `build`'s speed interval: `seed_of("{seed_prefix}/{build}/speed")`, with
/// `seed_prefix` as [`attach_stats`](crate::table::attach_stats) takes it (the coordinator
/// passes `""`), so the same runs give the same interval on every request, and the interval
/// does not share its resamples with the build's node statistics.
pub fn speed_seed(seed_prefix: &str, build: &str) -> u64 {
    seed_of(&format!("{seed_prefix}/{build}/speed"))
}

/// What the table shows of a variant's speed job: `runs` as stored (any order: they are
/// sorted by `repeat`, as the bootstrap depends on the order), `error` as the worker reported
/// it, and `seed` from [`speed_seed`] (the coordinator calls
/// `speed_of(&runs, error, speed_seed("", build))`).
///
/// A ratio is `None` without a pair, or when any pair lacks a figure it needs (0 CPU time, 0
/// nodes): a ratio over some pairs only would not be what `repeats` says, and a 0 must never
/// become a ratio of 0 or an infinity. The interval needs two pairs. Ratios are rounded to 4
/// decimals (run-to-run noise is far above that), the flag is judged on the rounded figures.
pub fn speed_of(runs: &[SpeedRun], error: Option<String>, seed: u64) -> RowSpeed {
    let mut runs = runs.to_vec();
    runs.sort_by_key(|r| r.repeat);
    let time = logs_of(&runs, |r| log_ratio(r.test.cpu_us, r.base.cpu_us));
    let nodes = logs_of(&runs, |r| log_ratio(r.test.nodes, r.base.nodes));
    let nps = logs_of(&runs, |r| {
        Some(log_ratio(r.test.nodes, r.base.nodes)? - log_ratio(r.test.cpu_us, r.base.cpu_us)?)
    });
    let wall = logs_of(&runs, |r| log_ratio(r.test.wall_us, r.base.wall_us));
    let ci95 = time
        .as_deref()
        .filter(|logs| logs.len() >= 2)
        .map(|logs| bootstrap_ci(logs, seed).map(round4));
    let node_ratio = nodes.as_deref().map(geomean);
    RowSpeed {
        repeats: u32::try_from(runs.len()).unwrap_or(u32::MAX),
        time_ratio: time.as_deref().map(geomean),
        ci95,
        nps_ratio: nps.as_deref().map(geomean),
        node_ratio,
        wall_ratio: wall.as_deref().map(geomean),
        fewer_nodes_but_slower: node_ratio.is_some_and(|r| r < 1.0)
            && ci95.is_some_and(|[lo, _]| lo > 1.0),
        error,
        positions: None,
    }
}

/// Puts `speed` on `build`'s rows at `limit`, in `table.tables` and in every stage's tables
/// (a staged sweep's Markdown shows its stages' tables, not `tables`); nothing on the
/// baseline's row, which is what the speed is measured against.
pub fn attach_speed(table: &mut Table, limit: Limit, build: &str, speed: &RowSpeed) {
    if build == table.baseline {
        return;
    }
    let stages = table.stages.iter_mut().flat_map(|s| s.tables.iter_mut());
    for lt in table.tables.iter_mut().chain(stages) {
        if lt.limit != limit {
            continue;
        }
        for row in lt.rows.iter_mut().filter(|r| r.build == build) {
            row.speed = Some(speed.clone());
        }
    }
}

/// `ln(test / base)`; `None` when either is 0 (no ratio, never an infinity or a NaN).
fn log_ratio(test: u64, base: u64) -> Option<f64> {
    (test > 0 && base > 0).then(|| (test as f64).ln() - (base as f64).ln())
}

/// Every pair's log-ratio by `ratio`; `None` without a pair, or when any pair has none.
fn logs_of(runs: &[SpeedRun], ratio: impl Fn(&SpeedRun) -> Option<f64>) -> Option<Vec<f64>> {
    if runs.is_empty() {
        return None;
    }
    runs.iter().map(ratio).collect()
}

/// The geometric mean of the ratios whose logs are `logs` (not empty), rounded.
fn geomean(logs: &[f64]) -> f64 {
    round4(mean(logs).exp())
}

/// `x` to 4 decimals.
fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SpeedSide;

    /// A pair: the baseline's CPU time and nodes, then the variant's (wall time 10 % above
    /// CPU time on both sides).
    fn run(repeat: u32, base: (u64, u64), test: (u64, u64)) -> SpeedRun {
        let side = |(cpu_us, nodes): (u64, u64)| SpeedSide {
            cpu_us,
            wall_us: cpu_us + cpu_us / 10,
            nodes,
        };
        SpeedRun {
            repeat,
            base: side(base),
            test: side(test),
        }
    }

    /// A small, fixed jitter of -2 % to +2 % for pair `i` on one side.
    fn jitter(i: u32, side: u32) -> f64 {
        1.0 + f64::from((i * 7 + side * 3) % 5) / 100.0 - 0.02
    }

    /// `n` pairs where the variant takes `slower` times the baseline's CPU time and searches
    /// `nodes` times its nodes, each side with its own jitter.
    fn pairs(n: u32, slower: f64, nodes: f64) -> Vec<SpeedRun> {
        (0..n)
            .map(|i| {
                let base = 2_000_000.0 * jitter(i, 0);
                let test = 2_000_000.0 * slower * jitter(i, 1);
                run(
                    i,
                    (base as u64, 1_000_000),
                    (test as u64, (1_000_000.0 * nodes) as u64),
                )
            })
            .collect()
    }

    #[test]
    fn equal_times_give_a_ratio_of_one_inside_its_interval() {
        let exact: Vec<SpeedRun> = (0..5).map(|i| run(i, (1_000, 500), (1_000, 500))).collect();
        let s = speed_of(&exact, None, speed_seed("", "K=1"));
        assert_eq!(
            (s.repeats, s.time_ratio, s.ci95),
            (5, Some(1.0), Some([1.0, 1.0]))
        );
        assert_eq!(
            (s.nps_ratio, s.node_ratio, s.wall_ratio),
            (Some(1.0), Some(1.0), Some(1.0))
        );
        assert!(!s.fewer_nodes_but_slower);
        // With noise on both sides, the interval still holds 1.
        let s = speed_of(&pairs(10, 1.0, 1.0), None, 7);
        let [lo, hi] = s.ci95.expect("ten pairs");
        assert!(lo <= 1.0 && 1.0 <= hi, "{s:?}");
        assert!((s.time_ratio.unwrap() - 1.0).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn a_variant_30_percent_slower_has_its_interval_above_one() {
        let s = speed_of(&pairs(10, 1.3, 1.0), None, speed_seed("", "K=2"));
        let t = s.time_ratio.unwrap();
        assert!((t - 1.3).abs() < 0.03, "{s:?}");
        let [lo, hi] = s.ci95.unwrap();
        assert!(1.0 < lo && lo <= t && t <= hi, "{s:?}");
        // Same nodes, so nodes per second fall as time rises; not flagged (no fewer nodes).
        assert!((s.nps_ratio.unwrap() - 1.0 / t).abs() < 1e-3, "{s:?}");
        assert_eq!(s.node_ratio, Some(1.0));
        assert!((s.wall_ratio.unwrap() - t).abs() < 1e-3, "{s:?}");
        assert!(!s.fewer_nodes_but_slower);
        // Figures are rounded to 4 decimals; the same runs in any order, the same speed.
        assert_eq!((t * 1e4).round() / 1e4, t);
        let mut shuffled = pairs(10, 1.3, 1.0);
        shuffled.reverse();
        assert_eq!(speed_of(&shuffled, None, speed_seed("", "K=2")), s);
    }

    #[test]
    fn fewer_nodes_but_slower_is_flagged_only_when_the_interval_says_slower() {
        let s = speed_of(&pairs(10, 1.3, 0.9), None, 3);
        assert_eq!(s.node_ratio, Some(0.9));
        assert!((s.nps_ratio.unwrap() - 0.9 / s.time_ratio.unwrap()).abs() < 1e-3);
        assert!(s.fewer_nodes_but_slower, "{s:?}");
        // Fewer nodes and as fast: no flag; fewer nodes, slower, but one pair (no interval):
        // no flag either.
        assert!(!speed_of(&pairs(10, 1.0, 0.9), None, 3).fewer_nodes_but_slower);
        let one = speed_of(&pairs(1, 1.3, 0.9), None, 3);
        assert_eq!((one.repeats, one.ci95), (1, None));
        assert!(one.time_ratio.is_some() && !one.fewer_nodes_but_slower);
    }

    #[test]
    fn an_error_without_runs_keeps_the_error_and_no_figure() {
        let s = speed_of(&[], Some("engine crashed".into()), 1);
        assert_eq!(
            s,
            RowSpeed {
                repeats: 0,
                time_ratio: None,
                ci95: None,
                nps_ratio: None,
                node_ratio: None,
                wall_ratio: None,
                fewer_nodes_but_slower: false,
                error: Some("engine crashed".into()),
                positions: None,
            }
        );
        // With pairs before it, the error stays beside their figures.
        let s = speed_of(&pairs(3, 1.3, 1.0), Some("timed out".into()), 1);
        assert_eq!((s.repeats, s.error.as_deref()), (3, Some("timed out")));
        assert!(s.ci95.is_some());
    }

    #[test]
    fn zero_nodes_or_time_give_no_ratio_never_nan() {
        let mut runs = pairs(4, 1.3, 0.9);
        runs[2].base.nodes = 0;
        let s = speed_of(&runs, None, 1);
        assert_eq!((s.node_ratio, s.nps_ratio), (None, None));
        assert!(s.time_ratio.is_some() && !s.fewer_nodes_but_slower);
        runs[1].test.cpu_us = 0;
        let s = speed_of(&runs, None, 1);
        assert_eq!((s.time_ratio, s.ci95, s.nps_ratio), (None, None, None));
        assert!(s.wall_ratio.is_some());
        // The JSON says null, not NaN (which serde_json cannot write) or 0.
        let json = serde_json::to_value(&s).unwrap();
        assert!(
            json["time_ratio"].is_null() && json["node_ratio"].is_null(),
            "{json}"
        );
    }

    #[test]
    fn attach_puts_the_speed_on_the_builds_rows_at_its_limit() {
        let mut t = crate::table::bench::table_of_two();
        t.stages = vec![crate::table::StageTable {
            stage: 1,
            suites: t.suite_order.clone(),
            limits: vec![Limit::Depth(5)],
            promote: None,
            max_solved_loss: None,
            state: crate::table::StageState::Finished,
            tables: t.tables.clone(),
            promoted: Vec::new(),
            eligible: Vec::new(),
            standings: Vec::new(),
            failed: None,
        }];
        let speed = speed_of(&pairs(2, 1.1, 1.0), None, 1);
        attach_speed(&mut t, Limit::Depth(6), "v1", &speed);
        assert_eq!(t.tables[0].rows[1].speed, None, "another limit's table");
        attach_speed(&mut t, Limit::Depth(5), "v1", &speed);
        attach_speed(&mut t, Limit::Depth(5), "base", &speed);
        for lt in [&t.tables[0], &t.stages[0].tables[0]] {
            assert_eq!(lt.rows[0].speed, None, "never on the baseline");
            assert_eq!(lt.rows[1].speed.as_ref(), Some(&speed));
        }
    }
}
