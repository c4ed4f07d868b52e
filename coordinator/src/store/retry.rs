//! The retry rules both backends apply, kept apart from SQL so they read (and are tested)
//! in one place:
//! - a position whose search errors is retried; once it has failed `max_attempts` times it
//!   gets a final result carrying the reasons, and is never tried again;
//! - a build that fails on a worker fails its variant only once it failed on
//!   `min(max_attempts, live workers)` distinct workers of `min(max_attempts, live tokens)`
//!   distinct tokens; until then another worker may try. Tokens count because one token may
//!   register many workers: without them one token could fail any build by itself while
//!   another token's workers were there to try it.

use std::collections::BTreeMap;

use sweep_domain::wire::PositionError;

use super::batch::Checked;

/// "time" or "times".
fn times(n: usize) -> &'static str {
    if n == 1 {
        "time"
    } else {
        "times"
    }
}

/// Distinct reasons in the order they first occurred, joined: the same crash three times is
/// one reason, a crash then a timeout are two worth seeing.
fn distinct(reasons: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for r in reasons {
        if !seen.contains(&r.as_str()) {
            seen.push(r);
        }
    }
    seen.join("; ")
}

/// The stored error of a position that failed for good after `reasons.len()` tries.
pub(crate) fn final_error(reasons: &[String]) -> String {
    let n = reasons.len();
    format!("failed {n} {}: {}", times(n), distinct(reasons))
}

/// How a position that failed but will be retried shows in the sweep's error list.
pub(crate) fn pending_error(reasons: &[String]) -> String {
    let n = reasons.len();
    format!(
        "failed {n} {} so far, retrying: {}",
        times(n),
        distinct(reasons)
    )
}

/// The final results for the failing positions of a batch: those among `failed` whose
/// recorded failures (`failures`: reasons by position index, oldest first) reached
/// `max_attempts`. The last failing result of each position lends its numbers.
pub(crate) fn final_failures(
    failed: &[Checked],
    failures: &BTreeMap<i32, Vec<String>>,
    max_attempts: u32,
) -> Vec<Checked> {
    let mut last: BTreeMap<i32, &Checked> = BTreeMap::new();
    for c in failed {
        last.insert(c.index, c);
    }
    last.into_iter()
        .filter_map(|(i, c)| {
            let reasons = failures.get(&i)?;
            (reasons.len() as u64 >= u64::from(max_attempts.max(1))).then(|| Checked {
                error: Some(final_error(reasons)),
                solved: false,
                ..c.clone()
            })
        })
        .collect()
}

/// Workers, and the distinct tokens that registered them (a worker registered without a
/// token counts as a token of its own): who failed a build, or who could try it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// Distinct workers.
    pub workers: i64,
    /// Distinct tokens among them.
    pub tokens: i64,
}

impl Tally {
    /// `n` workers, each of its own token.
    #[cfg(test)]
    fn each_own(n: i64) -> Self {
        Tally {
            workers: n,
            tokens: n,
        }
    }
}

/// Whether a build that failed on `failed` (distinct workers and their tokens) fails its
/// variant, with `live` workers (and their tokens) seen within the last lease that could take
/// it: both counts must reach `max_attempts`, or all there are live if fewer. Waiting for more
/// workers or tokens than are alive would stall the variant forever; one live worker (the
/// reporter) is always assumed.
pub(crate) fn build_fails(failed: Tally, max_attempts: u32, live: Tally) -> bool {
    let needed = |live: i64| i64::from(max_attempts.max(1)).min(live.max(1));
    failed.workers >= needed(live.workers) && failed.tokens >= needed(live.tokens)
}

/// The stored build error: the latest output, saying on how many workers the build failed
/// (and of how many tokens, when fewer).
pub(crate) fn build_error(failed: Tally, output: &str) -> String {
    let plural = |n: i64| if n == 1 { "" } else { "s" };
    let workers = failed.workers;
    let tokens = if failed.tokens < workers {
        format!(" of {} token{}", failed.tokens, plural(failed.tokens))
    } else {
        String::new()
    };
    format!(
        "build failed on {workers} worker{}{tokens}; last output:\n{output}",
        plural(workers)
    )
}

/// The verdict on a build that failed on `failed` (distinct workers and their tokens), the
/// latest of them printing `last_output`: its build error when that fails the variant with
/// `live` workers live (see [`build_fails`]), else `None` (another worker may still try).
///
/// Both the failure report and leasing ask this: leasing asks again because workers die.
/// A build that had to wait for a second worker when it first failed must fail once that
/// worker is gone, or its jobs, kept from the workers that failed it, would stay queued
/// forever.
pub(crate) fn failed_build_error(
    failed: Tally,
    max_attempts: u32,
    live: Tally,
    last_output: &str,
) -> Option<String> {
    build_fails(failed, max_attempts, live).then(|| build_error(failed, last_output))
}

/// A row of the sweep's error list before formatting: a final error (a result with an
/// error), or one recorded failure of a position still to be retried.
#[derive(Debug, Clone)]
pub(crate) struct ErrorRow {
    /// Build order in the sweep.
    pub ord: i64,
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// Suite index.
    pub index: i64,
    /// Position id.
    pub position: String,
    /// Stored error or failure reason.
    pub error: String,
}

/// The sweep's error list: final errors, then (by position) pending failures with their count
/// so far, in build, suite, position order, at most `limit`. `pending` holds one row per
/// recorded failure, grouped by position and oldest first.
pub(crate) fn error_list(
    finals: Vec<ErrorRow>,
    pending: Vec<ErrorRow>,
    limit: u32,
) -> Vec<PositionError> {
    let mut rows: Vec<ErrorRow> = finals;
    let mut reasons: Vec<String> = Vec::new();
    let mut pending = pending.into_iter().peekable();
    while let Some(row) = pending.next() {
        reasons.push(row.error.clone());
        let same = |next: &ErrorRow| {
            (next.ord, &next.suite, next.index) == (row.ord, &row.suite, row.index)
        };
        if !pending.peek().is_some_and(same) {
            rows.push(ErrorRow {
                error: pending_error(&reasons),
                ..row
            });
            reasons.clear();
        }
    }
    // A position is either final or pending, never both, so the keys are unique.
    rows.sort_by(|a, b| (a.ord, &a.suite, a.index).cmp(&(b.ord, &b.suite, b.index)));
    rows.into_iter()
        .take(limit as usize)
        .map(|r| PositionError {
            build: r.build,
            suite: r.suite,
            position: r.position,
            error: r.error,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(index: i32, error: &str) -> Checked {
        Checked {
            index,
            position_id: format!("p{index}"),
            nodes: 7,
            bestmove: String::new(),
            solved: false,
            score_cp: None,
            score_mate: None,
            reached_depth: 0,
            time_ms: 1,
            error: Some(error.into()),
            counters: None,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn messages_join_distinct_reasons() {
        assert_eq!(
            final_error(&strings(&["crash", "timeout", "crash"])),
            "failed 3 times: crash; timeout"
        );
        assert_eq!(final_error(&strings(&["crash"])), "failed 1 time: crash");
        assert_eq!(
            pending_error(&strings(&["crash"])),
            "failed 1 time so far, retrying: crash"
        );
    }

    #[test]
    fn only_positions_at_the_limit_become_final() {
        let failed = [checked(1, "a"), checked(2, "b"), checked(2, "b2")];
        let failures = BTreeMap::from([(1, strings(&["a", "a"])), (2, strings(&["x", "y", "b2"]))]);
        let finals = final_failures(&failed, &failures, 3);
        assert_eq!(finals.len(), 1);
        assert_eq!(finals[0].index, 2);
        assert_eq!(finals[0].error.as_deref(), Some("failed 3 times: x; y; b2"));
        assert_eq!(final_failures(&failed, &failures, 2).len(), 2);
        // Zero attempts would mean "never record": treated as one.
        assert_eq!(final_failures(&failed, &failures, 0).len(), 2);
    }

    #[test]
    fn build_threshold_follows_live_workers() {
        let own = Tally::each_own;
        // One live worker: its failure is final (nobody else could try).
        assert!(build_fails(own(1), 3, own(1)));
        assert!(build_fails(own(1), 3, own(0)));
        // Two live workers: both must fail.
        assert!(!build_fails(own(1), 3, own(2)));
        assert!(build_fails(own(2), 3, own(2)));
        // Many live workers: max_attempts of them suffice.
        assert!(!build_fails(own(2), 3, own(10)));
        assert!(build_fails(own(3), 3, own(10)));
        assert_eq!(
            build_error(own(2), "boom"),
            "build failed on 2 workers; last output:\nboom"
        );
    }

    #[test]
    fn build_threshold_counts_tokens_too() {
        let tally = |workers, tokens| Tally { workers, tokens };
        // Ten live workers of two tokens: three workers of one token are not enough...
        assert!(!build_fails(tally(3, 1), 3, tally(10, 2)));
        // ...but three workers of both tokens are.
        assert!(build_fails(tally(3, 2), 3, tally(10, 2)));
        // Two failures of two tokens are not three workers.
        assert!(!build_fails(tally(2, 2), 3, tally(10, 2)));
        // One token alone live: its workers decide, as many as before.
        assert!(!build_fails(tally(2, 1), 3, tally(5, 1)));
        assert!(build_fails(tally(3, 1), 3, tally(5, 1)));
        assert_eq!(
            build_error(tally(3, 1), "boom"),
            "build failed on 3 workers of 1 token; last output:\nboom"
        );
    }

    #[test]
    fn failed_build_verdict_follows_the_current_live_count() {
        let own = Tally::each_own;
        // Failed on one of two live workers: another may still try.
        assert_eq!(failed_build_error(own(1), 3, own(2), "boom"), None);
        // The other died: the one left failed it already, so the build fails.
        assert_eq!(
            failed_build_error(own(1), 3, own(1), "boom").as_deref(),
            Some("build failed on 1 worker; last output:\nboom")
        );
    }

    #[test]
    fn error_list_merges_and_limits() {
        let row = |ord, index, error: &str| ErrorRow {
            ord,
            build: format!("b{ord}"),
            suite: "s".into(),
            index,
            position: format!("p{index}"),
            error: error.into(),
        };
        let finals = vec![
            row(0, 3, "failed 3 times: x"),
            row(1, 0, "failed 3 times: y"),
        ];
        let pending = vec![row(0, 1, "crash"), row(0, 1, "hang"), row(0, 4, "crash")];
        let list = error_list(finals.clone(), pending.clone(), 10);
        let got: Vec<_> = list
            .iter()
            .map(|e| (e.build.as_str(), e.position.as_str(), e.error.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("b0", "p1", "failed 2 times so far, retrying: crash; hang"),
                ("b0", "p3", "failed 3 times: x"),
                ("b0", "p4", "failed 1 time so far, retrying: crash"),
                ("b1", "p0", "failed 3 times: y"),
            ]
        );
        assert_eq!(error_list(finals, pending, 2).len(), 2);
    }
}
