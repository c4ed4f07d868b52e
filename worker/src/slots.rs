//! The job slots: one dispatcher takes each leased job off the lease loop's channel and runs it
//! on a free slot, in a task of its own. A slot keeps its engine between jobs, so a chunk of
//! the same build does not pay for a new process; the dispatcher is the channel's only
//! receiver, so no lock is shared between slots.
//!
//! A speed job takes the whole worker: the dispatcher holds it back until every running job
//! has ended, then lends it every slot, whose engines it kills before timing (they would share
//! the machine with the timed runs, and reaping them later would count their CPU time as a
//! run's). Until it ends no slot is free, so nothing else starts; the lease loop leases
//! nothing meanwhile either, since the job holds every lease permit (see `leasing`).

use std::collections::HashMap;
use std::sync::Arc;

use sweep_domain::wire::SpeedLease;
use tokio::sync::mpsc;
use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::engine::session::EngineSession;
use crate::leasing::Assigned;
use crate::report::UploadMsg;
use crate::runner::{run_job, JobEnv};
use crate::speed::run_speed_job;

/// One job slot: its number (for the log) and the engine it keeps between jobs.
#[derive(Debug)]
struct Slot {
    id: usize,
    session: Option<EngineSession>,
}

impl Slot {
    /// Kills the slot's engine, if it has one, and reaps it.
    async fn kill(&mut self) {
        if let Some(mut s) = self.session.take() {
            s.kill().await;
        }
    }
}

/// The worker's slots: the free ones, and the jobs running on the others.
#[derive(Debug)]
pub(crate) struct Slots {
    env: Arc<JobEnv>,
    uploads: mpsc::Sender<UploadMsg>,
    free: Vec<Slot>,
    /// The running jobs, each giving back the slots it was lent.
    running: JoinSet<Vec<Slot>>,
    /// How many slots each running job holds, so a job that panicked is replaced by as many.
    lent: HashMap<Id, usize>,
    /// A speed job waiting for the running jobs to end.
    waiting: Option<(Assigned, SpeedLease)>,
    next_id: usize,
    span: Span,
}

impl Slots {
    /// `count` free slots running jobs in `env`, sending results to `uploads`; job tasks run
    /// in `span`.
    pub(crate) fn new(
        env: Arc<JobEnv>,
        uploads: mpsc::Sender<UploadMsg>,
        count: usize,
        span: Span,
    ) -> Self {
        Slots {
            env,
            uploads,
            free: (0..count).map(|id| Slot { id, session: None }).collect(),
            running: JoinSet::new(),
            lent: HashMap::new(),
            waiting: None,
            next_id: count,
            span,
        }
    }

    /// Hands the jobs of `jobs` to free slots until `shutdown`; a speed job waits for the
    /// running jobs and then runs alone (see the module's doc). A job arriving once shutdown
    /// has begun is not started, nor is a speed job still waiting: their leases are given
    /// back on the way out.
    pub(crate) async fn dispatch(
        &mut self,
        jobs: &mut mpsc::Receiver<Assigned>,
        shutdown: &CancellationToken,
    ) {
        let mut open = true;
        loop {
            if self.running.is_empty() {
                if let Some((assigned, speed)) = self.waiting.take() {
                    self.start_speed(assigned, speed);
                }
            }
            let ready = open && self.waiting.is_none() && !self.free.is_empty();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                Some(joined) = self.running.join_next_with_id() => self.returned(joined),
                next = jobs.recv(), if ready => match next {
                    Some(_) if shutdown.is_cancelled() => return,
                    Some(assigned) => match assigned.lease.speed.clone() {
                        Some(speed) => self.waiting = Some((assigned, speed)),
                        None => self.start(assigned),
                    },
                    // The lease loop ended; it cancels `shutdown` when it means the worker
                    // to end, so wait for that.
                    None => open = false,
                },
            }
        }
    }

    /// Runs `assigned` on a free slot (the caller checked there is one).
    fn start(&mut self, assigned: Assigned) {
        let Some(mut slot) = self.free.pop() else {
            return;
        };
        let env = self.env.clone();
        let uploads = self.uploads.clone();
        let job = async move {
            let outcome = run_job(
                &env,
                &mut slot.session,
                assigned.lease,
                assigned.stop,
                &uploads,
            )
            .await;
            tracing::debug!(slot = slot.id, ?outcome, "slot free");
            drop(assigned.permit);
            vec![slot]
        };
        self.spawn(job, 1);
    }

    /// Runs the speed job `assigned` (whose `speed` part is `speed`) on every slot (the
    /// caller checked that no job runs): the slots' engines are killed and reaped first.
    fn start_speed(&mut self, assigned: Assigned, speed: SpeedLease) {
        let mut slots = std::mem::take(&mut self.free);
        let lent = slots.len();
        let env = self.env.clone();
        let uploads = self.uploads.clone();
        let job = async move {
            for slot in &mut slots {
                slot.kill().await;
            }
            let outcome = run_speed_job(&env, assigned.lease, speed, assigned.stop, &uploads).await;
            tracing::debug!(
                slots = slots.len(),
                ?outcome,
                "slots free after a speed job"
            );
            drop(assigned.permit);
            slots
        };
        self.spawn(job, lent);
    }

    /// Runs `job`, which holds `slots` slots, in the slots' span.
    fn spawn(
        &mut self,
        job: impl std::future::Future<Output = Vec<Slot>> + Send + 'static,
        slots: usize,
    ) {
        let handle = self.running.spawn(job.instrument(self.span.clone()));
        self.lent.insert(handle.id(), slots);
    }

    /// Takes back the slots of a job that ended. A job that panicked took its slots' engines
    /// with it; fresh slots replace them, so a panic does not shrink the worker.
    fn returned(&mut self, joined: Result<(Id, Vec<Slot>), JoinError>) {
        match joined {
            Ok((id, slots)) => {
                self.lent.remove(&id);
                self.free.extend(slots);
            }
            Err(e) => {
                let lost = self.lent.remove(&e.id()).unwrap_or(1);
                self.span.in_scope(
                    || tracing::error!(error = %e, slots = lost, "slot failed; restarting it"),
                );
                for _ in 0..lost {
                    self.free.push(Slot {
                        id: self.next_id,
                        session: None,
                    });
                    self.next_id += 1;
                }
            }
        }
    }

    /// After shutdown: kills the free slots' engines, then waits for the running jobs (their
    /// stop signals fired with the shutdown) and kills theirs.
    pub(crate) async fn stop(&mut self) {
        for mut slot in std::mem::take(&mut self.free) {
            slot.kill().await;
        }
        while let Some(joined) = self.running.join_next().await {
            for mut slot in joined.into_iter().flatten() {
                slot.kill().await;
            }
        }
    }

    /// Aborts the jobs still running (their engines die with them) and waits for them to end.
    pub(crate) async fn abort(&mut self) {
        self.running.abort_all();
        while self.running.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweep_domain::limit::Limit;
    use tokio::sync::Semaphore;

    use crate::report::Upload;
    use crate::sandbox::Sandbox;
    use crate::speed::tests::{coordinator, env, minnow, speed_job, wac};
    use crate::stop::JobStop;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_speed_job_waits_for_the_running_jobs_and_runs_alone() {
        let (_state, url, sha) = coordinator().await;
        let cache = tempfile::tempdir().unwrap();
        let env = Arc::new(env(cache.path(), &url, Sandbox::Off, vec![]));
        let (uploads, mut uploaded) = mpsc::channel(64);
        let mut slots = Slots::new(env, uploads, 2, Span::none());
        let shutdown = CancellationToken::new();
        // Handed over at once, as a lease loop that did not hold the speed job back would.
        let permits = Arc::new(Semaphore::new(3));
        let (jobs, mut receiver) = mpsc::channel(3);
        let (mut long, _) = speed_job(minnow(&sha), minnow(&sha), wac(6), 7, 1);
        (long.job_id, long.speed) = (1, None);
        let (speed, _) = speed_job(minnow(&sha), minnow(&sha), wac(2), 3, 2);
        let (mut short, _) = speed_job(minnow(&sha), minnow(&sha), wac(2), 3, 1);
        (short.job_id, short.speed, short.limit) = (9, None, Limit::Depth(2));
        for lease in [long, speed, short] {
            let assigned = Assigned {
                lease,
                stop: JobStop::new(&shutdown),
                permit: permits.clone().try_acquire_owned().unwrap(),
            };
            jobs.send(assigned).await.unwrap();
        }
        let stop = shutdown.clone();
        let dispatcher = tokio::spawn(async move {
            slots.dispatch(&mut receiver, &stop).await;
            slots.stop().await;
        });
        let mut ends = Vec::new();
        while ends.len() < 3 {
            let msg = uploaded.recv().await.unwrap();
            match msg.what {
                Upload::Result(_) => continue,
                Upload::Finished => ends.push((msg.key.job_id, "finished")),
                Upload::Speed(report) => {
                    assert_eq!(report.problem(2), None, "{report:?}");
                    ends.push((msg.key.job_id, "speed"));
                }
            }
        }
        shutdown.cancel();
        dispatcher.await.unwrap();
        // The speed job's runs are far shorter than the long job, yet it ended after it; the
        // short job, though a slot was free, waited for it.
        assert_eq!(ends, [(1, "finished"), (5, "speed"), (9, "finished")]);
    }
}
