//! Result reuse on Postgres, in set-based statements inside the submit transaction: read the
//! candidates, copy the earlier results the new sweep's jobs take and the earlier
//! cross-checks its check jobs take, and close the jobs they complete. Which rows those are
//! is decided once for both backends, in [`crate::store::reuse`].

use chrono::{DateTime, Utc};

use sqlx::{Postgres, Transaction};

use crate::store::reuse::{candidates_sql, per_job};
use crate::store::rows::{CopyRow, Prior};
use crate::store::StoreResult;

/// Earlier results copied per statement.
const COPY_CHUNK: usize = 5_000;

/// Binds the new sweep's id and the copies' key columns as `$1`..`$10` of a copying
/// statement (any kind of query: a macro, where a function would need one per kind).
macro_rules! bind_rows {
    ($query:expr, $id:expr, $rows:expr $(,)?) => {{
        let rows: &[CopyRow] = $rows;
        let col = |f: fn(&CopyRow) -> i64| rows.iter().map(f).collect::<Vec<_>>();
        let col32 = |f: fn(&CopyRow) -> i32| rows.iter().map(f).collect::<Vec<_>>();
        $query
            .bind($id)
            .bind(col(|c| c.build_id))
            .bind(col(|c| c.suite_id))
            .bind(col32(|c| c.index))
            .bind(col(|c| c.job_id))
            .bind(
                rows.iter()
                    .map(|c| c.position_id.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(col32(|c| c.depth))
            .bind(col(|c| c.from_build))
            .bind(col(|c| c.from_suite))
            .bind(col32(|c| c.from_index))
    }};
}

/// Copies the earlier results `results` and then the earlier cross-checks `checks` into
/// sweep `id`; returns how many results were copied.
pub(super) async fn copy(
    tx: &mut Transaction<'static, Postgres>,
    id: i64,
    results: &[CopyRow],
    checks: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let copied = copy_results(tx, id, results, now).await?;
    if !checks.is_empty() {
        copy_checks(tx, id, checks, now).await?;
    }
    Ok(copied)
}

/// Copies the earlier results `rows` into sweep `id` ([`COPY_CHUNK`] per statement), and
/// counts them into their jobs in one statement, closing those complete; returns how many
/// were copied.
async fn copy_results(
    tx: &mut Transaction<'static, Postgres>,
    id: i64,
    rows: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    // A few thousand rows per statement: each insert is summed into `result_sums` by a
    // trigger whose work on pairs grows with the rows of one statement.
    let mut copied = 0;
    for chunk in rows.chunks(COPY_CHUNK) {
        copied += copy_chunk(tx, id, chunk).await?;
    }
    let done = per_job(rows);
    sqlx::query(
        "UPDATE jobs SET results_done = t.n,
                state = CASE WHEN t.n >= jobs.count THEN 'done' ELSE jobs.state END,
                updated_at = $3
         FROM UNNEST($1::int8[], $2::int4[]) AS t(id, n) WHERE jobs.id = t.id",
    )
    .bind(done.keys().copied().collect::<Vec<_>>())
    .bind(done.values().copied().collect::<Vec<_>>())
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(copied)
}

/// Copies the earlier results `rows` into sweep `id` in one statement; returns those new.
async fn copy_chunk(
    tx: &mut Transaction<'static, Postgres>,
    id: i64,
    rows: &[CopyRow],
) -> StoreResult<u64> {
    let copied = sqlx::query(
        "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                             worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                             reached_depth, time_ms, error, nodes_limit, counters, origin_sweep_id)
         SELECT t.build, t.suite, t.idx, r.depth, $1, t.job, 0, r.worker_id, t.pid, r.nodes,
                r.bestmove, t.solved, r.score_cp, r.score_mate, r.reached_depth, r.time_ms, NULL,
                r.nodes_limit, r.counters, r.sweep_id
         FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int8[], $6::text[], $7::int4[],
                     $8::int8[], $9::int8[], $10::int4[], $11::bool[])
              AS t(build, suite, idx, job, pid, depth, from_build, from_suite, from_idx, solved)
         JOIN results r ON r.build_id = t.from_build AND r.suite_id = t.from_suite
                       AND r.position_index = t.from_idx AND r.depth = t.depth
         ON CONFLICT DO NOTHING",
    );
    let copied = bind_rows!(copied, id, rows)
        .bind(rows.iter().map(|c| c.solved).collect::<Vec<_>>())
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(copied)
}

/// Copies the earlier cross-checks `rows` into sweep `id` in one statement, each judged
/// against the result just copied (as a check is judged when it is stored), and closes the
/// check jobs that took one.
async fn copy_checks(
    tx: &mut Transaction<'static, Postgres>,
    id: i64,
    rows: &[CopyRow],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let taken: Vec<i64> = bind_rows!(
        sqlx::query_scalar(
            "INSERT INTO cross_checks (build_id, suite_id, position_index, depth, nodes_limit,
                                       sweep_id, job_id, attempt, worker_id, position_id,
                                       nodes, bestmove, reached_depth, time_ms, error,
                                       original_worker_id, mismatch)
             SELECT t.build, t.suite, t.idx, c.depth, c.nodes_limit, $1, t.job, 0,
                    c.worker_id, t.pid, c.nodes, c.bestmove, c.reached_depth, c.time_ms,
                    NULL, r.worker_id, (r.nodes <> c.nodes OR r.bestmove <> c.bestmove)
             FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int8[], $6::text[],
                         $7::int4[], $8::int8[], $9::int8[], $10::int4[])
                  AS t(build, suite, idx, job, pid, depth, from_build, from_suite, from_idx)
             JOIN cross_checks c ON c.build_id = t.from_build AND c.suite_id = t.from_suite
                                AND c.position_index = t.from_idx AND c.depth = t.depth
             JOIN results r ON r.build_id = t.build AND r.suite_id = t.suite
                           AND r.position_index = t.idx AND r.depth = t.depth
             ON CONFLICT DO NOTHING
             RETURNING job_id",
        ),
        id,
        rows,
    )
    .fetch_all(&mut **tx)
    .await?;
    sqlx::query("UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = ANY($1)")
        .bind(&taken)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Earlier rows of `query` (`RESULT_CANDIDATES` or `CHECK_CANDIDATES`) for `wanted`, in
/// one statement (index `builds_fingerprint`, then their rows by primary-key prefix).
pub(super) async fn candidates(
    tx: &mut Transaction<'static, Postgres>,
    query: &str,
    wanted: &[&str],
    id: i64,
) -> StoreResult<Vec<Prior>> {
    sqlx::query(&candidates_sql(query, "= ANY($1)", "$2"))
        .bind(wanted)
        .bind(id)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(Prior::of)
        .collect()
}
