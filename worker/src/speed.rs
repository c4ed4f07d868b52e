//! Speed jobs (see [`SpeedLease`]): the job's build (the variant) timed against the sweep's
//! baseline on this machine. Both binaries come the way a job's does (source, build cache,
//! allow-lists, sandbox, bench; the variant's build record and build failure are reported as
//! a job's); then `repeats` pairs of runs, in ABBA order, each a fresh engine process over
//! every position of the job (`timed`), timed by the wall clock and by the CPU time of the
//! worker's reaped children (`cpu`). The report goes to the uploader, which closes the job
//! with it.
//!
//! The CPU clock counts every child of the worker reaped during a run, so a speed job runs
//! alone: the slots start it only once no other job runs, with their engines killed, and
//! start nothing else until it ends (see `slots`).

mod cpu;
#[cfg(test)]
pub(crate) mod tests;
mod timed;

use std::sync::Arc;

use sweep_domain::bounds::{clean_tail, MAX_RESULT_ERROR};
use sweep_domain::wire::{BuildSpec, JobLease, SpeedLease, SpeedReport, SpeedRun};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::leases::LeaseKey;
use crate::report::{Upload, UploadMsg};
use crate::runner::{
    prepare, prepare_job_build, settle, stopped, JobEnv, PrepareError, Prepared, RunOutcome,
};
use crate::stop::JobStop;
use timed::{RunError, TimedRun};

/// Runs the speed job `lease` (whose `speed` part is `speed`) to its end: its report handed to
/// `uploads`, or, when stopped (cancelled, lease lost, shutdown), nothing.
pub(crate) async fn run_speed_job(
    env: &JobEnv,
    lease: JobLease,
    speed: SpeedLease,
    stop: Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
) -> RunOutcome {
    let span = tracing::info_span!(
        "speed_job",
        worker_id = env.worker_id,
        sweep_id = lease.sweep_id,
        job_id = lease.job_id,
        attempt = lease.attempt,
        build = %lease.build.name,
        baseline = %speed.baseline.name,
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
            repeats = speed.repeats,
            "speed job started"
        );
        let outcome = execute(env, &lease, &speed, key, &stop, uploads).await;
        settle(env, key, outcome);
        outcome
    }
    .instrument(span)
    .await
}

/// Prepares both binaries, times the pairs and hands the report over. The variant's build
/// failure ends the job as a job's would (reported as the build's failure, which is what it
/// is); the baseline's is not reported as a build failure, since the coordinator would count
/// it against the variant's build (the one the job names), so it is the report's error.
async fn execute(
    env: &JobEnv,
    lease: &JobLease,
    speed: &SpeedLease,
    key: LeaseKey,
    stop: &Arc<JobStop>,
    uploads: &mpsc::Sender<UploadMsg>,
) -> RunOutcome {
    let test = match prepare_job_build(env, lease, key, stop).await {
        Ok(p) => p,
        Err(outcome) => return outcome,
    };
    let report = match prepare(env, &speed.baseline, stop).await {
        Ok(base) => match time_pairs(&base, &test, lease, speed.repeats, stop).await {
            Some(report) => report,
            None => return stopped(stop),
        },
        Err(PrepareError::Stopped) => return stopped(stop),
        Err(PrepareError::Failed(why)) => baseline_failed(&speed.baseline, &why),
    };
    let msg = UploadMsg {
        key,
        stop: stop.clone(),
        what: Upload::Speed(report),
    };
    tokio::select! {
        biased;
        _ = stop.token().cancelled() => stopped(stop),
        sent = uploads.send(msg) => match sent {
            Ok(()) => RunOutcome::Finished,
            Err(_) => stopped(stop),
        },
    }
}

/// The report of a job whose baseline could not be built here: no runs, and why (the tail of
/// the build's output, which says most, kept within what the coordinator keeps).
fn baseline_failed(baseline: &BuildSpec, why: &str) -> SpeedReport {
    tracing::error!(error = %why, "the baseline's build failed");
    let head = format!("the baseline build `{}` failed:\n", baseline.name);
    let tail = clean_tail(why, MAX_RESULT_ERROR.saturating_sub(head.len()));
    SpeedReport {
        runs: Vec::new(),
        error: Some(head + &tail),
    }
}

/// Times `repeats` pairs of the baseline (`base`) and the variant (`test`), each run a fresh
/// engine over the job's positions, in the order base, test, test, base, base, test, ...
/// (ABBA): a machine that drifts, or a first run of a pair that pays for something the second
/// does not, then weighs on both sides alike. (With the baseline always first, a variant built
/// alike came out 8 % faster with its interval excluding 1, on this machine under the test
/// suite's load.) A failed run ends the report with the pairs before it and why; `None` when
/// the job was stopped.
async fn time_pairs(
    base: &Prepared,
    test: &Prepared,
    lease: &JobLease,
    repeats: u32,
    stop: &JobStop,
) -> Option<SpeedReport> {
    let (positions, limit) = (&lease.positions[..], lease.limit);
    let base_run = TimedRun::new(&base.binary, &base.settings, positions, limit);
    let test_run = TimedRun::new(&test.binary, &test.settings, positions, limit);
    let mut runs = Vec::new();
    if lease.positions.is_empty() {
        return Some(failed(runs, "the job has no positions to time".into()));
    }
    for repeat in 0..repeats {
        let mut sides = [("baseline", &base_run), ("variant", &test_run)];
        if repeat % 2 == 1 {
            sides.reverse();
        }
        let mut timed = Vec::with_capacity(2);
        for (side, run) in sides {
            match run.time(stop).await {
                Ok(t) => timed.push(t),
                Err(e) => return failure(runs, repeat, side, e),
            }
        }
        if repeat % 2 == 1 {
            timed.reverse();
        }
        let (base, test) = (timed[0], timed[1]);
        tracing::info!(
            repeat,
            base_cpu_us = base.cpu_us,
            test_cpu_us = test.cpu_us,
            base_nodes = base.nodes,
            test_nodes = test.nodes,
            "pair timed"
        );
        runs.push(SpeedRun { repeat, base, test });
    }
    Some(SpeedReport { runs, error: None })
}

/// The report of runs that stopped at `repeat`'s run of `side` with `e`; `None` when the job
/// was stopped.
fn failure(runs: Vec<SpeedRun>, repeat: u32, side: &str, e: RunError) -> Option<SpeedReport> {
    match e {
        RunError::Stopped => None,
        e => Some(failed(runs, format!("repeat {repeat}, {side} run: {e}"))),
    }
}

/// The report of `runs` ended by `error`.
fn failed(runs: Vec<SpeedRun>, error: String) -> SpeedReport {
    tracing::warn!(%error, pairs = runs.len(), "speed job cut short");
    SpeedReport {
        runs,
        error: Some(clean_tail(&error, MAX_RESULT_ERROR)),
    }
}
