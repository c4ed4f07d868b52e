//! Holding leases, per worker rather than per job: one lease loop asks for as many jobs as
//! slots are free (plus a small prefetch), one heartbeat renews every held lease in a single
//! request, and [`HeldLeases`] routes the coordinator's per-job answers to the job they are
//! about.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use sweep_domain::wire::{
    self, HeldLease, JobLease, LeaseStatus, WorkerHeartbeat, MAX_JOBS_PER_CALL,
};
use tokio::sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::client::{sleep_or_cancel, Backoff, CoordinatorClient};
use crate::stop::{JobStop, StopReason};

/// Most jobs one lease request asks for (the coordinator's limit).
const MAX_JOBS_PER_LEASE: usize = wire::MAX_JOBS_PER_LEASE as usize;

/// Identity of a lease: a job at one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseKey {
    /// Job id.
    pub job_id: i64,
    /// Attempt held.
    pub attempt: i32,
}

/// The leases this worker holds (running, queued for a slot, or waiting for their closing
/// upload), each with the stop signal of its job.
#[derive(Debug, Default)]
pub struct HeldLeases {
    jobs: Mutex<HashMap<i64, (i32, Arc<JobStop>)>>,
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
    async fn until_empty(&self, shutdown: &CancellationToken) {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (i32, Arc<JobStop>)>> {
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

/// A leased job on its way to a slot. Holding it holds one of the worker's lease permits.
#[derive(Debug)]
pub struct Assigned {
    /// The lease.
    pub lease: JobLease,
    /// Its stop signal (registered in [`HeldLeases`]).
    pub stop: Arc<JobStop>,
    /// Released when the slot is done with the job, making room for the next lease.
    pub permit: OwnedSemaphorePermit,
}

/// How the lease loop paces itself.
#[derive(Debug, Clone, Copy)]
pub struct LeasePolicy {
    /// Job slots (engine processes).
    pub slots: usize,
    /// Jobs leased beyond the slots, so a slot finishing a job finds the next one waiting
    /// instead of waiting a round trip.
    pub prefetch: usize,
    /// First idle pause.
    pub poll_interval: Duration,
    /// Longest idle pause.
    pub poll_interval_max: Duration,
    /// Lease at most this many jobs in all, then end the worker once they have all ended.
    pub max_jobs: Option<u64>,
    /// End the worker once it held no job and the coordinator had none for it for this long.
    pub exit_when_idle: Option<Duration>,
}

impl LeasePolicy {
    /// One prefetched job per 8 slots (none below 8 slots, where a round trip per job is
    /// cheap and a prefetched job would only wait).
    pub fn new(slots: usize, poll_interval: Duration, poll_interval_max: Duration) -> Self {
        LeasePolicy {
            slots,
            prefetch: slots / 8,
            poll_interval,
            poll_interval_max,
            max_jobs: None,
            exit_when_idle: None,
        }
    }

    /// Jobs held at most (running plus waiting for a slot).
    pub fn capacity(&self) -> usize {
        self.slots + self.prefetch
    }

    /// Free permits worth a request: with a prefetch, ask once half of it is used up, so
    /// requests carry several jobs each while the slots still have jobs waiting.
    fn min_batch(&self) -> usize {
        (self.prefetch / 2).max(1)
    }
}

/// The worker's one lease loop: whenever enough lease permits are free, asks for that many
/// jobs, registers them in `held` and hands them to the slots over `jobs`. Backs off with
/// jitter while the coordinator has no work (growing to `poll_interval_max`) or fails.
///
/// With `policy.max_jobs` it leases no more than that many jobs in all and, once they have
/// all ended (no lease held), cancels `shutdown`; with `policy.exit_when_idle` it cancels
/// `shutdown` once no lease was held and every answer the coordinator gave for that long
/// was "no job". A coordinator that cannot be reached does not count as idle.
pub async fn lease_loop(
    client: CoordinatorClient,
    worker_id: i64,
    policy: LeasePolicy,
    permits: Arc<Semaphore>,
    held: Arc<HeldLeases>,
    jobs: mpsc::Sender<Assigned>,
    shutdown: CancellationToken,
) {
    let mut idle = policy.poll_interval;
    let mut errors = Backoff::coordinator();
    let mut leased_total: u64 = 0;
    let mut idle_since: Option<Instant> = None;
    loop {
        let left = match policy.max_jobs {
            Some(max) if leased_total >= max => {
                held.until_empty(&shutdown).await;
                if !shutdown.is_cancelled() {
                    tracing::info!(
                        jobs = leased_total,
                        "--max-jobs reached and every job reported; exiting"
                    );
                    shutdown.cancel();
                }
                return;
            }
            Some(max) => usize::try_from(max - leased_total).unwrap_or(usize::MAX),
            None => usize::MAX,
        };
        let want = policy
            .min_batch()
            .min(policy.capacity())
            .min(MAX_JOBS_PER_LEASE)
            .min(left) as u32;
        let mut permit = tokio::select! {
            _ = shutdown.cancelled() => return,
            p = permits.clone().acquire_many_owned(want) => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let extra = permits
            .available_permits()
            .min(MAX_JOBS_PER_LEASE.saturating_sub(permit.num_permits()))
            .min(left.saturating_sub(permit.num_permits()));
        if let Ok(more) = permits.clone().try_acquire_many_owned(extra as u32) {
            permit.merge(more);
        }
        let asked = permit.num_permits();
        let leased = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = client.lease(worker_id, asked as u32) => r,
        };
        let pause = match leased {
            Ok(resp) if resp.jobs.is_empty() => {
                errors.reset();
                let mut pause = jitter(idle);
                idle = idle.mul_f64(1.5).min(policy.poll_interval_max);
                if let Some(grace) = policy.exit_when_idle {
                    if held.is_empty() {
                        let since = *idle_since.get_or_insert_with(Instant::now);
                        let idle_for = since.elapsed();
                        if idle_for >= grace {
                            tracing::info!(
                                idle_secs = idle_for.as_secs(),
                                jobs = leased_total,
                                "no job for this worker; exiting (--exit-when-idle)"
                            );
                            shutdown.cancel();
                            return;
                        }
                        // Ask once more right when the grace ends, not up to a pause later.
                        pause = pause.min(grace - idle_for);
                    } else {
                        idle_since = None;
                    }
                }
                pause
            }
            Ok(resp) => {
                errors.reset();
                idle = policy.poll_interval;
                idle_since = None;
                let got = resp.jobs.len();
                leased_total += got as u64;
                for lease in resp.jobs {
                    let Some(one) = permit.split(1) else {
                        tracing::error!(asked, got, "coordinator sent more jobs than asked for");
                        break;
                    };
                    let key = LeaseKey {
                        job_id: lease.job_id,
                        attempt: lease.attempt,
                    };
                    let stop = JobStop::new(&shutdown);
                    held.insert(key, stop.clone());
                    let assigned = Assigned {
                        lease,
                        stop,
                        permit: one,
                    };
                    // Never blocks for long: the channel holds as many jobs as there are
                    // permits. On shutdown the lease expires and the job goes elsewhere.
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        sent = jobs.send(assigned) => if sent.is_err() { return },
                    }
                }
                // Fewer jobs than asked: the queue is (nearly) empty, so do not ask again at
                // once.
                if got < asked {
                    jitter(policy.poll_interval)
                } else {
                    Duration::ZERO
                }
            }
            Err(e) => {
                // Only a coordinator's "no job" counts toward --exit-when-idle.
                idle_since = None;
                let pause = e.pause(&mut errors);
                tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "lease request failed");
                pause
            }
        };
        // Unused permits go back before the pause, so they count as free at the next ask.
        drop(permit);
        if !pause.is_zero() && !sleep_or_cancel(pause, &shutdown).await {
            return;
        }
    }
}

/// `d` scaled by a random factor in [0.75, 1.25], so idle workers do not poll in lockstep.
fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.75..=1.25))
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

    #[test]
    fn prefetch_is_one_job_per_eight_slots() {
        let p = |n| LeasePolicy::new(n, Duration::ZERO, Duration::ZERO);
        assert_eq!((p(1).capacity(), p(1).min_batch()), (1, 1));
        assert_eq!((p(8).capacity(), p(8).min_batch()), (9, 1));
        assert_eq!((p(64).capacity(), p(64).min_batch()), (72, 4));
    }
}
