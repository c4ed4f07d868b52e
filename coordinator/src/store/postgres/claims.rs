//! Lease calls served together. Every lease call of this coordinator queues its ask; whoever
//! gets the turn serves every ask queued so far in one transaction, and the others find
//! their answer waiting when their turn comes. Workers with nothing particular about them
//! (no failed build or position, no binary-only engines: nearly all of them) share one claim
//! of jobs, dealt out in the order they asked, and one statement leases all of them; the
//! others are picked for one by one in the same transaction. So under load the database does
//! a handful of statements for many lease calls instead of several per call, and concurrent
//! picks never walk past each other's locked rows.
//!
//! A claim that fails answers every ask in it with the error, and leaves no job leased (it
//! is one transaction). Serving runs in a task of its own, so a caller that goes away while
//! it serves (a closed connection) cannot cut the others' answers short.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sweep_domain::wire::JobLease;
use tokio::sync::oneshot;

use super::leases::{fail_stalled_builds, leases_of, pick_for, Leased};
use super::{checks, secs, statements, PgStore};
use crate::store::{StoreError, StoreResult};

/// One lease call waiting to be served.
struct Ask {
    worker_id: i64,
    max: u32,
    lease: Duration,
    max_attempts: u32,
    reply: oneshot::Sender<StoreResult<Vec<JobLease>>>,
}

/// The queue of asks and the turn to serve them.
#[derive(Clone, Default)]
pub(super) struct Claims {
    pending: Arc<Mutex<Vec<Ask>>>,
    turn: Arc<tokio::sync::Mutex<()>>,
}

impl Claims {
    /// Leases up to `max` jobs to `worker_id` (see the module documentation).
    pub async fn lease(
        &self,
        store: &PgStore,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>> {
        let (reply, mut answer) = oneshot::channel();
        self.pending.lock().expect("lease queue lock").push(Ask {
            worker_id,
            max,
            lease,
            max_attempts,
            reply,
        });
        let turn = self.turn.clone().lock_owned().await;
        match answer.try_recv() {
            Ok(served) => return served,
            Err(oneshot::error::TryRecvError::Closed) => return Err(abandoned()),
            // Not served yet: serve everyone waiting, this ask included.
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let batch = std::mem::take(&mut *self.pending.lock().expect("lease queue lock"));
        let store = store.clone();
        let serving = tokio::spawn(async move {
            let _turn = turn;
            serve(&store, batch).await;
        });
        // Serving answers every ask before it ends; a panic in it drops the answers.
        let _ = serving.await;
        answer.await.unwrap_or_else(|_| Err(abandoned()))
    }
}

/// The error of an ask whose answer never came (its server panicked).
fn abandoned() -> StoreError {
    StoreError::Internal(anyhow::anyhow!("a lease claim ended without an answer"))
}

/// The same error for each ask of a failed claim (store errors are not `Clone`).
fn replicate(e: &StoreError) -> StoreError {
    match e {
        StoreError::NotFound(what) => StoreError::NotFound(what.clone()),
        StoreError::LeaseLost {
            job_id,
            worker_id,
            attempt,
        } => StoreError::LeaseLost {
            job_id: *job_id,
            worker_id: *worker_id,
            attempt: *attempt,
        },
        StoreError::Invalid(m) => StoreError::Invalid(m.clone()),
        // Still "unavailable", so each caller is told to retry.
        StoreError::Unavailable(e) => StoreError::Unavailable(sqlx::Error::Protocol(e.to_string())),
        StoreError::Internal(e) => StoreError::Internal(anyhow::anyhow!("{e:#}")),
    }
}

async fn serve(store: &PgStore, batch: Vec<Ask>) {
    match claim(store, &batch).await {
        Ok(leases) => {
            for (ask, leases) in batch.into_iter().zip(leases) {
                let _ = ask.reply.send(Ok(leases));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, asks = batch.len(), "lease claim failed");
            for ask in batch {
                let _ = ask.reply.send(Err(replicate(&e)));
            }
        }
    }
}

/// Serves `batch` in one transaction; one list of leases per ask, in order.
async fn claim(store: &PgStore, batch: &[Ask]) -> StoreResult<Vec<Vec<JobLease>>> {
    // Once per claim rather than per call: builds that fail with the workers live now (every
    // asking worker was marked seen before it asked) get their error before anything is
    // picked. All asks of one coordinator carry the same settings.
    let now = store.clock.now();
    if let Some(first) = batch.first() {
        fail_stalled_builds(&store.pool, first.lease, first.max_attempts, now).await?;
    }
    let mut tx = store.pool.begin().await?;
    sqlx::query(statements::LEASE_SETTINGS)
        .execute(&mut *tx)
        .await?;
    let workers: Vec<i64> = batch.iter().map(|a| a.worker_id).collect();
    let particular: HashSet<i64> = sqlx::query_scalar(statements::PARTICULAR_WORKERS)
        .bind(&workers)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
    let (special, ordinary): (Vec<usize>, Vec<usize>) =
        (0..batch.len()).partition(|&i| particular.contains(&batch[i].worker_id));
    let mut rows: Vec<Vec<Leased>> = (0..batch.len()).map(|_| Vec::new()).collect();

    let want: i64 = ordinary.iter().map(|&i| i64::from(batch[i].max)).sum();
    if want > 0 {
        // Expired leases first (a dead worker's jobs are redone before the queue moves on),
        // then the queue in id order: what each call would get on its own.
        let mut ids: Vec<i64> = sqlx::query_scalar(statements::CLAIM_EXPIRED)
            .bind(want)
            .bind(now)
            .fetch_all(&mut *tx)
            .await?;
        if (ids.len() as i64) < want {
            let queued: Vec<i64> = sqlx::query_scalar(statements::CLAIM_QUEUED)
                .bind(want - ids.len() as i64)
                .fetch_all(&mut *tx)
                .await?;
            ids.extend(queued);
        }
        // Dealt out in the order the calls asked.
        let mut claimed = ids.into_iter();
        let mut owner: Vec<usize> = Vec::new();
        let (mut job, mut worker, mut lease) = (Vec::new(), Vec::new(), Vec::new());
        for &i in &ordinary {
            for id in claimed.by_ref().take(batch[i].max as usize) {
                owner.push(i);
                job.push(id);
                worker.push(batch[i].worker_id);
                lease.push(secs(batch[i].lease));
            }
        }
        if !job.is_empty() {
            let assigned: Vec<Leased> = sqlx::query_as(statements::ASSIGN)
                .bind(&job)
                .bind(&worker)
                .bind(&lease)
                .bind(now)
                .fetch_all(&mut *tx)
                .await?;
            let mut by_id: HashMap<i64, Leased> = assigned.into_iter().map(|r| (r.id, r)).collect();
            for (id, i) in job.iter().zip(owner) {
                if let Some(row) = by_id.remove(id) {
                    rows[i].push(row);
                }
            }
        }
    }
    for &i in &special {
        let ask = &batch[i];
        rows[i] = pick_for(&mut tx, ask.worker_id, ask.max, ask.lease, now).await?;
    }
    // Cross-checks only for the room work left: they run after all work.
    for (i, ask) in batch.iter().enumerate() {
        if rows[i].len() < ask.max as usize {
            let room = ask.max - rows[i].len() as u32;
            rows[i].extend(checks::pick(&mut tx, ask.worker_id, room, ask.lease, now).await?);
        }
    }
    let mut out = Vec::with_capacity(batch.len());
    for r in &rows {
        out.push(leases_of(store, &mut tx, r).await?);
    }
    tx.commit().await?;
    Ok(out)
}
