//! Results and builds the table tests share.

use super::model::{ResultRow, RowSpeed, TableBuild};
use crate::limit::Limit;
use crate::plan::BuildPlan;

/// A valid result of `build` on position `index` of `suite` (id `suite.index`, best move
/// `e2e4`, no counters, not reused).
pub(crate) fn result_row(
    build: &str,
    suite: &str,
    index: u32,
    limit: Limit,
    nodes: u64,
    solved: bool,
) -> ResultRow {
    ResultRow {
        counters: Default::default(),
        reused: false,
        build: build.into(),
        suite: suite.into(),
        limit,
        index,
        position_id: format!("{suite}.{index}"),
        nodes,
        bestmove: "e2e4".into(),
        solved,
        error: None,
    }
}

/// A build named `name` with `defines`.
pub(crate) fn table_build(
    name: &str,
    defines: &[(&str, i64)],
    is_baseline: bool,
    failed: bool,
) -> TableBuild {
    TableBuild {
        plan: BuildPlan {
            name: name.into(),
            defines: defines.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            is_baseline,
            source: None,
        },
        failed,
    }
}

/// The speed of a variant that searches fewer nodes (0.9 of the baseline's) yet takes 1.3
/// times its CPU time over 10 pairs, its interval wholly above 1: flagged.
pub(crate) fn fewer_nodes_but_slower() -> RowSpeed {
    RowSpeed {
        repeats: 10,
        time_ratio: Some(1.3021),
        ci95: Some([1.2812, 1.3244]),
        nps_ratio: Some(0.6912),
        node_ratio: Some(0.9),
        wall_ratio: Some(1.2987),
        fewer_nodes_but_slower: true,
        error: None,
        positions: None,
    }
}
