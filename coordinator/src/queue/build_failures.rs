//! A build that failed on a worker, written once for both backends: the failure is recorded
//! under the job's lease, and the build fails once enough distinct workers of enough distinct
//! tokens failed it (see
//! [`failed_build_error`]); until then the job goes back to the queue, kept from the workers
//! that failed it. (Lease calls judge again the builds that failed on some workers: see
//! `stalled`.)

use std::time::Duration;

use chrono::{DateTime, Utc};
use sweep_domain::wire::{BatchAck, BuildFailure};

use super::fence::check_lease;
use super::queued::{jobs, leases, put_back};
use super::stalled::{close_build, failed_on, live_workers};
use super::{close_jobs, Queue};
use crate::store::backend::Backend;
use crate::store::clock::before;
use crate::store::job::{JobRow, LeaseRow};
use crate::store::retry::failed_build_error;
use crate::store::sql::{insert_sql, stamp};
use crate::store::sql::{Tx, Value};
use crate::store::{StoreError, StoreResult};

/// Records that the job's build failed on this worker (see
/// [`super::WorkerQueue::build_failed`]). One write transaction.
pub(crate) async fn build_failed<B: Backend>(
    db: &Queue<B>,
    job_id: i64,
    failure: &BuildFailure,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let now = db.clock().now();
    let mut tx = db.backend.begin().await?;
    let mut leases = leases::<B>(&mut tx, &[failure.attempt], true).await?;
    let job = jobs(db, &mut tx, &[job_id])
        .await?
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?;
    let held = leases.remove(&failure.attempt);
    check_lease(&job, held.as_ref(), failure.worker_id, failure.attempt)?;
    let refusal = Refusal {
        worker_id: failure.worker_id,
        output: &failure.output,
        lease,
        max_attempts,
        now,
    };
    refuse_build::<B>(db, &mut tx, &job, held.as_ref(), &refusal).await?;
    tx.commit().await?;
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// A worker that cannot run a job's build (it failed to build it, or its bench disagrees
/// with another worker's for the same binary).
pub(crate) struct Refusal<'a> {
    /// The worker.
    pub worker_id: i64,
    /// What it reported, kept as the build's failure on it.
    pub output: &'a str,
    /// How long a lease lasts: who counts as live.
    pub lease: Duration,
    /// Failed tries before the build fails for good.
    pub max_attempts: u32,
    /// Now, by the store's clock.
    pub now: DateTime<Utc>,
}

/// Records `refusal` of `job`'s build, under `held` (the worker's lease, checked by the
/// caller), in `tx`: the build fails once enough distinct workers of enough distinct tokens
/// refused it (see
/// [`failed_build_error`]); until then the job goes back to the queue, kept from the workers
/// that refused it.
pub(crate) async fn refuse_build<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    job: &JobRow,
    held: Option<&LeaseRow>,
    refusal: &Refusal<'_>,
) -> StoreResult<()> {
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
        &[Value::Int(refusal.worker_id), Value::Time(refusal.now)],
    )
    .await?;
    record_failure::<B>(tx, build, refusal.worker_id, refusal.output, refusal.now).await?;
    let failed = failed_on(tx, job.build_id).await?;
    let live = live_workers(tx, job.build_id, before(refusal.now, refusal.lease)).await?;
    if let Some(error) = failed_build_error(failed, refusal.max_attempts, live, refusal.output) {
        close_build::<B>(tx, job.build_id, &error).await?;
    } else if !job.cancelled {
        // Back to the queue; leasing keeps it from this worker (and any that failed it).
        if let Some(l) = held {
            close_jobs(db, tx, l, &[job.id]).await?;
        }
        put_back::<B>(tx, &[job], refusal.now).await?;
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
    worker_id: i64,
    output: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut cols = vec!["build_id", "worker_id", "output"];
    let mut values = vec![build, Value::Int(worker_id), Value::Text(output)];
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let sql = insert_sql(
        "build_failures",
        &cols,
        "ON CONFLICT (build_id, worker_id) DO NOTHING",
    );
    tx.execute(&sql, &values).await?;
    Ok(())
}
