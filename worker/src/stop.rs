//! A job's stop signal, shared by the lease loop (which learns that a lease was lost or a
//! sweep cancelled), the slot running the job, and the uploader (which drops the results of
//! a job nobody wants any more).

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// Why a job stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The sweep was cancelled.
    Cancelled,
    /// The lease went to another attempt.
    LeaseLost,
    /// The coordinator rejected our reports for good; the lease is left to expire.
    Rejected,
    /// The worker is shutting down.
    Shutdown,
}

/// Stop signal of one job. `running` stops the engine (any reason, including worker shutdown);
/// `discard` additionally tells the uploader that pending results are worthless.
#[derive(Debug)]
pub struct JobStop {
    running: CancellationToken,
    discard: CancellationToken,
    reason: OnceLock<StopReason>,
}

impl JobStop {
    /// A stop signal that also fires when `shutdown` does.
    pub fn new(shutdown: &CancellationToken) -> Arc<Self> {
        Arc::new(JobStop {
            running: shutdown.child_token(),
            discard: CancellationToken::new(),
            reason: OnceLock::new(),
        })
    }

    /// Stops the job for `reason` (the first reason wins).
    pub fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        if reason != StopReason::Shutdown {
            self.discard.cancel();
        }
        self.running.cancel();
    }

    /// Fires when the job must stop searching.
    pub fn token(&self) -> &CancellationToken {
        &self.running
    }

    /// Has the job been told to stop?
    pub fn is_stopped(&self) -> bool {
        self.running.is_cancelled()
    }

    /// Are the job's results no longer wanted (lost, cancelled or rejected)?
    pub fn is_discarded(&self) -> bool {
        self.discard.is_cancelled()
    }

    /// Why it stopped (a stop without a recorded reason is the worker's shutdown).
    pub fn reason(&self) -> Option<StopReason> {
        if !self.running.is_cancelled() {
            return None;
        }
        Some(self.reason.get().copied().unwrap_or(StopReason::Shutdown))
    }
}
