//! Taking leases: one lease loop per worker asks for as many jobs as slots are free (plus a
//! small prefetch), registers them in [`HeldLeases`] and hands them to the slots.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use sweep_client::{sleep_or_cancel, Backoff, ClientError};
use sweep_domain::wire::{self, JobLease, LeaseResponse};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::CoordinatorClient;
use crate::leases::{HeldLeases, LeaseKey};
use crate::stop::JobStop;

/// Most jobs one lease request asks for (the coordinator's limit).
const MAX_JOBS_PER_LEASE: usize = wire::MAX_JOBS_PER_LEASE as usize;

/// How long a lease request in flight when shutdown begins may still take to answer. Within
/// the worker's default shutdown grace (5 s), so the jobs it leased are released with the rest.
const IN_FLIGHT_LEASE_GRACE: Duration = Duration::from_secs(3);

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
///
/// Built by the worker and started with [`LeaseLoop::run`].
pub(crate) struct LeaseLoop {
    /// Coordinator client.
    pub(crate) client: CoordinatorClient,
    /// Our worker id.
    pub(crate) worker_id: i64,
    /// How the loop paces itself.
    pub(crate) policy: LeasePolicy,
    /// One permit per job held; a leased job carries its permit until its slot is done.
    pub(crate) permits: Arc<Semaphore>,
    /// Where the leases are registered.
    pub(crate) held: Arc<HeldLeases>,
    /// The slots' end of the jobs.
    pub(crate) jobs: mpsc::Sender<Assigned>,
    /// Stops the loop; cancelled by it to end the worker (`max_jobs`, `exit_when_idle`).
    pub(crate) shutdown: CancellationToken,
}

/// What the lease loop remembers between requests.
struct Pacing {
    /// The next pause after a "no job".
    idle: Duration,
    /// The pauses after failures.
    errors: Backoff,
    /// Jobs leased so far.
    leased_total: u64,
    /// Since when no lease was held and the coordinator had no job (`exit_when_idle`).
    idle_since: Option<Instant>,
}

/// What to do after a lease request.
enum Next {
    /// Ask again after this pause.
    Pause(Duration),
    /// End the loop.
    Stop,
}

impl LeaseLoop {
    /// Runs until `shutdown` (or until it cancels it).
    pub(crate) async fn run(self) {
        let mut pace = Pacing {
            idle: self.policy.poll_interval,
            errors: Backoff::coordinator(),
            leased_total: 0,
            idle_since: None,
        };
        loop {
            let Some(left) = self.jobs_left(pace.leased_total).await else {
                return;
            };
            let Some(permit) = self.acquire(left).await else {
                return;
            };
            let asked = permit.num_permits();
            let call = self.client.lease(self.worker_id, asked as u32);
            tokio::pin!(call);
            let leased = tokio::select! {
                r = &mut call => r,
                _ = self.shutdown.cancelled() => {
                    self.keep_answer_for_release(call).await;
                    return;
                }
            };
            // Unused permits go back before the pause, so they count as free at the next ask.
            let next = match leased {
                Ok(resp) if !resp.jobs.is_empty() => {
                    self.hand_out(&mut pace, resp.jobs, permit, asked).await
                }
                Ok(_) => {
                    drop(permit);
                    self.no_job(&mut pace)
                }
                Err(e) => {
                    drop(permit);
                    Next::Pause(self.failed(&mut pace, e))
                }
            };
            match next {
                Next::Stop => return,
                Next::Pause(pause) => {
                    if !pause.is_zero() && !sleep_or_cancel(pause, &self.shutdown).await {
                        return;
                    }
                }
            }
        }
    }

    /// Shutdown came while a lease request was in flight. The coordinator may already have
    /// leased jobs to this worker; dropping its answer would strand them until their lease
    /// expires. So wait for the answer (bounded) and hold its jobs, unstarted, for the
    /// release on the way out.
    async fn keep_answer_for_release(
        &self,
        call: impl std::future::Future<Output = Result<LeaseResponse, ClientError>>,
    ) {
        match tokio::time::timeout(IN_FLIGHT_LEASE_GRACE, call).await {
            Ok(Ok(resp)) => {
                for lease in &resp.jobs {
                    self.hold(lease);
                }
                if !resp.jobs.is_empty() {
                    tracing::info!(
                        jobs = resp.jobs.len(),
                        "jobs leased as shutdown began; giving them back"
                    );
                }
            }
            Ok(Err(_)) => {}
            Err(_) => tracing::warn!(
                "no answer to the last lease request in time; any jobs it leased expire on their own"
            ),
        }
    }

    /// Records `lease` as held (so it is heartbeated, and given back if the worker stops
    /// before reporting it) and returns its stop signal.
    fn hold(&self, lease: &JobLease) -> Arc<JobStop> {
        let key = LeaseKey {
            job_id: lease.job_id,
            attempt: lease.attempt,
        };
        let stop = JobStop::new(&self.shutdown);
        self.held.insert(key, stop.clone());
        stop
    }

    /// How many more jobs this worker may lease (`max_jobs`). `None` once it has leased them
    /// all: then it waits for them to end and cancels `shutdown`.
    async fn jobs_left(&self, leased_total: u64) -> Option<usize> {
        match self.policy.max_jobs {
            Some(max) if leased_total >= max => {
                self.held.until_empty(&self.shutdown).await;
                if !self.shutdown.is_cancelled() {
                    tracing::info!(
                        jobs = leased_total,
                        "--max-jobs reached and every job reported; exiting"
                    );
                    self.shutdown.cancel();
                }
                None
            }
            Some(max) => Some(usize::try_from(max - leased_total).unwrap_or(usize::MAX)),
            None => Some(usize::MAX),
        }
    }

    /// Waits until enough permits are free for a request worth making, then takes every free
    /// one too (up to the request limit and `left`). `None` on shutdown.
    async fn acquire(&self, left: usize) -> Option<OwnedSemaphorePermit> {
        let want = self
            .policy
            .min_batch()
            .min(self.policy.capacity())
            .min(MAX_JOBS_PER_LEASE)
            .min(left) as u32;
        let mut permit = tokio::select! {
            _ = self.shutdown.cancelled() => return None,
            p = self.permits.clone().acquire_many_owned(want) => p.ok()?,
        };
        let extra = self
            .permits
            .available_permits()
            .min(MAX_JOBS_PER_LEASE.saturating_sub(permit.num_permits()))
            .min(left.saturating_sub(permit.num_permits()));
        if let Ok(more) = self.permits.clone().try_acquire_many_owned(extra as u32) {
            permit.merge(more);
        }
        Some(permit)
    }

    /// The coordinator had no job: pause, longer each time, and end the worker once it has
    /// been idle for `exit_when_idle`.
    fn no_job(&self, pace: &mut Pacing) -> Next {
        pace.errors.reset();
        let mut pause = jitter(pace.idle);
        pace.idle = pace.idle.mul_f64(1.5).min(self.policy.poll_interval_max);
        if let Some(grace) = self.policy.exit_when_idle {
            if self.held.is_empty() {
                let since = *pace.idle_since.get_or_insert_with(Instant::now);
                let idle_for = since.elapsed();
                if idle_for >= grace {
                    tracing::info!(
                        idle_secs = idle_for.as_secs(),
                        jobs = pace.leased_total,
                        "no job for this worker; exiting (--exit-when-idle)"
                    );
                    self.shutdown.cancel();
                    return Next::Stop;
                }
                // Ask once more right when the grace ends, not up to a pause later.
                pause = pause.min(grace - idle_for);
            } else {
                pace.idle_since = None;
            }
        }
        Next::Pause(pause)
    }

    /// Registers the leased `jobs` and hands them to the slots, each with its permits (see
    /// [`LeaseLoop::permits_for`]) out of the `asked` ones; the permits left over go back.
    async fn hand_out(
        &self,
        pace: &mut Pacing,
        mut jobs: Vec<JobLease>,
        mut permit: OwnedSemaphorePermit,
        asked: usize,
    ) -> Next {
        pace.errors.reset();
        pace.idle = self.policy.poll_interval;
        pace.idle_since = None;
        let got = jobs.len();
        if got > asked {
            // Not held, so never heartbeated: their leases expire and they go elsewhere.
            tracing::error!(asked, got, "coordinator sent more jobs than asked for");
            jobs.truncate(asked);
        }
        pace.leased_total += got as u64;
        // Every job is held before the first is handed over: a shutdown while handing out
        // then still gives back the ones not yet sent.
        let stops: Vec<Arc<JobStop>> = jobs.iter().map(|lease| self.hold(lease)).collect();
        for (lease, stop) in jobs.into_iter().zip(stops) {
            let Some(permit) = self.permits_for(&lease, &mut permit).await else {
                return Next::Stop;
            };
            let assigned = Assigned {
                lease,
                stop,
                permit,
            };
            // Never blocks for long: the channel holds as many jobs as there are
            // permits. On shutdown the jobs not sent are still held, so they are given back.
            tokio::select! {
                _ = self.shutdown.cancelled() => return Next::Stop,
                sent = self.jobs.send(assigned) => if sent.is_err() { return Next::Stop },
            }
        }
        // Fewer jobs than asked: the queue is (nearly) empty, so do not ask again at once.
        Next::Pause(if got < asked {
            jitter(self.policy.poll_interval)
        } else {
            Duration::ZERO
        })
    }

    /// The permits `lease` is handed over with, taken from `batch` (those the lease call
    /// asked with) and, when it has too few left, from the semaphore, waiting for them: one
    /// for a job; for a speed job every permit of the worker, since it runs alone (see
    /// [`SpeedLease`](sweep_domain::wire::SpeedLease)). So a speed job reaches the slots only
    /// once every job before it has ended, and while it waits or runs the loop, waiting here
    /// or for a free permit, leases nothing. `None` on shutdown.
    async fn permits_for(
        &self,
        lease: &JobLease,
        batch: &mut OwnedSemaphorePermit,
    ) -> Option<OwnedSemaphorePermit> {
        let want = match lease.speed {
            Some(_) => self.policy.capacity(),
            None => 1,
        };
        // Never `None`: it splits off at most what the batch holds.
        let mut got = batch.split(want.min(batch.num_permits()))?;
        let short = want - got.num_permits();
        if short > 0 {
            let more = tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                p = self.permits.clone().acquire_many_owned(short as u32) => p.ok()?,
            };
            got.merge(more);
        }
        Some(got)
    }

    /// A lease request failed: pause by the backoff.
    fn failed(&self, pace: &mut Pacing, e: ClientError) -> Duration {
        // Only a coordinator's "no job" counts toward --exit-when-idle.
        pace.idle_since = None;
        let pause = e.pause(&mut pace.errors);
        tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "lease request failed");
        pause
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
    fn prefetch_is_one_job_per_eight_slots() {
        let p = |n| LeasePolicy::new(n, Duration::ZERO, Duration::ZERO);
        assert_eq!((p(1).capacity(), p(1).min_batch()), (1, 1));
        assert_eq!((p(8).capacity(), p(8).min_batch()), (9, 1));
        assert_eq!((p(64).capacity(), p(64).min_batch()), (72, 4));
    }
}
