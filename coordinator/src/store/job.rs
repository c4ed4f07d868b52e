//! Job bookkeeping both backends share: the row a worker call is checked against, the lease
//! check, and turning a leased job into the [`JobLease`] a worker receives.

use sweep_domain::epd::SuitePosition;
use sweep_domain::limit::Limit;
use sweep_domain::wire::{BuildSpec, JobLease, JobPosition};

use super::{StoreError, StoreResult};

/// A job as worker calls (heartbeat, report, build failure) need it, read under the lock.
#[derive(Debug, Clone)]
pub(crate) struct JobRow {
    /// queued | leased | done | failed | cancelled.
    pub state: String,
    /// Holder of the current (or last) lease.
    pub worker_id: Option<i64>,
    /// Current attempt.
    pub attempt: i32,
    /// Build.
    pub build_id: i64,
    /// Suite version.
    pub suite_id: i64,
    /// First position index of the chunk.
    pub first_index: i32,
    /// Positions in the chunk.
    pub count: i32,
    /// Sweep.
    pub sweep_id: i64,
    /// The sweep was cancelled.
    pub cancelled: bool,
    /// The job's depth limit, 0 for a node limit (part of the result key).
    pub depth: i32,
    /// The job's node limit, 0 for a depth limit.
    pub nodes_limit: i64,
    /// A cross-check (its measurements go to `cross_checks`, not `results`).
    pub check: bool,
}

impl JobRow {
    /// Suite indices the job covers.
    pub fn range(&self) -> std::ops::Range<i32> {
        self.first_index..self.first_index + self.count
    }

    /// The job's state after a report, given the positions it `has` measured now: `None`
    /// for a cancelled sweep's job (it stays closed); `leased` until the holder says it is
    /// `finished`; then `done`, or `queued` again when it has holes (positions lost or still
    /// failing), so the missing positions are leased again.
    pub fn state_after(&self, finished: bool, has: i64) -> Option<&'static str> {
        match (self.cancelled, finished) {
            (true, _) => None,
            (false, false) => Some("leased"),
            (false, true) if has >= i64::from(self.count) => Some("done"),
            (false, true) => Some("queued"),
        }
    }
}

/// The limit a stored `(depth, nodes_limit)` pair names (see the `0003_limits` migration);
/// anything else is a corrupt row.
pub(crate) fn limit_of(depth: i32, nodes_limit: i64) -> StoreResult<Limit> {
    Limit::from_key(depth, nodes_limit).ok_or_else(|| {
        StoreError::Internal(anyhow::anyhow!(
            "stored limit (depth {depth}, nodes {nodes_limit}) is not a limit"
        ))
    })
}

/// Checks that `worker_id` holds `attempt` of the job. A cancelled sweep is not a lost
/// lease: the worker is told to stop through the ack instead.
pub(crate) fn check_lease(
    job_id: i64,
    job: &JobRow,
    worker_id: i64,
    attempt: i32,
) -> StoreResult<()> {
    let holds = job.worker_id == Some(worker_id) && job.attempt == attempt;
    if holds && (job.state == "leased" || job.cancelled) {
        Ok(())
    } else {
        Err(StoreError::LeaseLost {
            job_id,
            worker_id,
            attempt,
        })
    }
}

/// What a backend read about a freshly leased job, decoded.
pub(crate) struct LeasedJob<'a> {
    /// Job id.
    pub job_id: i64,
    /// The attempt the lease just took.
    pub attempt: i32,
    /// Sweep.
    pub sweep_id: i64,
    /// First position index of the chunk.
    pub first_index: i32,
    /// Positions in the chunk.
    pub count: i32,
    /// The variant to build.
    pub build: BuildSpec,
    /// The job's search limit.
    pub limit: Limit,
    /// Suite name.
    pub suite_name: String,
    /// The suite's positions.
    pub suite: &'a [SuitePosition],
    /// Positions of the chunk that already have a result.
    pub done: &'a [i32],
}

/// The lease sent to the worker, leaving out positions that already have results; `None`
/// when none are left (the caller then closes the job).
pub(crate) fn job_lease(job: LeasedJob<'_>) -> Option<JobLease> {
    let positions: Vec<JobPosition> = (job.first_index..job.first_index + job.count)
        .filter(|i| !job.done.contains(i))
        .filter_map(|i| {
            job.suite
                .get(i as usize)
                .map(|p| JobPosition::of(i as u32, p))
        })
        .collect();
    if positions.is_empty() {
        return None;
    }
    Some(JobLease {
        job_id: job.job_id,
        attempt: job.attempt,
        sweep_id: job.sweep_id,
        build: job.build,
        suite: job.suite_name,
        limit: job.limit,
        positions,
        cross_check: false,
    })
}
