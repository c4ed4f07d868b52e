//! Job bookkeeping both backends share: a job as worker calls see it, a lease row and the
//! lease check (the fence), and turning a leased job into the [`JobLease`] a worker receives.
//!
//! A lease is one row per lease call (`leases`): the jobs it handed out, a bit per job set
//! once that job is no longer held, and when it expires. Its id is what the worker protocol
//! calls the attempt: every heartbeat, upload and build failure names it, and anything naming
//! a lease that is gone, or a job whose bit is set, is refused as a lost lease.

use chrono::{DateTime, Utc};
use sweep_domain::epd::SuitePosition;
use sweep_domain::limit::Limit;
use sweep_domain::wire::{BuildSpec, JobLease, JobPosition};

use super::sql::{limit_of, Columns};
use super::{StoreError, StoreResult};

/// The columns [`JobRow::read`] reads, for a `SELECT` over `jobs j`: what never changes
/// after a sweep's submission (the flags of its sweep and build are read apart).
pub(crate) const JOB_COLUMNS: &str = "j.id, j.sweep_id, j.build_id, j.suite_id, j.first_index, \
     j.count, j.depth, j.nodes_limit, j.kind = 'check' AS is_check, j.results_done";

/// A job as worker calls (lease, heartbeat, report, build failure) need it.
#[derive(Debug, Clone)]
pub(crate) struct JobRow {
    /// Id.
    pub id: i64,
    /// Sweep.
    pub sweep_id: i64,
    /// Build.
    pub build_id: i64,
    /// Suite version.
    pub suite_id: i64,
    /// First position index of the chunk.
    pub first_index: i32,
    /// Positions in the chunk.
    pub count: i32,
    /// The job's depth limit, 0 for a node limit (part of the result key).
    pub depth: i32,
    /// The job's node limit, 0 for a depth limit.
    pub nodes_limit: i64,
    /// A cross-check (its measurements go to `cross_checks`, not `results`; its state is
    /// kept in `jobs`).
    pub check: bool,
    /// Results the job took from earlier sweeps at its submission (a fresh job, handed out
    /// for the first time, has no others).
    pub results_done: i32,
    /// The sweep was cancelled.
    pub cancelled: bool,
    /// The job's build failed (it has a build error).
    pub build_failed: bool,
}

impl JobRow {
    /// A row of a `SELECT` of [`JOB_COLUMNS`], its flags not read yet (both false).
    pub fn read(row: &impl Columns) -> StoreResult<JobRow> {
        let int32 = |col: &str| -> StoreResult<i32> {
            let v = row.int(col)?;
            i32::try_from(v).map_err(|_| {
                StoreError::Internal(anyhow::anyhow!("stored {col} {v} is out of range"))
            })
        };
        Ok(JobRow {
            id: row.int("id")?,
            sweep_id: row.int("sweep_id")?,
            build_id: row.int("build_id")?,
            suite_id: row.int("suite_id")?,
            first_index: int32("first_index")?,
            count: int32("count")?,
            depth: int32("depth")?,
            nodes_limit: row.int("nodes_limit")?,
            check: row.flag("is_check")?,
            results_done: int32("results_done")?,
            cancelled: false,
            build_failed: false,
        })
    }

    /// Suite indices the job covers.
    pub fn range(&self) -> std::ops::Range<i32> {
        self.first_index..self.first_index + self.count
    }

    /// The job's search limit.
    pub fn limit(&self) -> StoreResult<Limit> {
        limit_of(self.depth, self.nodes_limit)
    }
}

/// The columns [`LeaseRow::read`] reads, from `leases`.
pub(crate) const LEASE_COLUMNS: &str = "id, worker_id, jobs, closed, expires_at";

/// One lease call's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    /// Id: the attempt every call about its jobs names.
    pub id: i64,
    /// The worker it was handed to.
    pub worker_id: i64,
    /// The jobs it handed out (at most 64, one bit of `closed` each).
    pub jobs: Vec<i64>,
    /// Bit `i` set: `jobs[i]` is no longer held (finished, given back, queued again).
    pub closed: i64,
    /// When it expires unless renewed.
    pub expires_at: DateTime<Utc>,
}

impl LeaseRow {
    /// A row of a `SELECT` of [`LEASE_COLUMNS`].
    pub fn read(row: &impl Columns) -> StoreResult<LeaseRow> {
        Ok(LeaseRow {
            id: row.int("id")?,
            worker_id: row.int("worker_id")?,
            jobs: row.ints("jobs")?,
            closed: row.int("closed")?,
            expires_at: row.time("expires_at")?,
        })
    }

    /// The bit of `job` in `closed`, if the lease handed it out.
    pub fn bit(&self, job: i64) -> Option<i64> {
        self.jobs
            .iter()
            .position(|&j| j == job)
            .filter(|&i| i < 64)
            .map(|i| 1i64 << i)
    }

    /// Whether the lease still holds `job`.
    pub fn holds(&self, job: i64) -> bool {
        self.bit(job).is_some_and(|b| self.closed & b == 0)
    }

    /// The jobs it still holds.
    pub fn held(&self) -> impl Iterator<Item = i64> + '_ {
        self.jobs
            .iter()
            .enumerate()
            .filter(|&(i, _)| i < 64 && self.closed & (1i64 << i) == 0)
            .map(|(_, &j)| j)
    }

    /// `closed` with every bit of its jobs set: the lease holds nothing then.
    pub fn all_closed(&self) -> i64 {
        match self.jobs.len() {
            0 => 0,
            n if n >= 64 => -1,
            n => (1i64 << n) - 1,
        }
    }
}

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
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(jobs: Vec<i64>, closed: i64) -> LeaseRow {
        LeaseRow {
            id: 7,
            worker_id: 3,
            jobs,
            closed,
            expires_at: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_lease_holds_its_jobs_until_their_bits_are_set() {
        let l = lease(vec![10, 11, 12], 0b010);
        assert!(l.holds(10) && !l.holds(11) && l.holds(12));
        assert!(!l.holds(13), "a job it never handed out");
        assert_eq!(l.held().collect::<Vec<_>>(), [10, 12]);
        assert_eq!(l.bit(12), Some(0b100));
        assert_eq!(l.all_closed(), 0b111);
        let full = lease((0..64).collect(), 0);
        assert_eq!(full.all_closed(), -1);
        assert!(full.holds(63));
    }
}
