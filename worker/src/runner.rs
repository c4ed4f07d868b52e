//! Job execution: source → build → positions on an engine, with results streamed to the
//! worker's uploader. The job's lease is kept by the worker's heartbeat, not here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sweep_domain::bounds::{clean_tail, MAX_BUILD_OUTPUT};
use sweep_domain::provenance::BuildReport;
use sweep_domain::wire::{BuildFailure, JobLease};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::allow::EngineBinaries;
use crate::binaries::{check_executable, OptionChecks};
use crate::build::BuildCache;
use crate::client::{with_retry, ClientError, CoordinatorClient};
use crate::engine::session::EngineSession;
use crate::engine::EngineSettings;
use crate::leases::{HeldLeases, LeaseKey};
use crate::provenance::BuildRecorder;
use crate::report::{Upload, UploadMsg};
use crate::source::{SourceError, SourceStore};
use crate::stop::{JobStop, StopReason};

/// What every job of this worker shares.
#[derive(Debug)]
pub(crate) struct JobEnv {
    pub client: CoordinatorClient,
    pub worker_id: i64,
    /// Host name, for messages about this machine's binaries.
    pub host: String,
    pub sources: SourceStore,
    pub builds: BuildCache,
    /// Binary-only engines this worker may start.
    pub engine_binaries: EngineBinaries,
    pub option_checks: OptionChecks,
    pub held: Arc<HeldLeases>,
    /// Build records reported to the coordinator, once per build.
    pub records: BuildRecorder,
}

/// How a job ended, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every position computed and handed to the uploader, which closes the job.
    Finished,
    /// The build (or its source) failed and was reported.
    BuildFailed,
    /// Stopped early.
    Stopped(StopReason),
}

/// Runs one leased job to its end. `slot` carries a live engine between jobs of one slot, so a
/// chunk of the same build does not pay for a new process. Results go to `uploads`; the job
/// does not wait for their delivery, so the slot moves on while the last batch is in flight.
pub(crate) async fn run_job(
    env: &JobEnv,
    slot: &mut Option<EngineSession>,
    lease: JobLease,
    stop: Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
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
        let key = LeaseKey {
            job_id: lease.job_id,
            attempt: lease.attempt,
        };
        tracing::info!(
            positions = lease.positions.len(),
            limit = %lease.limit,
            "job started"
        );
        let outcome = execute(env, slot, &lease, key, &stop, uploads).await;
        if outcome != JobOutcome::Finished && outcome != JobOutcome::Stopped(StopReason::Shutdown) {
            // Nothing more will be reported for it, so it needs no more heartbeats. (A
            // finished job stays held until the upload that closes it is acknowledged, and
            // one cut short by shutdown until the worker gives its lease back on the way
            // out.)
            env.held.remove(key);
        }
        tracing::info!(?outcome, "job ended");
        outcome
    }
    .instrument(span)
    .await
}

async fn execute(
    env: &JobEnv,
    slot: &mut Option<EngineSession>,
    lease: &JobLease,
    key: LeaseKey,
    stop: &Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
) -> JobOutcome {
    let stopped =
        |stop: &JobStop| JobOutcome::Stopped(stop.reason().unwrap_or(StopReason::Shutdown));
    let binary = match prepare(env, lease, stop).await {
        Ok(b) => b,
        Err(None) => return stopped(stop),
        Err(Some(report)) => {
            let failure = BuildFailure {
                worker_id: env.worker_id,
                attempt: key.attempt,
                // The coordinator refuses control characters (a 4xx, never retried) and keeps
                // only the tail: send what it would keep.
                output: clean_tail(&report, MAX_BUILD_OUTPUT),
            };
            let sent = with_retry("build-failed report", stop.token(), || {
                env.client.build_failed(key.job_id, &failure)
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

    report_build(env, lease, key, &binary).await;

    let mut settings = EngineSettings::from_build(&lease.build);
    if lease.cross_check {
        // A cross-check measures again in an engine process started for this position
        // alone, so state an engine kept from earlier searches cannot repeat itself.
        settings.fresh_process_per_position = true;
    }
    let mut session = match slot.take() {
        Some(s) if s.serves(&binary, &settings) => s,
        other => {
            if let Some(mut old) = other {
                old.close().await;
            }
            EngineSession::new(&binary, settings)
        }
    };

    let msg = |what| UploadMsg {
        key,
        stop: stop.clone(),
        what,
    };
    let mut complete = true;
    for pos in &lease.positions {
        let result = tokio::select! {
            biased;
            _ = stop.token().cancelled() => { complete = false; break }
            r = session.run_position(pos, lease.limit) => r,
        };
        if let Some(e) = &result.error {
            tracing::warn!(position = %pos.id, error = %e, "position failed");
        }
        // A full channel (uploads being retried) holds the engine back here.
        tokio::select! {
            biased;
            _ = stop.token().cancelled() => { complete = false; break }
            sent = uploads.send(msg(Upload::Result(result))) => if sent.is_err() { complete = false; break },
        }
    }
    if complete && !stop.is_stopped() {
        tokio::select! {
            biased;
            _ = stop.token().cancelled() => {}
            sent = uploads.send(msg(Upload::Finished)) => if sent.is_ok() {
                *slot = Some(session);
                return JobOutcome::Finished;
            },
        }
    }
    // Whatever the engine was doing is no longer wanted; kill it rather than wait.
    session.kill().await;
    *slot = Some(session);
    stopped(stop)
}

/// The binary for the lease, built (or, for a binary-only engine, found) and with the
/// variant's options accepted by the engine. `Err(None)`: the job was stopped meanwhile;
/// `Err(Some(report))`: the source, build, binary or options failed, with the text to report.
/// Tells the coordinator how this worker got the build's binary, the first time a job of the
/// build runs here. One try: provenance must never hold up the positions, and a record not
/// delivered is tried again with the build's next job.
async fn report_build(env: &JobEnv, lease: &JobLease, key: LeaseKey, binary: &Path) {
    if env.records.reported(lease.sweep_id, &lease.build.name) {
        return;
    }
    let record = match env.records.record(&lease.build, binary).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the binary to record the build");
            return;
        }
    };
    let report = BuildReport {
        worker_id: env.worker_id,
        attempt: key.attempt,
        record,
    };
    match env.client.record_build(key.job_id, &report).await {
        Ok(_) => env.records.mark_reported(lease.sweep_id, &lease.build.name),
        Err(e) => {
            tracing::warn!(error = %e, "build record not delivered; the next job of this build tries again")
        }
    }
}

async fn prepare(
    env: &JobEnv,
    lease: &JobLease,
    stop: &JobStop,
) -> Result<PathBuf, Option<String>> {
    let spec = &lease.build;
    let binary = match &spec.binary_path {
        Some(path) => {
            // The path comes from the coordinator: only a listed binary is ever started.
            env.engine_binaries
                .check(path)
                .map_err(|why| Some(format!("{why} (on host {})", env.host)))?;
            // Nothing to download or compile: the binary is either here or not.
            check_executable(Path::new(path)).map_err(|why| {
                Some(format!(
                    "binary {path} of engine `{}` is not usable on host {}: {why}",
                    spec.engine, env.host
                ))
            })?;
            PathBuf::from(path)
        }
        None => build_from_source(env, lease, stop).await?,
    };
    tokio::select! {
        _ = stop.token().cancelled() => Err(None),
        r = env.option_checks.check(&binary, spec) => match r {
            Ok(()) => Ok(binary),
            Err(e) => Err(Some(format!("{e} (on host {})", env.host))),
        },
    }
}

/// The variant built from its source snapshot.
async fn build_from_source(
    env: &JobEnv,
    lease: &JobLease,
    stop: &JobStop,
) -> Result<PathBuf, Option<String>> {
    let spec = &lease.build;
    // A refused program is reported without even fetching the source.
    env.builds
        .check_program(spec)
        .map_err(|e| Some(e.report()))?;
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
