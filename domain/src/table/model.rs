//! What the table code computes with and produces: stored results as it needs them, the
//! tables, their cells and rows, and the per-position comparison.

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
    pub(crate) fn ok(&self) -> bool {
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
    /// attaches them with [`attach_stats`](crate::table::attach_stats)); absent for the baseline and when nothing is
    /// comparable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<crate::stats::PairedStats>,
    /// Sums of the engine's search counters over this build's valid results, by name
    /// (attached with [`attach_counters`](crate::table::attach_counters) once the sweep has finished); absent while it
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
    /// The engine's bench on this build's binary, when its definition names one and a
    /// worker has reported it (the service fills it in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<RowBench>,
    /// The code this row's build was built from (see
    /// [`SourceProvenance::label`](crate::source::SourceProvenance::label)): the sweep's
    /// source, or a variant's own (`rev`, `sha256`); absent for a binary-only engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// How fast this build is against the baseline, from the sweep's speed jobs (`[speed]`),
    /// on the table of the limit they ran at; absent without them, for the baseline, and
    /// until its speed job has ended (the service fills it in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<RowSpeed>,
}

/// A variant's speed against the baseline (see [`crate::spec::SpeedSpec`]): pairs of fresh
/// engine processes, the baseline and the variant (each first in turn), each over the same positions at the same
/// depth on one worker that ran nothing else meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RowSpeed {
    /// Pairs of runs measured.
    pub repeats: u32,
    /// The variant's CPU time over the baseline's: the geometric mean of the per-pair ratios
    /// (above 1: slower); `null` without a pair.
    pub time_ratio: Option<f64>,
    /// 95 % bootstrap interval of `time_ratio` (as the paired node statistics'); `null`
    /// with fewer than two pairs.
    pub ci95: Option<[f64; 2]>,
    /// The variant's nodes per CPU second over the baseline's (geometric mean per pair).
    pub nps_ratio: Option<f64>,
    /// The variant's nodes over the baseline's in these runs (geometric mean per pair).
    pub node_ratio: Option<f64>,
    /// The variant's wall time over the baseline's (geometric mean per pair).
    pub wall_ratio: Option<f64>,
    /// The variant searched fewer nodes (`node_ratio` below 1) but its time interval lies
    /// wholly above 1: fewer nodes, yet slower.
    pub fewer_nodes_but_slower: bool,
    /// Why the speed job ended short (an engine that crashed, hung or printed no node
    /// count): the ratios are of the pairs before it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The positions every run searched, e.g. `the first 16 of ecm` (the service fills it
    /// in from the sweep's `[speed]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<String>,
}

/// A row's bench, as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RowBench {
    /// The engine's bench node total on the build's binary; `null` when every worker that
    /// benched it disagreed with another.
    pub nodes: Option<u64>,
    /// Equal to the baseline's bench: the variant probably searches exactly as the baseline
    /// does. Always false on the baseline's own row, and for a variant whose UCI options
    /// differ from the baseline's (a bench runs without them, so it cannot tell).
    pub same_as_baseline: bool,
    /// Workers whose bench of this build's binary disagreed with an earlier worker's: their
    /// jobs of the build went to other workers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mismatches: Vec<String>,
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
    /// [`non_monotonic`](crate::table::non_monotonic)); filled in once the sweep has finished.
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
    /// A staged sweep's stages, in order, each with its tables and what it promoted (the
    /// service fills them in; empty for a sweep without stages, whose `tables` are all).
    /// In a staged sweep `tables` are the first stage's, every variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageTable>,
    /// A sweep's search over its grid (`[search]`): its path, choice and cost (the service
    /// fills it in; `None` without a search). Its `tables` then hold the cells it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchReport>,
}

/// A variant's standing at the end of a stage: what its promotion was decided on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Standing {
    /// Build name.
    pub build: String,
    /// Geometric mean of its node ratios against the baseline over every position of the
    /// stage both finished (all suites and limits); `null` when it has none.
    pub geomean_ratio: Option<f64>,
    /// Its solved count minus the baseline's over those positions.
    pub solved_delta: i64,
    /// Whether it could be promoted: complete, with a ratio, and within `max_solved_loss`.
    pub eligible: bool,
    /// Why not, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// What a finished stage decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Promotion {
    /// The variants that run the next stage, best first.
    pub promoted: Vec<String>,
    /// The variants that could have been promoted, best first.
    pub eligible: Vec<String>,
    /// Every variant's standing: the eligible in rank order, then the rest by name.
    pub standings: Vec<Standing>,
    /// Why nothing was promoted, when the stage failed (a position failed for good, or
    /// the baseline did not build): the sweep ends there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// One step of a coordinate search: one knob's values measured with the others held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchStep {
    /// Its round, from 1.
    pub round: u32,
    /// The knob whose values it compared.
    pub knob: String,
    /// The cells it compared (that knob's values, the others held at the best so far).
    pub cells: Vec<String>,
    /// How many of them no step before had measured.
    pub measured: u32,
    /// The best of them, kept for the steps after.
    pub chosen: String,
    /// The chosen cell's geometric-mean node ratio against the baseline.
    pub ratio: Option<f64>,
    /// The chosen cell's solved count minus the baseline's.
    pub solved_delta: i64,
}

/// Where a search stands: what its table JSON shows as `search`, kept on the sweep at each
/// step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchReport {
    /// The strategy (`coordinate`).
    pub strategy: String,
    /// Most rounds it may take.
    pub max_rounds: u32,
    /// Most positions its choice may solve fewer than the baseline.
    pub max_solved_loss: u32,
    /// The cell it started from (the baseline's settings).
    pub start: String,
    /// The steps decided so far, in order.
    pub path: Vec<SearchStep>,
    /// Every cell given searches so far, in the order they were.
    pub planned: Vec<String>,
    /// The cells being measured now (empty once it has ended).
    pub next: Vec<String>,
    /// Whether it has ended.
    pub finished: bool,
    /// Its choice, once it has ended.
    pub chosen: Option<String>,
    /// The next best cell it measured (what a following stage runs beside the choice).
    pub runner_up: Option<String>,
    /// Why it ended without a choice (a position failed for good, the baseline failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// Cells in the whole grid.
    pub grid_cells: u32,
    /// Engine seconds its measured cells took in this sweep, the baseline's included
    /// (results taken from earlier sweeps count 0); the service fills it in once the sweep
    /// has finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_seconds: Option<f64>,
    /// What measuring the whole grid would take: its cells (and the baseline) times the mean
    /// engine seconds of a cell it measured; the service fills it in once the sweep has
    /// finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid_engine_seconds: Option<f64>,
}

/// Where a stage stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageState {
    /// The stage before it has not finished: its variants are not chosen yet.
    Waiting,
    /// Its searches are planned and under way.
    Running,
    /// Every search of it has a result (and, unless it is the last, its promotion is
    /// decided).
    Finished,
}

/// One stage of a staged sweep in its table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StageTable {
    /// Its number, from 1.
    pub stage: u32,
    /// Suites it runs.
    pub suites: Vec<String>,
    /// Its search limits.
    pub limits: Vec<Limit>,
    /// How many variants of the stage before run it (`null` for the first: all).
    pub promote: Option<u32>,
    /// The most solved positions a variant could lose against the baseline in the stage
    /// before and still be promoted into this one (`null` for the first).
    pub max_solved_loss: Option<u32>,
    /// Waiting, running or finished.
    pub state: StageState,
    /// One table per limit: the baseline and the variants that run this stage.
    pub tables: Vec<LimitTable>,
    /// The variants promoted out of it into the next stage, best first (empty for the last
    /// stage and until it is decided).
    pub promoted: Vec<String>,
    /// The variants that could have been promoted, best first.
    pub eligible: Vec<String>,
    /// What the promotion out of it was decided on, variant by variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub standings: Vec<Standing>,
    /// Why it promoted nothing, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
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
    /// The sums of every (build, limit, suite) that has results (see [`sums_of`](crate::table::sums_of)).
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
    /// [`PositionsView`](crate::table::PositionsView)).
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

/// A nodes-delta curve (per suite or combined, at one limit) that goes up and down as the
/// knob rises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CurveFlag {
    /// The swept knob.
    pub knob: String,
    /// The limit of the table.
    pub limit: Limit,
    /// The suite, or `combined`.
    pub suite: String,
    /// (knob value, nodes delta %) in knob order, the baseline's own value left out.
    pub points: Vec<(i64, f64)>,
}

impl CurveFlag {
    /// One line for people: `nodes delta vs KNOB is not monotonic on SUITE (LIMIT): ...`.
    pub fn describe(&self) -> String {
        let points: Vec<String> = self
            .points
            .iter()
            .map(|(v, d)| format!("{d:+.2}% at {v}"))
            .collect();
        format!(
            "nodes delta vs {} is not monotonic on {} ({}): {}",
            self.knob,
            self.suite,
            self.limit,
            points.join(", ")
        )
    }
}
