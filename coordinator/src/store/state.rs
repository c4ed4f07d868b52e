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
}

/// The state of a sweep. Cancellation wins; a sweep whose jobs are all closed has failed when
/// there is nothing to compare against (no baseline, or no build at all), is done with errors
/// when a variant failed to build or a position failed for good, and is done otherwise.
pub(crate) fn state_of(c: SweepCounts) -> SweepState {
    if c.cancelled {
        SweepState::Cancelled
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
