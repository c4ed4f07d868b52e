//! What workers send back: result batches (with retries of failing positions) and build
//! failures (failing a variant only once enough workers failed it). The rules themselves
//! live in [`crate::store::retry`].

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};
use sweep_domain::wire::{BatchAck, BuildFailure, JobReport};

use super::leases::mark_seen;
use super::{job_for_update, secs, PgStore};
use crate::store::batch::{check_batch, Checked, Report};
use crate::store::job::{check_lease, JobRow};
use crate::store::retry::{failed_build_error, final_failures};
use crate::store::{lock_order, JobOutcome, ResultBatch, StoreResult};

/// Stores a batch in a transaction of its own. Good results go to `results`; an error is
/// recorded as one failed try in `position_failures`, and becomes a final result only at the
/// `max_attempts`-th failure.
pub(super) async fn report(
    store: &PgStore,
    job_id: i64,
    batch: &ResultBatch,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let mut tx = store.pool.begin().await?;
    let ack = report_in(
        store,
        &mut tx,
        &Report::of_batch(job_id, batch),
        lease,
        max_attempts,
    )
    .await?;
    mark_seen(&mut tx, batch.worker_id).await?;
    tx.commit().await?;
    Ok(ack)
}

/// Stores every report of one upload in one transaction (see [`report_in`]); a lost lease is
/// that report's `Lost`, any other error rolls the whole upload back.
pub(super) async fn report_many(
    store: &PgStore,
    worker_id: i64,
    reports: &[JobReport],
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<JobOutcome>> {
    let mut tx = store.pool.begin().await?;
    let mut outcomes = vec![JobOutcome::LOST; reports.len()];
    for i in lock_order(reports.iter().map(|r| r.job_id)) {
        let report = Report::of_upload(worker_id, &reports[i]);
        // A lost lease is found by reading, not by a failing statement, so the transaction
        // stays usable for the other reports.
        outcomes[i] =
            JobOutcome::of(report_in(store, &mut tx, &report, lease, max_attempts).await)?;
    }
    mark_seen(&mut tx, worker_id).await?;
    tx.commit().await?;
    Ok(outcomes)
}

/// Stores one report inside `tx`: locks the job, checks the lease (`LeaseLost`/`NotFound`
/// before anything is written) and the whole batch (`Invalid`, likewise), then writes the
/// results and renews or closes the job. The caller marks the worker seen and commits.
async fn report_in(
    store: &PgStore,
    tx: &mut Transaction<'_, Postgres>,
    report: &Report<'_>,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let job_id = report.job_id;
    let job = job_for_update(tx, job_id).await?;
    check_lease(job_id, &job, report.worker_id, report.attempt)?;
    let suite = store.suite_positions(job.suite_id).await?;
    let checked = check_batch(&job, &suite, report)?;
    let (failed, ok): (Vec<Checked>, Vec<Checked>) =
        checked.into_iter().partition(|c| c.error.is_some());
    let mut accepted = insert_results(tx, &job, report, &ok).await?;
    if !failed.is_empty() {
        accepted += record_failures(tx, &job, report, &failed).await?;
        let failures = failures_of(tx, &job, &failed).await?;
        let finals = final_failures(&failed, &failures, max_attempts);
        insert_results(tx, &job, report, &finals).await?;
    }
    if !job.cancelled {
        let new_state = if report.finished {
            let range = job.range();
            let have: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM results WHERE build_id = $1 AND suite_id = $2 AND depth = $3
                   AND position_index >= $4 AND position_index < $5",
            )
            .bind(job.build_id)
            .bind(job.suite_id)
            .bind(job.depth)
            .bind(range.start)
            .bind(range.end)
            .fetch_one(&mut **tx)
            .await?;
            // A "finished" job with holes (lost or failing positions) goes back to the queue
            // for the missing positions.
            if have >= i64::from(job.count) {
                "done"
            } else {
                "queued"
            }
        } else {
            "leased"
        };
        sqlx::query(
            "UPDATE jobs SET state = $2, lease_expires_at = now() + make_interval(secs => $3),
                    updated_at = now() WHERE id = $1",
        )
        .bind(job_id)
        .bind(new_state)
        .bind(secs(lease))
        .execute(&mut **tx)
        .await?;
    }
    Ok(BatchAck {
        accepted,
        duplicates: report.results.len() as u32 - accepted,
        cancelled: job.cancelled,
    })
}

/// Inserts results, ignoring positions that already have one; returns how many were new.
async fn insert_results(
    tx: &mut Transaction<'_, Postgres>,
    job: &JobRow,
    report: &Report<'_>,
    rows: &[Checked],
) -> StoreResult<u32> {
    if rows.is_empty() {
        return Ok(0);
    }
    let idx: Vec<i32> = rows.iter().map(|c| c.index).collect();
    let pid: Vec<&str> = rows.iter().map(|c| c.position_id.as_str()).collect();
    let nodes: Vec<i64> = rows.iter().map(|c| c.nodes).collect();
    let bm: Vec<&str> = rows.iter().map(|c| c.bestmove.as_str()).collect();
    let solved: Vec<bool> = rows.iter().map(|c| c.solved).collect();
    let cp: Vec<Option<i32>> = rows.iter().map(|c| c.score_cp).collect();
    let mate: Vec<Option<i32>> = rows.iter().map(|c| c.score_mate).collect();
    let depth: Vec<i32> = rows.iter().map(|c| c.reached_depth).collect();
    let ms: Vec<i64> = rows.iter().map(|c| c.time_ms).collect();
    let err: Vec<Option<&str>> = rows.iter().map(|c| c.error.as_deref()).collect();
    let n = sqlx::query(
        "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                              worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                              reached_depth, time_ms, error, nodes_limit)
         SELECT $1, $2, t.idx, $3, $4, $5, $6, $7, t.pid, t.nodes, t.bm, t.solved, t.cp, t.mate, t.rd, t.ms, t.err, $18
         FROM UNNEST($8::int4[], $9::text[], $10::int8[], $11::text[], $12::bool[], $13::int4[],
                     $14::int4[], $15::int4[], $16::int8[], $17::text[])
              AS t(idx, pid, nodes, bm, solved, cp, mate, rd, ms, err)
         ON CONFLICT DO NOTHING",
    )
    .bind(job.build_id)
    .bind(job.suite_id)
    .bind(job.depth)
    .bind(job.sweep_id)
    .bind(report.job_id)
    .bind(report.attempt)
    .bind(report.worker_id)
    .bind(&idx)
    .bind(&pid)
    .bind(&nodes)
    .bind(&bm)
    .bind(&solved)
    .bind(&cp)
    .bind(&mate)
    .bind(&depth)
    .bind(&ms)
    .bind(&err)
    .bind(job.nodes_limit)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n as u32)
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
    job_id: i64,
    failure: &BuildFailure,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let mut tx = pool.begin().await?;
    let job = job_for_update(&mut tx, job_id).await?;
    check_lease(job_id, &job, failure.worker_id, failure.attempt)?;
    // Failures of one build on two workers arrive through different jobs; the build's row lock
    // makes the second count see the first, or neither would reach the threshold.
    sqlx::query("SELECT 1 FROM builds WHERE id = $1 FOR UPDATE")
        .bind(job.build_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
        .bind(failure.worker_id)
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
         WHERE w.last_seen_at > now() - make_interval(secs => $1)
           AND (ls.source_sha256 IS NOT NULL
                OR EXISTS (SELECT 1 FROM worker_engines we
                           WHERE we.worker_id = w.id AND we.engine = ls.engine))",
    )
    .bind(secs(lease))
    .bind(job.build_id)
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
            "UPDATE jobs SET state = 'failed', updated_at = now()
             WHERE build_id = $1 AND state IN ('queued', 'leased')",
        )
        .bind(job.build_id)
        .execute(&mut *tx)
        .await?;
    } else if !job.cancelled {
        // Back to the queue with no holder; leasing keeps it from this worker.
        sqlx::query(
            "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                    updated_at = now() WHERE id = $1",
        )
        .bind(job_id)
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
