//! Wire types: the worker protocol and the public read API, shared by coordinator, worker and
//! CLI so the two sides cannot drift apart.
//!
//! The two halves answer to different clients and change for different reasons: `protocol`
//! with the worker (leases, heartbeats, uploads), `public` with the CLI and dashboard (what
//! they read, and the answers to submitting and cancelling). The error body both use lives
//! here; every public item is re-exported here, so `wire::X` is the one path to each.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

mod protocol;
mod public;

pub use protocol::{
    BatchAck, BuildFailure, BuildSpec, HeldLease, JobAck, JobLease, JobPosition, JobReport,
    JobStatus, LeaseRequest, LeaseResponse, LeaseStatus, PositionResult, RegisterWorker,
    Registered, RejectedResult, SpeedLease, SpeedReport, SpeedRun, SpeedSide, WorkerHeartbeat,
    WorkerHeartbeatAck, WorkerReport, WorkerReportAck, MAX_JOBS_PER_CALL, MAX_JOBS_PER_LEASE,
    MAX_SPEED_REPEATS, MAX_WORKER_CORES, MAX_WORKER_ENGINES,
};
pub use public::{
    ActiveWorker, ApprovalAck, BuildStatus, CancelAck, DeleteAck, EngineInfo, EngineList,
    EngineOrigin, Estimate, EstimateCell, Health, ImportedFrom, PositionError, Progress, Rejection,
    StageEstimate, StageProgress, Submitted, SuiteInfo, SuiteList, SweepDetail, SweepEvent,
    SweepList, SweepState, SweepSummary, WorkerInfo, WorkerList, MAX_BUILD_RECORDS,
};

/// A 4xx/5xx body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Details of an API error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable code (`invalid_field`, `not_found`, `lease_lost`, ...).
    pub code: String,
    /// Offending field, for validation errors.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub field: Option<String>,
    /// Human explanation.
    pub message: String,
}
