//! Result reuse on Postgres: inside the submit transaction, copy the earlier results the new
//! sweep's jobs take (the rule is [`crate::store::reuse`]), and the earlier cross-checks of
//! those positions its check jobs take, and close the jobs they complete.

use chrono::{DateTime, Utc};
use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use sqlx::{Postgres, Row, Transaction};
use sweep_domain::epd::SuitePosition;

use crate::store::reuse::{
    candidates_sql, checks_of_copied, copies, per_job, suite_ids, CopyRow, JobSlot, Prior,
    CHECK_CANDIDATES, RESULT_CANDIDATES,
};
use crate::store::StoreResult;

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

/// Copies into sweep `id` every earlier measured result its builds (`fingerprints`, by
/// build id) can take, and the earlier cross-checks of those positions, and closes the jobs
/// that leaves with nothing to run; returns how many results were copied.
pub(super) async fn take_earlier_results(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    fingerprints: &HashMap<i64, String>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let wanted: Vec<&str> = fingerprints
        .values()
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if wanted.is_empty() {
        return Ok(0);
    }
    // Builds of earlier sweeps with those fingerprints (index `builds_fingerprint`), then
    // their rows by primary-key prefix.
    let priors = candidates(tx, RESULT_CANDIDATES, &wanted, id).await?;
    if priors.is_empty() {
        return Ok(0);
    }
    let check_priors = candidates(tx, CHECK_CANDIDATES, &wanted, id).await?;
    let jobs = slots(tx, id, "work").await?;
    let checks = slots(tx, id, "check").await?;
    let suites = suites(tx, &suite_ids(&jobs, &[&priors, &check_priors])).await?;
    let rows = copies(&jobs, fingerprints, &suites, &priors)?;
    if rows.is_empty() {
        return Ok(0);
    }
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
    let copied = bind_rows!(copied, id, &rows)
        .bind(rows.iter().map(|c| c.solved).collect::<Vec<_>>())
        .execute(&mut **tx)
        .await?
        .rows_affected();
    let done = per_job(&rows);
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

    let check_rows = copies(
        &checks_of_copied(&checks, &rows),
        fingerprints,
        &suites,
        &check_priors,
    )?;
    if !check_rows.is_empty() {
        // Judged against the result just copied, as a check is judged when it is stored.
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
            &check_rows,
        )
        .fetch_all(&mut **tx)
        .await?;
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = ANY($1)")
            .bind(&taken)
            .bind(now)
            .execute(&mut **tx)
            .await?;
    }
    Ok(copied)
}

/// Earlier rows of `query` ([`RESULT_CANDIDATES`] or [`CHECK_CANDIDATES`]) for `wanted`.
async fn candidates(
    tx: &mut Transaction<'_, Postgres>,
    query: &str,
    wanted: &[&str],
    id: i64,
) -> StoreResult<Vec<Prior>> {
    Ok(sqlx::query(&candidates_sql(query, "= ANY($1)", "$2"))
        .bind(wanted)
        .bind(id)
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(Prior::of)
        .collect())
}

/// The sweep's jobs of one kind.
async fn slots(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    kind: &str,
) -> StoreResult<Vec<JobSlot>> {
    Ok(sqlx::query(&format!(
        "{} WHERE sweep_id = $1 AND kind = $2",
        JobSlot::SELECT
    ))
    .bind(id)
    .bind(kind)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(JobSlot::of)
    .collect())
}

/// The positions of the suite versions `ids`.
async fn suites(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
) -> StoreResult<HashMap<i64, Vec<SuitePosition>>> {
    let mut out = HashMap::new();
    for r in sqlx::query("SELECT id, positions FROM suites WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(&mut **tx)
        .await?
    {
        let positions: Vec<SuitePosition> = serde_json::from_value(r.get("positions"))
            .context("decoding stored suite positions")?;
        out.insert(r.get::<i64, _>("id"), positions);
    }
    Ok(out)
}
