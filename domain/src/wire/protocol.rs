//! The worker protocol: what a worker sends the coordinator (registration, lease requests,
//! heartbeats, result uploads, build failures) and what it gets back. Apart from the public
//! API because only workers speak it: its bounds and fencing (leases, attempts) are about
//! keeping many workers honest, not about what users read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::bounds::{
    check_name, check_text, keep_tail, Lines, MAX_BUILD_OUTPUT, MAX_HOST, MAX_REF_NAME,
    MAX_WORKER_NAME,
};
pub use crate::build::BuildSpec;
use crate::epd::SuitePosition;
use crate::limit::Limit;
use crate::FieldError;

/// A worker introducing itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterWorker {
    /// Display name (defaults to the host name).
    pub name: String,
    /// Host name.
    pub host: String,
    /// Engine processes it runs at once.
    pub cores: u32,
    /// The binary-only engines (by name) whose binary exists and is executable on this
    /// machine; only such workers get their jobs. Older workers send none.
    #[serde(default)]
    pub engines: Vec<String>,
}

/// Most binary-only engines one [`RegisterWorker`] may name.
pub const MAX_WORKER_ENGINES: usize = 256;
/// Most engine processes one worker may say it runs at once.
pub const MAX_WORKER_CORES: u32 = 4096;

impl RegisterWorker {
    /// Checks every field against its bound (see [`crate::bounds`]): a name, a host that is
    /// one line and not too long, 1 to [`MAX_WORKER_CORES`] cores, at most
    /// [`MAX_WORKER_ENGINES`] engines, each a name.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.cores == 0 || self.cores > MAX_WORKER_CORES {
            return Err(FieldError::new(
                "cores",
                format!("must be 1 to {MAX_WORKER_CORES}"),
            ));
        }
        check_name("name", &self.name, MAX_WORKER_NAME)?;
        check_text("host", &self.host, MAX_HOST, Lines::One)?;
        if self.engines.len() > MAX_WORKER_ENGINES {
            return Err(FieldError::new(
                "engines",
                format!("at most {MAX_WORKER_ENGINES} engines"),
            ));
        }
        for (i, engine) in self.engines.iter().enumerate() {
            check_name(&format!("engines[{i}]"), engine, MAX_REF_NAME)?;
        }
        Ok(())
    }
}

/// The coordinator's answer to [`RegisterWorker`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Registered {
    /// Id to use in every later call.
    pub worker_id: i64,
    /// Seconds a lease lives without a heartbeat or report.
    pub lease_secs: u64,
    /// Seconds between heartbeats the coordinator expects.
    pub heartbeat_secs: u64,
}

/// Most jobs one [`LeaseRequest`] may ask for; a worker with more free slots asks again.
pub const MAX_JOBS_PER_LEASE: u32 = 64;

/// Request for work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// Most jobs wanted now (1 to [`MAX_JOBS_PER_LEASE`]): the worker's free slots plus a
    /// small prefetch.
    pub max_jobs: u32,
}

/// One position of a leased job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobPosition {
    /// Index of the position in its suite.
    pub index: u32,
    /// EPD id.
    pub id: String,
    /// FEN.
    pub fen: String,
    /// Best moves (UCI).
    pub bm: Vec<String>,
    /// Avoid moves (UCI).
    pub am: Vec<String>,
}

impl JobPosition {
    /// Position `index` of a suite, as a job carries it.
    pub fn of(index: u32, p: &SuitePosition) -> Self {
        JobPosition {
            index,
            id: p.id.clone(),
            fen: p.fen.clone(),
            bm: p.bm.clone(),
            am: p.am.clone(),
        }
    }
}

/// A leased job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobLease {
    /// Job id.
    pub job_id: i64,
    /// The lease it went out under (the lease call's id, shared by every job of that call):
    /// every later call about the job names it, and one naming a lease the job has left
    /// (given back, expired and handed out again, finished) is refused.
    pub attempt: i64,
    /// Sweep the job belongs to.
    pub sweep_id: i64,
    /// Variant to build.
    pub build: BuildSpec,
    /// Suite name.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Positions still without a result (finished ones are left out on a re-lease).
    pub positions: Vec<JobPosition>,
    /// A cross-check (see [`crate::crosscheck`]): a position measured once already, to be
    /// measured again in an engine process started for it alone. Absent means false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_check: bool,
    /// A speed job (see [`SpeedLease`]): `build` and the sweep's baseline timed against each
    /// other over `positions` at `limit`. It is dealt only to a worker holding no other lease,
    /// which runs nothing else until it ends. Absent for every other job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedLease>,
}

/// What a speed job times: the job's build against `baseline`, interleaved (pairs in ABBA
/// order: baseline, build, build, baseline, ...), each run a fresh engine process searching every position of the job
/// at its limit, `repeats` pairs in all. Reported as [`SpeedReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpeedLease {
    /// The sweep's baseline build.
    pub baseline: BuildSpec,
    /// Pairs of runs.
    pub repeats: u32,
}

/// Most pairs of runs one speed job may ask for.
pub const MAX_SPEED_REPEATS: u32 = 100;

/// One side of a [`SpeedRun`]: one engine process over every position of the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedSide {
    /// CPU time (user + system) the engine process and its descendants used, in
    /// microseconds (`getrusage` of the worker's children, before and after).
    pub cpu_us: u64,
    /// Wall time from starting the process to its exit, in microseconds.
    pub wall_us: u64,
    /// Nodes the engine reported, summed over the positions.
    pub nodes: u64,
}

/// One pair of runs of a speed job: the baseline and the job's build (in that order for even
/// `repeat`, the other for odd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedRun {
    /// Which pair (0 to repeats - 1).
    pub repeat: u32,
    /// The baseline's run.
    pub base: SpeedSide,
    /// The job's build's run.
    pub test: SpeedSide,
}

/// What a worker measured of a speed job ([`JobReport::speed`]), sent with `finished`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedReport {
    /// Every pair run, in order.
    pub runs: Vec<SpeedRun>,
    /// Why the runs stopped short (an engine crashed, timed out or printed no node count):
    /// the job ends with the runs before it, and the table says so instead of a ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SpeedReport {
    /// Checks the report against its lease's `repeats`: each pair once, numbered below
    /// `repeats`, every figure storable (at most `i64::MAX`), CPU and wall time above 0;
    /// all `repeats` pairs unless it carries an error. The field named is a path into the
    /// report (`speed.runs[3].test.cpu_us`).
    pub fn problem(&self, repeats: u32) -> Option<FieldError> {
        let mut seen = std::collections::HashSet::new();
        for (i, run) in self.runs.iter().enumerate() {
            let at = |f: &str| format!("speed.runs[{i}].{f}");
            if run.repeat >= repeats || !seen.insert(run.repeat) {
                return Some(FieldError::new(
                    at("repeat"),
                    format!("{} is repeated or not below {repeats}", run.repeat),
                ));
            }
            for (side, s) in [("base", run.base), ("test", run.test)] {
                for (f, v) in [
                    ("cpu_us", s.cpu_us),
                    ("wall_us", s.wall_us),
                    ("nodes", s.nodes),
                ] {
                    if i64::try_from(v).is_err() || (v == 0 && f != "nodes") {
                        return Some(FieldError::new(
                            at(&format!("{side}.{f}")),
                            format!("{v} cannot be stored (1 to {})", i64::MAX),
                        ));
                    }
                }
            }
        }
        match &self.error {
            None if self.runs.len() != repeats as usize => Some(FieldError::new(
                "speed.runs",
                format!(
                    "{} pairs reported; the job asks for {repeats}",
                    self.runs.len()
                ),
            )),
            Some(e) if e.is_empty() => Some(FieldError::new("speed.error", "is empty")),
            _ => None,
        }
    }
}

/// Answer to a [`LeaseRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LeaseResponse {
    /// Jobs now held by the worker (possibly none).
    pub jobs: Vec<JobLease>,
}

/// Outcome of one position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PositionResult {
    /// Index in the suite.
    pub index: u32,
    /// Nodes the engine reported for the search.
    pub nodes: u64,
    /// Best move (UCI); empty on error.
    pub bestmove: String,
    /// Did the best move solve the position?
    pub solved: bool,
    /// Last reported score in centipawns.
    pub score_cp: Option<i32>,
    /// Last reported mate score in moves.
    pub score_mate: Option<i32>,
    /// Last completed depth.
    pub depth: u32,
    /// Wall time of the search in milliseconds.
    pub time_ms: u64,
    /// Why the position has no valid result (crash, timeout, illegal move...).
    pub error: Option<String>,
    /// The engine's search counters (`info string counters k=v ...`), e.g. `null_skipped`;
    /// empty when it prints none. At most [`crate::bounds::MAX_COUNTERS`], each name
    /// [`crate::bounds::counter_name_ok`] and each value at most `i64::MAX`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counters: BTreeMap<String, u64>,
}

impl PositionResult {
    /// What makes a result without an error unusable as a number, as (field, problem): a node
    /// count that cannot be stored, or a best move that is no move (control characters, NUL,
    /// whitespace, too long). Such a result is never stored as a figure: the coordinator
    /// records it as a failed try of its position (retried, then failed for good) and names it
    /// in the upload's answer ([`JobAck::rejected`]); the other results are kept.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.error.is_some() {
            return None;
        }
        if i64::try_from(self.nodes).is_err() {
            return Some((
                "nodes",
                format!(
                    "the worker reported {} nodes, more than can be stored",
                    self.nodes
                ),
            ));
        }
        if self.counters.len() > crate::bounds::MAX_COUNTERS {
            return Some((
                "counters",
                format!(
                    "the worker reported {} counters; at most {}",
                    self.counters.len(),
                    crate::bounds::MAX_COUNTERS
                ),
            ));
        }
        if let Some((name, value)) = self
            .counters
            .iter()
            .find(|(k, v)| !crate::bounds::counter_name_ok(k) || i64::try_from(**v).is_err())
        {
            let shown = crate::bounds::clean_result_error(&format!("{name:?}"));
            return Some((
                "counters",
                if crate::bounds::counter_name_ok(name) {
                    format!("counter {shown} is {value}, more than can be stored")
                } else {
                    format!(
                        "counter name {shown} is not 1 to {} letters, digits, `_`, `.` or `-`",
                        crate::bounds::MAX_COUNTER_NAME
                    )
                },
            ));
        }
        if !crate::bounds::plausible_move(&self.bestmove) {
            return Some((
                "bestmove",
                format!(
                    "the worker reported an invalid best move: {}",
                    crate::bounds::clean_result_error(&format!("{:?}", self.bestmove))
                ),
            ));
        }
        None
    }
}

/// A result of an upload refused as a figure (see [`PositionResult::problem`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RejectedResult {
    /// Suite index of the position.
    pub index: u32,
    /// The offending field, as a path into the upload
    /// (`reports[0].results[3].bestmove`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Most leases one [`WorkerHeartbeat`] and most job reports one [`WorkerReport`] may carry;
/// a worker holding more splits them over several calls, and the coordinator refuses more
/// (422) so one request's work stays bounded.
pub const MAX_JOBS_PER_CALL: usize = 1000;

/// What the coordinator says about one lease a worker believes it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LeaseStatus {
    /// The worker holds the lease (renewed by this call): keep working.
    Held,
    /// The sweep was cancelled: stop the job and drop its pending results.
    Cancelled,
    /// The lease is gone (expired and re-leased, finished, or never ours): stop the job and
    /// drop its pending results, which would be refused anyway.
    Lost,
}

/// One lease a worker holds, as named in its heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeldLease {
    /// Job id.
    pub job_id: i64,
    /// The lease (attempt) the worker holds it under.
    pub attempt: i64,
}

/// One heartbeat per worker (`POST /api/v1/workers/{id}/heartbeat`) renewing every lease it
/// holds, so the request rate grows with workers, not with cores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerHeartbeat {
    /// The leases to renew (at most [`MAX_JOBS_PER_CALL`]).
    pub leases: Vec<HeldLease>,
    /// Give these leases back instead of renewing them: a worker stopping with jobs it will
    /// not finish (Ctrl-C, SIGTERM) releases them, so they are queued again at once for any
    /// worker rather than after their lease runs out. The ack then says `held` for each lease
    /// that was held and is now released, `lost` for one that was not held. It also says the
    /// worker is stopping (with no leases when it held none): it stops counting as live, so
    /// nothing waits for it (e.g. cross-checks another live worker would have taken), until
    /// its next call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub release: bool,
}

/// The status of one job in an ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobStatus {
    /// Job id.
    pub job_id: i64,
    /// What the worker should do about it.
    pub status: LeaseStatus,
}

/// Answer to a [`WorkerHeartbeat`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerHeartbeatAck {
    /// One status per lease of the request, in the request's order.
    pub jobs: Vec<JobStatus>,
}

/// New results of one job, inside a [`WorkerReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobReport {
    /// Job id.
    pub job_id: i64,
    /// The lease (attempt) the worker holds: fences reports of a lease that went to someone
    /// else.
    pub attempt: i64,
    /// Results (may be empty, e.g. for a report that only closes the job).
    pub results: Vec<PositionResult>,
    /// Every position of the lease is now reported: close the job.
    pub finished: bool,
    /// A speed job's measurements (with `finished` and no `results`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedReport>,
}

/// One upload per worker (`POST /api/v1/workers/{id}/results`) carrying the results of all
/// its jobs since the last upload. Idempotent: re-sent results count as duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerReport {
    /// Reports, one per job (at most [`MAX_JOBS_PER_CALL`]).
    pub reports: Vec<JobReport>,
}

/// The outcome of one [`JobReport`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobAck {
    /// Job id.
    pub job_id: i64,
    /// `held`: stored and the lease renewed; `cancelled`: stored, but stop the job; `lost`:
    /// nothing stored, stop the job.
    pub status: LeaseStatus,
    /// Results newly stored.
    pub accepted: u32,
    /// Results already stored earlier (ignored).
    pub duplicates: u32,
    /// Results refused as figures (each recorded as a failed try of its position instead);
    /// the others of the upload were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedResult>,
}

/// Answer to a [`WorkerReport`]: a lost lease for one job does not fail the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerReportAck {
    /// One ack per report of the request, in the request's order.
    pub jobs: Vec<JobAck>,
}

/// Answer to a build-failure report (and the store's answer for one job's heartbeat or results,
/// which the coordinator turns into a [`JobStatus`] or [`JobAck`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchAck {
    /// Results newly stored.
    pub accepted: u32,
    /// Results already stored earlier (ignored).
    pub duplicates: u32,
    /// The sweep was cancelled: stop working on this job.
    pub cancelled: bool,
}

/// A failed build, reported with the compiler's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildFailure {
    /// Worker that tried.
    pub worker_id: i64,
    /// The lease (attempt) it holds.
    pub attempt: i64,
    /// Compiler output: newlines and tabs but no other control characters (a worker cleans
    /// it with [`crate::bounds::clean_tail`]); the coordinator keeps its last
    /// [`MAX_BUILD_OUTPUT`] bytes.
    pub output: String,
}

impl BuildFailure {
    /// The failure as the coordinator keeps it: output with a control character other than
    /// a newline or tab is refused (naming `output`); output longer than
    /// [`MAX_BUILD_OUTPUT`] is cut to its tail, after a line saying how much was cut.
    pub fn bounded(&self) -> Result<BuildFailure, FieldError> {
        // The length is bounded by keeping the tail, so only the characters are checked here.
        check_text("output", &self.output, usize::MAX, Lines::Many)?;
        Ok(BuildFailure {
            output: keep_tail(&self.output, MAX_BUILD_OUTPUT),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_registration_is_bounded() {
        let ok = RegisterWorker {
            name: "w1".into(),
            host: "box".into(),
            cores: 4,
            engines: vec!["fairymax".into()],
        };
        assert!(ok.validate().is_ok());
        let field = |r: RegisterWorker| r.validate().unwrap_err().field;
        let with = |f: &dyn Fn(&mut RegisterWorker)| {
            let mut r = ok.clone();
            f(&mut r);
            r
        };
        assert_eq!(field(with(&|r| r.name = "w\0".into())), "name");
        assert_eq!(field(with(&|r| r.name = String::new())), "name");
        assert_eq!(field(with(&|r| r.name = "n".repeat(201))), "name");
        assert_eq!(field(with(&|r| r.host = "h\n".into())), "host");
        assert_eq!(field(with(&|r| r.host = "h".repeat(256))), "host");
        assert_eq!(field(with(&|r| r.cores = 0)), "cores");
        assert_eq!(
            field(with(&|r| r.engines = vec!["a\u{7f}".into()])),
            "engines[0]"
        );
        assert_eq!(
            field(with(
                &|r| r.engines = vec!["e".into(); MAX_WORKER_ENGINES + 1]
            )),
            "engines"
        );
    }

    #[test]
    fn build_failures_keep_the_tail() {
        let failure = |output: String| BuildFailure {
            worker_id: 1,
            attempt: 1,
            output,
        };
        let long = format!("{}error: the real one\n", "noise\n".repeat(100_000));
        let kept = failure(long).bounded().unwrap();
        assert!(kept.output.len() <= MAX_BUILD_OUTPUT);
        assert!(kept.output.starts_with("[... "), "says it was cut");
        assert!(kept.output.ends_with("error: the real one\n"));
        let short = failure("a\n\tb".into()).bounded().unwrap();
        assert_eq!(short.output, "a\n\tb");
        let err = failure("bad\0byte".into()).bounded().unwrap_err();
        assert_eq!(err.field, "output");
    }
}
