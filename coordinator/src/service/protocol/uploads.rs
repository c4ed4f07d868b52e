//! A worker's upload of results: every job report of the call stored in one store call (each
//! idempotently, with its own lease check), counted for `/metrics`, and answered per job with
//! its status, its counts and the results refused as figures.

use std::sync::Arc;

use sweep_domain::wire::{JobAck, JobReport, LeaseStatus, PositionResult, RejectedResult};

use super::workers::check_jobs_per_call;
use super::{AuthorizedWorker, Protocol, ProtocolError};
use crate::queue::JobOutcome;

impl Protocol {
    /// Stores every job report of an upload; one answer per report, in order. A lost lease is
    /// that job's `Lost`, not an error of the call; invalid input (e.g. an index outside the
    /// job) fails the whole call and stores nothing of it. `reports` is shared with the
    /// store, not copied: the answers name each report again.
    pub async fn report(
        &self,
        worker: &AuthorizedWorker,
        reports: Arc<[JobReport]>,
    ) -> Result<Vec<JobAck>, ProtocolError> {
        check_jobs_per_call("reports", reports.len())?;
        let (lease, max_attempts) = (self.leases.lease, self.leases.max_attempts);
        let outcomes = self
            .queue
            .report_many(worker.id, reports.clone(), lease, max_attempts)
            .await?;
        self.count_upload(&reports, &outcomes);
        Ok(reports
            .iter()
            .zip(outcomes)
            .enumerate()
            .map(|(j, (report, outcome))| job_ack(j, report, outcome))
            .collect())
    }

    /// Counts an upload: results newly stored, and the failed tries of positions among them.
    /// A failed try is recorded once per attempt and counts as accepted then, so a report
    /// counts at most as many failures as it had accepted results: a re-sent upload (accepted
    /// 0) or a lost lease (nothing stored) counts none again.
    fn count_upload(&self, reports: &[JobReport], outcomes: &[JobOutcome]) {
        let m = &self.shared.metrics;
        m.result_uploads.inc();
        let mut accepted = 0u64;
        let mut errors = 0u64;
        for (report, outcome) in reports.iter().zip(outcomes) {
            accepted += u64::from(outcome.accepted);
            if outcome.status != LeaseStatus::Lost {
                let failed = report
                    .results
                    .iter()
                    .filter(|r| r.error.is_some() || r.problem().is_some())
                    .count() as u64;
                errors += failed.min(u64::from(outcome.accepted));
            }
        }
        m.results_accepted.inc_by(accepted);
        m.position_errors.inc_by(errors);
    }
}

/// The answer to report `j` of an upload, from what became of it.
fn job_ack(j: usize, report: &JobReport, outcome: JobOutcome) -> JobAck {
    let JobOutcome {
        status,
        accepted,
        duplicates,
    } = outcome;
    tracing::debug_span!("job", job_id = report.job_id, attempt = report.attempt).in_scope(|| {
        tracing::debug!(
            ?status,
            accepted,
            duplicates,
            finished = report.finished,
            "results stored"
        )
    });
    // Named only where something was stored: a lost lease stored nothing at all.
    let rejected = if status == LeaseStatus::Lost {
        Vec::new()
    } else {
        rejected_results(j, &report.results)
    };
    JobAck {
        job_id: report.job_id,
        status,
        accepted,
        duplicates,
        rejected,
    }
}

/// The results of report `j` refused as figures, each naming its field.
fn rejected_results(j: usize, results: &[PositionResult]) -> Vec<RejectedResult> {
    results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.problem().map(|(field, message)| RejectedResult {
                index: r.index,
                field: format!("reports[{j}].results[{i}].{field}"),
                message,
            })
        })
        .collect()
}
