//! The worker protocol: registering a worker and checking who speaks for it, leases,
//! heartbeats and giving leases back (`workers.rs`), result uploads (`uploads.rs`), build
//! failures and build records, and the source snapshots workers build from (`builds.rs`).
//! Requests are bounded here (by the domain's rules for registrations and build failures,
//! and jobs per call); the worker queue (`crate::queue`) does the rest.
//!
//! Apart from the other parts because it is the hot path, called by worker tokens only,
//! never rate-limited and never made to wait for a read's turn, and because it alone meets
//! the failures of leases: a lease lost, a token holding its most live workers, an upload
//! contradicting its job. [`ProtocolError`] names those; the answers it gives are the wire
//! types the handlers send, so no store type leaves it.

use std::sync::Arc;

use sweep_domain::FieldError;

use super::auth::Denied;
use super::failure::Unavailable;
use super::shared::Shared;
use super::{LeaseSettings, Options};
use crate::queue::WorkerQueue;
use crate::store::StoreError;

mod builds;
mod uploads;
mod workers;

/// Live workers one token may hold by default (`--max-workers-per-token`): a few machines'
/// worth of workers, far below what would let one token outvote the rest in cross-checks or
/// build failures by numbers alone (those count tokens, not workers, anyway).
pub const DEFAULT_MAX_WORKERS_PER_TOKEN: u32 = 64;

/// Why a worker protocol call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The caller may not speak the protocol, or not for this worker.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// No such worker, job or source (or a source the caller may not read).
    #[error("{0} not found")]
    NotFound(String),
    /// The worker does not hold this job's lease (any more).
    #[error("job {job_id}: lease not held by worker {worker_id} at attempt {attempt}")]
    LeaseLost {
        /// Job.
        job_id: i64,
        /// Worker that reported.
        worker_id: i64,
        /// The lease (attempt) it named.
        attempt: i64,
    },
    /// The request is well-formed but contradicts the stored state (e.g. a result for a
    /// position outside the job): nothing of it was stored.
    #[error("{0}")]
    Rejected(String),
    /// The registering token already holds as many live workers as one may.
    #[error("the token already holds {limit} live workers")]
    TooManyWorkers {
        /// Live workers a token may hold.
        limit: u32,
        /// Seconds a lease lasts (at least one): the longest a place stays taken by a worker
        /// that went away.
        lease_secs: u64,
    },
    /// The database did not answer.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<StoreError> for ProtocolError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ProtocolError::NotFound(what),
            StoreError::LeaseLost {
                job_id,
                worker_id,
                attempt,
            } => ProtocolError::LeaseLost {
                job_id,
                worker_id,
                attempt,
            },
            StoreError::Invalid(why) => ProtocolError::Rejected(why),
            StoreError::TooManyWorkers { limit, lease } => ProtocolError::TooManyWorkers {
                limit,
                lease_secs: lease.as_secs().max(1),
            },
            StoreError::Unavailable(e) => ProtocolError::Unavailable(Unavailable::new(e)),
            StoreError::Internal(e) => ProtocolError::Internal(e),
        }
    }
}

/// The worker protocol's use cases.
#[derive(Clone)]
pub struct Protocol {
    shared: Shared,
    /// Leases, heartbeats, uploads, build reports: only this part speaks to the queue.
    queue: Arc<dyn WorkerQueue>,
    /// Lease timing and attempts.
    leases: LeaseSettings,
    /// Live workers one token may hold (see [`Options::max_workers_per_token`]).
    max_workers_per_token: u32,
}

impl Protocol {
    /// The protocol over `shared` and `queue`, with `options`' leases and workers per token.
    pub(crate) fn new(shared: Shared, queue: Arc<dyn WorkerQueue>, options: &Options) -> Self {
        Self {
            shared,
            queue,
            leases: options.leases,
            max_workers_per_token: options.max_workers_per_token.max(1),
        }
    }
}

/// A worker its caller was checked to speak for: made by [`Protocol::authorize_worker`] only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthorizedWorker {
    id: i64,
}

impl AuthorizedWorker {
    /// The worker's id.
    pub fn id(&self) -> i64 {
        self.id
    }
}
