//! A build that failed on a worker, written once for both backends: the failure is recorded
//! under the job's lease, and the build fails once enough distinct workers failed it (see
//! [`failed_build_error`]); until then the job goes back to the queue, kept from the workers
//! that failed it. Lease calls judge again the builds that failed on some workers
//! ([`fail_stalled_builds`]): when the workers that had not tried one die, it fails then.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sweep_domain::wire::{BatchAck, BuildFailure};

use super::backend::Backend;
use super::clock::before;
use super::job::check_lease;
use super::protocol::{close_jobs, requeue};
use super::retry::{build_fails, failed_build_error};
use super::sql::{Columns, Reads, Tx, Value};
use super::sweeps::{insert_sql, stamp};
use super::{StoreError, StoreResult};

/// Records that the job's build failed on this worker (see
/// [`super::Store::build_failed`]). One write transaction.
pub(crate) async fn build_failed<B: Backend>(
    db: &B,
    job_id: i64,
    failure: &BuildFailure,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let now = db.clock().now();
    let mut tx = db.begin().await?;
    let mut leases = super::protocol::leases::<B>(&mut tx, &[failure.attempt], true).await?;
    let job = super::protocol::jobs::<B>(&mut tx, &[job_id])
        .await?
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?;
    let held = leases.remove(&failure.attempt);
    check_lease(&job, held.as_ref(), failure.worker_id, failure.attempt)?;
    let build = Value::Int(job.build_id);
    // Failures of one build on two workers arrive through different jobs: the build's row
    // lock (Postgres; SQLite's write transaction excludes every other writer anyway) makes
    // the second count see the first, or neither would reach the threshold.
    let lock = format!(
        "SELECT b.id FROM builds b WHERE b.id = $1{}",
        B::lock_rows("b")
    );
    tx.row(&lock, &[build]).await?;
    tx.execute(
        "UPDATE workers SET last_seen_at = $2 WHERE id = $1",
        &[Value::Int(failure.worker_id), Value::Time(now)],
    )
    .await?;
    record_failure::<B>(&mut tx, build, failure, now).await?;
    let failed_workers = count(
        &mut tx,
        "SELECT count(*) AS n FROM build_failures WHERE build_id = $1",
        &[build],
    )
    .await?;
    let live_workers = live_workers(&mut tx, job.build_id, before(now, lease)).await?;
    if let Some(error) =
        failed_build_error(failed_workers, max_attempts, live_workers, &failure.output)
    {
        close_build::<B>(&mut tx, job.build_id, &error).await?;
    } else if !job.cancelled {
        // Back to the queue; leasing keeps it from this worker (and any that failed it).
        if let Some(l) = &held {
            close_jobs(db, &mut tx, l, &[job_id]).await?;
        }
        if job.check {
            super::protocol::requeue_checks::<B>(&mut tx, &[job_id]).await?;
        } else {
            requeue::<B>(&mut tx, &[job_id], now).await?;
        }
    }
    tx.commit().await?;
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// Gives build `build_id` its build error and closes its open work: the fresh jobs of its
/// cursor, its jobs waiting to be handed out again, and its open cross-checks. Jobs still
/// held by a lease are no longer held (the lease check refuses a failed build's jobs).
pub(crate) async fn close_build<B: Backend>(
    tx: &mut B::Tx,
    build_id: i64,
    error: &str,
) -> StoreResult<()> {
    let build = [Value::Int(build_id)];
    tx.execute(
        "UPDATE builds SET build_error = $2 WHERE id = $1",
        &[build[0], Value::Text(error)],
    )
    .await?;
    tx.execute("DELETE FROM build_queue WHERE build_id = $1", &build)
        .await?;
    tx.execute("DELETE FROM requeued WHERE build_id = $1", &build)
        .await?;
    tx.execute(
        "UPDATE jobs SET state = 'failed'
         WHERE build_id = $1 AND kind = 'check' AND state IN ('queued', 'leased')",
        &build,
    )
    .await?;
    Ok(())
}

/// Workers seen since `since` that could take build `build_id`: for a binary-only engine,
/// those that have its binary.
async fn live_workers<T: Tx + ?Sized>(
    tx: &mut T,
    build_id: i64,
    since: DateTime<Utc>,
) -> StoreResult<i64> {
    count(
        tx,
        "SELECT count(*) AS n FROM workers w
         JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
         WHERE w.last_seen_at > $2
           AND (ls.source_sha256 IS NOT NULL
                OR EXISTS (SELECT 1 FROM worker_engines we
                           WHERE we.worker_id = w.id AND we.engine = ls.engine))",
        &[Value::Int(build_id), Value::Time(since)],
    )
    .await
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// work waiting, against the workers live now (seen within the last `lease`), and fails those
/// the rule fails now: when the workers that had not tried a build died, the ones left all
/// failed it and are never leased its jobs, so without this the sweep would never finish.
pub(crate) async fn fail_stalled_builds<B: Backend>(
    db: &B,
    lease: Duration,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    // One lock-free look, touching only builds with recorded failures and no build error (a
    // handful); only those the rule would fail now get a transaction, which checks again
    // under the build's lock.
    let since = before(now, lease);
    let candidates = db
        .reader()
        .rows(
            "SELECT bf.build_id, count(*) AS failed FROM build_failures bf
             JOIN builds b ON b.id = bf.build_id
             WHERE b.build_error IS NULL
               AND (EXISTS (SELECT 1 FROM build_queue bq WHERE bq.build_id = bf.build_id)
                    OR EXISTS (SELECT 1 FROM requeued rq WHERE rq.build_id = bf.build_id)
                    OR EXISTS (SELECT 1 FROM jobs j
                               WHERE j.build_id = bf.build_id AND j.kind = 'check'
                                 AND j.state IN ('queued', 'leased')))
             GROUP BY bf.build_id ORDER BY bf.build_id",
            &[],
        )
        .await?;
    for c in candidates {
        let build_id = c.int("build_id")?;
        let mut tx = db.begin().await?;
        let live = live_workers(&mut tx, build_id, since).await?;
        if !build_fails(c.int("failed")?, max_attempts, live) {
            continue;
        }
        // The lock build_failed takes: a failure recorded meanwhile is counted here, and a
        // build it failed meanwhile is left alone.
        let lock = format!(
            "SELECT b.build_error IS NULL AS open,
                    (SELECT count(*) FROM build_failures f WHERE f.build_id = b.id) AS failed
             FROM builds b WHERE b.id = $1{}",
            B::lock_rows("b")
        );
        let Some(row) = tx.row(&lock, &[Value::Int(build_id)]).await? else {
            continue;
        };
        if !row.flag("open")? {
            continue;
        }
        let last = tx
            .row(
                &format!(
                    "SELECT output FROM build_failures WHERE build_id = $1 {} LIMIT 1",
                    B::NEWEST_FAILURE_FIRST
                ),
                &[Value::Int(build_id)],
            )
            .await?
            .map(|r| r.text("output"))
            .transpose()?
            .unwrap_or_default();
        if let Some(error) = failed_build_error(row.int("failed")?, max_attempts, live, &last) {
            close_build::<B>(&mut tx, build_id, &error).await?;
            tx.commit().await?;
        }
    }
    Ok(())
}

/// Keeps the worker's failure of `build` (its first one: a second report keeps it). When the
/// backend leaves `created_at` to the database (Postgres: `clock_timestamp()`, see migration
/// 0016), the time is taken under the build's lock, so failures are ordered as they were
/// counted and the "last output" a failed build shows is the latest one.
async fn record_failure<B: Backend>(
    tx: &mut B::Tx,
    build: Value<'_>,
    failure: &BuildFailure,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut cols = vec!["build_id", "worker_id", "output"];
    let mut values = vec![
        build,
        Value::Int(failure.worker_id),
        Value::Text(&failure.output),
    ];
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let sql = insert_sql(
        "build_failures",
        &cols,
        "ON CONFLICT (build_id, worker_id) DO NOTHING",
    );
    tx.execute(&sql, &values).await?;
    Ok(())
}

/// The `n` of a one-row count query.
async fn count<T: Tx + ?Sized>(tx: &mut T, sql: &str, values: &[Value<'_>]) -> StoreResult<i64> {
    tx.row(sql, values).await?.map_or(Ok(0), |r| r.int("n"))
}
