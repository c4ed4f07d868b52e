//! A build that failed on a worker, written once for both backends: the failure is recorded
//! under the job's lease, and the build fails once enough distinct workers failed it (see
//! [`failed_build_error`]); until then the job goes back to the queue, kept from the workers
//! that failed it.

use std::time::Duration;

use sweep_domain::wire::{BatchAck, BuildFailure};

use super::backend::Backend;
use super::clock::before;
use super::job::check_lease;
use super::retry::failed_build_error;
use super::sql::{Columns, Tx, Value};
use super::sweeps::{insert_sql, stamp};
use super::StoreResult;

/// Records that the job's build failed on this worker (see [`super::BackendCalls`]'s
/// `build_failed`). One write transaction.
pub(crate) async fn build_failed<B: Backend>(
    db: &B,
    job_id: i64,
    failure: &BuildFailure,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let now = db.clock().now();
    let mut tx = db.begin().await?;
    let job = db.job_for_update(&mut tx, job_id).await?;
    check_lease(job_id, &job, failure.worker_id, failure.attempt)?;
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
    // Only workers seen within a lease that could take the build count: for a binary-only
    // engine, those that have its binary.
    let live_workers = count(
        &mut tx,
        "SELECT count(*) AS n FROM workers w
         JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
         WHERE w.last_seen_at > $2
           AND (ls.source_sha256 IS NOT NULL
                OR EXISTS (SELECT 1 FROM worker_engines we
                           WHERE we.worker_id = w.id AND we.engine = ls.engine))",
        &[build, Value::Time(before(now, lease))],
    )
    .await?;
    if let Some(error) =
        failed_build_error(failed_workers, max_attempts, live_workers, &failure.output)
    {
        tx.execute(
            "UPDATE builds SET build_error = $2 WHERE id = $1",
            &[build, Value::Text(&error)],
        )
        .await?;
        tx.execute(
            "UPDATE jobs SET state = 'failed', updated_at = $2
             WHERE build_id = $1 AND state IN ('queued', 'leased')",
            &[build, Value::Time(now)],
        )
        .await?;
    } else if !job.cancelled {
        // Back to the queue with no holder; leasing keeps it from this worker.
        tx.execute(
            "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                    updated_at = $2 WHERE id = $1",
            &[Value::Int(job_id), Value::Time(now)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// Keeps the worker's failure of `build` (its first one: a second report keeps it). When the
/// backend leaves `created_at` to the database (Postgres: `clock_timestamp()`, see migration
/// 0016), the time is taken under the build's lock, so failures are ordered as they were
/// counted and the "last output" a failed build shows is the latest one.
async fn record_failure<B: Backend>(
    tx: &mut B::Tx,
    build: Value<'_>,
    failure: &BuildFailure,
    now: chrono::DateTime<chrono::Utc>,
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
