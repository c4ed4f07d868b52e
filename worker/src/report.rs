//! Reporting for one job: the result uploader (batching, idempotent retries) and the
//! heartbeat that keeps the lease alive. Both can stop the job ([`JobStop`]) when the
//! coordinator says the sweep was cancelled or the lease is gone.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sweep_domain::wire::{Heartbeat, PositionResult, ResultBatch};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::client::{with_retry, ClientError, CoordinatorClient};

/// Why a job stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The sweep was cancelled.
    Cancelled,
    /// The lease went to another attempt.
    LeaseLost,
    /// The coordinator rejected our reports for good; the lease is left to expire.
    Rejected,
    /// The worker is shutting down.
    Shutdown,
}

/// Stop signal of one job. `running` stops the engine (any reason, including worker shutdown);
/// `discard` additionally tells the uploader that pending results are worthless.
#[derive(Debug)]
pub struct JobStop {
    running: CancellationToken,
    discard: CancellationToken,
    reason: OnceLock<StopReason>,
}

impl JobStop {
    /// A stop signal that also fires when `shutdown` does.
    pub fn new(shutdown: &CancellationToken) -> Arc<Self> {
        Arc::new(JobStop {
            running: shutdown.child_token(),
            discard: CancellationToken::new(),
            reason: OnceLock::new(),
        })
    }

    /// Stops the job for `reason` (the first reason wins).
    pub fn stop(&self, reason: StopReason) {
        let _ = self.reason.set(reason);
        if reason != StopReason::Shutdown {
            self.discard.cancel();
        }
        self.running.cancel();
    }

    /// Fires when the job must stop searching.
    pub fn token(&self) -> &CancellationToken {
        &self.running
    }

    /// Has the job been told to stop?
    pub fn is_stopped(&self) -> bool {
        self.running.is_cancelled()
    }

    /// Why it stopped (a stop without a recorded reason is the worker's shutdown).
    pub fn reason(&self) -> Option<StopReason> {
        if !self.running.is_cancelled() {
            return None;
        }
        Some(self.reason.get().copied().unwrap_or(StopReason::Shutdown))
    }
}

/// Identity of the lease the reports are about.
#[derive(Debug, Clone, Copy)]
pub struct LeaseId {
    /// Job id.
    pub job_id: i64,
    /// Attempt held.
    pub attempt: i32,
    /// Our worker id.
    pub worker_id: i64,
}

/// Batching limits of the uploader.
#[derive(Debug, Clone, Copy)]
pub struct UploadPolicy {
    /// Results per batch at most.
    pub batch_max: usize,
    /// Longest wait of a result before upload.
    pub interval: Duration,
    /// On shutdown, how long to keep trying to deliver.
    pub shutdown_grace: Duration,
}

/// How the uploader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UploadEnd {
    /// Every expected result was delivered with `finished: true`.
    Finished,
    /// Stopped early; results not yet delivered were dropped (or delivered best-effort on
    /// shutdown).
    Stopped(StopReason),
}

/// Receives results over `rx` and uploads them in batches until the channel closes. The last
/// batch carries `finished: true` when `expected` results were received. Transient failures are
/// retried with the batch kept in memory (the coordinator ignores duplicates); a full channel
/// meanwhile holds the engine back, which keeps memory bounded.
pub async fn upload_results(
    client: CoordinatorClient,
    lease: LeaseId,
    policy: UploadPolicy,
    expected: usize,
    mut rx: mpsc::Receiver<PositionResult>,
    stop: Arc<JobStop>,
) -> UploadEnd {
    let mut pending: Vec<PositionResult> = Vec::with_capacity(policy.batch_max);
    let mut received = 0usize;
    let mut due: Option<Instant> = None;
    loop {
        let flush_due = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = stop.discard.cancelled() => return UploadEnd::Stopped(stop_reason(&stop)),
            msg = rx.recv() => match msg {
                Some(r) => {
                    pending.push(r);
                    received += 1;
                    due.get_or_insert_with(|| Instant::now() + policy.interval);
                    if pending.len() >= policy.batch_max.max(1) {
                        due = None;
                        if let Err(reason) = send(&client, lease, &mut pending, false, &stop).await {
                            return UploadEnd::Stopped(reason);
                        }
                    }
                }
                None => break,
            },
            _ = flush_due => {
                due = None;
                if let Err(reason) = send(&client, lease, &mut pending, false, &stop).await {
                    return UploadEnd::Stopped(reason);
                }
            }
        }
    }
    let finished = received == expected;
    if !finished && !stop.is_stopped() {
        // The runner never closes early without a stop; be safe and do not close the job.
        tracing::error!(received, expected, "result stream ended early");
    }
    let last = send(&client, lease, &mut pending, finished, &stop);
    let delivered = if stop.is_stopped() {
        // Shutting down: deliver what was computed, but only for a bounded time.
        match tokio::time::timeout(policy.shutdown_grace, last).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!("gave up delivering results on shutdown");
                Err(StopReason::Shutdown)
            }
        }
    } else {
        last.await
    };
    match delivered {
        Ok(()) if finished => UploadEnd::Finished,
        Ok(()) => UploadEnd::Stopped(stop_reason(&stop)),
        Err(reason) => UploadEnd::Stopped(reason),
    }
}

fn stop_reason(stop: &JobStop) -> StopReason {
    stop.reason().unwrap_or(StopReason::Shutdown)
}

/// Uploads `pending` (and the `finished` flag) until accepted; empties `pending` on success.
async fn send(
    client: &CoordinatorClient,
    lease: LeaseId,
    pending: &mut Vec<PositionResult>,
    finished: bool,
    stop: &JobStop,
) -> Result<(), StopReason> {
    if pending.is_empty() && !finished {
        return Ok(());
    }
    let batch = ResultBatch {
        worker_id: lease.worker_id,
        attempt: lease.attempt,
        results: std::mem::take(pending),
        finished,
    };
    let n = batch.results.len();
    match with_retry("result upload", &stop.discard, || {
        client.upload(lease.job_id, &batch)
    })
    .await
    {
        Ok(ack) => {
            tracing::debug!(
                results = n,
                accepted = ack.accepted,
                duplicates = ack.duplicates,
                finished,
                "uploaded results"
            );
            if ack.cancelled {
                tracing::info!("sweep cancelled; stopping job");
                stop.stop(StopReason::Cancelled);
                return Err(StopReason::Cancelled);
            }
            Ok(())
        }
        Err(ClientError::Cancelled) => Err(stop_reason(stop)),
        Err(ClientError::LeaseLost(msg)) => {
            tracing::warn!(%msg, "lease lost; dropping job");
            stop.stop(StopReason::LeaseLost);
            Err(StopReason::LeaseLost)
        }
        Err(e) => {
            tracing::error!(error = %e, results = n, "coordinator rejected results; abandoning job");
            stop.stop(StopReason::Rejected);
            Err(StopReason::Rejected)
        }
    }
}

/// Sends a heartbeat every `every` until the job stops; stops the job when the coordinator
/// reports the sweep cancelled or the lease lost. Transient failures are only logged: the next
/// beat (or the next upload) tries again.
pub async fn heartbeat(
    client: CoordinatorClient,
    lease: LeaseId,
    every: Duration,
    stop: Arc<JobStop>,
) {
    let every = every.max(Duration::from_millis(100));
    let mut ticker = tokio::time::interval_at(Instant::now() + every, every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let beat = Heartbeat {
        worker_id: lease.worker_id,
        attempt: lease.attempt,
    };
    loop {
        let answer = tokio::select! {
            _ = stop.token().cancelled() => return,
            _ = ticker.tick() => tokio::select! {
                _ = stop.token().cancelled() => return,
                r = client.heartbeat(lease.job_id, &beat) => r,
            },
        };
        match answer {
            Ok(ack) if ack.cancelled => {
                tracing::info!("sweep cancelled; stopping job");
                stop.stop(StopReason::Cancelled);
                return;
            }
            Ok(_) => {}
            Err(ClientError::LeaseLost(msg)) => {
                tracing::warn!(%msg, "lease lost; dropping job");
                stop.stop(StopReason::LeaseLost);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
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
            !s.discard.is_cancelled(),
            "shutdown keeps results for a last upload"
        );

        let s = JobStop::new(&CancellationToken::new());
        s.stop(StopReason::LeaseLost);
        s.stop(StopReason::Cancelled);
        assert_eq!(s.reason(), Some(StopReason::LeaseLost));
        assert!(s.discard.is_cancelled() && s.is_stopped());
    }
}
