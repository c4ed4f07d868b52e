//! Heartbeats served together, and leases given back. Every heartbeat of this coordinator
//! queues its ask; whoever gets the turn serves every heartbeat queued so far in one
//! transaction of a few statements whatever their number: one read of the lease rows they
//! name, one of their jobs, one renewal of every lease row that is due (a row per lease
//! call, not per job), and one mark of every worker not marked seen lately. The renewal
//! repeats the lease check, so a lease taken back meanwhile is simply not renewed (`Lost`).
//!
//! A heartbeat whose worker is not registered gets `NotFound` alone, and the others go on.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sweep_domain::wire::{BatchAck, HeldLease};

use super::closing::LeaseWrites;
use super::fence::check_lease;
use super::group::{abandoned, replicate};
use super::queued::{jobs, leases, put_back};
use super::statements as stmt;
use super::touch_unless_recent;
use super::JobOutcome;
use super::Queue;
use crate::store::backend::Backend;
use crate::store::clock::after;
use crate::store::job::{JobRow, LeaseRow};
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// One heartbeat waiting to be served.
pub(crate) struct Beat {
    /// The worker.
    pub worker_id: i64,
    /// The leases it names (none: an idle worker's "I am alive").
    pub leases: Vec<HeldLease>,
    /// How long a renewed lease lasts (the same for every call of one coordinator).
    pub lease: Duration,
}

/// What one heartbeat gets back: one result per lease, in request order, or the error of the
/// whole call.
pub(crate) type Acks = StoreResult<Vec<StoreResult<BatchAck>>>;

/// How many groups of heartbeats may be served at once: one, so heartbeats that arrive while
/// it serves wait and are served together next (a heartbeat is not urgent: it comes every
/// sixth of a lease and renews only leases with less than two thirds left).
pub(crate) const BEAT_TURNS: usize = 1;

/// Renews the leases of one heartbeat, together with the heartbeats that arrive meanwhile,
/// and marks its worker seen.
pub(crate) async fn heartbeat<B: Backend>(db: &Queue<B>, beat: Beat) -> Acks {
    let store = db.clone();
    db.memory()
        .beats
        .call(beat, move |batch| async move { serve(&store, batch).await })
        .await
        .unwrap_or_else(|| Err(abandoned("heartbeat")))
}

/// Serves `batch`: one answer per heartbeat, in order.
async fn serve<B: Backend>(db: &Queue<B>, batch: Vec<Beat>) -> Vec<Acks> {
    let started = std::time::Instant::now();
    match beat_all(db, &batch).await {
        Ok(answers) => {
            tracing::debug!(
                heartbeats = batch.len(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "heartbeats served"
            );
            answers
        }
        Err(e) => {
            tracing::warn!(error = %e, heartbeats = batch.len(), "heartbeats failed");
            batch.iter().map(|_| Err(replicate(&e))).collect()
        }
    }
}

/// The ids of the leases and of the jobs `named`, each sorted and once.
fn named(named: impl Iterator<Item = HeldLease>) -> (Vec<i64>, Vec<i64>) {
    let (mut lease_ids, mut job_ids): (Vec<i64>, Vec<i64>) =
        named.map(|l| (l.attempt, l.job_id)).unzip();
    for ids in [&mut lease_ids, &mut job_ids] {
        ids.sort_unstable();
        ids.dedup();
    }
    (lease_ids, job_ids)
}

/// The heartbeats of `batch` in one transaction.
async fn beat_all<B: Backend>(db: &Queue<B>, batch: &[Beat]) -> StoreResult<Vec<Acks>> {
    let Some(lease) = batch.first().map(|b| b.lease) else {
        return Ok(Vec::new());
    };
    let now = db.clock().now();
    let mut tx = db.backend.begin_hot().await?;
    let (lease_ids, job_ids) = named(batch.iter().flat_map(|b| b.leases.iter().copied()));
    let rows = leases::<B>(&mut tx, &lease_ids, false).await?;
    let job_rows = jobs(db, &mut tx, &job_ids).await?;
    // Due: less than two thirds of a lease left. A heartbeat comes every sixth of a lease,
    // so most find their lease not due and write nothing.
    let due_before = after(now, lease.mul_f64(2.0 / 3.0));
    let (mut acks, mut due) = judge_all(batch, &job_rows, &rows, due_before);
    if !due.is_empty() {
        due.sort_unstable();
        due.dedup();
        let renewed = renew::<B>(&mut tx, &due, after(now, lease)).await?;
        lost_unless_renewed(batch, &mut acks, &rows, &due, &renewed);
    }
    let workers: Vec<i64> = batch.iter().map(|b| b.worker_id).collect();
    let (unknown, marked) = touch_unless_recent(db, &mut tx, &workers, lease).await?;
    tx.commit().await?;
    marked.committed();
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

/// Every lease of every heartbeat of `batch`, as read (see [`judge`]); and the lease rows
/// of those held (and not cancelled) due for renewal: expiring before `due_before`.
fn judge_all(
    batch: &[Beat],
    jobs: &HashMap<i64, JobRow>,
    leases: &HashMap<i64, LeaseRow>,
    due_before: DateTime<Utc>,
) -> (Vec<Vec<StoreResult<BatchAck>>>, Vec<i64>) {
    let mut due: Vec<i64> = Vec::new();
    let acks: Vec<Vec<StoreResult<BatchAck>>> = batch
        .iter()
        .map(|b| {
            b.leases
                .iter()
                .map(|l| {
                    let ack = judge(b.worker_id, l, jobs, leases)?;
                    let row = &leases[&l.attempt];
                    if !ack.cancelled && row.expires_at < due_before {
                        due.push(row.id);
                    }
                    Ok(ack)
                })
                .collect()
        })
        .collect();
    (acks, due)
}

/// Turns the acks of leases `due` that the renewal did not renew into `LeaseLost`.
fn lost_unless_renewed(
    batch: &[Beat],
    acks: &mut [Vec<StoreResult<BatchAck>>],
    rows: &HashMap<i64, LeaseRow>,
    due: &[i64],
    renewed: &HashMap<i64, i64>,
) {
    // Read as held, but taken back (or closed) before the renewal: lost after all.
    for (b, acks) in batch.iter().zip(acks) {
        for (ack, l) in acks.iter_mut().zip(&b.leases) {
            let lost = due.binary_search(&l.attempt).is_ok()
                && !renewed.get(&l.attempt).is_some_and(|closed| {
                    rows[&l.attempt]
                        .bit(l.job_id)
                        .is_some_and(|b| closed & b == 0)
                });
            if ack.is_ok() && lost {
                *ack = Err(StoreError::LeaseLost {
                    job_id: l.job_id,
                    worker_id: b.worker_id,
                    attempt: l.attempt,
                });
            }
        }
    }
}

/// One lease of a heartbeat, as read: held (a cancelled sweep's says so: its worker stops),
/// or lost.
fn judge(
    worker_id: i64,
    named: &HeldLease,
    jobs: &HashMap<i64, JobRow>,
    leases: &HashMap<i64, LeaseRow>,
) -> StoreResult<BatchAck> {
    let job = jobs
        .get(&named.job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {}", named.job_id)))?;
    check_lease(job, leases.get(&named.attempt), worker_id, named.attempt)?;
    Ok(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: job.cancelled,
    })
}

/// Renews the lease rows `ids` until `until` in one statement; returns the rows renewed
/// (those still there) with their bits.
async fn renew<B: Backend>(
    tx: &mut B::Tx,
    ids: &[i64],
    until: DateTime<Utc>,
) -> StoreResult<HashMap<i64, i64>> {
    let sql = stmt::renew::<B>();
    tx.rows(&sql, &[Value::Ints(ids), Value::Time(until)])
        .await?
        .iter()
        .map(|r| Ok((r.int("id")?, r.int("closed")?)))
        .collect()
}

/// Gives back the leases of `worker_id` named in `named` (the worker is stopping): each job
/// it still holds (of a sweep not cancelled, a build not failed) goes back to the queue at
/// once, for any worker to take, and the worker is marked as left: not live, so nothing
/// waits for it (a lone worker's checks of its own results, the stalled-build judgement).
/// One outcome per lease in request order: `Held` when given back, `Lost` when it was not
/// held.
pub(crate) async fn release<B: Backend>(
    db: &Queue<B>,
    worker_id: i64,
    named: &[HeldLease],
) -> StoreResult<Vec<JobOutcome>> {
    let now = db.clock().now();
    let mut tx = db.backend.begin_hot().await?;
    let (lease_ids, job_ids) = self::named(named.iter().copied());
    let rows = leases::<B>(&mut tx, &lease_ids, true).await?;
    let job_rows = jobs(db, &mut tx, &job_ids).await?;
    let mut writes = LeaseWrites::default();
    let mut back: Vec<&JobRow> = Vec::new();
    let mut given: HashSet<(i64, i64)> = HashSet::new();
    for l in named {
        let (Some(job), Some(row)) = (job_rows.get(&l.job_id), rows.get(&l.attempt)) else {
            continue;
        };
        if job.cancelled
            || job.build_failed
            || check_lease(job, Some(row), worker_id, l.attempt).is_err()
        {
            continue;
        }
        writes.close(row, job.id);
        given.insert((l.job_id, l.attempt));
        back.push(job);
    }
    writes.apply(db, &mut tx).await?;
    put_back::<B>(&mut tx, &back, now).await?;
    tx.execute(
        "UPDATE workers SET left_at = $2 WHERE id = $1",
        &[Value::Int(worker_id), Value::Time(now)],
    )
    .await?;
    tx.commit().await?;
    // So that a call after this one marks it seen, and live, again.
    db.memory().seen.forget(worker_id);
    Ok(named
        .iter()
        .map(|l| {
            if given.contains(&(l.job_id, l.attempt)) {
                JobOutcome::HELD
            } else {
                JobOutcome::LOST
            }
        })
        .collect())
}
