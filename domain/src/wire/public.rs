//! The public API's types: what the CLI and dashboard read (sweeps, engines, suites, workers,
//! health) and the answers to submitting and cancelling a sweep. Apart from the worker
//! protocol because these change with what users are shown, and no protocol type is built
//! from them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::engine::{EngineDef, EngineKind, Knob, OptionValue, Protocol};
use crate::limit::Limit;
use crate::spec::SweepSpec;

/// Lifecycle of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SweepState {
    /// Submitted, no job leased yet.
    Queued,
    /// At least one job leased or finished, some still open.
    Running,
    /// Every job finished and every position has a valid result.
    Done,
    /// Every job finished, but some positions ended in errors or some variants failed to
    /// build: the table has gaps.
    DoneWithErrors,
    /// Every build failed, or nothing can finish.
    Failed,
    /// Cancelled by a user.
    Cancelled,
    /// Held until an admin approves it: its estimate is over what the operator lets a
    /// submitter run unasked (`--approve-over-engine-hours`); no job is handed out meanwhile.
    PendingApproval,
    /// Rejected by an admin while it waited for approval; nothing of it ran.
    Rejected,
}

impl SweepState {
    /// The lowercase name used in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            SweepState::Queued => "queued",
            SweepState::Running => "running",
            SweepState::Done => "done",
            SweepState::DoneWithErrors => "done_with_errors",
            SweepState::Failed => "failed",
            SweepState::Cancelled => "cancelled",
            SweepState::PendingApproval => "pending_approval",
            SweepState::Rejected => "rejected",
        }
    }

    /// Parses the name used in the database.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => SweepState::Queued,
            "running" => SweepState::Running,
            "done" => SweepState::Done,
            "done_with_errors" => SweepState::DoneWithErrors,
            "failed" => SweepState::Failed,
            "cancelled" => SweepState::Cancelled,
            "pending_approval" => SweepState::PendingApproval,
            "rejected" => SweepState::Rejected,
            _ => return None,
        })
    }

    /// Will the state never change again?
    pub fn is_final(self) -> bool {
        matches!(
            self,
            SweepState::Done
                | SweepState::DoneWithErrors
                | SweepState::Failed
                | SweepState::Cancelled
                | SweepState::Rejected
        )
    }
}

/// A registered engine as `GET /api/v1/engines` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EngineInfo {
    /// Engine name.
    pub name: String,
    /// Protocol.
    pub protocol: Protocol,
    /// Built from source, or binary-only.
    pub kind: EngineKind,
    /// The binary's absolute path on workers (binary-only engines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The knobs a sweep may set, with their kinds.
    pub knobs: Vec<Knob>,
    /// Fixed options.
    pub options: BTreeMap<String, OptionValue>,
    /// Names left out of source snapshots (source engines only): what a client snapshotting
    /// its own copy (`sweep submit --source DIR`) leaves out too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Snapshots keep dotfiles and dot-directories (source engines only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_dotfiles: bool,
    /// Where the definition came from (absent in answers of older coordinators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<EngineOrigin>,
}

/// Where a registered engine's definition came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum EngineOrigin {
    /// A file in the coordinator's engines directory.
    File {
        /// The file's name (not its path on the coordinator's machine).
        file: String,
    },
    /// Added over the API (`sweep engine add`) and stored in the database; it wins over a
    /// file defining the same name.
    Database {
        /// When it was last added or updated.
        updated_at: DateTime<Utc>,
        /// The token name (or `local`) that last added or updated it.
        updated_by: String,
    },
}

/// Answer of `GET /api/v1/engines`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EngineList {
    /// Registered engines, by name.
    pub engines: Vec<EngineInfo>,
}

impl EngineInfo {
    /// What the engine list shows of `def`.
    pub fn of(def: &EngineDef) -> Self {
        EngineInfo {
            name: def.name.clone(),
            protocol: def.protocol,
            kind: def.kind(),
            binary: def.is_binary_only().then(|| def.binary.clone()),
            knobs: def.knobs.clone(),
            options: def.options.clone(),
            origin: None,
            exclude: def
                .source
                .as_ref()
                .map(|s| s.exclude.clone())
                .unwrap_or_default(),
            include_dotfiles: def.source.as_ref().is_some_and(|s| s.include_dotfiles),
        }
    }
}

/// A sweep in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepSummary {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Engine.
    pub engine: String,
    /// State.
    pub state: SweepState,
    /// Submission time.
    pub created_at: DateTime<Utc>,
    /// Positions with a result, over all builds and suites.
    pub positions_done: u64,
    /// Positions to run, over all builds and suites.
    pub positions_total: u64,
    /// Name of the token that submitted it; none for a sweep submitted without one (a local
    /// run, a command on the database itself) or stored before tokens existed.
    #[serde(default)]
    pub submitter: Option<String>,
    /// Where the source came from (registered, uploaded, git) with its sha256; `None` for a
    /// binary-only engine.
    #[serde(default)]
    pub source: Option<crate::source::SourceProvenance>,
    /// A staged sweep's stage: which is running (or the last one added) of how many; absent
    /// for a sweep without stages. `positions_total` counts the stages added so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<StageProgress>,
    /// Why the sweep waits for an admin's approval, or why it was rejected (absent for a
    /// sweep that never needed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_note: Option<String>,
    /// Its priority (`low`, `normal`, `high`): with its submitter, what weighs its share of
    /// the workers while other sweeps run.
    #[serde(default)]
    pub priority: crate::spec::Priority,
}

/// Which stage of a staged sweep has been reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StageProgress {
    /// The newest stage added, from 1.
    pub current: u32,
    /// Stages in all.
    pub total: u32,
}

/// Progress of one build on one suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// Build name.
    pub build: String,
    /// Suite name.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Positions with a result.
    pub done: u64,
    /// Positions in the suite.
    pub total: u64,
    /// Results that are errors.
    pub errors: u64,
    /// Sum of nodes so far.
    pub nodes: u64,
}

/// A build of a sweep and whether it could be built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BuildStatus {
    /// Build name.
    pub name: String,
    /// Its defines.
    pub defines: BTreeMap<String, i64>,
    /// Is it the baseline?
    pub is_baseline: bool,
    /// Compiler output when the build failed.
    pub build_error: Option<String>,
    /// How workers got its binary: one record per worker that built it (see
    /// [`crate::provenance`]), oldest first, at most [`MAX_BUILD_RECORDS`] of them.
    #[serde(default)]
    pub records: Vec<crate::provenance::StoredBuildRecord>,
    /// Workers that reported a record, all of them (`records` may be cut).
    #[serde(default)]
    pub records_total: u64,
}

/// Most build records a sweep's detail shows per build.
pub const MAX_BUILD_RECORDS: usize = 32;

/// A worker currently holding a job of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActiveWorker {
    /// Worker id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Host.
    pub host: String,
    /// Jobs of this sweep it holds.
    pub jobs: u64,
}

/// An error recorded for a position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PositionError {
    /// Build name.
    pub build: String,
    /// Suite.
    pub suite: String,
    /// Position id.
    pub position: String,
    /// Reason.
    pub error: String,
}

/// Everything about one sweep (`GET /api/v1/sweeps/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepDetail {
    /// Summary fields.
    #[serde(flatten)]
    pub summary: SweepSummary,
    /// The validated spec.
    pub spec: SweepSpec,
    /// sha256 of the engine source snapshot; empty for a binary-only engine. (Where the
    /// source came from is the summary's `source`.)
    pub source_sha256: String,
    /// Builds.
    pub builds: Vec<BuildStatus>,
    /// Progress per build and suite.
    pub progress: Vec<Progress>,
    /// Workers holding its jobs now.
    pub active_workers: Vec<ActiveWorker>,
    /// Builds with a job held by a worker now, in the sweep's order. One of them with no
    /// result yet is being compiled (or its first positions are running): progress displays
    /// say "building NAME".
    #[serde(default)]
    pub active_builds: Vec<String>,
    /// Position errors (first 100).
    pub errors: Vec<PositionError>,
    /// Cross-checks: planned, done, mismatches and the mismatching positions.
    #[serde(default)]
    pub cross_checks: crate::crosscheck::CrossChecks,
    /// Where the sweep was measured, when it was imported from an export file (`sweep
    /// import`); absent for a sweep submitted here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<ImportedFrom>,
}

/// Where an imported sweep came from (see [`SweepDetail::imported_from`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportedFrom {
    /// Its id in the store it was exported from.
    pub sweep_id: i64,
    /// The file or upload it was imported from.
    pub from: String,
    /// When it was exported.
    pub exported_at: chrono::DateTime<chrono::Utc>,
    /// The Sweep version that exported it.
    pub sweep_version: String,
}

/// Answer to a submission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Submitted {
    /// The sweep's id: a new one, or the one already running (see `existing`).
    pub id: i64,
    /// Jobs the sweep has.
    pub jobs: u64,
    /// An identical sweep (same engine, source and spec) was still queued or running, and
    /// this is its id: nothing new was made.
    #[serde(default)]
    pub existing: bool,
    /// Results taken from earlier sweeps that measured the same builds on the same positions
    /// and limits, instead of being run again (0 when the config says `recompute`).
    #[serde(default)]
    pub reused: u64,
    /// Why the new sweep waits for an admin's approval before anything runs (absent when it
    /// runs at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<String>,
}

/// Answer to approving or rejecting a sweep that waited for approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalAck {
    /// The sweep.
    pub id: i64,
    /// Its state now: `queued` once approved, `rejected`.
    pub state: SweepState,
}

/// Body of `POST /api/v1/sweeps/{id}/reject`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    /// Why, for the submitter (1 to 1,000 characters, one line).
    pub why: String,
}

/// Answer to `POST /api/v1/sweeps/estimate` (`sweep submit --dry-run`): what a sweep would
/// cost if submitted now, with nothing stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Estimate {
    /// The sweep's name.
    pub name: String,
    /// The engine it runs.
    pub engine: String,
    /// An identical sweep (same engine, source and spec) still queued or running: a
    /// submission would get it instead of a new sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<i64>,
    /// Builds (the baseline and the variants).
    pub builds: u64,
    /// Work jobs of its first stage (the whole sweep without stages).
    pub jobs: u64,
    /// Cross-check jobs.
    pub cross_checks: u64,
    /// Searches planned in its first stage: builds x positions x limits.
    pub positions: u64,
    /// Of those, results that earlier sweeps of the same builds measured, which the sweep
    /// would take instead of searching them (0 when the config says `recompute`).
    pub reused: u64,
    /// Searches left to run in its first stage.
    pub to_search: u64,
    /// Per suite and limit of its first stage: what is left to search and what an earlier
    /// search there cost.
    pub cells: Vec<EstimateCell>,
    /// A staged sweep's later stages: at most this many searches each (the baseline and
    /// the variants it promotes, none taken from earlier results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub later_stages: Vec<StageEstimate>,
    /// A sweep with a `[search]`: the first stage plans only the search's first cells; the
    /// rest of the grid's cells on the first stage's positions, at most (a search measures
    /// what it needs of them as it goes). Its `stage` is 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_rest: Option<StageEstimate>,
    /// A sweep with `[speed]`: its speed jobs' searches (variants x 2 x repeats x positions,
    /// none taken from earlier sweeps), priced as the other cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<EstimateCell>,
    /// Engine-seconds the searches left to run would take at the mean cost of earlier
    /// measurements of the same engine on the same suite and limit (later stages and the
    /// rest of a search counted at most); `null` when some cell has no earlier measurement.
    pub engine_seconds: Option<f64>,
    /// Cells with no earlier measurement, as `suite at limit` (why `engine_seconds` is null).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
}

/// One suite at one limit of an [`Estimate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EstimateCell {
    /// Suite.
    pub suite: String,
    /// Search limit.
    pub limit: Limit,
    /// Searches left to run here (over all builds).
    pub to_search: u64,
    /// Mean engine milliseconds of one search here, from earlier measured results of the
    /// same engine; `null` when there are none.
    pub mean_ms: Option<f64>,
    /// How many earlier results the mean is over.
    pub measured: u64,
}

/// A later stage of a staged sweep in an [`Estimate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StageEstimate {
    /// Its number, from 1.
    pub stage: u32,
    /// At most this many searches (builds x positions x limits).
    pub positions: u64,
    /// Its cells, as for the first stage (`to_search` at most).
    pub cells: Vec<EstimateCell>,
}

/// Answer to `GET /api/v1/sweeps`: sweeps, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepList {
    /// The sweeps.
    pub sweeps: Vec<SweepSummary>,
}

/// A registered worker as the workers page shows it (`GET /api/v1/workers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerInfo {
    /// Worker id.
    pub id: i64,
    /// Name it registered with.
    pub name: String,
    /// Host it runs on.
    pub host: String,
    /// Engine processes it runs at once.
    pub cores: u32,
    /// Jobs whose lease it holds now (unexpired).
    pub jobs: u64,
    /// Results it stored in the last minute (a rate: results per minute).
    pub results_last_minute: u64,
    /// When it registered.
    pub registered_at: DateTime<Utc>,
    /// When the coordinator last heard from it (register, lease, heartbeat or upload).
    pub last_seen_at: DateTime<Utc>,
    /// Cross-checks it took part in (measuring the result or the check), over all sweeps.
    #[serde(default)]
    pub checks: u64,
    /// Of those, how many disagreed. A bad machine has mismatches in most of its checks; a
    /// nondeterministic engine spreads them over every worker.
    #[serde(default)]
    pub mismatches: u64,
}

/// Answer to `GET /api/v1/workers`: the workers seen within `seen_within_secs`, most recently
/// seen first, at most `limit` of them (so ten thousand idle registrations never make one
/// huge answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerList {
    /// The workers.
    pub workers: Vec<WorkerInfo>,
    /// Only workers seen this recently are listed.
    pub seen_within_secs: u64,
    /// At most this many are listed.
    pub limit: u32,
}

/// Answer to `POST /api/v1/sweeps/{id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelAck {
    /// The sweep.
    pub id: i64,
    /// Always `cancelled`.
    pub state: SweepState,
}

/// Answer to deleting a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeleteAck {
    /// The sweep, which no longer exists.
    pub id: i64,
    /// It was running and was cancelled first.
    pub cancelled: bool,
    /// Results deleted with it.
    pub results: u64,
}

/// What a coordinator POSTs to the operator's webhooks (`--webhook URL`) when a sweep ends:
/// the body, signed with HMAC-SHA256 under the operator's secret in the
/// `X-Sweep-Signature: sha256=<hex>` header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepEvent {
    /// `sweep.finished` (ended `done`, `done_with_errors` or `cancelled`), `sweep.failed`
    /// (ended `failed`), or `crosscheck.mismatch` (ended with mismatching cross-checks, sent
    /// beside the first).
    pub event: String,
    /// This event's id (`sweep-<id>-<event>`), the same in every retry: a receiver that
    /// keeps it can drop a second delivery of one event.
    pub delivery: String,
    /// When the coordinator saw the sweep end (the same in every retry).
    pub at: DateTime<Utc>,
    /// The sweep, as `GET /api/v1/sweeps` lists it.
    pub sweep: SweepSummary,
    /// Its cross-checks: counts, and the mismatching positions (at most 100).
    pub cross_checks: crate::crosscheck::CrossChecks,
}

/// One suite the coordinator can sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SuiteInfo {
    /// Name (the file name without `.epd`).
    pub name: String,
    /// Content hash of the loaded version.
    pub sha256: String,
    /// Number of positions.
    pub positions: usize,
}

/// Answer to `GET /api/v1/suites`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SuiteList {
    /// The suites, by name.
    pub suites: Vec<SuiteInfo>,
}

/// Answer to `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok` or `unavailable`.
    pub status: String,
    /// The database: `ok` or `unavailable` (its error goes to the coordinator's log).
    pub database: String,
}
