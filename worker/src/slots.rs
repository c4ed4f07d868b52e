//! The job slots: one dispatcher takes each leased job off the lease loop's channel and runs it
//! on a free slot, in a task of its own. A slot keeps its engine between jobs, so a chunk of
//! the same build does not pay for a new process; the dispatcher is the channel's only
//! receiver, so no lock is shared between slots.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::engine::session::EngineSession;
use crate::leasing::Assigned;
use crate::report::UploadMsg;
use crate::runner::{run_job, JobEnv};

/// One job slot: its number (for the log) and the engine it keeps between jobs.
#[derive(Debug)]
struct Slot {
    id: usize,
    session: Option<EngineSession>,
}

impl Slot {
    /// Kills the slot's engine, if it has one.
    async fn kill(mut self) {
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
    running: JoinSet<Slot>,
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
            next_id: count,
            span,
        }
    }

    /// Hands the jobs of `jobs` to free slots until `shutdown`. A job arriving once shutdown
    /// has begun is not started: its lease is given back on the way out.
    pub(crate) async fn dispatch(
        &mut self,
        jobs: &mut mpsc::Receiver<Assigned>,
        shutdown: &CancellationToken,
    ) {
        let mut open = true;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                Some(joined) = self.running.join_next() => self.returned(joined),
                next = jobs.recv(), if open && !self.free.is_empty() => match next {
                    Some(_) if shutdown.is_cancelled() => return,
                    Some(assigned) => self.start(assigned),
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
            slot
        };
        self.running.spawn(job.instrument(self.span.clone()));
    }

    /// Takes back the slot of a job that ended. A job that panicked took its slot's engine
    /// with it; a fresh slot replaces it, so a panic does not shrink the worker.
    fn returned(&mut self, joined: Result<Slot, JoinError>) {
        match joined {
            Ok(slot) => self.free.push(slot),
            Err(e) => {
                self.span
                    .in_scope(|| tracing::error!(error = %e, "slot failed; restarting it"));
                self.free.push(Slot {
                    id: self.next_id,
                    session: None,
                });
                self.next_id += 1;
            }
        }
    }

    /// After shutdown: kills the free slots' engines, then waits for the running jobs (their
    /// stop signals fired with the shutdown) and kills theirs.
    pub(crate) async fn stop(&mut self) {
        for slot in std::mem::take(&mut self.free) {
            slot.kill().await;
        }
        while let Some(joined) = self.running.join_next().await {
            if let Ok(slot) = joined {
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
