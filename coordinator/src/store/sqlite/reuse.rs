//! Result reuse on SQLite: inside the submit transaction, copy the earlier results the new
//! sweep's jobs take (the rule is [`crate::store::reuse`]), and the earlier cross-checks of
//! those positions its check jobs take, and close the jobs they complete. The write
//! transaction holds the file's lock, so statements go one row at a time (no I/O per row
//! inside a transaction).

use std::collections::{BTreeSet, HashMap};

use anyhow::Context;
use sqlx::{Sqlite, Transaction};
use sweep_domain::epd::SuitePosition;

use super::Db;
use crate::store::reuse::{
    candidates_sql, checks_of_copied, copies, per_job, suite_ids, JobSlot, Prior, CHECK_CANDIDATES,
    RESULT_CANDIDATES,
};
use crate::store::StoreResult;

/// Copies into sweep `id` every earlier measured result its builds (`fingerprints`, by
/// build id) can take, and the earlier cross-checks of those positions, and closes the jobs
/// that leaves with nothing to run; returns how many results were copied.
pub(super) async fn take_earlier_results(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    fingerprints: &HashMap<i64, String>,
    now: i64,
) -> StoreResult<u64> {
    let wanted: BTreeSet<&str> = fingerprints.values().map(String::as_str).collect();
    let priors = candidates(tx, RESULT_CANDIDATES, &wanted, id).await?;
    if priors.is_empty() {
        return Ok(0);
    }
    let check_priors = candidates(tx, CHECK_CANDIDATES, &wanted, id).await?;
    let jobs = slots(tx, id, "work").await?;
    let checks = slots(tx, id, "check").await?;
    let mut suites = HashMap::new();
    for suite_id in suite_ids(&jobs, &[&priors, &check_priors]) {
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

    let check_rows = copies(
        &checks_of_copied(&checks, &rows),
        fingerprints,
        &suites,
        &check_priors,
    )?;
    for c in &check_rows {
        // Judged against the result just copied, as a check is judged when it is stored.
        let taken = sqlx::query(
            "INSERT OR IGNORE INTO cross_checks (build_id, suite_id, position_index, depth,
                                 nodes_limit, sweep_id, job_id, attempt, worker_id,
                                 position_id, nodes, bestmove, reached_depth, time_ms, error,
                                 created_at, original_worker_id, mismatch)
             SELECT ?1, ?2, ?3, c.depth, c.nodes_limit, ?4, ?5, 0, c.worker_id, ?6, c.nodes,
                    c.bestmove, c.reached_depth, c.time_ms, NULL, ?7, r.worker_id,
                    (r.nodes <> c.nodes OR r.bestmove <> c.bestmove)
             FROM cross_checks c
             JOIN results r ON r.build_id = ?1 AND r.suite_id = ?2 AND r.position_index = ?3
                           AND r.depth = c.depth
             WHERE c.build_id = ?8 AND c.suite_id = ?9 AND c.position_index = ?10
               AND c.depth = ?11",
        )
        .bind(c.build_id)
        .bind(c.suite_id)
        .bind(c.index)
        .bind(id)
        .bind(c.job_id)
        .bind(&c.position_id)
        .bind(now)
        .bind(c.from_build)
        .bind(c.from_suite)
        .bind(c.from_index)
        .bind(c.depth)
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
        if taken > 0 {
            sqlx::query("UPDATE jobs SET state = 'done', updated_at = ?2 WHERE id = ?1")
                .bind(c.job_id)
                .bind(now)
                .execute(&mut **tx)
                .await
                .db()?;
        }
    }
    Ok(copied)
}

/// Earlier rows of `query` ([`RESULT_CANDIDATES`] or [`CHECK_CANDIDATES`]) for `wanted`,
/// one fingerprint at a time (index `builds_fingerprint`).
async fn candidates(
    tx: &mut Transaction<'static, Sqlite>,
    query: &str,
    wanted: &BTreeSet<&str>,
    id: i64,
) -> StoreResult<Vec<Prior>> {
    let sql = candidates_sql(query, "= ?1", "?2");
    let mut out = Vec::new();
    for fingerprint in wanted {
        let rows = sqlx::query(&sql)
            .bind(*fingerprint)
            .bind(id)
            .fetch_all(&mut **tx)
            .await
            .db()?;
        out.extend(rows.iter().map(Prior::of));
    }
    Ok(out)
}

/// The sweep's jobs of one kind.
async fn slots(
    tx: &mut Transaction<'static, Sqlite>,
    id: i64,
    kind: &str,
) -> StoreResult<Vec<JobSlot>> {
    Ok(sqlx::query(&format!(
        "{} WHERE sweep_id = ?1 AND kind = ?2",
        JobSlot::SELECT
    ))
    .bind(id)
    .bind(kind)
    .fetch_all(&mut **tx)
    .await
    .db()?
    .iter()
    .map(JobSlot::of)
    .collect())
}
