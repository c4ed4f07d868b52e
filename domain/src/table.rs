//! Delta tables: pure arithmetic over stored results. Rendering lives in [`render`].

pub mod render;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::BuildPlan;

/// One stored result, as the table code needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRow {
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// Index in the suite.
    pub index: u32,
    /// EPD id.
    pub position_id: String,
    /// Nodes searched.
    pub nodes: u64,
    /// Best move (UCI).
    pub bestmove: String,
    /// Solved?
    pub solved: bool,
    /// Error, if the position has no valid result.
    pub error: Option<String>,
}

/// Totals of one build on one suite (or combined), with deltas against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Positions in the suite(s).
    pub positions: u64,
    /// Positions with a result.
    pub done: u64,
    /// Results that are errors.
    pub errors: u64,
    /// Total nodes.
    pub nodes: u64,
    /// Positions solved.
    pub solved: u64,
    /// Nodes vs the baseline, percent (rounded to 0.01); absent for the baseline itself or when
    /// the baseline has no nodes.
    pub nodes_delta_pct: Option<f64>,
    /// Solved minus the baseline's solved.
    pub solved_delta: Option<i64>,
}

/// A build's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    /// Build name.
    pub build: String,
    /// Its defines.
    pub defines: BTreeMap<String, i64>,
    /// Per suite.
    pub suites: BTreeMap<String, Cell>,
    /// All suites together.
    pub combined: Cell,
}

/// The delta table of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Baseline build name.
    pub baseline: String,
    /// The knob that varies.
    pub knob: String,
    /// Depth limit.
    pub depth: u32,
    /// Suites in the sweep's order.
    pub suite_order: Vec<String>,
    /// Rows, baseline first.
    pub rows: Vec<TableRow>,
}

fn pct(nodes: u64, base: u64) -> Option<f64> {
    (base > 0).then(|| ((nodes as f64 - base as f64) * 100.0 / base as f64 * 100.0).round() / 100.0)
}

/// Builds the table. `suite_sizes` gives the number of positions of each suite.
pub fn build_table(
    knob: &str,
    depth: u32,
    builds: &[BuildPlan],
    suites: &[String],
    suite_sizes: &BTreeMap<String, usize>,
    results: &[ResultRow],
) -> Table {
    let mut cells: BTreeMap<(&str, &str), Cell> = BTreeMap::new();
    for r in results {
        let c = cells
            .entry((r.build.as_str(), r.suite.as_str()))
            .or_default();
        c.done += 1;
        c.nodes += r.nodes;
        c.solved += u64::from(r.solved && r.error.is_none());
        c.errors += u64::from(r.error.is_some());
    }
    let baseline = builds
        .iter()
        .find(|b| b.is_baseline)
        .map(|b| b.name.clone())
        .unwrap_or_default();
    let mut rows: Vec<TableRow> = builds
        .iter()
        .map(|b| {
            let mut combined = Cell::default();
            let suites_map = suites
                .iter()
                .map(|s| {
                    let mut cell = cells
                        .get(&(b.name.as_str(), s.as_str()))
                        .cloned()
                        .unwrap_or_default();
                    cell.positions = suite_sizes.get(s).copied().unwrap_or(0) as u64;
                    combined.positions += cell.positions;
                    combined.done += cell.done;
                    combined.errors += cell.errors;
                    combined.nodes += cell.nodes;
                    combined.solved += cell.solved;
                    (s.clone(), cell)
                })
                .collect();
            TableRow {
                build: b.name.clone(),
                defines: b.defines.clone(),
                suites: suites_map,
                combined,
            }
        })
        .collect();
    rows.sort_by_key(|r| r.build != baseline);
    if let Some(base) = rows.first().filter(|r| r.build == baseline).cloned() {
        for row in rows.iter_mut().skip(1) {
            for (s, cell) in row.suites.iter_mut() {
                let b = &base.suites[s];
                cell.nodes_delta_pct = pct(cell.nodes, b.nodes);
                cell.solved_delta = Some(cell.solved as i64 - b.solved as i64);
            }
            row.combined.nodes_delta_pct = pct(row.combined.nodes, base.combined.nodes);
            row.combined.solved_delta =
                Some(row.combined.solved as i64 - base.combined.solved as i64);
        }
    }
    Table {
        baseline,
        knob: knob.to_string(),
        depth,
        suite_order: suites.to_vec(),
        rows,
    }
}

/// How a position fares in a build compared with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Solved by the build, not by the baseline.
    Gained,
    /// Solved by the baseline, not by the build.
    Lost,
    /// Same verdict.
    Same,
    /// One side has no result yet (or an error).
    Pending,
}

/// One position beside the baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionComparison {
    /// Suite.
    pub suite: String,
    /// Index in the suite.
    pub index: u32,
    /// EPD id.
    pub id: String,
    /// The build's result.
    pub build: Option<ResultRow>,
    /// The baseline's result.
    pub baseline: Option<ResultRow>,
    /// Verdict.
    pub change: Change,
}

/// Per-position comparison report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PositionsReport {
    /// Build compared.
    pub build: String,
    /// Baseline name.
    pub baseline: String,
    /// Positions gained.
    pub gained: Vec<String>,
    /// Positions lost.
    pub lost: Vec<String>,
    /// Every position, in suite order.
    pub rows: Vec<PositionComparison>,
}

/// Compares `build`'s results with the baseline's, position by position.
pub fn compare_positions(
    build: &str,
    baseline: &str,
    suites: &[String],
    results: &[ResultRow],
) -> PositionsReport {
    // (suite order, index) -> (the build's result, the baseline's result)
    type Pair<'a> = (Option<&'a ResultRow>, Option<&'a ResultRow>);
    let mut by_key: BTreeMap<(usize, u32), Pair> = BTreeMap::new();
    for r in results {
        let Some(order) = suites.iter().position(|s| *s == r.suite) else {
            continue;
        };
        let slot = by_key.entry((order, r.index)).or_default();
        if r.build == build {
            slot.0 = Some(r);
        }
        if r.build == baseline {
            slot.1 = Some(r);
        }
    }
    let mut report = PositionsReport {
        build: build.to_string(),
        baseline: baseline.to_string(),
        gained: vec![],
        lost: vec![],
        rows: vec![],
    };
    for ((order, index), (b, base)) in by_key {
        if b.is_none() && base.is_none() {
            continue;
        }
        let ok = |r: Option<&ResultRow>| r.filter(|r| r.error.is_none()).map(|r| r.solved);
        let change = match (ok(b), ok(base)) {
            (Some(true), Some(false)) => Change::Gained,
            (Some(false), Some(true)) => Change::Lost,
            (Some(_), Some(_)) => Change::Same,
            _ => Change::Pending,
        };
        let id = b
            .or(base)
            .map(|r| r.position_id.clone())
            .unwrap_or_default();
        match change {
            Change::Gained => report.gained.push(id.clone()),
            Change::Lost => report.lost.push(id.clone()),
            _ => {}
        }
        report.rows.push(PositionComparison {
            suite: suites[order].clone(),
            index,
            id,
            build: b.cloned(),
            baseline: base.cloned(),
            change,
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(build: &str, suite: &str, index: u32, nodes: u64, solved: bool) -> ResultRow {
        ResultRow {
            build: build.into(),
            suite: suite.into(),
            index,
            position_id: format!("{suite}.{index}"),
            nodes,
            bestmove: "e2e4".into(),
            solved,
            error: None,
        }
    }

    fn builds() -> Vec<BuildPlan> {
        vec![
            BuildPlan {
                name: "K=1".into(),
                defines: BTreeMap::from([("K".into(), 1)]),
                is_baseline: false,
            },
            BuildPlan {
                name: "head_reference".into(),
                defines: BTreeMap::new(),
                is_baseline: true,
            },
        ]
    }

    #[test]
    fn deltas_against_baseline() {
        let results = vec![
            r("head_reference", "a", 0, 1000, true),
            r("head_reference", "a", 1, 1000, false),
            r("head_reference", "b", 0, 2000, true),
            r("K=1", "a", 0, 900, false),
            r("K=1", "a", 1, 1200, true),
            r("K=1", "b", 0, 1000, false),
        ];
        let sizes = BTreeMap::from([("a".into(), 2), ("b".into(), 1)]);
        let t = build_table(
            "K",
            5,
            &builds(),
            &["a".into(), "b".into()],
            &sizes,
            &results,
        );
        assert_eq!(t.rows[0].build, "head_reference");
        assert_eq!(t.rows[0].combined.nodes, 4000);
        assert_eq!(t.rows[0].combined.nodes_delta_pct, None);
        let k = &t.rows[1];
        assert_eq!(k.suites["a"].nodes, 2100);
        assert_eq!(k.suites["a"].nodes_delta_pct, Some(5.0));
        assert_eq!(k.suites["a"].solved_delta, Some(0));
        assert_eq!(k.suites["b"].nodes_delta_pct, Some(-50.0));
        assert_eq!(k.combined.nodes, 3100);
        assert_eq!(k.combined.nodes_delta_pct, Some(-22.5));
        assert_eq!(k.combined.solved_delta, Some(-1));
        assert_eq!(k.combined.positions, 3);
    }

    #[test]
    fn gained_and_lost() {
        let results = vec![
            r("head_reference", "a", 0, 1, true),
            r("head_reference", "a", 1, 1, false),
            r("head_reference", "a", 2, 1, false),
            r("K=1", "a", 0, 1, false),
            r("K=1", "a", 1, 1, true),
        ];
        let rep = compare_positions("K=1", "head_reference", &["a".into()], &results);
        assert_eq!(rep.lost, vec!["a.0"]);
        assert_eq!(rep.gained, vec!["a.1"]);
        assert_eq!(rep.rows[2].change, Change::Pending);
    }
}
