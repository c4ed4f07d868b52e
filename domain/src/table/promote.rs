//! Which variants of a finished stage run the next one (see [`crate::spec::StageConfig`]):
//! ranked by their geometric-mean node ratio against the baseline over every position of the
//! stage, among those that solve no more than `max_solved_loss` fewer positions than it.
//! Pure arithmetic over the stage's tables once their paired statistics are attached.

use std::cmp::Ordering;

use super::model::{LimitTable, Promotion, RowState, Standing, TableRow};

/// Decides the promotion out of a finished stage whose `tables` (one per limit, paired
/// statistics attached) compare every variant with `baseline`: the `n` best eligible
/// variants, by geometric-mean node ratio, then more solved, then name.
pub fn promote(tables: &[LimitTable], baseline: &str, n: usize, max_solved_loss: u32) -> Promotion {
    let mut standings: Vec<Standing> = Vec::new();
    let mut failed = None;
    for lt in tables {
        for row in &lt.rows {
            if row.combined.errors > 0 {
                let n = row.combined.errors;
                failed.get_or_insert(format!(
                    "`{}` has {n} position{} that failed for good at {}",
                    row.build,
                    if n == 1 { "" } else { "s" },
                    lt.limit
                ));
            }
            if row.build == baseline && row.state == RowState::BuildFailed {
                failed.get_or_insert(format!("the baseline `{baseline}` did not build"));
            }
        }
    }
    let names: Vec<&str> = tables
        .first()
        .map(|lt| lt.rows.iter().map(|r| r.build.as_str()).collect())
        .unwrap_or_default();
    for name in names.into_iter().filter(|b| *b != baseline) {
        let rows: Vec<&TableRow> = tables
            .iter()
            .filter_map(|lt| lt.rows.iter().find(|r| r.build == name))
            .collect();
        standings.push(standing(name, &rows, max_solved_loss));
    }
    standings.sort_by(rank);
    let eligible: Vec<String> = standings
        .iter()
        .filter(|s| s.eligible)
        .map(|s| s.build.clone())
        .collect();
    let promoted = if failed.is_some() {
        Vec::new()
    } else {
        eligible.iter().take(n).cloned().collect()
    };
    Promotion {
        promoted,
        eligible,
        standings,
        failed,
    }
}

/// One variant's standing from its row at each limit of the stage.
fn standing(name: &str, rows: &[&TableRow], max_solved_loss: u32) -> Standing {
    let (mut weight, mut log_sum, mut solved_delta) = (0u64, 0f64, 0i64);
    let mut why_not = None;
    for row in rows {
        match row.state {
            RowState::BuildFailed => {
                why_not.get_or_insert("its build failed".to_string());
            }
            RowState::Pending => {
                why_not.get_or_insert("positions are missing".to_string());
            }
            RowState::Ok => {}
        }
        solved_delta += row.combined.solved_delta.unwrap_or(0);
        if let Some(stats) = &row.combined.stats {
            if let Some(g) = stats.geomean_ratio {
                let w = stats.pairs - stats.zero_nodes;
                weight += w;
                log_sum += w as f64 * g.ln();
            }
        }
    }
    let geomean_ratio = (weight > 0).then(|| (log_sum / weight as f64).exp());
    if why_not.is_none() && geomean_ratio.is_none() {
        why_not = Some("no position to compare with the baseline".to_string());
    }
    if why_not.is_none() && solved_delta < -i64::from(max_solved_loss) {
        why_not = Some(format!(
            "solves {} fewer than the baseline (at most {max_solved_loss} allowed)",
            -solved_delta
        ));
    }
    Standing {
        build: name.to_string(),
        geomean_ratio,
        solved_delta,
        eligible: why_not.is_none(),
        why_not,
    }
}

/// Eligible first, by ratio (lower is better), then more solved, then name; the rest by name.
pub(crate) fn rank(a: &Standing, b: &Standing) -> Ordering {
    b.eligible
        .cmp(&a.eligible)
        .then_with(|| {
            if a.eligible {
                let (x, y) = (
                    a.geomean_ratio.unwrap_or(f64::INFINITY),
                    b.geomean_ratio.unwrap_or(f64::INFINITY),
                );
                x.total_cmp(&y).then(b.solved_delta.cmp(&a.solved_delta))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| a.build.cmp(&b.build))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;
    use crate::stats::PairedStats;
    use crate::table::model::Cell;
    use std::collections::BTreeMap;

    fn row(build: &str, ratio: Option<f64>, pairs: u64, solved_delta: i64) -> TableRow {
        TableRow {
            build: build.into(),
            defines: BTreeMap::new(),
            state: RowState::Ok,
            suites: BTreeMap::new(),
            combined: Cell {
                positions: pairs,
                done: pairs,
                compared: pairs,
                solved_delta: Some(solved_delta),
                stats: ratio.map(|g| PairedStats {
                    pairs,
                    zero_nodes: 0,
                    geomean_ratio: Some(g),
                    ci95: None,
                    median_ratio: None,
                    faster: 0,
                    slower: 0,
                    equal: 0,
                    gained: 0,
                    lost: 0,
                    mcnemar_p: 1.0,
                }),
                ..Cell::default()
            },
            checks: 0,
            mismatches: 0,
            bench: None,
            source: None,
            speed: None,
        }
    }

    fn table(limit: u32, rows: Vec<TableRow>) -> LimitTable {
        LimitTable {
            limit: Limit::Depth(limit),
            rows,
        }
    }

    #[test]
    fn best_ratios_within_the_solved_loss_are_promoted() {
        let t = table(
            8,
            vec![
                row("base", None, 10, 0),
                row("A", Some(0.90), 10, -1),
                row("B", Some(0.95), 10, 0),
                row("C", Some(0.97), 10, 2),
                row("D", Some(1.10), 10, 0),
            ],
        );
        let p = promote(std::slice::from_ref(&t), "base", 2, 0);
        assert_eq!(p.promoted, ["B", "C"]);
        assert_eq!(p.eligible, ["B", "C", "D"]);
        assert!(p.standings.iter().any(|s| s.build == "A" && !s.eligible));
        let p = promote(&[t], "base", 2, 1);
        assert_eq!(p.promoted, ["A", "B"]);
        assert_eq!(p.failed, None);
    }

    #[test]
    fn ratios_combine_over_limits_weighted_by_positions_and_ties_go_to_solved_then_name() {
        // A: 0.8 over 10 positions and 1.25 over 10: geomean 1. B: exactly 1 at both.
        let d8 = table(
            8,
            vec![
                row("base", None, 10, 0),
                row("A", Some(0.8), 10, 0),
                row("B", Some(1.0), 10, 0),
                row("C", Some(1.0), 10, 1),
            ],
        );
        let d9 = table(
            9,
            vec![
                row("base", None, 10, 0),
                row("A", Some(1.25), 10, 0),
                row("B", Some(1.0), 10, 0),
                row("C", Some(1.0), 10, 0),
            ],
        );
        let p = promote(&[d8, d9], "base", 3, 0);
        let a = p.standings.iter().find(|s| s.build == "A").unwrap();
        assert!((a.geomean_ratio.unwrap() - 1.0).abs() < 1e-12);
        // C solves one more than B at the same ratio; A and B tie on both, by name.
        assert_eq!(p.promoted[0], "C");
        assert_eq!(p.promoted.len(), 3);
    }

    #[test]
    fn a_stage_with_failed_positions_promotes_nothing_and_says_why() {
        let mut bad = row("B", Some(0.9), 10, 0);
        bad.combined.errors = 2;
        let p = promote(
            &[table(
                8,
                vec![row("base", None, 10, 0), row("A", Some(0.9), 10, 0), bad],
            )],
            "base",
            1,
            0,
        );
        assert!(p.promoted.is_empty());
        assert!(p
            .failed
            .unwrap()
            .contains("`B` has 2 positions that failed"));
    }

    #[test]
    fn failed_builds_are_not_eligible() {
        let mut failed = row("A", None, 10, 0);
        failed.state = RowState::BuildFailed;
        let p = promote(
            &[table(
                8,
                vec![row("base", None, 10, 0), failed, row("B", Some(1.2), 10, 0)],
            )],
            "base",
            1,
            0,
        );
        assert_eq!(p.promoted, ["B"]);
        assert_eq!(p.standings[1].why_not.as_deref(), Some("its build failed"));
    }
}
