//! What both stores share about reading cross-checks: the summary's queries (written once,
//! with the backend's parameter markers filled in) and their row mappings. Planning, leasing
//! and storing checks stay per backend (`postgres/checks.rs`, `sqlite/checks.rs`).

use sqlx::{ColumnIndex, Decode, Row, Type};
use sweep_domain::crosscheck::{BuildChecks, CheckSide, CrossChecks, Mismatch};

use super::job::limit_of;
use super::StoreResult;

/// Check jobs planned for sweep `{P1}`.
const PLANNED: &str = "SELECT count(*) FROM jobs WHERE sweep_id = {P1} AND kind = 'check'";

/// Finished checks of sweep `{P1}` per (build, limit). A mismatch was judged when the check
/// was stored.
const CELLS: &str = "
SELECT b.name, c.depth, c.nodes_limit, count(*) AS done, count(c.error) AS errors,
       count(*) FILTER (WHERE c.mismatch) AS mismatches
FROM cross_checks c
JOIN builds b ON b.id = c.build_id
JOIN results r ON r.build_id = c.build_id AND r.suite_id = c.suite_id
              AND r.position_index = c.position_index AND r.depth = c.depth
WHERE c.sweep_id = {P1}
GROUP BY b.name, b.ord, c.depth, c.nodes_limit
ORDER BY b.ord, c.depth, c.nodes_limit";

/// The first `{P2}` mismatching positions of sweep `{P1}`, with both measurements.
const MISMATCHES: &str = "
SELECT b.name AS build, su.name AS suite, c.depth, c.nodes_limit, c.position_index,
       c.position_id, r.worker_id AS o_worker, wo.name AS o_name, r.nodes AS o_nodes,
       r.bestmove AS o_move, c.worker_id AS c_worker, wc.name AS c_name,
       c.nodes AS c_nodes, c.bestmove AS c_move
FROM cross_checks c
JOIN builds b ON b.id = c.build_id
JOIN suites su ON su.id = c.suite_id
JOIN sweep_suites ss ON ss.sweep_id = c.sweep_id AND ss.suite_id = c.suite_id
JOIN results r ON r.build_id = c.build_id AND r.suite_id = c.suite_id
              AND r.position_index = c.position_index AND r.depth = c.depth
LEFT JOIN workers wo ON wo.id = r.worker_id
LEFT JOIN workers wc ON wc.id = c.worker_id
WHERE c.sweep_id = {P1} AND c.mismatch
ORDER BY b.ord, ss.ord, c.depth, c.nodes_limit, c.position_index
LIMIT {P2}";

/// The summary's three queries (planned, cells, mismatches) with parameter markers `p1`
/// (the sweep) and `p2` (how many mismatches to list) in the backend's dialect.
pub(crate) fn summary_sql(p1: &str, p2: &str) -> [String; 3] {
    [PLANNED, CELLS, MISMATCHES].map(|q| q.replace("{P1}", p1).replace("{P2}", p2))
}

/// The summary from the rows of [`summary_sql`]'s queries.
pub(crate) fn summary_of<'r, R>(
    planned: i64,
    cells: &'r [R],
    mismatches: &'r [R],
) -> StoreResult<CrossChecks>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    i32: Decode<'r, R::Database> + Type<R::Database>,
{
    let mut out = CrossChecks {
        planned: planned.max(0) as u64,
        ..CrossChecks::default()
    };
    for r in cells {
        let done = r.get::<i64, _>("done").max(0) as u64;
        let mismatches = r.get::<i64, _>("mismatches").max(0) as u64;
        out.done += done;
        out.errors += r.get::<i64, _>("errors").max(0) as u64;
        out.mismatches += mismatches;
        out.builds.push(BuildChecks {
            build: r.get("name"),
            limit: limit_of(r.get("depth"), r.get("nodes_limit"))?,
            done,
            mismatches,
        });
    }
    out.positions = mismatches
        .iter()
        .map(|r| {
            let side = |worker: &'static str,
                        name: &'static str,
                        nodes: &'static str,
                        bestmove: &'static str| CheckSide {
                worker_id: r.get(worker),
                worker: r.get::<Option<String>, _>(name).unwrap_or_default(),
                nodes: r.get::<i64, _>(nodes).max(0) as u64,
                bestmove: r.get(bestmove),
            };
            Ok(Mismatch {
                build: r.get("build"),
                suite: r.get("suite"),
                limit: limit_of(r.get("depth"), r.get("nodes_limit"))?,
                index: r.get::<i32, _>("position_index").max(0) as u32,
                position: r.get("position_id"),
                original: side("o_worker", "o_name", "o_nodes", "o_move"),
                check: side("c_worker", "c_name", "c_nodes", "c_move"),
            })
        })
        .collect::<StoreResult<_>>()?;
    Ok(out)
}
