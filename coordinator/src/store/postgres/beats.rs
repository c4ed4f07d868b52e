//! Heartbeats served together. Every heartbeat of this coordinator queues its ask; whoever
//! gets the turn serves every heartbeat queued so far with at most three statements whatever
//! their number: one read of all their jobs, one renewal of every lease that is due, and one
//! mark of every worker not marked seen lately. No transaction: each lease is checked again
//! by the renewal itself, so a job taken meanwhile is simply not renewed (and is `Lost`).
//!
//! A serving that fails answers each of its heartbeats with the error; a heartbeat whose
//! worker is not registered gets `NotFound` alone, and the others go on.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::Row;
use sweep_domain::wire::{BatchAck, HeldLease};

use super::group::{abandoned, replicate, Group};
use super::leases::touch_all_unless_recent;
use super::{job_row, secs, statements, PgStore};
use crate::store::job::{check_lease, JobRow};
use crate::store::{StoreError, StoreResult};

/// One heartbeat waiting to be served.
pub(super) struct Beat {
    /// The worker.
    pub worker_id: i64,
    /// The leases it names (none: an idle worker's "I am alive").
    pub leases: Vec<HeldLease>,
    /// How long a renewed lease lasts (the same for every call of one coordinator).
    pub lease: Duration,
}

/// What one heartbeat gets back: one result per lease, in request order, or the error of the
/// whole call.
type Acks = StoreResult<Vec<StoreResult<BatchAck>>>;

/// The heartbeats of this coordinator, served together.
pub(super) type Beats = Group<Beat, Acks>;

/// How many groups of heartbeats may be served at once: one, so heartbeats that arrive while
/// it serves wait and are served together next (a heartbeat is not urgent: it comes every
/// sixth of a lease and renews only leases with less than two thirds left).
pub(super) const BEAT_TURNS: usize = 1;

/// Renews the leases of one heartbeat, together with the heartbeats that arrive meanwhile,
/// and marks its worker seen. A lease the worker does not hold is `LeaseLost`, an unknown job
/// `NotFound`; neither fails the others. `NotFound` for the call when the worker is not
/// registered.
pub(super) async fn heartbeat(store: &PgStore, beat: Beat) -> Acks {
    let served = store.clone();
    store
        .beats
        .call(
            beat,
            move |batch| async move { serve(&served, batch).await },
        )
        .await
        .unwrap_or_else(|| Err(abandoned("heartbeat")))
}

/// Serves `batch`: one answer per heartbeat, in order.
async fn serve(store: &PgStore, batch: Vec<Beat>) -> Vec<Acks> {
    match beat_all(store, &batch).await {
        Ok(answers) => answers,
        Err(e) => {
            tracing::warn!(error = %e, heartbeats = batch.len(), "heartbeats failed");
            batch.iter().map(|_| Err(replicate(&e))).collect()
        }
    }
}

/// The three steps for every heartbeat of `batch`.
async fn beat_all(store: &PgStore, batch: &[Beat]) -> StoreResult<Vec<Acks>> {
    let Some(lease) = batch.first().map(|b| b.lease) else {
        return Ok(Vec::new());
    };
    let jobs = read_jobs(store, batch, lease).await?;
    let mut due: Vec<(i64, i32, i64)> = Vec::new();
    let mut acks: Vec<Vec<StoreResult<BatchAck>>> =
        batch.iter().map(|b| judge(b, &jobs, &mut due)).collect();
    if !due.is_empty() {
        let renewed = renew(store, &mut due, lease).await?;
        // Read as held, but taken (or closed) before the renewal: lost after all.
        for (b, acks) in batch.iter().zip(&mut acks) {
            for (ack, l) in acks.iter_mut().zip(&b.leases) {
                let key = (l.job_id, l.attempt, b.worker_id);
                if due.binary_search(&key).is_ok() && !renewed.contains(&(l.job_id, b.worker_id)) {
                    *ack = Err(StoreError::LeaseLost {
                        job_id: l.job_id,
                        worker_id: b.worker_id,
                        attempt: l.attempt,
                    });
                }
            }
        }
    }
    let workers: Vec<i64> = batch.iter().map(|b| b.worker_id).collect();
    let unknown = touch_all_unless_recent(store, &workers, lease).await?;
    Ok(batch
        .iter()
        .zip(acks)
        .map(|(b, acks)| {
            if unknown.contains(&b.worker_id) {
                Err(StoreError::NotFound(format!("worker {}", b.worker_id)))
            } else {
                Ok(acks)
            }
        })
        .collect())
}

/// Every job the heartbeats name, read in one statement without locking: its row and whether
/// its lease is due for renewal (see [`statements::READ_LEASES`]).
async fn read_jobs(
    store: &PgStore,
    batch: &[Beat],
    lease: Duration,
) -> StoreResult<HashMap<i64, (JobRow, bool)>> {
    let mut ids: Vec<i64> = batch
        .iter()
        .flat_map(|b| b.leases.iter().map(|l| l.job_id))
        .collect();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    ids.sort_unstable();
    ids.dedup();
    let rows = sqlx::query(statements::READ_LEASES)
        .bind(&ids)
        .bind(secs(lease))
        .bind(store.clock.now())
        .fetch_all(&store.pool)
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("id"), (job_row(r), r.get("due"))))
        .collect())
}

/// One heartbeat's answer per lease as read, adding to `due` the leases it holds that are
/// due for renewal (a cancelled sweep's are not renewed: its workers are told to stop).
fn judge(
    beat: &Beat,
    jobs: &HashMap<i64, (JobRow, bool)>,
    due: &mut Vec<(i64, i32, i64)>,
) -> Vec<StoreResult<BatchAck>> {
    beat.leases
        .iter()
        .map(|l| {
            let (job, is_due) = jobs
                .get(&l.job_id)
                .ok_or_else(|| StoreError::NotFound(format!("job {}", l.job_id)))?;
            check_lease(l.job_id, job, beat.worker_id, l.attempt)?;
            if !job.cancelled && *is_due {
                due.push((l.job_id, l.attempt, beat.worker_id));
            }
            Ok(BatchAck {
                accepted: 0,
                duplicates: 0,
                cancelled: job.cancelled,
            })
        })
        .collect()
}

/// Renews the leases `due` (sorted here, so rows are locked in the order every call locks
/// them) in one statement; returns the (job, worker) pairs renewed.
async fn renew(
    store: &PgStore,
    due: &mut Vec<(i64, i32, i64)>,
    lease: Duration,
) -> StoreResult<HashSet<(i64, i64)>> {
    due.sort_unstable();
    due.dedup();
    let ids: Vec<i64> = due.iter().map(|d| d.0).collect();
    let attempts: Vec<i32> = due.iter().map(|d| d.1).collect();
    let workers: Vec<i64> = due.iter().map(|d| d.2).collect();
    let renewed: Vec<(i64, i64)> = sqlx::query_as(statements::RENEW)
        .bind(&ids)
        .bind(&attempts)
        .bind(&workers)
        .bind(secs(lease))
        .bind(store.clock.now())
        .fetch_all(&store.pool)
        .await?;
    Ok(renewed.into_iter().collect())
}
