//! Workers and leases: registering, handing out jobs, renewing leases.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::engine::EngineDef;
use sweep_domain::wire::{BatchAck, HeldLease, JobLease, RegisterWorker};

use super::{job_for_update, secs, PgStore};
use crate::store::job::{check_lease, job_lease, limit_of, LeasedJob};
use crate::store::retry::{build_fails, failed_build_error};
use crate::store::{lock_order, Heartbeat, JobOutcome, StoreError, StoreResult};

/// Registers a worker with the binary-only engines it has; returns its id.
pub(super) async fn register_worker(pool: &PgPool, w: &RegisterWorker) -> StoreResult<i64> {
    let mut tx = pool.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO workers (name, host, cores) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(&w.name)
    .bind(&w.host)
    .bind(w.cores as i32)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO worker_engines (worker_id, engine)
         SELECT $1, e FROM unnest($2::text[]) AS e ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(&w.engines)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Marks a worker seen; `NotFound` when it is not registered.
pub(super) async fn touch_worker(pool: &PgPool, worker_id: i64) -> StoreResult<()> {
    let touched = sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
        .bind(worker_id)
        .execute(pool)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound(format!("worker {worker_id}")));
    }
    Ok(())
}

/// Leases up to `max` queued or expired jobs to `worker_id`, after failing the builds that
/// fail with the workers live now (see [`fail_stalled_builds`]).
pub(super) async fn lease_jobs(
    store: &PgStore,
    worker_id: i64,
    max: u32,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<JobLease>> {
    let touched = sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
        .bind(worker_id)
        .execute(&store.pool)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound(format!("worker {worker_id}")));
    }
    // After the touch, so the asking worker counts as live.
    fail_stalled_builds(&store.pool, lease, max_attempts).await?;
    // Expired leases are taken back right here, so no reaper is needed: an expired job is
    // as claimable as a queued one, and the attempt bump fences the old holder.
    // A worker never gets a build it failed to compile (its toolchain would fail again), and
    // takes jobs it saw a position fail on last, so a retry lands on another worker when
    // there is one and on the same worker when there is not. A sweep without a source
    // snapshot is of a binary-only engine: only workers that reported its binary get it.
    let mut rows = sqlx::query(
        "WITH picked AS (
             SELECT j.id, EXISTS (SELECT 1 FROM position_failures pf
                                  WHERE pf.job_id = j.id AND pf.worker_id = $1) AS retried
             FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
             WHERE (j.state = 'queued' OR (j.state = 'leased' AND j.lease_expires_at < now()))
               AND NOT s.cancelled
               AND NOT EXISTS (SELECT 1 FROM build_failures bf
                               WHERE bf.build_id = j.build_id AND bf.worker_id = $1)
               AND (s.source_sha256 IS NOT NULL
                    OR EXISTS (SELECT 1 FROM worker_engines we
                               WHERE we.worker_id = $1 AND we.engine = s.engine))
             ORDER BY retried, j.id
             LIMIT $2
             FOR UPDATE OF j SKIP LOCKED
         )
         UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, worker_id = $1,
                lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
         FROM picked WHERE jobs.id = picked.id
         RETURNING jobs.id, jobs.attempt, jobs.sweep_id, jobs.build_id, jobs.suite_id,
                   jobs.first_index, jobs.count, picked.retried",
    )
    .bind(worker_id)
    .bind(i64::from(max))
    .bind(secs(lease))
    .fetch_all(&store.pool)
    .await?;
    // RETURNING promises no order; leases go out in the order they were picked.
    rows.sort_by_key(|r| (r.get::<bool, _>("retried"), r.get::<i64, _>("id")));
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        if let Some(job) = lease_one(store, row).await? {
            out.push(job);
        }
    }
    Ok(out)
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// open jobs, against the workers live now, and fails those the rule fails now: when the
/// workers that had not tried a build died, the ones left all failed it and are never leased
/// its jobs, so without this the sweep would never finish. A binary-only engine's build
/// counts only the live workers that have its binary (the others never get its jobs).
async fn fail_stalled_builds(pool: &PgPool, lease: Duration, max_attempts: u32) -> StoreResult<()> {
    // One lock-free look per lease, touching only builds with recorded failures and no build
    // error (a handful); only those the rule would fail now get a transaction, which checks
    // again under the build's lock.
    let candidates: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT bf.build_id, count(*),
                (SELECT count(*) FROM workers w
                 JOIN builds lb ON lb.id = bf.build_id JOIN sweeps ls ON ls.id = lb.sweep_id
                 WHERE w.last_seen_at > now() - make_interval(secs => $1)
                   AND (ls.source_sha256 IS NOT NULL
                        OR EXISTS (SELECT 1 FROM worker_engines we
                                   WHERE we.worker_id = w.id AND we.engine = ls.engine)))
         FROM build_failures bf JOIN builds b ON b.id = bf.build_id
         WHERE b.build_error IS NULL
           AND EXISTS (SELECT 1 FROM jobs j
                       WHERE j.build_id = bf.build_id AND j.state IN ('queued', 'leased'))
         GROUP BY bf.build_id
         ORDER BY bf.build_id",
    )
    .bind(secs(lease))
    .fetch_all(pool)
    .await?;
    for (build_id, failed_workers, live_workers) in candidates {
        if build_fails(failed_workers, max_attempts, live_workers) {
            fail_stalled_build(pool, build_id, lease, max_attempts).await?;
        }
    }
    Ok(())
}

/// Fails one build if, under its row lock, it still has no build error and the rule fails it
/// with the workers live now; leaves it for the next lease when one of its open jobs is
/// being written by someone else.
async fn fail_stalled_build(
    pool: &PgPool,
    build_id: i64,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    // The same lock build_failed takes: a failure recorded meanwhile is counted here, and a
    // build it failed meanwhile is left alone.
    let build_error_now: Option<Option<String>> =
        sqlx::query_scalar("SELECT build_error FROM builds WHERE id = $1 FOR UPDATE")
            .bind(build_id)
            .fetch_optional(&mut *tx)
            .await?;
    if !matches!(build_error_now, Some(None)) {
        return Ok(());
    }
    let (failed_workers, live_workers, last_output): (i64, i64, Option<String>) = sqlx::query_as(
        "SELECT count(*),
                    (SELECT count(*) FROM workers w
                     JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
                     WHERE w.last_seen_at > now() - make_interval(secs => $2)
                       AND (ls.source_sha256 IS NOT NULL
                            OR EXISTS (SELECT 1 FROM worker_engines we
                                       WHERE we.worker_id = w.id AND we.engine = ls.engine))),
                    (SELECT output FROM build_failures WHERE build_id = $1
                     ORDER BY created_at DESC, worker_id DESC LIMIT 1)
             FROM build_failures WHERE build_id = $1",
    )
    .bind(build_id)
    .bind(secs(lease))
    .fetch_one(&mut *tx)
    .await?;
    let Some(error) = failed_build_error(
        failed_workers,
        max_attempts,
        live_workers,
        last_output.as_deref().unwrap_or_default(),
    ) else {
        return Ok(());
    };
    // Never wait for a job lock while holding the build's: build_failed holds its job's lock
    // while it waits for the build's, so waiting here could deadlock. A job locked by someone
    // else is being written right now; the next lease judges the build again.
    let locked: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE build_id = $1 AND state IN ('queued', 'leased')
         FOR UPDATE SKIP LOCKED",
    )
    .bind(build_id)
    .fetch_all(&mut *tx)
    .await?;
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE build_id = $1 AND state IN ('queued', 'leased')",
    )
    .bind(build_id)
    .fetch_one(&mut *tx)
    .await?;
    if (locked.len() as i64) < open {
        return Ok(());
    }
    sqlx::query("UPDATE builds SET build_error = $2 WHERE id = $1")
        .bind(build_id)
        .bind(error)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE jobs SET state = 'failed', updated_at = now() WHERE id = ANY($1)")
        .bind(&locked)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Turns a freshly leased job row into the lease sent to the worker, leaving out positions
/// that already have results; closes the job (and returns `None`) when none are left.
async fn lease_one(store: &PgStore, row: &PgRow) -> StoreResult<Option<JobLease>> {
    let job_id: i64 = row.get("id");
    let build_id: i64 = row.get("build_id");
    let suite_id: i64 = row.get("suite_id");
    let first: i32 = row.get("first_index");
    let count: i32 = row.get("count");
    let info = sqlx::query(
        "SELECT s.engine_def, s.source_sha256, b.name, b.defines, su.name AS suite, j.depth, j.nodes_limit
         FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
         JOIN suites su ON su.id = j.suite_id WHERE j.id = $1",
    )
    .bind(job_id)
    .fetch_one(&store.pool)
    .await?;
    let depth: i32 = info.get("depth");
    let limit = limit_of(depth, info.get("nodes_limit"))?;
    let def: EngineDef =
        serde_json::from_value(info.get("engine_def")).context("decoding engine definition")?;
    let defines = serde_json::from_value(info.get("defines")).context("decoding defines")?;
    let done: Vec<i32> = sqlx::query_scalar(
        "SELECT position_index FROM results WHERE build_id = $1 AND suite_id = $2 AND depth = $3
           AND position_index >= $4 AND position_index < $5",
    )
    .bind(build_id)
    .bind(suite_id)
    .bind(depth)
    .bind(first)
    .bind(first + count)
    .fetch_all(&store.pool)
    .await?;
    let suite = store.suite_positions(suite_id).await?;
    let lease = job_lease(LeasedJob {
        job_id,
        attempt: row.get("attempt"),
        sweep_id: row.get("sweep_id"),
        first_index: first,
        count,
        def,
        limit,
        build_name: info.get("name"),
        defines,
        source_sha256: info.get("source_sha256"),
        suite_name: info.get("suite"),
        suite: &suite,
        done: &done,
    });
    if lease.is_none() {
        // Everything was reported before the previous holder could close the job.
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = now() WHERE id = $1")
            .bind(job_id)
            .execute(&store.pool)
            .await?;
    }
    Ok(lease)
}

/// Renews a lease in a transaction of its own (unless the sweep was cancelled) and marks
/// the worker seen.
pub(super) async fn heartbeat(
    pool: &PgPool,
    job_id: i64,
    beat: &Heartbeat,
    lease: Duration,
) -> StoreResult<BatchAck> {
    let mut tx = pool.begin().await?;
    let ack = renew_in(&mut tx, job_id, beat, lease).await?;
    mark_seen(&mut tx, beat.worker_id).await?;
    tx.commit().await?;
    Ok(ack)
}

/// Renews every lease of one heartbeat in one transaction; a lease not held is that job's
/// `Lost`, not an error of the call.
pub(super) async fn heartbeat_many(
    pool: &PgPool,
    worker_id: i64,
    leases: &[HeldLease],
    lease: Duration,
) -> StoreResult<Vec<JobOutcome>> {
    let mut tx = pool.begin().await?;
    let mut outcomes = vec![JobOutcome::LOST; leases.len()];
    for i in lock_order(leases.iter().map(|l| l.job_id)) {
        let beat = Heartbeat {
            worker_id,
            attempt: leases[i].attempt,
        };
        // A lost lease is found by reading, not by a failing statement, so the transaction
        // stays usable for the other leases.
        outcomes[i] = JobOutcome::of(renew_in(&mut tx, leases[i].job_id, &beat, lease).await)?;
    }
    mark_seen(&mut tx, worker_id).await?;
    tx.commit().await?;
    Ok(outcomes)
}

/// Locks the job, checks the lease (`LeaseLost`/`NotFound` before anything is written) and
/// renews it unless the sweep was cancelled. The caller marks the worker seen and commits.
async fn renew_in(
    tx: &mut Transaction<'_, Postgres>,
    job_id: i64,
    beat: &Heartbeat,
    lease: Duration,
) -> StoreResult<BatchAck> {
    let job = job_for_update(tx, job_id).await?;
    check_lease(job_id, &job, beat.worker_id, beat.attempt)?;
    if !job.cancelled {
        sqlx::query(
            "UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $2), updated_at = now() WHERE id = $1",
        )
        .bind(job_id)
        .bind(secs(lease))
        .execute(&mut **tx)
        .await?;
    }
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// Marks a worker seen inside `tx`, after its job rows are locked (the order every worker
/// call locks in); `NotFound` when it is not registered.
pub(super) async fn mark_seen(
    tx: &mut Transaction<'_, Postgres>,
    worker_id: i64,
) -> StoreResult<()> {
    let touched = sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
        .bind(worker_id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound(format!("worker {worker_id}")));
    }
    Ok(())
}
