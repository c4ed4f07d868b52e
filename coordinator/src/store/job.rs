//! Job bookkeeping both backends share: a job as worker calls see it and a lease row. (The
//! lease check and what a worker receives of a leased job are the worker queue's:
//! `queue/fence.rs`.)
//!
//! A lease is one row per lease call (`leases`): the jobs it handed out, a bit per job set
//! once that job is no longer held, and when it expires. Its id is what the worker protocol
//! calls the attempt: every heartbeat, upload and build failure names it, and anything naming
//! a lease that is gone, or a job whose bit is set, is refused as a lost lease.

use chrono::{DateTime, Utc};
use sweep_domain::limit::Limit;

use super::sql::{limit_of, Columns};
use super::{StoreError, StoreResult};

/// The columns [`JobRow::read`] reads, for a `SELECT` over `jobs j`: what never changes
/// after a sweep's submission (the flags of its sweep and build are read apart).
pub(crate) const JOB_COLUMNS: &str = "j.id, j.sweep_id, j.build_id, j.suite_id, j.first_index, \
     j.count, j.depth, j.nodes_limit, j.kind = 'check' AS is_check, j.kind = 'speed' AS is_speed, j.results_done";

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
    /// A speed job (its measurements go to `speed_runs`; its state is kept in `jobs`).
    pub speed: bool,
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
            speed: row.flag("is_speed")?,
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
