//! How a sweep's state follows from its jobs and builds. Both backends gather the same
//! counts (see their `SUMMARY_SQL`) and derive the state here, so they cannot disagree.

use sweep_domain::wire::SweepState;

/// The counts a sweep's state is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SweepCounts {
    /// The sweep was cancelled.
    pub cancelled: bool,
    /// Jobs of the sweep.
    pub jobs: i64,
    /// Jobs done, failed or cancelled.
    pub closed: i64,
    /// Jobs leased at least once.
    pub started: i64,
    /// The baseline build failed.
    pub baseline_failed: bool,
    /// Builds without a build error.
    pub ok_builds: i64,
}

/// The state of a sweep. Cancellation wins; a sweep whose jobs are all closed is done unless
/// there is nothing to compare against (no baseline, or no build at all).
pub(crate) fn state_of(c: SweepCounts) -> SweepState {
    if c.cancelled {
        SweepState::Cancelled
    } else if c.jobs > 0 && c.closed == c.jobs {
        if c.baseline_failed || c.ok_builds == 0 {
            SweepState::Failed
        } else {
            SweepState::Done
        }
    } else if c.started > 0 {
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
        closed: 0,
        started: 0,
        baseline_failed: false,
        ok_builds: 2,
    };

    #[test]
    fn states() {
        assert_eq!(state_of(FRESH), SweepState::Queued);
        assert_eq!(
            state_of(SweepCounts {
                started: 1,
                ..FRESH
            }),
            SweepState::Running
        );
        let closed = SweepCounts {
            closed: 4,
            started: 4,
            ..FRESH
        };
        assert_eq!(state_of(closed), SweepState::Done);
        assert_eq!(
            state_of(SweepCounts {
                baseline_failed: true,
                ..closed
            }),
            SweepState::Failed
        );
        assert_eq!(
            state_of(SweepCounts {
                ok_builds: 0,
                ..closed
            }),
            SweepState::Failed
        );
        assert_eq!(
            state_of(SweepCounts {
                cancelled: true,
                ..closed
            }),
            SweepState::Cancelled
        );
        // A sweep without jobs never counts as finished.
        assert_eq!(
            state_of(SweepCounts { jobs: 0, ..FRESH }),
            SweepState::Queued
        );
    }
}
