//! The table arithmetic: sums per cell, the tables built from them, and the comparison of a
//! build with the baseline position by position.

use std::collections::BTreeMap;

use super::model::{
    Cell, CellSums, Change, LimitTable, PositionComparison, PositionsReport, ResultRow, RowState,
    SumsKey, Table, TableBuild, TableInput, TableRow,
};
use crate::limit::Limit;

/// The sums of every cell that has results, computed from the results themselves (what a
/// store without its own aggregation does).
pub fn sums_of(results: &[ResultRow], baseline: &str) -> BTreeMap<SumsKey, CellSums> {
    let base: BTreeMap<(Limit, &str, u32), &ResultRow> = results
        .iter()
        .filter(|r| r.build == baseline && r.ok())
        .map(|r| ((r.limit, r.suite.as_str(), r.index), r))
        .collect();
    let mut out: BTreeMap<SumsKey, CellSums> = BTreeMap::new();
    for r in results {
        let sums = out
            .entry((r.build.clone(), r.limit, r.suite.clone()))
            .or_default();
        sums.done += 1;
        sums.reused += u64::from(r.reused);
        if !r.ok() {
            sums.errors += 1;
            continue;
        }
        sums.nodes += u128::from(r.nodes);
        sums.solved += u64::from(r.solved);
        if let Some(b) = base.get(&(r.limit, r.suite.as_str(), r.index)) {
            sums.compared += 1;
            sums.compared_nodes += u128::from(r.nodes);
            sums.compared_base_nodes += u128::from(b.nodes);
            sums.compared_solved += u64::from(r.solved);
            sums.compared_base_solved += u64::from(b.solved);
        }
    }
    out
}

fn pct(nodes: u128, base: u128) -> Option<f64> {
    (base > 0).then(|| ((nodes as f64 - base as f64) * 100.0 / base as f64 * 100.0).round() / 100.0)
}

/// Sums of one build over one suite, and over the positions it shares with the baseline.
#[derive(Default)]
struct Sums {
    cell: Cell,
    nodes: u128,
    compared_nodes: u128,
    compared_base_nodes: u128,
    compared_solved: i64,
    compared_base_solved: i64,
}

impl Sums {
    fn add(&mut self, other: &Sums) {
        let c = &mut self.cell;
        c.positions += other.cell.positions;
        c.done += other.cell.done;
        c.errors += other.cell.errors;
        c.reused += other.cell.reused;
        c.solved += other.cell.solved;
        c.compared += other.cell.compared;
        self.nodes += other.nodes;
        self.compared_nodes += other.compared_nodes;
        self.compared_base_nodes += other.compared_base_nodes;
        self.compared_solved += other.compared_solved;
        self.compared_base_solved += other.compared_base_solved;
    }

    /// The cell, with deltas when it is a variant's and something is comparable. Totals past
    /// `u64` saturate rather than wrap (sums are kept in 128 bits).
    fn finish(mut self, is_baseline: bool) -> Cell {
        self.cell.nodes = u64::try_from(self.nodes).unwrap_or(u64::MAX);
        if !is_baseline && self.cell.compared > 0 {
            self.cell.nodes_delta_pct = pct(self.compared_nodes, self.compared_base_nodes);
            self.cell.solved_delta = Some(self.compared_solved - self.compared_base_solved);
        }
        self.cell
    }
}

/// Builds the tables: per limit, per build, per suite and combined.
pub fn build_table(input: TableInput<'_>) -> Table {
    let baseline = input
        .builds
        .iter()
        .find(|b| b.plan.is_baseline)
        .map(|b| b.plan.name.clone())
        .unwrap_or_default();
    let mut ordered: Vec<&TableBuild> = input.builds.iter().collect();
    ordered.sort_by_key(|b| !b.plan.is_baseline);
    let tables = input
        .limits
        .iter()
        .map(|&limit| LimitTable {
            limit,
            rows: ordered.iter().map(|b| row_of(&input, b, limit)).collect(),
        })
        .collect();
    Table {
        baseline,
        knobs: input.knobs.to_vec(),
        counters: input.counters.to_vec(),
        suite_order: input.suites.to_vec(),
        tables,
        source: None,
        curve_flags: Vec::new(),
        suite_sha256: BTreeMap::new(),
        sweep: None,
        stages: Vec::new(),
        search: None,
    }
}

fn row_of(input: &TableInput<'_>, build: &TableBuild, limit: Limit) -> TableRow {
    let name = build.plan.name.as_str();
    let mut combined = Sums::default();
    let mut suites = BTreeMap::new();
    for suite in input.suites {
        let size = input.suite_sizes.get(suite).copied().unwrap_or(0);
        let found = input
            .sums
            .get(&(name.to_string(), limit, suite.clone()))
            .cloned()
            .unwrap_or_default();
        let sums = Sums {
            cell: Cell {
                positions: size as u64,
                done: found.done,
                errors: found.errors,
                reused: found.reused,
                solved: found.solved,
                compared: found.compared,
                ..Cell::default()
            },
            nodes: found.nodes,
            compared_nodes: found.compared_nodes,
            compared_base_nodes: found.compared_base_nodes,
            compared_solved: found.compared_solved as i64,
            compared_base_solved: found.compared_base_solved as i64,
        };
        combined.add(&sums);
        suites.insert(suite.clone(), sums.finish(build.plan.is_baseline));
    }
    let combined = combined.finish(build.plan.is_baseline);
    let state = if build.failed {
        RowState::BuildFailed
    } else if combined.done < combined.positions {
        RowState::Pending
    } else {
        RowState::Ok
    };
    TableRow {
        build: name.to_string(),
        defines: build.plan.defines.clone(),
        state,
        suites,
        combined,
        checks: 0,
        mismatches: 0,
        bench: None,
        source: None,
        speed: None,
    }
}

/// Compares `build`'s results with the baseline's at `limit`, position by position.
pub fn compare_positions(
    build: &str,
    baseline: &str,
    limit: Limit,
    suites: &[String],
    results: &[ResultRow],
) -> PositionsReport {
    // (suite order, index) -> (the build's result, the baseline's result)
    type Pair<'a> = (Option<&'a ResultRow>, Option<&'a ResultRow>);
    let mut by_key: BTreeMap<(usize, u32), Pair> = BTreeMap::new();
    for r in results.iter().filter(|r| r.limit == limit) {
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
        limit,
        gained: vec![],
        lost: vec![],
        total: 0,
        offset: 0,
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
            fen: String::new(),
            bm: Vec::new(),
            am: Vec::new(),
        });
    }
    report.total = report.rows.len();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::fixtures::{result_row, table_build};

    const D5: Limit = Limit::Depth(5);

    fn r(build: &str, suite: &str, index: u32, nodes: u64, solved: bool) -> ResultRow {
        result_row(build, suite, index, D5, nodes, solved)
    }

    fn builds(failed: bool) -> Vec<TableBuild> {
        vec![
            table_build("K=1", &[("K", 1)], false, failed),
            table_build("head_reference", &[], true, false),
        ]
    }

    fn table(builds: &[TableBuild], sizes: &[(&str, usize)], results: &[ResultRow]) -> Table {
        let sizes: BTreeMap<String, usize> =
            sizes.iter().map(|(s, n)| (s.to_string(), *n)).collect();
        let suites: Vec<String> = sizes.keys().cloned().collect();
        build_table(TableInput {
            counters: &[],
            knobs: &["K".to_string()],
            builds,
            limits: &[D5],
            suites: &suites,
            suite_sizes: &sizes,
            sums: &sums_of(results, "head_reference"),
        })
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
        let t = table(&builds(false), &[("a", 2), ("b", 1)], &results);
        let rows = &t.tables[0].rows;
        assert_eq!(rows[0].build, "head_reference");
        assert_eq!(rows[0].combined.nodes, 4000);
        assert_eq!(rows[0].combined.nodes_delta_pct, None);
        assert_eq!(rows[0].state, RowState::Ok);
        let k = &rows[1];
        assert_eq!(k.suites["a"].nodes, 2100);
        assert_eq!(k.suites["a"].nodes_delta_pct, Some(5.0));
        assert_eq!(k.suites["a"].solved_delta, Some(0));
        assert_eq!(k.suites["b"].nodes_delta_pct, Some(-50.0));
        assert_eq!(k.combined.nodes, 3100);
        assert_eq!(k.combined.nodes_delta_pct, Some(-22.5));
        assert_eq!(k.combined.solved_delta, Some(-1));
        assert_eq!(k.combined.positions, 3);
        assert_eq!(k.combined.compared, 3);
    }

    #[test]
    fn partial_rows_compare_only_shared_positions() {
        // The variant has position 0 only, and position 1 of the baseline is an error.
        let mut err = r("head_reference", "a", 2, 7, false);
        err.error = Some("crash".into());
        let results = vec![
            r("head_reference", "a", 0, 1000, true),
            r("head_reference", "a", 1, 5000, true),
            err,
            r("K=1", "a", 0, 900, true),
        ];
        let t = table(&builds(false), &[("a", 4)], &results);
        let base = &t.tables[0].rows[0];
        assert_eq!(base.state, RowState::Pending);
        assert_eq!((base.combined.done, base.combined.errors), (3, 1));
        // The error's nodes do not count.
        assert_eq!(base.combined.nodes, 6000);
        let k = &t.tables[0].rows[1];
        assert_eq!(k.state, RowState::Pending);
        assert_eq!(k.combined.compared, 1);
        assert_eq!(k.combined.nodes_delta_pct, Some(-10.0));
        assert_eq!(k.combined.solved_delta, Some(0));
        // Nothing comparable: no delta at all, not -100 %.
        let t = table(&builds(false), &[("a", 4)], &results[..3]);
        let k = &t.tables[0].rows[1];
        assert_eq!(k.combined.nodes_delta_pct, None);
        assert_eq!(k.combined.solved_delta, None);
        assert_eq!(k.state, RowState::Pending);
    }

    #[test]
    fn failed_builds_and_huge_totals() {
        let results = vec![
            r("head_reference", "a", 0, u64::MAX / 2, true),
            r("head_reference", "a", 1, u64::MAX / 2, true),
            r("head_reference", "a", 2, u64::MAX / 2, true),
        ];
        let t = table(&builds(true), &[("a", 3)], &results);
        assert_eq!(t.tables[0].rows[0].combined.nodes, u64::MAX);
        let k = &t.tables[0].rows[1];
        assert_eq!(k.state, RowState::BuildFailed);
        assert_eq!(k.combined.nodes_delta_pct, None);
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
        let rep = compare_positions("K=1", "head_reference", D5, &["a".into()], &results);
        assert_eq!(rep.lost, vec!["a.0"]);
        assert_eq!(rep.gained, vec!["a.1"]);
        assert_eq!(rep.rows[2].change, Change::Pending);
        let other = compare_positions(
            "K=1",
            "head_reference",
            Limit::Depth(9),
            &["a".into()],
            &results,
        );
        assert!(other.rows.is_empty());
    }
}
