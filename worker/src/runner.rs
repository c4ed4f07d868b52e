//! Job execution: source → build → positions on an engine, with results streamed to the
//! uploader and a heartbeat alongside.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sweep_domain::wire::{BuildFailure, JobLease};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::build::BuildCache;
use crate::client::{with_retry, ClientError, CoordinatorClient};
use crate::engine::session::EngineSession;
use crate::engine::EngineSettings;
use crate::report::{
    heartbeat, upload_results, JobStop, LeaseId, StopReason, UploadEnd, UploadPolicy,
};
use crate::source::{SourceError, SourceStore};

/// What every job of this worker shares.
#[derive(Debug)]
pub(crate) struct JobEnv {
    pub client: CoordinatorClient,
    pub worker_id: i64,
    pub heartbeat_every: Duration,
    pub sources: SourceStore,
    pub builds: BuildCache,
    pub upload: UploadPolicy,
}

/// How a job ended, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every position reported, job closed.
    Finished,
    /// The build (or its source) failed and was reported.
    BuildFailed,
    /// Stopped early.
    Stopped(StopReason),
}

/// Runs one leased job to its end. `slot` carries a live engine between jobs of one slot, so a
/// chunk of the same build does not pay for a new process.
pub(crate) async fn run_job(
    env: Arc<JobEnv>,
    slot: &mut Option<EngineSession>,
    lease: JobLease,
    shutdown: &CancellationToken,
) -> JobOutcome {
    let span = tracing::info_span!(
        "job",
        worker_id = env.worker_id,
        sweep_id = lease.sweep_id,
        job_id = lease.job_id,
        attempt = lease.attempt,
        build = %lease.build.name,
        suite = %lease.suite,
    );
    async {
        let id = LeaseId {
            job_id: lease.job_id,
            attempt: lease.attempt,
            worker_id: env.worker_id,
        };
        let stop = JobStop::new(shutdown);
        let beat = tokio::spawn(
            heartbeat(env.client.clone(), id, env.heartbeat_every, stop.clone()).in_current_span(),
        );
        tracing::info!(
            positions = lease.positions.len(),
            depth = lease.depth,
            "job started"
        );
        let outcome = execute(&env, slot, &lease, id, &stop).await;
        beat.abort();
        tracing::info!(?outcome, "job ended");
        outcome
    }
    .instrument(span)
    .await
}

async fn execute(
    env: &Arc<JobEnv>,
    slot: &mut Option<EngineSession>,
    lease: &JobLease,
    id: LeaseId,
    stop: &Arc<JobStop>,
) -> JobOutcome {
    let stopped =
        |stop: &JobStop| JobOutcome::Stopped(stop.reason().unwrap_or(StopReason::Shutdown));
    let binary = match prepare(env, lease, stop).await {
        Ok(b) => b,
        Err(None) => return stopped(stop),
        Err(Some(report)) => {
            let failure = BuildFailure {
                worker_id: id.worker_id,
                attempt: id.attempt,
                output: report,
            };
            let sent = with_retry("build-failed report", stop.token(), || {
                env.client.build_failed(id.job_id, &failure)
            })
            .await;
            return match sent {
                Ok(_) => JobOutcome::BuildFailed,
                Err(ClientError::Cancelled) => stopped(stop),
                Err(ClientError::LeaseLost(_)) => JobOutcome::Stopped(StopReason::LeaseLost),
                Err(e) => {
                    tracing::error!(error = %e, "could not report the build failure");
                    JobOutcome::Stopped(StopReason::Rejected)
                }
            };
        }
    };

    let settings = EngineSettings::from_build(&lease.build);
    let mut session = match slot.take() {
        Some(s) if s.serves(&binary, &settings) => s,
        other => {
            if let Some(mut old) = other {
                old.close().await;
            }
            EngineSession::new(&binary, settings)
        }
    };

    let (tx, rx) = mpsc::channel(env.upload.batch_max.max(1) * 2);
    let uploader = tokio::spawn(
        upload_results(
            env.client.clone(),
            id,
            env.upload,
            lease.positions.len(),
            rx,
            stop.clone(),
        )
        .in_current_span(),
    );
    for pos in &lease.positions {
        let result = tokio::select! {
            biased;
            _ = stop.token().cancelled() => break,
            r = session.run_position(pos, lease.depth) => r,
        };
        if let Some(e) = &result.error {
            tracing::warn!(position = %pos.id, error = %e, "position failed");
        }
        tokio::select! {
            biased;
            _ = stop.token().cancelled() => break,
            sent = tx.send(result) => if sent.is_err() { break },
        }
    }
    drop(tx);
    if stop.is_stopped() {
        // Whatever the engine was doing is no longer wanted; kill it rather than wait.
        session.kill().await;
    }
    let end = match uploader.await {
        Ok(end) => end,
        Err(e) => {
            tracing::error!(error = %e, "uploader task failed");
            UploadEnd::Stopped(StopReason::Rejected)
        }
    };
    if end != UploadEnd::Finished {
        session.kill().await;
    }
    *slot = Some(session);
    match end {
        UploadEnd::Finished => JobOutcome::Finished,
        UploadEnd::Stopped(reason) => JobOutcome::Stopped(reason),
    }
}

/// The built binary for the lease. `Err(None)`: the job was stopped meanwhile;
/// `Err(Some(report))`: the source or build failed, with the text to report.
async fn prepare(
    env: &JobEnv,
    lease: &JobLease,
    stop: &JobStop,
) -> Result<PathBuf, Option<String>> {
    let spec = &lease.build;
    let source = tokio::select! {
        _ = stop.token().cancelled() => return Err(None),
        r = env.sources.ensure(&env.client, &spec.source_sha256, stop.token()) => r,
    };
    let source = match source {
        Ok(dir) => dir,
        Err(SourceError::Download(ClientError::Cancelled)) => return Err(None),
        Err(e) => {
            // The coordinator serves a snapshot we cannot use: nothing of this build can run
            // here, which is what a build failure tells the sweep's owner.
            tracing::error!(error = %e, "source snapshot unusable");
            return Err(Some(format!("source snapshot {}: {e}", spec.source_sha256)));
        }
    };
    let built = tokio::select! {
        _ = stop.token().cancelled() => return Err(None),
        r = env.builds.get(&source, spec) => r,
    };
    built.map_err(|e| Some(e.report()))
}
