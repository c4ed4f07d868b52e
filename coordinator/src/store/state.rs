//! How a sweep's state follows from its jobs and builds. Both backends gather the same
//! counts and flags (see `SUMMARY_SQL`) and derive the state here, so they cannot disagree.

use sweep_domain::wire::SweepState;

/// The counts a sweep's state is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SweepCounts {
    /// The sweep was cancelled.
    pub cancelled: bool,
    /// Jobs of the sweep.
    pub jobs: i64,
    /// Some job is still queued or leased.
    pub open: bool,
    /// Some job has been leased (a job that only took earlier sweeps' results was not).
    pub started: bool,
    /// The baseline build failed.
    pub baseline_failed: bool,
    /// Builds without a build error.
    pub ok_builds: i64,
    /// Results that are errors (positions that failed for good).
    pub error_results: i64,
    /// Builds with a build error.
    pub failed_builds: i64,
    /// Stages of a staged sweep not added yet (their promotion is not decided).
    pub stages_left: i64,
    /// Where the sweep stands with an admin's approval, when it needed one.
    pub approval: Approval,
}

/// Where a sweep held for approval stands (see `migrations/postgres/0029_approval.sql`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Approval {
    /// It never needed one, or it was approved.
    Clear,
    /// It waits for an admin.
    Pending,
    /// An admin rejected it.
    Rejected,
}

impl Approval {
    /// From the `approval` column.
    pub fn parse(column: Option<&str>) -> Self {
        match column {
            Some("pending") => Approval::Pending,
            Some("rejected") => Approval::Rejected,
            _ => Approval::Clear,
        }
    }
}

/// The state of a sweep. Cancellation wins; a sweep whose jobs are all closed has failed when
/// there is nothing to compare against (no baseline, or no build at all), is done with errors
/// when a variant failed to build or a position failed for good, and is done otherwise.
///
/// A staged sweep whose jobs are all closed but has stages left runs on: its next stage is
/// added as soon as a coordinator has decided the promotion (or ends it, when the stage
/// failed).
/// A sweep held for approval waits until an admin decides; a rejected one is cancelled, and
/// says it was rejected.
pub(crate) fn state_of(c: SweepCounts) -> SweepState {
    if c.approval == Approval::Rejected {
        SweepState::Rejected
    } else if c.cancelled {
        SweepState::Cancelled
    } else if c.approval == Approval::Pending {
        SweepState::PendingApproval
    } else if c.jobs > 0 && !c.open && c.stages_left > 0 {
        SweepState::Running
    } else if c.jobs > 0 && !c.open {
        if c.baseline_failed || c.ok_builds == 0 {
            SweepState::Failed
        } else if c.error_results > 0 || c.failed_builds > 0 {
            SweepState::DoneWithErrors
        } else {
            SweepState::Done
        }
    } else if c.started {
        SweepState::Running
    } else {
        SweepState::Queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: SweepCounts = SweepCounts {
        cancelled: false,
        jobs: 4,
        open: true,
        started: false,
        baseline_failed: false,
        ok_builds: 2,
        error_results: 0,
        failed_builds: 0,
        stages_left: 0,
        approval: Approval::Clear,
    };

    /// A sweep whose jobs are all closed and started (the state follows from the rest).
    const CLOSED: SweepCounts = SweepCounts {
        open: false,
        started: true,
        ..FRESH
    };

    #[test]
    fn open_sweeps_are_queued_until_started() {
        assert_eq!(state_of(FRESH), SweepState::Queued);
        assert_eq!(
            state_of(SweepCounts {
                started: true,
                ..FRESH
            }),
            SweepState::Running
        );
        // A sweep without jobs never counts as finished.
        assert_eq!(
            state_of(SweepCounts {
                jobs: 0,
                open: false,
                ..FRESH
            }),
            SweepState::Queued
        );
    }

    #[test]
    fn closed_sweeps_are_done_with_or_without_errors() {
        assert_eq!(state_of(CLOSED), SweepState::Done);
        assert_eq!(
            state_of(SweepCounts {
                error_results: 1,
                ..CLOSED
            }),
            SweepState::DoneWithErrors
        );
        assert_eq!(
            state_of(SweepCounts {
                failed_builds: 1,
                ok_builds: 1,
                ..CLOSED
            }),
            SweepState::DoneWithErrors
        );
    }

    #[test]
    fn held_sweeps_wait_and_rejected_ones_say_so() {
        let held = SweepCounts {
            approval: Approval::Pending,
            ..FRESH
        };
        assert_eq!(state_of(held), SweepState::PendingApproval);
        assert_eq!(
            state_of(SweepCounts {
                approval: Approval::Rejected,
                cancelled: true,
                ..FRESH
            }),
            SweepState::Rejected
        );
        assert_eq!(
            state_of(SweepCounts {
                cancelled: true,
                ..held
            }),
            SweepState::Cancelled
        );
    }

    #[test]
    fn a_closed_sweep_with_stages_left_runs_on_until_they_are_added() {
        let waiting = SweepCounts {
            stages_left: 1,
            ..CLOSED
        };
        assert_eq!(state_of(waiting), SweepState::Running);
        assert_eq!(
            state_of(SweepCounts {
                cancelled: true,
                ..waiting
            }),
            SweepState::Cancelled
        );
    }

    #[test]
    fn closed_sweeps_without_a_baseline_fail_and_cancelling_wins() {
        assert_eq!(
            state_of(SweepCounts {
                baseline_failed: true,
                ..CLOSED
            }),
            SweepState::Failed
        );
        assert_eq!(
            state_of(SweepCounts {
                ok_builds: 0,
                ..CLOSED
            }),
            SweepState::Failed
        );
        assert_eq!(
            state_of(SweepCounts {
                cancelled: true,
                ..CLOSED
            }),
            SweepState::Cancelled
        );
    }
}
