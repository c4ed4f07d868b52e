//! Result reuse on SQLite, a row at a time inside the submit transaction (which holds the
//! file's lock, so no I/O per row): read the candidates, copy the earlier results the new
//! sweep's jobs take and the earlier cross-checks its check jobs take, and close the jobs
//! they complete. Which rows those are is decided once for both backends, in
//! [`crate::store::reuse`].

use chrono::{DateTime, Utc};
use sqlx::{Sqlite, Transaction};

use crate::store::reuse::{candidates_sql, per_job};
use crate::store::rows::{CopyRow, Prior};
use crate::store::sql::{Tx, Value};
use crate::store::StoreResult;

/// The new sweep `id`, a copy's new key (`$1`..`$6` of a copying statement), a seventh
/// value, and the copied row's key (`$8`..`$11`).
fn copy_values<'a>(id: i64, c: &'a CopyRow, seventh: Value<'a>) -> [Value<'a>; 11] {
    [
        Value::Int(c.build_id),
        Value::Int(c.suite_id),
        Value::Int(c.index.into()),
        Value::Int(id),
        Value::Int(c.job_id),
        Value::Text(&c.position_id),
        seventh,
        Value::Int(c.from_build),
        Value::Int(c.from_suite),
        Value::Int(c.from_index.into()),
        Value::Int(c.depth.into()),
    ]
}

/// Copies the earlier results `results` and then the earlier cross-checks `checks` into
/// sweep `id`; returns how many results were copied.
pub(super) async fn copy(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    results: &[CopyRow],
    checks: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let copied = copy_results(tx, id, results, now).await?;
    copy_checks(tx, id, checks, now).await?;
    Ok(copied)
}

/// Copies the earlier results `rows` into sweep `id`, and counts them into their jobs,
/// closing those complete; returns how many were copied.
async fn copy_results(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    rows: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let mut copied = 0;
    for c in rows {
        copied += tx
            .execute(
                "INSERT OR IGNORE INTO results (build_id, suite_id, position_index, depth,
                                 sweep_id, job_id, attempt, worker_id, position_id, nodes,
                                 bestmove, solved, score_cp, score_mate, reached_depth,
                                 time_ms, error, nodes_limit, counters, origin_sweep_id)
                 SELECT $1, $2, $3, r.depth, $4, $5, 0, r.worker_id, $6, r.nodes, r.bestmove,
                        $7, r.score_cp, r.score_mate, r.reached_depth, r.time_ms, NULL,
                        r.nodes_limit, r.counters, r.sweep_id
                 FROM results r
                 WHERE r.build_id = $8 AND r.suite_id = $9 AND r.position_index = $10
                   AND r.depth = $11",
                &copy_values(id, c, Value::Flag(c.solved)),
            )
            .await?;
    }
    for (job_id, n) in per_job(rows) {
        tx.execute(
            "UPDATE jobs SET results_done = $2,
                    state = CASE WHEN $2 >= count THEN 'done' ELSE state END,
                    updated_at = $3
             WHERE id = $1",
            &[Value::Int(job_id), Value::Int(n.into()), Value::Time(now)],
        )
        .await?;
    }
    Ok(copied)
}

/// Copies the earlier cross-checks `rows` into sweep `id`, each judged against the result
/// just copied (as a check is judged when it is stored), and closes the check jobs that
/// took one.
async fn copy_checks(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    rows: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    for c in rows {
        let taken = tx
            .execute(
                "INSERT OR IGNORE INTO cross_checks (build_id, suite_id, position_index, depth,
                                 nodes_limit, sweep_id, job_id, attempt, worker_id,
                                 position_id, nodes, bestmove, reached_depth, time_ms, error,
                                 created_at, original_worker_id, mismatch)
                 SELECT $1, $2, $3, c.depth, c.nodes_limit, $4, $5, 0, c.worker_id, $6, c.nodes,
                        c.bestmove, c.reached_depth, c.time_ms, NULL, $7, r.worker_id,
                        (r.nodes <> c.nodes OR r.bestmove <> c.bestmove)
                 FROM cross_checks c
                 JOIN results r ON r.build_id = $1 AND r.suite_id = $2 AND r.position_index = $3
                               AND r.depth = c.depth
                 WHERE c.build_id = $8 AND c.suite_id = $9 AND c.position_index = $10
                   AND c.depth = $11",
                &copy_values(id, c, Value::Time(now)),
            )
            .await?;
        if taken > 0 {
            tx.execute(
                "UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = $1",
                &[Value::Int(c.job_id), Value::Time(now)],
            )
            .await?;
        }
    }
    Ok(())
}

/// Earlier rows of `query` (`RESULT_CANDIDATES` or `CHECK_CANDIDATES`) for `wanted`, one
/// fingerprint at a time (index `builds_fingerprint`).
pub(super) async fn candidates(
    tx: &mut Transaction<'static, Sqlite>,
    query: &str,
    wanted: &[&str],
    id: i64,
) -> StoreResult<Vec<Prior>> {
    let sql = candidates_sql(query, "= $1", "$2");
    let mut out = Vec::new();
    for fingerprint in wanted {
        for row in tx
            .rows(&sql, &[Value::Text(fingerprint), Value::Int(id)])
            .await?
        {
            out.push(Prior::of(&row)?);
        }
    }
    Ok(out)
}
