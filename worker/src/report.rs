//! Reporting results: one uploader per worker collects the results of every slot and sends
//! them in batches (one request for many jobs), retrying transient failures without losing or
//! duplicating anything. The per-job answers route back to the jobs through [`HeldLeases`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sweep_client::{with_retry, ClientError};
use sweep_domain::wire::{
    JobReport, LeaseStatus, PositionResult, SpeedReport, WorkerReport, WorkerReportAck,
    MAX_JOBS_PER_CALL,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::CoordinatorClient;
use crate::leases::{HeldLeases, LeaseKey};
use crate::stop::{JobStop, StopReason};

/// Bytes of results that trigger an upload even before `batch_max` results, so one request
/// stays well under the coordinator's body limit (4 MiB) when engines send long error texts.
const MAX_UPLOAD_BYTES: usize = 1 << 20;

/// What a slot hands the uploader about one job.
#[derive(Debug)]
pub enum Upload {
    /// One computed position.
    Result(PositionResult),
    /// Every position of the lease was sent: the next upload closes the job.
    Finished,
    /// A speed job's measurements (every pair of runs, or those before the one that failed):
    /// the next upload carries them and closes the job, which has no position results.
    Speed(SpeedReport),
}

/// A message from a slot to the uploader.
#[derive(Debug)]
pub struct UploadMsg {
    /// The lease the message is about.
    pub key: LeaseKey,
    /// The job's stop signal: results of a discarded job are dropped.
    pub stop: Arc<JobStop>,
    /// The content.
    pub what: Upload,
}

/// Batching limits of the uploader.
#[derive(Debug, Clone, Copy)]
pub struct UploadPolicy {
    /// Results per upload at most.
    pub batch_max: usize,
    /// Longest wait of a result (or a job's close) before upload.
    pub interval: Duration,
}

/// Results waiting for the next upload, per lease.
#[derive(Default)]
struct Pending {
    jobs: BTreeMap<LeaseKey, PendingJob>,
    results: usize,
    bytes: usize,
}

struct PendingJob {
    stop: Arc<JobStop>,
    results: Vec<PositionResult>,
    finished: bool,
    speed: Option<SpeedReport>,
}

/// What one report of an upload was about, to route its ack.
struct Sent {
    key: LeaseKey,
    stop: Arc<JobStop>,
    finished: bool,
    results: usize,
}

impl Pending {
    fn push(&mut self, msg: UploadMsg) {
        if msg.stop.is_discarded() {
            return;
        }
        let job = self.jobs.entry(msg.key).or_insert_with(|| PendingJob {
            stop: msg.stop,
            results: Vec::new(),
            finished: false,
            speed: None,
        });
        match msg.what {
            Upload::Result(r) => {
                // A rough JSON size: the fixed fields plus the free texts.
                self.bytes += 200 + r.bestmove.len() + r.error.as_ref().map_or(0, |e| e.len());
                self.results += 1;
                job.results.push(r);
            }
            Upload::Finished => job.finished = true,
            Upload::Speed(report) => {
                // A rough JSON size: each pair's figures plus the error text.
                self.bytes +=
                    200 + 200 * report.runs.len() + report.error.as_ref().map_or(0, |e| e.len());
                job.speed = Some(report);
                job.finished = true;
            }
        }
    }

    fn is_full(&self, policy: &UploadPolicy) -> bool {
        self.results >= policy.batch_max.max(1) || self.bytes >= MAX_UPLOAD_BYTES
    }

    /// Takes everything still wanted, as reports and what each was about.
    fn take(&mut self) -> Vec<(Sent, JobReport)> {
        self.results = 0;
        self.bytes = 0;
        std::mem::take(&mut self.jobs)
            .into_iter()
            .filter(|(_, job)| !job.stop.is_discarded())
            .map(|(key, job)| {
                let sent = Sent {
                    key,
                    stop: job.stop,
                    finished: job.finished,
                    results: job.results.len(),
                };
                let report = JobReport {
                    job_id: key.job_id,
                    attempt: key.attempt,
                    results: job.results,
                    finished: job.finished,
                    speed: job.speed,
                };
                (sent, report)
            })
            .collect()
    }
}

/// The worker's one uploader.
pub struct Uploader {
    /// Coordinator client.
    pub client: CoordinatorClient,
    /// Our worker id.
    pub worker_id: i64,
    /// Batching limits.
    pub policy: UploadPolicy,
    /// Where per-job answers go.
    pub held: Arc<HeldLeases>,
    /// Fires when undelivered results should be given up (shutdown grace over).
    pub give_up: CancellationToken,
}

impl Uploader {
    /// Receives results over `rx` and uploads them until the channel closes (every slot
    /// ended), then delivers what is left. An upload goes out when `batch_max` results are
    /// waiting or the oldest has waited `interval`. While an upload is being retried nothing
    /// is received, so the bounded channel fills and holds the engines back: memory stays
    /// bounded during a coordinator outage.
    pub async fn run(self, mut rx: mpsc::Receiver<UploadMsg>) {
        let mut pending = Pending::default();
        let mut due: Option<Instant> = None;
        loop {
            let flush_due = async {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // The timer first, so a steady stream of results cannot postpone it.
                biased;
                _ = flush_due => {
                    due = None;
                    self.flush(&mut pending).await;
                }
                msg = rx.recv() => match msg {
                    Some(msg) => {
                        pending.push(msg);
                        if pending.jobs.is_empty() {
                            continue;
                        }
                        due.get_or_insert_with(|| Instant::now() + self.policy.interval);
                        if pending.is_full(&self.policy) {
                            due = None;
                            self.flush(&mut pending).await;
                        }
                    }
                    None => break,
                },
            }
        }
        self.flush(&mut pending).await;
    }

    /// Uploads everything pending, at most [`MAX_JOBS_PER_CALL`] jobs per request.
    async fn flush(&self, pending: &mut Pending) {
        let mut all = pending.take();
        while !all.is_empty() {
            let rest = all.split_off(all.len().min(MAX_JOBS_PER_CALL));
            self.send(std::mem::replace(&mut all, rest)).await;
        }
    }

    async fn send(&self, batch: Vec<(Sent, JobReport)>) {
        let (sent, reports): (Vec<Sent>, Vec<JobReport>) = batch.into_iter().unzip();
        let body = WorkerReport { reports };
        match self.call(&body).await {
            Ok(ack) => self.apply(&sent, &ack),
            Err(e @ ClientError::Fatal { .. }) if sent.len() > 1 => {
                // One bad report fails the whole call; find it job by job, so one broken
                // job does not cost the others.
                tracing::warn!(error = %e, jobs = sent.len(), "upload refused; retrying job by job");
                for (one, report) in sent.into_iter().zip(body.reports) {
                    let body = WorkerReport {
                        reports: vec![report],
                    };
                    match self.call(&body).await {
                        Ok(ack) => self.apply(std::slice::from_ref(&one), &ack),
                        Err(e) => self.fail(&[one], e),
                    }
                }
            }
            Err(e) => self.fail(&sent, e),
        }
    }

    async fn call(&self, body: &WorkerReport) -> Result<WorkerReportAck, ClientError> {
        with_retry("result upload", &self.give_up, || {
            self.client.report(self.worker_id, body)
        })
        .await
    }

    /// Routes each job's answer: a closed job leaves the held set; a lost or cancelled one is
    /// stopped.
    fn apply(&self, sent: &[Sent], ack: &WorkerReportAck) {
        if ack.jobs.len() != sent.len() {
            tracing::error!(
                sent = sent.len(),
                acked = ack.jobs.len(),
                "upload ack does not match the request"
            );
        }
        for (s, a) in sent.iter().zip(&ack.jobs) {
            if a.job_id != s.key.job_id {
                tracing::error!(
                    job_id = s.key.job_id,
                    acked = a.job_id,
                    "upload ack out of order"
                );
                continue;
            }
            tracing::debug!(
                job_id = a.job_id,
                results = s.results,
                accepted = a.accepted,
                duplicates = a.duplicates,
                finished = s.finished,
                status = ?a.status,
                "uploaded results"
            );
            for r in &a.rejected {
                // The engine printed something unusable: the coordinator counts it as a failed
                // try of the position and hands it out again, so there is nothing to resend.
                tracing::warn!(
                    job_id = a.job_id,
                    index = r.index,
                    field = %r.field,
                    message = %r.message,
                    "the coordinator refused a result"
                );
            }
            match a.status {
                LeaseStatus::Held if s.finished => self.held.remove(s.key),
                LeaseStatus::Held => {}
                status => self.held.apply(s.key, &s.stop, status),
            }
        }
    }

    fn fail(&self, sent: &[Sent], e: ClientError) {
        let results: usize = sent.iter().map(|s| s.results).sum();
        if e == ClientError::Cancelled {
            tracing::warn!(results, "gave up delivering results on shutdown");
            return;
        }
        for s in sent {
            tracing::error!(job_id = s.key.job_id, error = %e, results = s.results,
                "coordinator rejected results; abandoning job");
            s.stop.stop(StopReason::Rejected);
            self.held.remove(s.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons() {
        let shutdown = CancellationToken::new();
        let s = JobStop::new(&shutdown);
        assert_eq!(s.reason(), None);
        shutdown.cancel();
        assert_eq!(s.reason(), Some(StopReason::Shutdown));
        assert!(
            !s.is_discarded(),
            "shutdown keeps results for a last upload"
        );

        let s = JobStop::new(&CancellationToken::new());
        s.stop(StopReason::LeaseLost);
        s.stop(StopReason::Cancelled);
        assert_eq!(s.reason(), Some(StopReason::LeaseLost));
        assert!(s.is_discarded() && s.is_stopped());
    }

    fn result(index: u32) -> PositionResult {
        PositionResult {
            counters: Default::default(),
            index,
            nodes: 1,
            bestmove: "e2e4".into(),
            solved: false,
            score_cp: None,
            score_mate: None,
            depth: 1,
            time_ms: 1,
            error: None,
        }
    }

    #[test]
    fn pending_groups_per_lease_and_drops_discarded_jobs() {
        let policy = UploadPolicy {
            batch_max: 3,
            interval: Duration::from_secs(1),
        };
        let never = CancellationToken::new();
        let (a, b) = (JobStop::new(&never), JobStop::new(&never));
        let ka = LeaseKey {
            job_id: 1,
            attempt: 1,
        };
        let kb = LeaseKey {
            job_id: 2,
            attempt: 1,
        };
        let mut p = Pending::default();
        let msg = |key, stop: &Arc<JobStop>, what| UploadMsg {
            key,
            stop: stop.clone(),
            what,
        };
        p.push(msg(ka, &a, Upload::Result(result(0))));
        p.push(msg(kb, &b, Upload::Result(result(5))));
        assert!(!p.is_full(&policy));
        p.push(msg(ka, &a, Upload::Result(result(1))));
        p.push(msg(ka, &a, Upload::Finished));
        assert!(p.is_full(&policy));
        b.stop(StopReason::LeaseLost);
        p.push(msg(kb, &b, Upload::Result(result(6))));
        let taken = p.take();
        assert_eq!(taken.len(), 1, "the lost job's results are dropped");
        let (sent, report) = &taken[0];
        assert_eq!((sent.key, sent.finished, sent.results), (ka, true, 2));
        assert_eq!((report.job_id, report.results.len()), (1, 2));
        assert!(p.take().is_empty());
    }

    #[test]
    fn a_speed_report_closes_its_job() {
        use sweep_domain::wire::{SpeedRun, SpeedSide};
        let never = CancellationToken::new();
        let key = LeaseKey {
            job_id: 4,
            attempt: 2,
        };
        let side = SpeedSide {
            cpu_us: 10,
            wall_us: 12,
            nodes: 99,
        };
        let speed = SpeedReport {
            runs: vec![SpeedRun {
                repeat: 0,
                base: side,
                test: side,
            }],
            error: Some("repeat 1, baseline run: engine crashed".into()),
        };
        let mut p = Pending::default();
        p.push(UploadMsg {
            key,
            stop: JobStop::new(&never),
            what: Upload::Speed(speed.clone()),
        });
        let taken = p.take();
        let (sent, report) = &taken[0];
        assert_eq!((sent.key, sent.finished, sent.results), (key, true, 0));
        assert_eq!((report.finished, report.results.len()), (true, 0));
        assert_eq!(report.speed.as_ref(), Some(&speed));
    }
}
