//! Result reuse on SQLite: inside the submit transaction, copy the earlier results the new
//! sweep's jobs take (the rule is [`crate::store::reuse`]) and close the jobs they complete.
//! The write transaction holds the file's lock, so statements go one row at a time (no I/O
//! per row inside a transaction).

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use sqlx::{Sqlite, Transaction};
use sweep_domain::epd::SuitePosition;

use super::{now_ms, Db};
use crate::store::reuse::{copies, per_job, JobSlot, Prior};
use crate::store::StoreResult;

/// Copies into sweep `id` every earlier measured result its builds (`fingerprints`, by
/// build id) can take, and closes the jobs that leaves with nothing to run; returns how many
/// results were copied.
pub(super) async fn take_earlier_results(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    fingerprints: &HashMap<i64, String>,
) -> StoreResult<u64> {
    let wanted: BTreeSet<&str> = fingerprints.values().map(String::as_str).collect();
    let mut priors = Vec::new();
    for fingerprint in wanted {
        let rows = sqlx::query(
            "SELECT b.fingerprint, r.build_id, r.suite_id, r.position_index, r.depth,
                    r.nodes_limit, r.sweep_id, r.bestmove
             FROM builds b JOIN results r ON r.build_id = b.id
             WHERE b.fingerprint = ?1 AND b.sweep_id <> ?2
               AND r.error IS NULL AND r.origin_sweep_id IS NULL",
        )
        .bind(fingerprint)
        .bind(id)
        .fetch_all(&mut **tx)
        .await
        .db()?;
        priors.extend(rows.iter().map(Prior::of));
    }
    if priors.is_empty() {
        return Ok(0);
    }
    let jobs: Vec<JobSlot> = sqlx::query(&format!(
        "SELECT {} FROM jobs WHERE sweep_id = ?1",
        JobSlot::COLUMNS
    ))
    .bind(id)
    .fetch_all(&mut **tx)
    .await
    .db()?
    .iter()
    .map(JobSlot::of)
    .collect();
    let suite_ids: BTreeSet<i64> = jobs
        .iter()
        .map(|j| j.suite_id)
        .chain(priors.iter().map(|p| p.suite_id))
        .collect();
    let mut suites = HashMap::new();
    for suite_id in suite_ids {
        let json: String = sqlx::query_scalar("SELECT positions FROM suites WHERE id = ?1")
            .bind(suite_id)
            .fetch_one(&mut **tx)
            .await
            .db()?;
        let positions: Vec<SuitePosition> =
            serde_json::from_str(&json).context("decoding stored suite positions")?;
        suites.insert(suite_id, positions);
    }
    let rows = copies(&jobs, fingerprints, &suites, &priors)?;
    let mut copied = 0;
    for c in &rows {
        copied += sqlx::query(
            "INSERT OR IGNORE INTO results (build_id, suite_id, position_index, depth, sweep_id,
                                 job_id, attempt, worker_id, position_id, nodes, bestmove,
                                 solved, score_cp, score_mate, reached_depth, time_ms, error,
                                 nodes_limit, counters, origin_sweep_id)
             SELECT ?1, ?2, ?3, r.depth, ?4, ?5, 0, r.worker_id, ?6, r.nodes, r.bestmove, ?7,
                    r.score_cp, r.score_mate, r.reached_depth, r.time_ms, NULL, r.nodes_limit,
                    r.counters, r.sweep_id
             FROM results r
             WHERE r.build_id = ?8 AND r.suite_id = ?9 AND r.position_index = ?10
               AND r.depth = ?11",
        )
        .bind(c.build_id)
        .bind(c.suite_id)
        .bind(c.index)
        .bind(id)
        .bind(c.job_id)
        .bind(&c.position_id)
        .bind(c.solved)
        .bind(c.from_build)
        .bind(c.from_suite)
        .bind(c.from_index)
        .bind(c.depth)
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
    }
    let now = now_ms();
    for (job_id, n) in per_job(&rows) {
        sqlx::query(
            "UPDATE jobs SET state = CASE WHEN ?2 >= count THEN 'done' ELSE state END,
                    updated_at = ?3
             WHERE id = ?1",
        )
        .bind(job_id)
        .bind(n)
        .bind(now)
        .execute(&mut **tx)
        .await
        .db()?;
    }
    Ok(copied)
}
