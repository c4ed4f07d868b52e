//! What workers send back: result batches (with retries of failing positions) and build
//! failures (failing a variant only once enough workers failed it). The rules themselves
//! live in [`crate::store::retry`].

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};
use sweep_domain::wire::{BatchAck, BuildFailure};

use super::checks::CheckColumns;
use super::leases::mark_seen;
use super::{jobs_for_update, secs, statements, PgStore};
use crate::store::batch::{check_batch, Checked, Report};
use crate::store::job::{check_lease, JobRow};
use crate::store::retry::{failed_build_error, final_failures};
use crate::store::{StoreError, StoreResult};

/// Stores the reports of one upload in one transaction, set-based: the jobs are locked with
/// one statement, every report is checked (a lost lease is that report's `LeaseLost` or
/// `NotFound` and stores nothing; invalid input fails the whole call and stores nothing),
/// the good results of all reports go in with one multi-row insert, and the jobs' new states
/// with one update. Failing positions (rare) take the per-job retry path. One result per
/// report, in request order.
pub(super) async fn report_jobs(
    store: &PgStore,
    worker_id: i64,
    reports: &[Report<'_>],
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<StoreResult<BatchAck>>> {
    let mut tx = store.pool.begin().await?;
    let ids: Vec<i64> = reports.iter().map(|r| r.job_id).collect();
    let jobs = jobs_for_update(&mut tx, &ids).await?;
    let mut held = Vec::with_capacity(reports.len());
    let mut rows = ResultColumns::default();
    let mut checks = CheckColumns::default();
    for report in reports {
        let job = match jobs.get(&report.job_id) {
            None => Err(StoreError::NotFound(format!("job {}", report.job_id))),
            Some(locked) => {
                check_lease(report.job_id, &locked.job, worker_id, report.attempt).map(|()| locked)
            }
        };
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                held.push(Err(e));
                continue;
            }
        };
        let suite = store.suite_positions(job.job.suite_id).await?;
        let checked = check_batch(&job.job, &suite, report)?;
        if job.job.check {
            // A cross-check's measurements, errors included, go to `cross_checks` only.
            checks.push(&job.job, report, &checked);
            held.push(Ok((job, Vec::new())));
            continue;
        }
        let (failed, ok): (Vec<Checked>, Vec<Checked>) =
            checked.into_iter().partition(|c| c.error.is_some());
        rows.push(&job.job, report, &ok);
        held.push(Ok((job, failed)));
    }
    let mut accepted: HashMap<i64, u32> = HashMap::new();
    let stored = rows.insert(&mut tx, worker_id).await?;
    for job_id in stored
        .into_iter()
        .chain(checks.insert(&mut tx, worker_id).await?)
    {
        *accepted.entry(job_id).or_default() += 1;
    }
    let mut acks = Vec::with_capacity(reports.len());
    // (job, results added, new state), one entry per job of the upload.
    let mut updates: Vec<(i64, i32, Option<&str>)> = Vec::new();
    for (report, held) in reports.iter().zip(held) {
        let (locked, failed) = match held {
            Ok(h) => h,
            Err(e) => {
                acks.push(Err(e));
                continue;
            }
        };
        let job = &locked.job;
        // A job reported twice in one upload counts its new rows once.
        let stored = accepted.remove(&report.job_id).unwrap_or(0);
        let mut added = stored;
        let mut n = stored;
        if !failed.is_empty() {
            n += record_failures(&mut tx, job, report, &failed).await?;
            let failures = failures_of(&mut tx, job, &failed).await?;
            let finals = final_failures(&failed, &failures, max_attempts);
            let mut final_rows = ResultColumns::default();
            final_rows.push(job, report, &finals);
            added += final_rows.insert(&mut tx, worker_id).await?.len() as u32;
        }
        let earlier = updates
            .iter()
            .filter(|(id, _, _)| *id == report.job_id)
            .map(|(_, a, _)| *a)
            .sum::<i32>();
        let has = locked.results_done + earlier + added as i32;
        let state = job.state_after(report.finished, i64::from(has));
        updates.push((report.job_id, added as i32, state));
        acks.push(Ok(BatchAck {
            accepted: n,
            duplicates: (report.results.len() as u32).saturating_sub(n),
            cancelled: job.cancelled,
        }));
    }
    // One entry per job: an UPDATE joined to a row twice would apply only one of them.
    let mut merged: BTreeMap<i64, (i32, Option<&str>)> = BTreeMap::new();
    for (id, added, state) in updates {
        let entry = merged.entry(id).or_insert((0, None));
        entry.0 += added;
        entry.1 = state;
    }
    if !merged.is_empty() {
        let ids: Vec<i64> = merged.keys().copied().collect();
        let added: Vec<i32> = merged.values().map(|u| u.0).collect();
        let states: Vec<Option<&str>> = merged.values().map(|u| u.1).collect();
        sqlx::query(statements::SET_STATES)
            .bind(&ids)
            .bind(&added)
            .bind(&states)
            .bind(secs(lease))
            .bind(store.clock.now())
            .execute(&mut *tx)
            .await?;
    }
    mark_seen(store, &mut tx, worker_id, lease).await?;
    tx.commit().await?;
    Ok(acks)
}

/// Results of several jobs as the columns of one multi-row insert.
#[derive(Default)]
struct ResultColumns {
    build: Vec<i64>,
    suite: Vec<i64>,
    idx: Vec<i32>,
    depth: Vec<i32>,
    sweep: Vec<i64>,
    job: Vec<i64>,
    attempt: Vec<i32>,
    pid: Vec<String>,
    nodes: Vec<i64>,
    bm: Vec<String>,
    solved: Vec<bool>,
    cp: Vec<Option<i32>>,
    mate: Vec<Option<i32>>,
    reached: Vec<i32>,
    ms: Vec<i64>,
    err: Vec<Option<String>>,
    nodes_limit: Vec<i64>,
    counters: Vec<Option<String>>,
}

impl ResultColumns {
    /// Adds one job's checked results.
    fn push(&mut self, job: &JobRow, report: &Report<'_>, rows: &[Checked]) {
        for c in rows {
            self.build.push(job.build_id);
            self.suite.push(job.suite_id);
            self.idx.push(c.index);
            self.depth.push(job.depth);
            self.sweep.push(job.sweep_id);
            self.job.push(report.job_id);
            self.attempt.push(report.attempt);
            self.pid.push(c.position_id.clone());
            self.nodes.push(c.nodes);
            self.bm.push(c.bestmove.clone());
            self.solved.push(c.solved);
            self.cp.push(c.score_cp);
            self.mate.push(c.score_mate);
            self.reached.push(c.reached_depth);
            self.ms.push(c.time_ms);
            self.err.push(c.error.clone());
            self.nodes_limit.push(job.nodes_limit);
            self.counters.push(c.counters.clone());
        }
    }

    /// Inserts every row, ignoring positions that already have a result; returns the job of
    /// each row that was new.
    async fn insert(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        worker_id: i64,
    ) -> StoreResult<Vec<i64>> {
        if self.job.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_scalar(statements::INSERT_RESULTS)
            .bind(worker_id)
            .bind(&self.build)
            .bind(&self.suite)
            .bind(&self.idx)
            .bind(&self.depth)
            .bind(&self.sweep)
            .bind(&self.job)
            .bind(&self.attempt)
            .bind(&self.pid)
            .bind(&self.nodes)
            .bind(&self.bm)
            .bind(&self.solved)
            .bind(&self.cp)
            .bind(&self.mate)
            .bind(&self.reached)
            .bind(&self.ms)
            .bind(&self.err)
            .bind(&self.nodes_limit)
            .bind(&self.counters)
            .fetch_all(&mut **tx)
            .await?)
    }
}

/// Records each failing position as one failed try of this (job, attempt); a re-sent batch
/// and a position that already has its result add nothing. Returns how many were new.
async fn record_failures(
    tx: &mut Transaction<'_, Postgres>,
    job: &JobRow,
    report: &Report<'_>,
    failed: &[Checked],
) -> StoreResult<u32> {
    let idx: Vec<i32> = failed.iter().map(|c| c.index).collect();
    let pid: Vec<&str> = failed.iter().map(|c| c.position_id.as_str()).collect();
    let err: Vec<&str> = failed
        .iter()
        .map(|c| c.error.as_deref().unwrap_or_default())
        .collect();
    let n = sqlx::query(
        "INSERT INTO position_failures (build_id, suite_id, position_index, depth, position_id,
                                        job_id, attempt, worker_id, error)
         SELECT $1, $2, t.idx, $3, t.pid, $4, $5, $6, t.err
         FROM UNNEST($7::int4[], $8::text[], $9::text[]) AS t(idx, pid, err)
         WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = $1 AND r.suite_id = $2
                             AND r.position_index = t.idx AND r.depth = $3)
         ON CONFLICT (job_id, attempt, position_index) DO NOTHING",
    )
    .bind(job.build_id)
    .bind(job.suite_id)
    .bind(job.depth)
    .bind(report.job_id)
    .bind(report.attempt)
    .bind(report.worker_id)
    .bind(&idx)
    .bind(&pid)
    .bind(&err)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n as u32)
}

/// Every recorded failure reason of the given positions, oldest first, by position.
async fn failures_of(
    tx: &mut Transaction<'_, Postgres>,
    job: &JobRow,
    failed: &[Checked],
) -> StoreResult<BTreeMap<i32, Vec<String>>> {
    let idx: Vec<i32> = failed.iter().map(|c| c.index).collect();
    let rows: Vec<(i32, String)> = sqlx::query_as(
        "SELECT position_index, error FROM position_failures
         WHERE build_id = $1 AND suite_id = $2 AND depth = $3 AND position_index = ANY($4)
         ORDER BY id",
    )
    .bind(job.build_id)
    .bind(job.suite_id)
    .bind(job.depth)
    .bind(&idx)
    .fetch_all(&mut **tx)
    .await?;
    let mut by_position: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for (i, error) in rows {
        by_position.entry(i).or_default().push(error);
    }
    Ok(by_position)
}

/// Records that the job's build failed on this worker. The build (and its open jobs) fail
/// once `min(max_attempts, live workers)` distinct workers failed it; until then the job goes
/// back to the queue for a worker that has not tried.
pub(super) async fn build_failed(
    pool: &PgPool,
    now: DateTime<Utc>,
    job_id: i64,
    failure: &BuildFailure,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let mut tx = pool.begin().await?;
    let mut jobs = jobs_for_update(&mut tx, &[job_id]).await?;
    let job = jobs
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?
        .job;
    check_lease(job_id, &job, failure.worker_id, failure.attempt)?;
    // Failures of one build on two workers arrive through different jobs; the build's row lock
    // makes the second count see the first, or neither would reach the threshold.
    sqlx::query("SELECT 1 FROM builds WHERE id = $1 FOR UPDATE")
        .bind(job.build_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE workers SET last_seen_at = $2 WHERE id = $1")
        .bind(failure.worker_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    // clock_timestamp(), not the default now() (when the transaction began): taken under the
    // build's lock, it orders the failures as they were counted, so "last output" is the
    // latest one when leasing fails the build later.
    sqlx::query(
        "INSERT INTO build_failures (build_id, worker_id, output, created_at)
         VALUES ($1, $2, $3, clock_timestamp())
         ON CONFLICT (build_id, worker_id) DO NOTHING",
    )
    .bind(job.build_id)
    .bind(failure.worker_id)
    .bind(&failure.output)
    .execute(&mut *tx)
    .await?;
    let failed_workers: i64 =
        sqlx::query_scalar("SELECT count(*) FROM build_failures WHERE build_id = $1")
            .bind(job.build_id)
            .fetch_one(&mut *tx)
            .await?;
    // Only workers that could take the build count: for a binary-only engine, those that
    // have its binary.
    let live_workers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM workers w
         JOIN builds lb ON lb.id = $2 JOIN sweeps ls ON ls.id = lb.sweep_id
         WHERE w.last_seen_at > $3 - make_interval(secs => $1)
           AND (ls.source_sha256 IS NOT NULL
                OR EXISTS (SELECT 1 FROM worker_engines we
                           WHERE we.worker_id = w.id AND we.engine = ls.engine))",
    )
    .bind(secs(lease))
    .bind(job.build_id)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(error) =
        failed_build_error(failed_workers, max_attempts, live_workers, &failure.output)
    {
        sqlx::query("UPDATE builds SET build_error = $2 WHERE id = $1")
            .bind(job.build_id)
            .bind(error)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE jobs SET state = 'failed', updated_at = $2
             WHERE build_id = $1 AND state IN ('queued', 'leased')",
        )
        .bind(job.build_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    } else if !job.cancelled {
        // Back to the queue with no holder; leasing keeps it from this worker.
        sqlx::query(
            "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                    updated_at = $2 WHERE id = $1",
        )
        .bind(job_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}
