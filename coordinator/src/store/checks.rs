//! A sweep's cross-check summary and each worker's checks, written once for both stores,
//! and the checks a new sweep can take at once (their original copied from an earlier
//! sweep). Planning them is `sweeps.rs`; leasing and storing them, the worker queue
//! (`queue/checks.rs`, `queue/uploads.rs`).

use sweep_domain::crosscheck::{BuildChecks, CheckSide, CrossChecks, Mismatch};

use std::collections::BTreeMap;

use super::backend::Backend;
use super::sql::{Columns, Reads, Tx, Value};
use super::StoreResult;

/// Check jobs planned for sweep `$1`.
const PLANNED: &str = "SELECT count(*) AS n FROM jobs WHERE sweep_id = $1 AND kind = 'check'";

/// Finished checks of sweep `$1` per (build, limit). A mismatch was judged when the check
/// was stored.
const CELLS: &str = "
SELECT b.name, c.depth, c.nodes_limit, count(*) AS done, count(c.error) AS errors,
       count(*) FILTER (WHERE c.mismatch) AS mismatches
FROM cross_checks c
JOIN builds b ON b.id = c.build_id
JOIN results r ON r.build_id = c.build_id AND r.suite_id = c.suite_id
              AND r.position_index = c.position_index AND r.depth = c.depth
WHERE c.sweep_id = $1
GROUP BY b.name, b.ord, c.depth, c.nodes_limit
ORDER BY b.ord, c.depth, c.nodes_limit";

/// The first `$2` mismatching positions of sweep `$1`, with both measurements.
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
WHERE c.sweep_id = $1 AND c.mismatch
ORDER BY b.ord, ss.ord, c.depth, c.nodes_limit, c.position_index
LIMIT $2";

/// Sweep `id`'s cross-checks: counts, per (build, limit), and the first `listed` mismatching
/// positions with both measurements.
pub(crate) async fn summary(db: &impl Reads, id: i64, listed: u32) -> StoreResult<CrossChecks> {
    let by_id = [Value::Int(id)];
    let planned = db
        .row(PLANNED, &by_id)
        .await?
        .map_or(Ok(0), |r| r.count("n"))?;
    let mut out = CrossChecks {
        planned,
        ..CrossChecks::default()
    };
    for r in db.rows(CELLS, &by_id).await? {
        let done = r.count("done")?;
        let mismatches = r.count("mismatches")?;
        out.done += done;
        out.errors += r.count("errors")?;
        out.mismatches += mismatches;
        out.builds.push(BuildChecks {
            build: r.text("name")?,
            limit: r.limit()?,
            done,
            mismatches,
        });
    }
    let listed = db
        .rows(MISMATCHES, &[Value::Int(id), Value::Int(listed.into())])
        .await?;
    out.positions = listed.iter().map(mismatch_of).collect::<StoreResult<_>>()?;
    Ok(out)
}

/// A row of [`MISMATCHES`].
fn mismatch_of(r: &impl Columns) -> StoreResult<Mismatch> {
    let side = |worker: &str, name: &str, nodes: &str, bestmove: &str| -> StoreResult<_> {
        Ok(CheckSide {
            worker_id: r.int(worker)?,
            worker: r.opt_text(name)?.unwrap_or_default(),
            nodes: r.count(nodes)?,
            bestmove: r.text(bestmove)?,
        })
    };
    Ok(Mismatch {
        build: r.text("build")?,
        suite: r.text("suite")?,
        limit: r.limit()?,
        index: r.count("position_index")? as u32,
        position: r.text("position_id")?,
        original: side("o_worker", "o_name", "o_nodes", "o_move")?,
        check: side("c_worker", "c_name", "c_nodes", "c_move")?,
    })
}

/// Per worker of `workers`: the cross-checks it took part in (measuring the original or the
/// check; a check on the same worker counts once) and how many of them mismatched. Over the
/// indexes on either worker column: only these workers' checks are read.
pub(crate) async fn per_worker<B: Backend>(
    db: &B,
    workers: &[i64],
) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
    if workers.is_empty() {
        return Ok(BTreeMap::new());
    }
    let any = B::in_list("$1");
    let sql = format!(
        "SELECT w, count(*) AS n, count(*) FILTER (WHERE mismatch) AS m FROM (
             SELECT worker_id AS w, mismatch FROM cross_checks WHERE worker_id {any}
             UNION ALL
             SELECT original_worker_id AS w, mismatch FROM cross_checks
             WHERE original_worker_id {any} AND original_worker_id <> worker_id
         ) involved GROUP BY w"
    );
    db.reader()
        .rows(&sql, &[Value::Ints(workers)])
        .await?
        .iter()
        .map(|r| Ok((r.int("w")?, (r.count("n")?, r.count("m")?))))
        .collect()
}

/// A check's original result (`r`), found by `results_pkey` from the check job `j`. Read with
/// scalar subqueries (`(SELECT TRUE ...)` is true when it exists, else null), which Postgres
/// runs once per check as a probe; an `EXISTS` or a join it may plan as a hash of all of
/// `results`.
pub(crate) const ORIGINAL: &str = "FROM results r
    WHERE r.build_id = j.build_id AND r.suite_id = j.suite_id
      AND r.position_index = j.first_index AND r.depth = j.depth";

/// Marks takeable the cross-checks of sweep `$1` whose original result is stored (copied from
/// an earlier sweep as it was submitted), with the worker that measured it: index
/// `jobs_checks`, then `results_pkey`.
pub(crate) fn mark_sweep_originals_stored() -> String {
    format!(
        "UPDATE jobs AS j
         SET original_stored = TRUE, original_worker = (SELECT r.worker_id {ORIGINAL})
         WHERE j.sweep_id = $1 AND j.kind = 'check' AND NOT j.original_stored
           AND (SELECT TRUE {ORIGINAL})"
    )
}

/// Marks takeable the cross-checks of sweep `sweep` whose original result was copied from an
/// earlier sweep as it was submitted.
pub(crate) async fn sweep_originals_stored<T: Tx>(tx: &mut T, sweep: i64) -> StoreResult<()> {
    let sql = mark_sweep_originals_stored();
    tx.execute(&sql, &[Value::Int(sweep)]).await?;
    Ok(())
}
