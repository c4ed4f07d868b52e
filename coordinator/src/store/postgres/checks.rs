//! Cross-checks on Postgres (see [`sweep_domain::crosscheck`]): leasing them once their
//! originals exist, storing their measurements apart from `results`, and reading what they
//! found. Planning them at submission is shared (`store/sweeps.rs`).

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

use super::leases::Leased;
use super::{secs, statements};
use crate::store::batch::{Checked, Report};
use crate::store::job::JobRow;
use crate::store::StoreResult;

/// Leases up to `max` cross-checks to `worker_id` (see [`statements::LEASE_CHECKS`]), and
/// closes the picked ones whose original is an error: nothing to compare, and the sweep must
/// not wait for them.
pub(super) async fn pick(
    tx: &mut Transaction<'_, Postgres>,
    worker_id: i64,
    max: u32,
    lease: Duration,
    now: DateTime<Utc>,
) -> StoreResult<Vec<Leased>> {
    let picked: Vec<(i64, bool)> = sqlx::query_as(statements::LEASE_CHECKS)
        .bind(worker_id)
        .bind(i64::from(max))
        .bind(secs(lease))
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
    let moot: Vec<i64> = picked.iter().filter(|p| p.1).map(|p| p.0).collect();
    if !moot.is_empty() {
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = ANY($1)")
            .bind(&moot)
            .bind(now)
            .execute(&mut **tx)
            .await?;
    }
    let ids: Vec<i64> = picked.iter().filter(|p| !p.1).map(|p| p.0).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: Vec<Leased> = sqlx::query_as(statements::ASSIGN)
        .bind(&ids)
        .bind(vec![worker_id; ids.len()])
        .bind(vec![secs(lease); ids.len()])
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// The measurements of cross-check jobs, as the columns of one multi-row insert into
/// `cross_checks`.
#[derive(Default)]
pub(super) struct CheckColumns {
    build: Vec<i64>,
    suite: Vec<i64>,
    idx: Vec<i32>,
    depth: Vec<i32>,
    nodes_limit: Vec<i64>,
    sweep: Vec<i64>,
    job: Vec<i64>,
    attempt: Vec<i32>,
    pid: Vec<String>,
    nodes: Vec<i64>,
    bm: Vec<String>,
    reached: Vec<i32>,
    ms: Vec<i64>,
    err: Vec<Option<String>>,
}

impl CheckColumns {
    /// Adds one check job's checked measurements (errors included: a failed check is
    /// recorded, not retried, and never a mismatch).
    pub fn push(&mut self, job: &JobRow, report: &Report<'_>, rows: &[Checked]) {
        for c in rows {
            self.build.push(job.build_id);
            self.suite.push(job.suite_id);
            self.idx.push(c.index);
            self.depth.push(job.depth);
            self.nodes_limit.push(job.nodes_limit);
            self.sweep.push(job.sweep_id);
            self.job.push(report.job_id);
            self.attempt.push(report.attempt);
            self.pid.push(c.position_id.clone());
            self.nodes.push(c.nodes);
            self.bm.push(c.bestmove.clone());
            self.reached.push(c.reached_depth);
            self.ms.push(c.time_ms);
            self.err.push(c.error.clone());
        }
    }

    /// Inserts every row, ignoring positions already checked; returns the job of each new row.
    pub async fn insert(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        worker_id: i64,
    ) -> StoreResult<Vec<i64>> {
        if self.job.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_scalar(
            "INSERT INTO cross_checks (build_id, suite_id, position_index, depth, nodes_limit,
                                       sweep_id, job_id, attempt, worker_id, position_id, nodes,
                                       bestmove, reached_depth, time_ms, error,
                                       original_worker_id, mismatch)
             SELECT t.build, t.suite, t.idx, t.depth, t.nl, t.sweep, t.job, t.attempt, $1, t.pid,
                    t.nodes, t.bm, t.rd, t.ms, t.err, r.worker_id,
                    COALESCE(r.error IS NULL AND t.err IS NULL
                             AND (r.nodes <> t.nodes OR r.bestmove <> t.bm), FALSE)
             FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int8[], $7::int8[],
                         $8::int8[], $9::int4[], $10::text[], $11::int8[], $12::text[],
                         $13::int4[], $14::int8[], $15::text[])
                  AS t(build, suite, idx, depth, nl, sweep, job, attempt, pid, nodes, bm, rd, ms, err)
             LEFT JOIN results r ON r.build_id = t.build AND r.suite_id = t.suite
                                AND r.position_index = t.idx AND r.depth = t.depth
             ON CONFLICT DO NOTHING
             RETURNING job_id",
        )
        .bind(worker_id)
        .bind(&self.build)
        .bind(&self.suite)
        .bind(&self.idx)
        .bind(&self.depth)
        .bind(&self.nodes_limit)
        .bind(&self.sweep)
        .bind(&self.job)
        .bind(&self.attempt)
        .bind(&self.pid)
        .bind(&self.nodes)
        .bind(&self.bm)
        .bind(&self.reached)
        .bind(&self.ms)
        .bind(&self.err)
        .fetch_all(&mut **tx)
        .await?)
    }
}

/// Per worker of `workers`: the cross-checks it took part in (measuring the original or the
/// check; a check on the same worker counts once) and how many of them mismatched.
pub(super) async fn per_worker(
    pool: &PgPool,
    workers: &[i64],
) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
    if workers.is_empty() {
        return Ok(BTreeMap::new());
    }
    // Over the indexes on either worker column: only these workers' checks are read.
    let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT w, count(*), count(*) FILTER (WHERE mismatch) FROM (
             SELECT worker_id AS w, mismatch FROM cross_checks WHERE worker_id = ANY($1)
             UNION ALL
             SELECT original_worker_id, mismatch FROM cross_checks
             WHERE original_worker_id = ANY($1) AND original_worker_id <> worker_id
         ) involved GROUP BY w",
    )
    .bind(workers)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(w, n, m)| (w, (n as u64, m as u64)))
        .collect())
}
