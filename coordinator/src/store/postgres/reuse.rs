//! Result reuse on Postgres: inside the submit transaction, copy the earlier results the new
//! sweep's jobs take (the rule is [`crate::store::reuse`]) and close the jobs they complete.

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use sqlx::{Postgres, Row, Transaction};
use sweep_domain::epd::SuitePosition;

use crate::store::reuse::{copies, per_job, JobSlot, Prior};
use crate::store::StoreResult;

/// Copies into sweep `id` every earlier measured result its builds (`fingerprints`, by
/// build id) can take, and closes the jobs that leaves with nothing to run; returns how many
/// results were copied.
pub(super) async fn take_earlier_results(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    fingerprints: &HashMap<i64, String>,
) -> StoreResult<u64> {
    if fingerprints.is_empty() {
        return Ok(0);
    }
    let wanted: Vec<&str> = fingerprints
        .values()
        .map(String::as_str)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Builds of earlier sweeps with those fingerprints (index `builds_fingerprint`), then
    // their results by primary-key prefix.
    let priors: Vec<Prior> = sqlx::query(
        "SELECT b.fingerprint, r.build_id, r.suite_id, r.position_index, r.depth, r.nodes_limit,
                r.sweep_id, r.bestmove
         FROM builds b JOIN results r ON r.build_id = b.id
         WHERE b.fingerprint = ANY($1) AND b.sweep_id <> $2
           AND r.error IS NULL AND r.origin_sweep_id IS NULL",
    )
    .bind(&wanted)
    .bind(id)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(Prior::of)
    .collect();
    if priors.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<JobSlot> = sqlx::query(&format!(
        "SELECT {} FROM jobs WHERE sweep_id = $1",
        JobSlot::COLUMNS
    ))
    .bind(id)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(JobSlot::of)
    .collect();
    let suite_ids: Vec<i64> = jobs
        .iter()
        .map(|j| j.suite_id)
        .chain(priors.iter().map(|p| p.suite_id))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut suites = HashMap::new();
    for r in sqlx::query("SELECT id, positions FROM suites WHERE id = ANY($1)")
        .bind(&suite_ids)
        .fetch_all(&mut **tx)
        .await?
    {
        let positions: Vec<SuitePosition> = serde_json::from_value(r.get("positions"))
            .context("decoding stored suite positions")?;
        suites.insert(r.get::<i64, _>("id"), positions);
    }
    let rows = copies(&jobs, fingerprints, &suites, &priors)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let col = |f: fn(&crate::store::reuse::CopyRow) -> i64| rows.iter().map(f).collect::<Vec<_>>();
    let col32 =
        |f: fn(&crate::store::reuse::CopyRow) -> i32| rows.iter().map(f).collect::<Vec<_>>();
    let copied = sqlx::query(
        "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                             worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                             reached_depth, time_ms, error, nodes_limit, counters, origin_sweep_id)
         SELECT t.build, t.suite, t.idx, r.depth, $1, t.job, 0, r.worker_id, t.pid, r.nodes,
                r.bestmove, t.solved, r.score_cp, r.score_mate, r.reached_depth, r.time_ms, NULL,
                r.nodes_limit, r.counters, r.sweep_id
         FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int8[], $6::text[], $7::bool[],
                     $8::int4[], $9::int8[], $10::int8[], $11::int4[])
              AS t(build, suite, idx, job, pid, solved, depth, from_build, from_suite, from_idx)
         JOIN results r ON r.build_id = t.from_build AND r.suite_id = t.from_suite
                       AND r.position_index = t.from_idx AND r.depth = t.depth
         ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(col(|c| c.build_id))
    .bind(col(|c| c.suite_id))
    .bind(col32(|c| c.index))
    .bind(col(|c| c.job_id))
    .bind(
        rows.iter()
            .map(|c| c.position_id.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(rows.iter().map(|c| c.solved).collect::<Vec<_>>())
    .bind(col32(|c| c.depth))
    .bind(col(|c| c.from_build))
    .bind(col(|c| c.from_suite))
    .bind(col32(|c| c.from_index))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    let done = per_job(&rows);
    sqlx::query(
        "UPDATE jobs SET results_done = t.n,
                state = CASE WHEN t.n >= jobs.count THEN 'done' ELSE jobs.state END,
                updated_at = now()
         FROM UNNEST($1::int8[], $2::int4[]) AS t(id, n) WHERE jobs.id = t.id",
    )
    .bind(done.keys().copied().collect::<Vec<_>>())
    .bind(done.values().copied().collect::<Vec<_>>())
    .execute(&mut **tx)
    .await?;
    Ok(copied)
}
