//! Workers and leases: registering, handing out jobs, renewing leases.

use std::time::Duration;

use anyhow::Context;
use sqlx::{Row, SqliteConnection};
use sweep_domain::engine::EngineDef;
use sweep_domain::wire::{BatchAck, HeldLease, JobLease, LeaseStatus, RegisterWorker};

use super::{expiry, job_row, Db, SqliteStore};
use crate::store::job::{check_lease, job_lease, limit_of, LeasedJob};
use crate::store::retry::failed_build_error;
use crate::store::{lock_order, JobOutcome, StoreError, StoreResult};

/// Registers a worker with the binary-only engines it has; returns its id.
pub(super) async fn register_worker(
    store: &SqliteStore,
    w: &RegisterWorker,
    token_id: Option<i64>,
) -> StoreResult<i64> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO workers (name, host, cores, registered_at, last_seen_at, token_id)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5) RETURNING id",
    )
    .bind(&w.name)
    .bind(&w.host)
    .bind(i64::from(w.cores))
    .bind(now)
    .bind(token_id)
    .fetch_one(&mut *tx)
    .await
    .db()?;
    for engine in &w.engines {
        sqlx::query("INSERT OR IGNORE INTO worker_engines (worker_id, engine) VALUES (?1, ?2)")
            .bind(id)
            .bind(engine)
            .execute(&mut *tx)
            .await
            .db()?;
    }
    tx.commit().await.db()?;
    Ok(id)
}

/// Leases up to `max` queued or expired jobs to `worker_id`, after failing the builds that
/// fail with the workers live now (see [`fail_stalled_builds`]).
pub(super) async fn lease_jobs(
    store: &SqliteStore,
    worker_id: i64,
    max: u32,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<JobLease>> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    mark_seen(&mut tx, worker_id, now).await?;
    // In the same transaction and after the touch, so the asking worker counts as live and
    // the builds failed here are not leased below.
    fail_stalled_builds(&mut tx, now, lease, max_attempts).await?;
    // Expired leases are taken back right here, so no reaper is needed: an expired job is
    // as claimable as a queued one, and the attempt bump fences the old holder. The write
    // lock held since BEGIN IMMEDIATE is what FOR UPDATE SKIP LOCKED is on Postgres.
    // A worker never gets a build it failed to compile (its toolchain would fail again), and
    // takes jobs it saw a position fail on last, so a retry lands on another worker when
    // there is one and on the same worker when there is not. A sweep without a source
    // snapshot is of a binary-only engine: only workers that reported its binary get it.
    let mut rows = sqlx::query(
        "UPDATE jobs SET state = 'leased', attempt = attempt + 1, worker_id = ?1,
                lease_expires_at = ?2, updated_at = ?3
         WHERE id IN (
             SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
             WHERE (j.state = 'queued' OR (j.state = 'leased' AND j.lease_expires_at < ?3))
               AND j.kind = 'work' AND NOT s.cancelled
               AND NOT EXISTS (SELECT 1 FROM build_failures bf
                               WHERE bf.build_id = j.build_id AND bf.worker_id = ?1)
               AND (s.source_sha256 IS NOT NULL
                    OR EXISTS (SELECT 1 FROM worker_engines we
                               WHERE we.worker_id = ?1 AND we.engine = s.engine))
             ORDER BY EXISTS (SELECT 1 FROM position_failures pf
                              WHERE pf.job_id = j.id AND pf.worker_id = ?1), j.id
             LIMIT ?4)
         RETURNING id, attempt, sweep_id, build_id, suite_id, first_index, count,
                   EXISTS (SELECT 1 FROM position_failures pf
                           WHERE pf.job_id = jobs.id AND pf.worker_id = ?1) AS retried",
    )
    .bind(worker_id)
    .bind(expiry(now, lease))
    .bind(now)
    .bind(i64::from(max))
    .fetch_all(&mut *tx)
    .await
    .db()?;
    // RETURNING yields rows in no promised order; leases go out in the order they were picked.
    rows.sort_by_key(|r| (r.get::<bool, _>("retried"), r.get::<i64, _>("id")));
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let id = row.get("id");
        if let Some(job) = lease_one(store, &mut tx, id, row.get("attempt"), now).await? {
            out.push(job);
        }
    }
    // Cross-checks only for the room work left: they run after all work.
    if rows.len() < max as usize {
        let room = max - rows.len() as u32;
        for (id, attempt) in super::checks::pick(&mut tx, worker_id, room, lease, now).await? {
            if let Some(job) = lease_one(store, &mut tx, id, attempt, now).await? {
                out.push(job);
            }
        }
    }
    tx.commit().await.db()?;
    Ok(out)
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// open jobs, against the workers live now, and fails those the rule fails now: when the
/// workers that had not tried a build died, the ones left all failed it and are never leased
/// its jobs, so without this the sweep would never finish. Runs inside the lease's
/// `BEGIN IMMEDIATE`, which excludes build_failed as the build row lock does on Postgres.
async fn fail_stalled_builds(
    conn: &mut SqliteConnection,
    now: i64,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<()> {
    // Only builds with recorded failures and no build error (a handful) are looked at.
    // rowid orders the failures as they were recorded, so the output is the latest one.
    // "Seen within the last lease": the same window build_failed uses. A binary-only
    // engine's build counts only the live workers that have its binary (the others never
    // get its jobs).
    let since = now.saturating_sub(expiry(0, lease));
    let candidates: Vec<(i64, i64, String, i64)> = sqlx::query_as(
        "SELECT bf.build_id, count(*),
                (SELECT l.output FROM build_failures l WHERE l.build_id = bf.build_id
                 ORDER BY l.rowid DESC LIMIT 1),
                (SELECT count(*) FROM workers w
                 JOIN builds lb ON lb.id = bf.build_id JOIN sweeps ls ON ls.id = lb.sweep_id
                 WHERE w.last_seen_at > ?1
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
    .bind(since)
    .fetch_all(&mut *conn)
    .await
    .db()?;
    for (build_id, failed_workers, last_output, live_workers) in candidates {
        let Some(error) =
            failed_build_error(failed_workers, max_attempts, live_workers, &last_output)
        else {
            continue;
        };
        sqlx::query("UPDATE builds SET build_error = ?2 WHERE id = ?1")
            .bind(build_id)
            .bind(error)
            .execute(&mut *conn)
            .await
            .db()?;
        sqlx::query(
            "UPDATE jobs SET state = 'failed', updated_at = ?2
             WHERE build_id = ?1 AND state IN ('queued', 'leased')",
        )
        .bind(build_id)
        .bind(now)
        .execute(&mut *conn)
        .await
        .db()?;
    }
    Ok(())
}

/// Turns a freshly leased job row into the lease sent to the worker, leaving out positions
/// that already have results; closes the job (and returns `None`) when none are left.
async fn lease_one(
    store: &SqliteStore,
    conn: &mut SqliteConnection,
    job_id: i64,
    attempt: i32,
    now: i64,
) -> StoreResult<Option<JobLease>> {
    let info = sqlx::query(
        "SELECT s.engine_def, s.source_sha256, b.name, b.defines, su.name AS suite, j.depth,
                j.nodes_limit, j.build_id, j.suite_id, j.first_index, j.count, j.sweep_id,
                j.kind = 'check' AS is_check
         FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
         JOIN suites su ON su.id = j.suite_id WHERE j.id = ?1",
    )
    .bind(job_id)
    .fetch_one(&mut *conn)
    .await
    .db()?;
    let build_id: i64 = info.get("build_id");
    let suite_id: i64 = info.get("suite_id");
    let first: i32 = info.get("first_index");
    let count: i32 = info.get("count");
    let check: bool = info.get("is_check");
    let depth: i32 = info.get("depth");
    let limit = limit_of(depth, info.get("nodes_limit"))?;
    let def: EngineDef =
        serde_json::from_str(info.get("engine_def")).context("decoding engine definition")?;
    let defines = serde_json::from_str(info.get("defines")).context("decoding defines")?;
    // A work job leaves out positions with a result; a cross-check those it measured (its
    // position always has a result: the original it checks).
    let done_sql = if check {
        "SELECT position_index FROM cross_checks
         WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3
           AND position_index >= ?4 AND position_index < ?5"
    } else {
        "SELECT position_index FROM results
         WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3
           AND position_index >= ?4 AND position_index < ?5"
    };
    let done: Vec<i32> = sqlx::query_scalar(done_sql)
        .bind(build_id)
        .bind(suite_id)
        .bind(depth)
        .bind(first)
        .bind(first + count)
        .fetch_all(&mut *conn)
        .await
        .db()?;
    let suite = store.suite_positions(conn, suite_id).await?;
    let lease = job_lease(LeasedJob {
        job_id,
        attempt,
        sweep_id: info.get("sweep_id"),
        first_index: first,
        count,
        build: def.build_spec(
            info.get("name"),
            defines,
            info.get::<Option<&str>, _>("source_sha256")
                .unwrap_or_default(),
        ),
        limit,
        suite_name: info.get("suite"),
        suite: &suite,
        done: &done,
    })
    .map(|mut l| {
        l.cross_check = check;
        l
    });
    if lease.is_none() {
        // Everything was reported before the previous holder could close the job.
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = ?2 WHERE id = ?1")
            .bind(job_id)
            .bind(now)
            .execute(&mut *conn)
            .await
            .db()?;
    }
    Ok(lease)
}

/// Renews every lease of one heartbeat in one write transaction; a lease not held is that
/// job's `Lost`, not an error of the call.
pub(super) async fn heartbeat_many(
    store: &SqliteStore,
    worker_id: i64,
    leases: &[HeldLease],
    lease: Duration,
) -> StoreResult<Vec<JobOutcome>> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    let mut outcomes = vec![JobOutcome::LOST; leases.len()];
    for i in lock_order(leases.iter().map(|l| l.job_id)) {
        let renewed = renew_in(&mut tx, worker_id, &leases[i], now, lease).await;
        outcomes[i] = JobOutcome::of(renewed)?;
    }
    mark_seen(&mut tx, worker_id, now).await?;
    tx.commit().await.db()?;
    Ok(outcomes)
}

/// Gives back, in one write transaction, the leases `worker_id` names and still holds: queued
/// again with no holder. One outcome per lease, in request order.
pub(super) async fn release(
    store: &SqliteStore,
    worker_id: i64,
    leases: &[HeldLease],
) -> StoreResult<Vec<JobOutcome>> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    let mut outcomes = vec![JobOutcome::LOST; leases.len()];
    for i in lock_order(leases.iter().map(|l| l.job_id)) {
        let released = sqlx::query(
            "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                    updated_at = ?4
             WHERE id = ?1 AND attempt = ?2 AND worker_id = ?3 AND state = 'leased'",
        )
        .bind(leases[i].job_id)
        .bind(leases[i].attempt)
        .bind(worker_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .db()?
        .rows_affected();
        if released > 0 {
            outcomes[i] = JobOutcome {
                status: LeaseStatus::Held,
                accepted: 0,
                duplicates: 0,
            };
        }
    }
    tx.commit().await.db()?;
    Ok(outcomes)
}

/// Checks the lease inside a write transaction (`LeaseLost`/`NotFound` before anything is
/// written) and renews it unless the sweep was cancelled. The caller marks the worker seen
/// and commits.
async fn renew_in(
    conn: &mut SqliteConnection,
    worker_id: i64,
    held: &HeldLease,
    now: i64,
    lease: Duration,
) -> StoreResult<BatchAck> {
    let job_id = held.job_id;
    let job = job_row(conn, job_id).await?;
    check_lease(job_id, &job, worker_id, held.attempt)?;
    if !job.cancelled {
        sqlx::query("UPDATE jobs SET lease_expires_at = ?2, updated_at = ?3 WHERE id = ?1")
            .bind(job_id)
            .bind(expiry(now, lease))
            .bind(now)
            .execute(&mut *conn)
            .await
            .db()?;
    }
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// Marks a worker seen inside a write transaction; `NotFound` when it is not registered.
pub(super) async fn mark_seen(
    conn: &mut SqliteConnection,
    worker_id: i64,
    now: i64,
) -> StoreResult<()> {
    let touched = sqlx::query("UPDATE workers SET last_seen_at = ?2 WHERE id = ?1")
        .bind(worker_id)
        .bind(now)
        .execute(&mut *conn)
        .await
        .db()?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound(format!("worker {worker_id}")));
    }
    Ok(())
}
