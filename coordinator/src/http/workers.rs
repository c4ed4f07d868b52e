//! The worker protocol: register, lease, heartbeat, results, build failures, sources.
//!
//! Lease, heartbeat and results are per worker, not per job, so a worker with many cores
//! costs the coordinator a few requests per second however many jobs it runs, and each call is
//! one store transaction; each job inside a call still gets its own lease check and status.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde::de::DeserializeOwned;
use sweep_domain::provenance::{BuildRecorded, BuildReport};
use sweep_domain::wire::{
    BatchAck, BuildFailure, LeaseRequest, LeaseResponse, LeaseStatus, RegisterWorker, Registered,
    WorkerHeartbeat, WorkerHeartbeatAck, WorkerList, WorkerReport, WorkerReportAck,
};
use tracing::{field, Span};

use super::call::{need, Answer, ApiQuery, Call, LimitQuery};
use super::error::ApiError;
use super::openapi::{
    InputErrors, JobCallErrors, ReadErrors, RegisterErrors, WorkerCallErrors, WorkerListErrors,
};
use super::{json_body, parse_id};
use crate::service::{
    AuthorizedWorker, Caller, Service, DEFAULT_WORKERS_LISTED, MAX_WORKERS_LISTED,
};

/// Registers a worker; the token that registers it is the only one that may speak for it.
#[utoipa::path(
    post, path = "/api/v1/workers", tag = "workers",
    request_body = RegisterWorker,
    responses((status = 200, description = "Registered.", body = Registered), RegisterErrors),
    security(("token" = ["worker"]))
)]
pub(super) async fn register(
    Call { svc, caller, .. }: Call<need::Worker>,
    body: Bytes,
) -> Answer<Registered> {
    let req: RegisterWorker = json_body(&body)?;
    Ok(Json(svc.protocol().register_worker(&caller, &req).await?))
}

/// The workers page's data: workers seen in the last day, most recently seen first.
#[utoipa::path(
    get, path = "/api/v1/workers", tag = "workers",
    params(("limit" = Option<u32>, Query, description = "Workers listed at most (default 200, at most 1,000).")),
    responses(
        (status = 200, description = "Workers seen in the last 24 h, most recently seen first.", body = WorkerList),
        WorkerListErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn list(
    Call { svc, caller, .. }: Call<need::Read>,
    // Text, so a bad value is answered 422 naming the field (default
    // [`DEFAULT_WORKERS_LISTED`]).
    ApiQuery(q): ApiQuery<LimitQuery<String>>,
) -> Answer<WorkerList> {
    let limit = match q.limit.as_deref() {
        None => DEFAULT_WORKERS_LISTED,
        Some(raw) => raw.parse::<u32>().map_err(|_| {
            sweep_domain::FieldError::new(
                "limit",
                format!("must be a number from 1 to {MAX_WORKERS_LISTED}"),
            )
        })?,
    };
    Ok(Json(svc.reads().workers(&caller, limit).await?))
}

/// Leases up to `max_jobs` jobs to the worker.
#[utoipa::path(
    post, path = "/api/v1/workers/{id}/lease", tag = "workers",
    params(("id" = i64, Path, description = "Worker id (from registration)."),),
    request_body = LeaseRequest,
    responses(
        (status = 200, description = "The jobs now held (possibly none).", body = LeaseResponse),
        WorkerCallErrors
    ),
    security(("token" = ["worker"]))
)]
#[tracing::instrument(name = "lease", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn lease(
    Call { svc, caller, .. }: Call<need::Worker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<LeaseResponse> {
    let (worker, req): (_, LeaseRequest) = worker_call(&svc, &caller, &id, &body).await?;
    let jobs = svc.protocol().lease(&worker, req.max_jobs).await?;
    Ok(Json(LeaseResponse { jobs }))
}

/// Renews every lease the worker names in one store call, and answers each job's status; a
/// lost or cancelled job does not fail the others. With `release`, gives them back instead.
#[utoipa::path(
    post, path = "/api/v1/workers/{id}/heartbeat", tag = "workers",
    params(("id" = i64, Path, description = "Worker id (from registration)."),),
    request_body = WorkerHeartbeat,
    responses(
        (status = 200, description = "Each lease's status, in the request's order.",
            body = WorkerHeartbeatAck),
        WorkerCallErrors
    ),
    security(("token" = ["worker"]))
)]
#[tracing::instrument(name = "heartbeat", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn heartbeat(
    Call { svc, caller, .. }: Call<need::Worker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<WorkerHeartbeatAck> {
    let (worker, beat): (_, WorkerHeartbeat) = worker_call(&svc, &caller, &id, &body).await?;
    if beat.release {
        let jobs = svc.protocol().release(&worker, &beat.leases).await?;
        let released = jobs
            .iter()
            .filter(|j| j.status == LeaseStatus::Held)
            .count();
        tracing::info!(released, asked = jobs.len(), "leases released");
        return Ok(Json(WorkerHeartbeatAck { jobs }));
    }
    // Also marks the worker seen.
    let jobs = svc.protocol().heartbeat(&worker, &beat.leases).await?;
    for (held, job) in beat.leases.iter().zip(&jobs) {
        if job.status != LeaseStatus::Held {
            let status = job.status;
            tracing::debug_span!("job", job_id = held.job_id, attempt = held.attempt)
                .in_scope(|| tracing::info!(?status, "heartbeat for a job no longer held"));
        }
    }
    tracing::debug!(leases = jobs.len(), "heartbeat");
    Ok(Json(WorkerHeartbeatAck { jobs }))
}

/// Stores every job report of the upload in one store call (each idempotently, with its own
/// lease check) and answers each job's status. A lost lease is that job's `lost`, not an
/// error of the call. Invalid input (e.g. an index outside the job) fails the whole call
/// with 400 and stores nothing of it.
#[utoipa::path(
    post, path = "/api/v1/workers/{id}/results", tag = "workers",
    params(("id" = i64, Path, description = "Worker id (from registration)."),),
    request_body = WorkerReport,
    responses(
        (status = 200, description = "Each report's outcome, in the request's order.",
            body = WorkerReportAck),
        InputErrors
    ),
    security(("token" = ["worker"]))
)]
#[tracing::instrument(name = "results", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn results(
    Call { svc, caller, .. }: Call<need::Worker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<WorkerReportAck> {
    let (worker, upload): (_, WorkerReport) = worker_call(&svc, &caller, &id, &body).await?;
    // Also marks the worker seen.
    let jobs = svc
        .protocol()
        .report(&worker, upload.reports.into())
        .await?;
    Ok(Json(WorkerReportAck { jobs }))
}

/// The worker a protocol call speaks for, from its path, and the call's body: the worker is
/// parsed, recorded on the call's span and checked to be the caller's before the body is read
/// (so a caller that may not speak for it is answered 401, 403 or 404 whatever it sent).
async fn worker_call<T: DeserializeOwned>(
    svc: &Service,
    caller: &Caller,
    id: &str,
    body: &Bytes,
) -> Result<(AuthorizedWorker, T), ApiError> {
    let worker_id = parse_id(id, "worker")?;
    Span::current().record("worker_id", worker_id);
    let worker = svc.protocol().authorize_worker(caller, worker_id).await?;
    Ok((worker, json_body(body)?))
}

/// The job a build call names in its path, and the call's body, with the worker the body
/// names (`worker_of`): both recorded on the call's span. The caller's role was checked
/// before (its [`Call`]); the worker's ownership is the use case's, once the body is read.
fn job_call<T: DeserializeOwned>(
    id: &str,
    body: &Bytes,
    worker_of: impl Fn(&T) -> i64,
) -> Result<(i64, T), ApiError> {
    let job_id = parse_id(id, "job")?;
    Span::current().record("job_id", job_id);
    let call: T = json_body(body)?;
    Span::current().record("worker_id", worker_of(&call));
    Ok((job_id, call))
}

/// Reports that the job's variant failed to build, with the compiler's output.
#[utoipa::path(
    post, path = "/api/v1/jobs/{id}/build-failed", tag = "workers",
    params(("id" = i64, Path, description = "Job id.")),
    request_body = BuildFailure,
    responses((status = 200, description = "Recorded.", body = BatchAck), JobCallErrors),
    security(("token" = ["worker"]))
)]
#[tracing::instrument(name = "build_failed", skip_all, fields(job_id = field::Empty, worker_id = field::Empty))]
pub(super) async fn build_failed(
    Call { svc, caller, .. }: Call<need::Worker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<BatchAck> {
    let (job_id, failure) = job_call(&id, &body, |f: &BuildFailure| f.worker_id)?;
    Ok(Json(
        svc.protocol()
            .build_failed(&caller, job_id, &failure)
            .await?,
    ))
}

/// `POST /api/v1/jobs/{id}/built`: how the worker got the binary of the job's build.
#[utoipa::path(
    post, path = "/api/v1/jobs/{id}/built", tag = "workers",
    params(("id" = i64, Path, description = "Job id.")),
    request_body = BuildReport,
    responses(
        (status = 200, description = "Kept (the first record per build and worker stays); `bench_mismatch` set when the worker's bench disagrees with another's for the same binary (the job then went back to the queue, kept from this worker).", body = BuildRecorded),
        JobCallErrors
    ),
    security(("token" = ["worker"]))
)]
#[tracing::instrument(name = "build_recorded", skip_all, fields(job_id = field::Empty, worker_id = field::Empty))]
pub(super) async fn built(
    Call { svc, caller, .. }: Call<need::Worker>,
    Path(id): Path<String>,
    body: Bytes,
) -> Answer<BuildRecorded> {
    let (job_id, report) = job_call(&id, &body, |r: &BuildReport| r.worker_id)?;
    let bench_mismatch = svc
        .protocol()
        .record_build(&caller, job_id, &report)
        .await?;
    Ok(Json(BuildRecorded {
        job_id,
        bench_mismatch,
    }))
}

/// Downloads a source snapshot (gzip'ed tar) by its sha256: served to admins, to the token
/// that uploaded it or submitted a sweep that uses it, and to a worker token one of whose
/// workers holds a lease of a job of such a sweep. To anyone else it is 404, as if it were
/// not stored.
#[utoipa::path(
    get, path = "/api/v1/sources/{sha256}", tag = "sources",
    params(("sha256" = String, Path, description = "The snapshot's sha256 (64 lowercase hex digits).")),
    responses(
        (status = 200, description = "The snapshot.", content_type = "application/gzip",
            body = Vec<u8>),
        ReadErrors
    ),
    security(("token" = ["admin", "submitter", "worker"]))
)]
pub(super) async fn source(
    Call { svc, caller, .. }: Call<need::Source>,
    Path(sha): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let archive = svc.protocol().source(&caller, &sha).await?;
    Ok(([(header::CONTENT_TYPE, "application/gzip")], archive))
}
