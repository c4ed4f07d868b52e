//! What became of each job a worker's call named: the answer per job of an upload, a
//! heartbeat or leases given back.

use sweep_domain::wire::{BatchAck, LeaseStatus};

use crate::store::{StoreError, StoreResult};

/// What became of one job of a worker's upload or heartbeat (see
/// [`super::WorkerQueue::report_many`] and [`super::WorkerQueue::heartbeat_many`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobOutcome {
    /// `Held`: stored (or renewed) and the lease renewed; `Cancelled`: stored, but the sweep
    /// was cancelled; `Lost`: the worker does not hold the job (or it does not exist), nothing
    /// was stored for it.
    pub status: LeaseStatus,
    /// Results newly stored (recorded failures included); 0 for heartbeats.
    pub accepted: u32,
    /// Results already stored earlier; 0 for heartbeats.
    pub duplicates: u32,
}

impl JobOutcome {
    /// The outcome of a job whose lease the worker does not hold.
    pub const LOST: JobOutcome = JobOutcome {
        status: LeaseStatus::Lost,
        accepted: 0,
        duplicates: 0,
    };

    /// The outcome of a job whose lease the worker held (and gave back, or renewed).
    pub const HELD: JobOutcome = JobOutcome {
        status: LeaseStatus::Held,
        accepted: 0,
        duplicates: 0,
    };

    /// The outcome of one job's store call: a lost lease or an unknown job is that job's
    /// `Lost`; any other error is the whole call's.
    pub(crate) fn of(stored: StoreResult<BatchAck>) -> StoreResult<JobOutcome> {
        match stored {
            Ok(ack) => Ok(JobOutcome {
                status: if ack.cancelled {
                    LeaseStatus::Cancelled
                } else {
                    LeaseStatus::Held
                },
                accepted: ack.accepted,
                duplicates: ack.duplicates,
            }),
            Err(StoreError::LeaseLost { .. } | StoreError::NotFound(_)) => Ok(JobOutcome::LOST),
            Err(e) => Err(e),
        }
    }
}
