//! Holding leases, per worker rather than per job: one heartbeat renews every held lease in
//! a single request, and [`HeldLeases`] routes the coordinator's per-job answers to the job
//! they are about. (The lease loop that takes new leases is in `leasing`.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sweep_domain::wire::{HeldLease, LeaseStatus, WorkerHeartbeat, MAX_JOBS_PER_CALL};
use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::client::CoordinatorClient;
use crate::stop::{JobStop, StopReason};

/// Identity of a lease: a job at one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    /// Job id.
    pub job_id: i64,
    /// The lease (attempt) it is held under.
    pub attempt: i64,
}

/// The leases this worker holds (running, queued for a slot, or waiting for their closing
/// upload), each with the stop signal of its job.
#[derive(Debug, Default)]
pub struct HeldLeases {
    jobs: Mutex<HashMap<i64, (i64, Arc<JobStop>)>>,
    /// Woken whenever the last lease is forgotten (what `--max-jobs` waits for).
    emptied: Notify,
}

impl HeldLeases {
    /// Records a new lease. A job leased again at a newer attempt proves the older lease
    /// gone, so its job is stopped.
    pub fn insert(&self, key: LeaseKey, stop: Arc<JobStop>) {
        let old = self.lock().insert(key.job_id, (key.attempt, stop));
        if let Some((attempt, old)) = old {
            if attempt != key.attempt {
                old.stop(StopReason::LeaseLost);
            }
        }
    }

    /// Forgets a lease (a no-op when that attempt is no longer held).
    pub fn remove(&self, key: LeaseKey) {
        let mut jobs = self.lock();
        if jobs
            .get(&key.job_id)
            .is_some_and(|(a, _)| *a == key.attempt)
        {
            jobs.remove(&key.job_id);
            if jobs.is_empty() {
                self.emptied.notify_waiters();
            }
        }
    }

    /// Whether no lease is held: no job running, waiting for a slot or for its closing upload.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Every lease held, as the coordinator knows them.
    pub fn leases(&self) -> Vec<HeldLease> {
        self.snapshot()
            .into_iter()
            .map(|(k, _)| HeldLease {
                job_id: k.job_id,
                attempt: k.attempt,
            })
            .collect()
    }

    /// Waits until no lease is held (or `shutdown`).
    pub(crate) async fn until_empty(&self, shutdown: &CancellationToken) {
        loop {
            // Registered before the check, so a removal in between still wakes it.
            let emptied = self.emptied.notified();
            if self.is_empty() {
                return;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = emptied => {}
            }
        }
    }

    /// Acts on the coordinator's word about `key`: a lost or cancelled job is stopped (its
    /// engine killed, its pending results dropped) and forgotten.
    pub fn apply(&self, key: LeaseKey, stop: &JobStop, status: LeaseStatus) {
        let reason = match status {
            LeaseStatus::Held => return,
            LeaseStatus::Cancelled => StopReason::Cancelled,
            LeaseStatus::Lost => StopReason::LeaseLost,
        };
        if !stop.is_stopped() {
            tracing::info!(
                job_id = key.job_id,
                attempt = key.attempt,
                ?status,
                "stopping job"
            );
        }
        stop.stop(reason);
        self.remove(key);
    }

    /// Every held lease with its stop signal.
    fn snapshot(&self) -> Vec<(LeaseKey, Arc<JobStop>)> {
        self.lock()
            .iter()
            .map(|(&job_id, (attempt, stop))| {
                let key = LeaseKey {
                    job_id,
                    attempt: *attempt,
                };
                (key, stop.clone())
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (i64, Arc<JobStop>)>> {
        // A panic while holding this lock cannot leave the map half-updated (single calls).
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Renews every held lease with one request every `every` until `shutdown`, and stops the
/// jobs the coordinator calls lost or cancelled. Failures are only logged: the next beat (or
/// the next upload, which renews the lease too) tries again, well within the lease.
pub async fn heartbeat_loop(
    client: CoordinatorClient,
    worker_id: i64,
    every: Duration,
    held: Arc<HeldLeases>,
    shutdown: CancellationToken,
) {
    let every = every.max(Duration::from_millis(100));
    let mut ticker = tokio::time::interval_at(Instant::now() + every, every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let leases = held.snapshot();
        for chunk in leases.chunks(MAX_JOBS_PER_CALL) {
            let beat = WorkerHeartbeat {
                leases: chunk
                    .iter()
                    .map(|(k, _)| HeldLease {
                        job_id: k.job_id,
                        attempt: k.attempt,
                    })
                    .collect(),
                release: false,
            };
            let answer = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = client.heartbeat(worker_id, &beat) => r,
            };
            match answer {
                Ok(ack) => {
                    if ack.jobs.len() != chunk.len() {
                        tracing::error!(
                            sent = chunk.len(),
                            acked = ack.jobs.len(),
                            "heartbeat ack does not match the request"
                        );
                    }
                    for ((key, stop), status) in chunk.iter().zip(&ack.jobs) {
                        if status.job_id == key.job_id {
                            held.apply(*key, stop, status.status);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, leases = chunk.len(), "heartbeat failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_leases_route_statuses_by_attempt() {
        let never = CancellationToken::new();
        let held = HeldLeases::default();
        let k1 = LeaseKey {
            job_id: 9,
            attempt: 1,
        };
        let s1 = JobStop::new(&never);
        held.insert(k1, s1.clone());
        held.apply(k1, &s1, LeaseStatus::Held);
        assert!(!s1.is_stopped());
        // The same job again at a newer attempt: the old one is gone.
        let k2 = LeaseKey {
            job_id: 9,
            attempt: 2,
        };
        let s2 = JobStop::new(&never);
        held.insert(k2, s2.clone());
        assert_eq!(s1.reason(), Some(StopReason::LeaseLost));
        // A late answer about the old attempt does not forget the new one.
        held.remove(k1);
        assert_eq!(held.snapshot().len(), 1);
        held.apply(k2, &s2, LeaseStatus::Cancelled);
        assert_eq!(s2.reason(), Some(StopReason::Cancelled));
        assert!(held.snapshot().is_empty());
    }
}
