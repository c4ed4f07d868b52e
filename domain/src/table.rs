//! Delta tables: pure arithmetic over stored results. Rendering lives in [`render`].

pub mod counters;
pub mod curve;
pub mod paired;
pub mod positions;
pub mod render;

pub use counters::attach_counters;
pub use curve::{non_monotonic, CurveFlag};
pub use paired::attach_stats;
pub use positions::PositionsView;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::limit::Limit;
use crate::plan::BuildPlan;

/// One stored result, as the table code needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResultRow {
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
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
    /// The engine's search counters for this search (empty when it printed none).
    pub counters: BTreeMap<String, u64>,
    /// Taken from an earlier sweep that measured the same build on the same position and
    /// limit (see [`crate::reuse`]), not searched by this one.
    pub reused: bool,
}

impl ResultRow {
    /// A valid result (not an error).
    fn ok(&self) -> bool {
        self.error.is_none()
    }
}

/// Totals of one build on one suite (or combined), with deltas against the baseline.
///
/// Totals (`nodes`, `solved`) are over the build's own valid results; deltas are over the
/// `compared` positions only, those both this build and the baseline finished without error,
/// so a partial or failing build is never compared with positions it has not searched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Cell {
    /// Positions in the suite(s).
    pub positions: u64,
    /// Positions with a result (errors included).
    pub done: u64,
    /// Results that are errors.
    pub errors: u64,
    /// Results taken from earlier sweeps that measured the same build on the same positions
    /// and limit (see [`crate::reuse`]) instead of being searched again.
    #[serde(default)]
    pub reused: u64,
    /// Total nodes of the valid results.
    pub nodes: u64,
    /// Positions solved.
    pub solved: u64,
    /// Positions both this build and the baseline finished without error: what the deltas
    /// are computed over.
    pub compared: u64,
    /// Nodes vs the baseline over the compared positions, percent (rounded to 0.01); `null`
    /// for the baseline itself and when nothing is comparable.
    pub nodes_delta_pct: Option<f64>,
    /// Solved minus the baseline's solved, over the compared positions; `null` likewise.
    pub solved_delta: Option<i64>,
    /// Paired statistics against the baseline over the compared positions (the service
    /// attaches them with [`attach_stats`]); absent for the baseline and when nothing is
    /// comparable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<crate::stats::PairedStats>,
    /// Sums of the engine's search counters over this build's valid results, by name
    /// (attached with [`attach_counters`] once the sweep has finished); absent while it
    /// runs and for a build with no valid result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<BTreeMap<String, u64>>,
}

/// Where a build's row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RowState {
    /// Every position has a result (some may be errors).
    Ok,
    /// Positions are still to be searched.
    Pending,
    /// The build failed: there are no numbers, and there will be none.
    BuildFailed,
}

/// A build's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TableRow {
    /// Build name.
    pub build: String,
    /// Its defines.
    pub defines: BTreeMap<String, i64>,
    /// Complete, pending or failed.
    pub state: RowState,
    /// Per suite.
    pub suites: BTreeMap<String, Cell>,
    /// All suites together.
    pub combined: Cell,
    /// Cross-checks of this build finished (see [`crate::crosscheck`]; the service fills
    /// them in).
    #[serde(default)]
    pub checks: u64,
    /// Of those, how many disagreed with the result they re-measured: with any, this row's
    /// numbers are not reproducible.
    #[serde(default)]
    pub mismatches: u64,
}

/// The rows of one search limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LimitTable {
    /// The search limit.
    pub limit: Limit,
    /// Rows, baseline first.
    pub rows: Vec<TableRow>,
}

/// The delta tables of a sweep: one per search limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Table {
    /// Baseline build name.
    pub baseline: String,
    /// The swept knobs (one column each).
    pub knobs: Vec<String>,
    /// Search counters the sweep shows as columns (its `counters`); every cell's JSON
    /// carries all of them anyway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    /// Suites in the sweep's order.
    pub suite_order: Vec<String>,
    /// One table per limit, in the sweep's order.
    pub tables: Vec<LimitTable>,
    /// The source the builds were made from (the service fills it in; `None` for a
    /// binary-only engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::source::SourceProvenance>,
    /// Nodes-delta curves of a one-knob sweep that go up and down as the knob rises (see
    /// [`non_monotonic`]); filled in once the sweep has finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve_flags: Vec<CurveFlag>,
    /// The sha256 of each suite version the sweep ran, by suite name (the service fills it
    /// in).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub suite_sha256: BTreeMap<String, String>,
    /// What made the table: the sweep, when it was submitted and the Sweep version that
    /// serves it (the service fills it in; the Markdown heading shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<TableSweep>,
}

/// What names a sweep above its table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TableSweep {
    /// Sweep id.
    pub id: i64,
    /// Sweep name.
    pub name: String,
    /// Engine swept.
    pub engine: String,
    /// When the sweep was submitted.
    pub submitted_at: chrono::DateTime<chrono::Utc>,
    /// The version of Sweep that made the table.
    pub sweep_version: String,
}

/// A build as the table needs it: its plan and whether it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableBuild {
    /// Name, defines, baseline flag.
    pub plan: BuildPlan,
    /// The build failed (no results will come).
    pub failed: bool,
}

/// What a table is computed from.
#[derive(Debug, Clone, Copy)]
pub struct TableInput<'a> {
    /// The swept knobs.
    pub knobs: &'a [String],
    /// Builds, baseline among them.
    pub builds: &'a [TableBuild],
    /// Search limits.
    pub limits: &'a [Limit],
    /// Suites in order.
    pub suites: &'a [String],
    /// Positions per suite.
    pub suite_sizes: &'a BTreeMap<String, usize>,
    /// The sums of every (build, limit, suite) that has results (see [`sums_of`]).
    pub sums: &'a BTreeMap<SumsKey, CellSums>,
    /// Search counters to show as columns.
    pub counters: &'a [String],
}

/// Which cell a [`CellSums`] belongs to: (build, limit, suite).
pub type SumsKey = (String, Limit, String);

/// What one cell (a build on a suite at a limit) is computed from: plain sums, so a database
/// can compute them next to the data (`GROUP BY`) instead of shipping every result.
///
/// `compared_*` are over the positions both this build and the baseline finished without
/// error (for the baseline itself: its own valid positions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellSums {
    /// Positions with a result (errors included).
    pub done: u64,
    /// Results that are errors.
    pub errors: u64,
    /// Results taken from earlier sweeps.
    pub reused: u64,
    /// Nodes of the valid results.
    pub nodes: u128,
    /// Valid results that solved their position.
    pub solved: u64,
    /// Positions valid in both this build and the baseline.
    pub compared: u64,
    /// This build's nodes over the compared positions.
    pub compared_nodes: u128,
    /// The baseline's nodes over the compared positions.
    pub compared_base_nodes: u128,
    /// This build's solved positions among the compared.
    pub compared_solved: u64,
    /// The baseline's solved positions among the compared.
    pub compared_base_solved: u64,
}

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
    }
}

/// How a position fares in a build compared with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    /// The position as FEN; empty unless the suite was looked up (the coordinator does).
    #[serde(default)]
    pub fen: String,
    /// Its best moves (UCI), likewise.
    #[serde(default)]
    pub bm: Vec<String>,
    /// Its moves to avoid (UCI), likewise.
    #[serde(default)]
    pub am: Vec<String>,
}

/// Per-position comparison report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PositionsReport {
    /// Build compared.
    pub build: String,
    /// Baseline name.
    pub baseline: String,
    /// The search limit compared.
    pub limit: Limit,
    /// Positions gained.
    pub gained: Vec<String>,
    /// Positions lost.
    pub lost: Vec<String>,
    /// Positions with a result on either side, in all (of the view asked for, see
    /// [`PositionsView`]).
    pub total: usize,
    /// Index in the whole list of the first row of `rows`.
    pub offset: usize,
    /// One page of the positions, in suite order (every one unless paged).
    pub rows: Vec<PositionComparison>,
}

impl PositionsReport {
    /// Keeps `size` rows from `offset` (`gained` and `lost` stay whole: they are short, and
    /// a reviewer wants them all).
    pub fn page(mut self, offset: usize, size: usize) -> Self {
        self.offset = offset.min(self.rows.len());
        self.rows = self.rows.into_iter().skip(offset).take(size).collect();
        self
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

    const D5: Limit = Limit::Depth(5);

    fn r(build: &str, suite: &str, index: u32, nodes: u64, solved: bool) -> ResultRow {
        ResultRow {
            counters: Default::default(),
            reused: false,
            build: build.into(),
            suite: suite.into(),
            limit: D5,
            index,
            position_id: format!("{suite}.{index}"),
            nodes,
            bestmove: "e2e4".into(),
            solved,
            error: None,
        }
    }

    fn builds(failed: bool) -> Vec<TableBuild> {
        vec![
            TableBuild {
                plan: BuildPlan {
                    name: "K=1".into(),
                    defines: BTreeMap::from([("K".into(), 1)]),
                    is_baseline: false,
                },
                failed,
            },
            TableBuild {
                plan: BuildPlan {
                    name: "head_reference".into(),
                    defines: BTreeMap::new(),
                    is_baseline: true,
                },
                failed: false,
            },
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
