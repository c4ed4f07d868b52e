//! The lease check (the fence) and what a worker receives of a leased job.
//!
//! A lease is one row per lease call (`leases`, read as a [`LeaseRow`]): its id is what the
//! worker protocol calls the attempt. Every heartbeat, upload, build failure and build record
//! names it, and anything naming a lease that is gone, or a job whose bit is set, is refused as
//! a lost lease.

use sweep_domain::epd::SuitePosition;
use sweep_domain::wire::{BuildSpec, JobLease, JobPosition, SpeedLease};

use crate::store::job::{JobRow, LeaseRow};
use crate::store::{StoreError, StoreResult};

/// Checks that `worker_id` holds `job` under the lease `attempt` (`lease`, when that row still
/// exists). A cancelled sweep is not a lost lease: the worker is told to stop through the ack
/// instead. A job whose build failed is no longer held by anyone.
pub(crate) fn check_lease(
    job: &JobRow,
    lease: Option<&LeaseRow>,
    worker_id: i64,
    attempt: i64,
) -> StoreResult<()> {
    let holds =
        lease.is_some_and(|l| l.id == attempt && l.worker_id == worker_id && l.holds(job.id));
    if holds && (job.cancelled || !job.build_failed) {
        Ok(())
    } else {
        Err(StoreError::LeaseLost {
            job_id: job.id,
            worker_id,
            attempt,
        })
    }
}

/// What a claim read about a job it hands out, decoded.
pub(crate) struct LeasedJob<'a> {
    /// The job.
    pub job: &'a JobRow,
    /// The lease (attempt) it goes out under.
    pub attempt: i64,
    /// The variant to build.
    pub build: BuildSpec,
    /// Suite name.
    pub suite_name: String,
    /// The suite's positions.
    pub suite: &'a [SuitePosition],
    /// Positions of the chunk that already have a result (a check: a measurement).
    pub done: &'a [i32],
    /// A speed job's baseline and repeats; `None` for every other job.
    pub speed: Option<SpeedLease>,
}

/// The lease sent to the worker, leaving out positions that already have results; `None`
/// when none are left (the job is complete: it is not handed out).
pub(crate) fn job_lease(leased: LeasedJob<'_>) -> StoreResult<Option<JobLease>> {
    let job = leased.job;
    let positions: Vec<JobPosition> = job
        .range()
        .filter(|i| !leased.done.contains(i))
        .filter_map(|i| {
            leased
                .suite
                .get(i as usize)
                .map(|p| JobPosition::of(i as u32, p))
        })
        .collect();
    if positions.is_empty() {
        return Ok(None);
    }
    Ok(Some(JobLease {
        job_id: job.id,
        attempt: leased.attempt,
        sweep_id: job.sweep_id,
        build: leased.build,
        suite: leased.suite_name,
        limit: job.limit()?,
        positions,
        cross_check: job.check,
        speed: leased.speed,
    }))
}
