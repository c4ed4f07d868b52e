//! Validation of a result batch, shared by both backends: the whole batch is checked before
//! any of it is written, so a bad batch stores nothing.

use sweep_domain::bounds::{clean_result_error as clean_text, plausible_move};
use sweep_domain::epd::SuitePosition;
use sweep_domain::wire::{JobReport, PositionResult, SpeedReport};

use super::job::JobRow;
use super::{StoreError, StoreResult};

/// One job's report as the backends store it: a [`JobReport`] of an upload, borrowed, with
/// the worker named by the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report<'a> {
    /// Job reported on.
    pub job_id: i64,
    /// Reporting worker.
    pub worker_id: i64,
    /// The lease (attempt) the worker holds.
    pub attempt: i64,
    /// Results (may be empty).
    pub results: &'a [PositionResult],
    /// Every position of the lease is now reported: close the job.
    pub finished: bool,
    /// A speed job's measurements.
    pub speed: Option<&'a SpeedReport>,
}

impl<'a> Report<'a> {
    /// One report of `worker_id`'s upload.
    pub fn of_upload(worker_id: i64, report: &'a JobReport) -> Self {
        Report {
            job_id: report.job_id,
            worker_id,
            attempt: report.attempt,
            results: &report.results,
            finished: report.finished,
            speed: report.speed.as_ref(),
        }
    }
}

/// One result of a batch, checked and converted to the columns of `results`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Checked {
    /// Suite index (inside the job's range).
    pub index: i32,
    /// The suite's id of the position.
    pub position_id: String,
    /// Nodes searched.
    pub nodes: i64,
    /// Best move (empty on error).
    pub bestmove: String,
    /// The coordinator's verdict, never the worker's.
    pub solved: bool,
    /// Score in centipawns.
    pub score_cp: Option<i32>,
    /// Mate score in moves.
    pub score_mate: Option<i32>,
    /// Depth the search reached.
    pub reached_depth: i32,
    /// Wall time.
    pub time_ms: i64,
    /// Why there is no valid result.
    pub error: Option<String>,
    /// The search counters as a JSON object, for a valid result that has any.
    pub counters: Option<String>,
}

/// Checks every result of `report` against its job and the job's suite.
pub(crate) fn check_batch(
    job: &JobRow,
    suite: &[SuitePosition],
    report: &Report<'_>,
) -> StoreResult<Vec<Checked>> {
    let job_id = report.job_id;
    let range = job.range();
    report
        .results
        .iter()
        .map(|r| {
            let i = i32::try_from(r.index)
                .ok()
                .filter(|i| range.contains(i))
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "results: position index {} is not part of job {job_id} ({}..{})",
                        r.index, range.start, range.end
                    ))
                })?;
            let pos = suite.get(i as usize).ok_or_else(|| {
                StoreError::Invalid(format!("results: suite has no position {i}"))
            })?;
            // One bad result is that position's failed try, never the whole upload's failure
            // (which a worker would retry forever): it is retried, then recorded as failed.
            let nodes = i64::try_from(r.nodes).ok();
            let bestmove_ok = plausible_move(&r.bestmove);
            let error = match &r.error {
                Some(e) => Some(clean_text(e)),
                None => r.problem().map(|(_, problem)| problem),
            };
            let bestmove = if bestmove_ok {
                r.bestmove.clone()
            } else {
                String::new()
            };
            Ok(Checked {
                index: i,
                position_id: pos.id.clone(),
                nodes: nodes.unwrap_or(0),
                // The coordinator owns the verdict, so a worker cannot disagree with the suite.
                solved: error.is_none() && pos.is_solved(&bestmove),
                bestmove,
                score_cp: r.score_cp,
                score_mate: r.score_mate,
                reached_depth: r.depth.min(i32::MAX as u32) as i32,
                time_ms: r.time_ms.min(i64::MAX as u64) as i64,
                counters: (error.is_none() && !r.counters.is_empty())
                    .then(|| serde_json::to_string(&r.counters).expect("a map of numbers")),
                error,
            })
        })
        .collect()
}
