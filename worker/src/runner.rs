//! Job execution: source → build → positions on an engine, with results streamed to the
//! worker's uploader. The job's lease is kept by the worker's heartbeat, not here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sweep_client::{with_retry, ClientError};
use sweep_domain::bounds::{clean_tail, MAX_BUILD_OUTPUT};
use sweep_domain::provenance::BuildReport;
use sweep_domain::wire::{BuildFailure, BuildSpec, JobLease};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::allow::EngineBinaries;
use crate::binaries::{check_executable, OptionChecks};
use crate::build::BuildCache;
use crate::client::CoordinatorClient;
use crate::engine::session::EngineSession;
use crate::engine::EngineSettings;
use crate::leases::{HeldLeases, LeaseKey};
use crate::provenance::BuildRecorder;
use crate::report::{Upload, UploadMsg};
use crate::sandbox::{Confinement, Sandbox};
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
    /// The sandbox builds and engines run in.
    pub sandbox: Sandbox,
}

/// How the run of one leased job ended, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
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
) -> RunOutcome {
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
        settle(env, key, outcome);
        outcome
    }
    .instrument(span)
    .await
}

/// Ends a job's run: forgets its lease when nothing more will be reported for it, so it
/// needs no more heartbeats (a finished job stays held until the upload that closes it is
/// acknowledged, and one cut short by shutdown until the worker gives its lease back on the
/// way out), and logs the outcome.
pub(crate) fn settle(env: &JobEnv, key: LeaseKey, outcome: RunOutcome) {
    if outcome != RunOutcome::Finished && outcome != RunOutcome::Stopped(StopReason::Shutdown) {
        env.held.remove(key);
    }
    tracing::info!(?outcome, "job ended");
}

/// The job's stop reason as an outcome (a stop without a recorded reason is the shutdown).
pub(crate) fn stopped(stop: &JobStop) -> RunOutcome {
    RunOutcome::Stopped(stop.reason().unwrap_or(StopReason::Shutdown))
}

/// Prepares the binary (or reports why there is none), records it, then runs the positions.
async fn execute(
    env: &JobEnv,
    slot: &mut Option<EngineSession>,
    lease: &JobLease,
    key: LeaseKey,
    stop: &Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
) -> RunOutcome {
    let prepared = match prepare_job_build(env, lease, key, stop).await {
        Ok(p) => p,
        Err(outcome) => return outcome,
    };
    let mut session = session_for(slot, prepared, lease).await;
    if run_positions(&mut session, lease, key, stop, uploads).await {
        *slot = Some(session);
        return RunOutcome::Finished;
    }
    // Whatever the engine was doing is no longer wanted; kill it rather than wait.
    session.kill().await;
    *slot = Some(session);
    stopped(stop)
}

/// The binary of the lease's own build (`lease.build`), prepared as [`prepare`] does, with
/// its failure reported to the coordinator as the build's, and its build record delivered
/// (see [`report_build`]). `Err` is how the job ends when there is no binary to run.
pub(crate) async fn prepare_job_build(
    env: &JobEnv,
    lease: &JobLease,
    key: LeaseKey,
    stop: &JobStop,
) -> Result<Prepared, RunOutcome> {
    let prepared = match prepare(env, &lease.build, stop).await {
        Ok(p) => p,
        Err(PrepareError::Stopped) => return Err(stopped(stop)),
        Err(PrepareError::Failed(report)) => {
            return Err(report_build_failure(env, key, stop, &report).await)
        }
    };
    match report_build(env, lease, key, &prepared, stop).await {
        Some(refused) => Err(refused),
        None => Ok(prepared),
    }
}

/// Tells the coordinator that the job's build failed, with `report`.
async fn report_build_failure(
    env: &JobEnv,
    key: LeaseKey,
    stop: &JobStop,
    report: &str,
) -> RunOutcome {
    let failure = BuildFailure {
        worker_id: env.worker_id,
        attempt: key.attempt,
        // The coordinator refuses control characters (a 4xx, never retried) and keeps
        // only the tail: send what it would keep.
        output: clean_tail(report, MAX_BUILD_OUTPUT),
    };
    let sent = with_retry("build-failed report", stop.token(), || {
        env.client.build_failed(key.job_id, &failure)
    })
    .await;
    match sent {
        Ok(_) => RunOutcome::BuildFailed,
        Err(ClientError::Cancelled) => stopped(stop),
        Err(ClientError::LeaseLost(_)) => RunOutcome::Stopped(StopReason::LeaseLost),
        Err(e) => {
            tracing::error!(error = %e, "could not report the build failure");
            RunOutcome::Stopped(StopReason::Rejected)
        }
    }
}

/// The slot's engine if it serves the prepared binary with its settings; otherwise a new
/// session (the old one closed).
async fn session_for(
    slot: &mut Option<EngineSession>,
    prepared: Prepared,
    lease: &JobLease,
) -> EngineSession {
    let Prepared {
        binary,
        mut settings,
        ..
    } = prepared;
    if lease.cross_check {
        // A cross-check measures again in an engine process started for this position
        // alone, so state an engine kept from earlier searches cannot repeat itself.
        settings.fresh_process_per_position = true;
    }
    match slot.take() {
        Some(s) if s.serves(&binary, &settings) => s,
        other => {
            if let Some(mut old) = other {
                old.close().await;
            }
            EngineSession::new(&binary, settings)
        }
    }
}

/// Runs every position of the lease and hands the results, then the job's end, to the
/// uploader. `false` if the job stopped (or the uploader is gone) before all of that was
/// handed over.
async fn run_positions(
    session: &mut EngineSession,
    lease: &JobLease,
    key: LeaseKey,
    stop: &Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
) -> bool {
    let msg = |what| UploadMsg {
        key,
        stop: stop.clone(),
        what,
    };
    for pos in &lease.positions {
        let result = tokio::select! {
            biased;
            _ = stop.token().cancelled() => return false,
            r = session.run_position(pos, lease.limit) => r,
        };
        if let Some(e) = &result.error {
            tracing::warn!(position = %pos.id, error = %e, "position failed");
        }
        // A full channel (uploads being retried) holds the engine back here.
        tokio::select! {
            biased;
            _ = stop.token().cancelled() => return false,
            sent = uploads.send(msg(Upload::Result(result))) => if sent.is_err() { return false },
        }
    }
    if stop.is_stopped() {
        return false;
    }
    tokio::select! {
        biased;
        _ = stop.token().cancelled() => false,
        sent = uploads.send(msg(Upload::Finished)) => sent.is_ok(),
    }
}

/// Tells the coordinator how this worker got the build's binary, the first time a job of the
/// build runs here. Without a bench, one try: provenance must never hold up the positions, and
/// a record not delivered is tried again with the build's next job. With a bench the record
/// decides whether this worker may run the build at all (its total must equal the one other
/// workers reported for the same binary), so it is delivered before any position runs, and a
/// mismatch ends the job here: the coordinator has given it to the other workers. `Some`
/// outcome when the job must not run.
async fn report_build(
    env: &JobEnv,
    lease: &JobLease,
    key: LeaseKey,
    prepared: &Prepared,
    stop: &JobStop,
) -> Option<RunOutcome> {
    if env.records.reported(lease.sweep_id, &lease.build.name) {
        return None;
    }
    let record = match env
        .records
        .record(&lease.build, &prepared.binary, prepared.bench)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the binary to record the build");
            return None;
        }
    };
    let report = BuildReport {
        worker_id: env.worker_id,
        attempt: key.attempt,
        record,
    };
    if prepared.bench.is_none() {
        match env.client.record_build(key.job_id, &report).await {
            Ok(_) => env.records.mark_reported(lease.sweep_id, &lease.build.name),
            Err(e) => {
                tracing::warn!(error = %e, "build record not delivered; the next job of this build tries again")
            }
        }
        return None;
    }
    let sent = with_retry("build record", stop.token(), || {
        env.client.record_build(key.job_id, &report)
    })
    .await;
    match sent {
        Ok(recorded) => match recorded.bench_mismatch {
            None => {
                env.records.mark_reported(lease.sweep_id, &lease.build.name);
                None
            }
            Some(why) => {
                tracing::error!(%why, "bench mismatch: this worker's results of the build would not be trusted");
                Some(RunOutcome::BuildFailed)
            }
        },
        Err(ClientError::Cancelled) => Some(stopped(stop)),
        Err(ClientError::LeaseLost(_)) => Some(RunOutcome::Stopped(StopReason::LeaseLost)),
        Err(e) => {
            tracing::error!(error = %e, "could not deliver the build record");
            Some(RunOutcome::Stopped(StopReason::Rejected))
        }
    }
}

/// A build's binary, ready to run, with how to run it and its bench total.
pub(crate) struct Prepared {
    /// The binary.
    pub(crate) binary: PathBuf,
    /// How its engines run (the worker's sandbox set).
    pub(crate) settings: EngineSettings,
    /// The engine's bench total on this binary (`None`: its definition names no bench).
    pub(crate) bench: Option<u64>,
}

/// Why [`prepare`] has no binary for a build.
#[derive(Debug)]
pub(crate) enum PrepareError {
    /// The job was stopped meanwhile: nothing to report.
    Stopped,
    /// The source, build, binary or options failed: the text to report as the build failure.
    Failed(String),
}

/// The binary of `spec` (a lease's build, or a speed job's baseline), built (or, for a
/// binary-only engine, found), with the build's options accepted by the engine, its
/// `[report]` patterns compiled and its bench run. Any of those failing is the build's
/// failure on this worker.
pub(crate) async fn prepare(
    env: &JobEnv,
    spec: &BuildSpec,
    stop: &JobStop,
) -> Result<Prepared, PrepareError> {
    let mut settings = EngineSettings::from_build(spec)
        .map_err(|e| PrepareError::Failed(format!("engine `{}`: {e}", spec.engine)))?;
    settings.confinement.sandbox = env.sandbox.clone();
    let binary = find_binary(env, spec, &settings.confinement, stop).await?;
    let bench = tokio::select! {
        _ = stop.token().cancelled() => return Err(PrepareError::Stopped),
        r = env.records.bench(spec, &binary, &settings.confinement) => {
            r.map_err(|e| PrepareError::Failed(format!("{e} (on host {})", env.host)))?
        }
    };
    Ok(Prepared {
        binary,
        settings,
        bench,
    })
}

/// The binary of `spec`, built (or, for a binary-only engine, found) and with the build's
/// options accepted by the engine.
async fn find_binary(
    env: &JobEnv,
    spec: &BuildSpec,
    confinement: &Confinement,
    stop: &JobStop,
) -> Result<PathBuf, PrepareError> {
    let binary = match &spec.binary_path {
        Some(path) => {
            // The path comes from the coordinator: only a listed binary is ever started.
            env.engine_binaries
                .check(path)
                .map_err(|why| PrepareError::Failed(format!("{why} (on host {})", env.host)))?;
            // Nothing to download or compile: the binary is either here or not.
            check_executable(Path::new(path)).map_err(|why| {
                PrepareError::Failed(format!(
                    "binary {path} of engine `{}` is not usable on host {}: {why}",
                    spec.engine, env.host
                ))
            })?;
            PathBuf::from(path)
        }
        None => build_from_source(env, spec, stop).await?,
    };
    tokio::select! {
        _ = stop.token().cancelled() => Err(PrepareError::Stopped),
        r = env.option_checks.check(&binary, spec, confinement) => match r {
            Ok(()) => Ok(binary),
            Err(e) => Err(PrepareError::Failed(format!("{e} (on host {})", env.host))),
        },
    }
}

/// `spec` built from its source snapshot.
async fn build_from_source(
    env: &JobEnv,
    spec: &BuildSpec,
    stop: &JobStop,
) -> Result<PathBuf, PrepareError> {
    // A refused program is reported without even fetching the source.
    env.builds
        .check_program(spec)
        .map_err(|e| PrepareError::Failed(e.report()))?;
    let source = tokio::select! {
        _ = stop.token().cancelled() => return Err(PrepareError::Stopped),
        r = env.sources.ensure(&env.client, &spec.source_sha256, stop.token()) => r,
    };
    let source = match source {
        Ok(dir) => dir,
        Err(SourceError::Download(ClientError::Cancelled)) => return Err(PrepareError::Stopped),
        Err(e) => {
            // The coordinator serves a snapshot we cannot use: nothing of this build can run
            // here, which is what a build failure tells the sweep's owner.
            tracing::error!(error = %e, "source snapshot unusable");
            return Err(PrepareError::Failed(format!(
                "source snapshot {}: {e}",
                spec.source_sha256
            )));
        }
    };
    let built = tokio::select! {
        _ = stop.token().cancelled() => return Err(PrepareError::Stopped),
        r = env.builds.get(&source, spec) => r,
    };
    built.map_err(|e| PrepareError::Failed(e.report()))
}
