//! The worker protocol: register, lease, heartbeat, results, build failures, sources.
//!
//! Lease, heartbeat and results are per worker, not per job, so a worker with many cores
//! costs the coordinator a few requests per second however many jobs it runs, and each call is
//! one store transaction; each job inside a call still gets its own lease check and status.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use sweep_domain::wire::{
    BatchAck, BuildFailure, JobAck, JobStatus, LeaseRequest, LeaseResponse, LeaseStatus,
    RegisterWorker, Registered, WorkerHeartbeat, WorkerHeartbeatAck, WorkerReport, WorkerReportAck,
    MAX_JOBS_PER_CALL, MAX_JOBS_PER_LEASE, MAX_WORKER_ENGINES,
};
use sweep_domain::FieldError;
use tracing::{field, Span};

use super::error::ApiError;
use super::{json_body, parse_id};
use crate::service::Service;
use crate::store::JobOutcome;

pub(super) async fn register(
    State(svc): State<Service>,
    body: Bytes,
) -> Result<Json<Registered>, ApiError> {
    let req: RegisterWorker = json_body(&body)?;
    if req.cores == 0 || req.cores > 4096 {
        return Err(FieldError::new("cores", "must be 1 to 4096").into());
    }
    if req.name.is_empty() || req.name.len() > 200 || req.host.len() > 200 {
        return Err(FieldError::new("name", "must be 1 to 200 characters").into());
    }
    if req.engines.len() > MAX_WORKER_ENGINES {
        return Err(
            FieldError::new("engines", format!("at most {MAX_WORKER_ENGINES} engines")).into(),
        );
    }
    for (i, engine) in req.engines.iter().enumerate() {
        if engine.is_empty() || engine.len() > 200 {
            return Err(
                FieldError::new(format!("engines[{i}]"), "must be 1 to 200 characters").into(),
            );
        }
    }
    let worker_id = svc.store.register_worker(&req).await?;
    tracing::info!(worker_id, name = %req.name, host = %req.host, cores = req.cores, engines = ?req.engines, "worker registered");
    Ok(Json(Registered {
        worker_id,
        lease_secs: svc.leases.lease.as_secs().max(1),
        heartbeat_secs: svc.leases.heartbeat.as_secs().max(1),
    }))
}

#[tracing::instrument(name = "lease", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn lease(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<LeaseResponse>, ApiError> {
    let worker_id = parse_id(&id, "worker")?;
    Span::current().record("worker_id", worker_id);
    let req: LeaseRequest = json_body(&body)?;
    if req.max_jobs == 0 || req.max_jobs > MAX_JOBS_PER_LEASE {
        return Err(
            FieldError::new("max_jobs", format!("must be 1 to {MAX_JOBS_PER_LEASE}")).into(),
        );
    }
    let jobs = svc
        .store
        .lease_jobs(
            worker_id,
            req.max_jobs,
            svc.leases.lease,
            svc.leases.max_attempts,
        )
        .await?;
    for j in &jobs {
        tracing::info_span!("job", job_id = j.job_id, sweep_id = j.sweep_id)
            .in_scope(|| tracing::debug!(attempt = j.attempt, "job leased"));
    }
    Ok(Json(LeaseResponse { jobs }))
}

/// Renews every lease the worker names in one store transaction, and answers each job's
/// status; a lost or cancelled job does not fail the others.
#[tracing::instrument(name = "heartbeat", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn heartbeat(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<WorkerHeartbeatAck>, ApiError> {
    let worker_id = parse_id(&id, "worker")?;
    Span::current().record("worker_id", worker_id);
    let beat: WorkerHeartbeat = json_body(&body)?;
    check_jobs_per_call("leases", beat.leases.len())?;
    // Also marks the worker seen, and answers NotFound (404) for an unregistered one.
    let outcomes = svc
        .store
        .heartbeat_many(worker_id, &beat.leases, svc.leases.lease)
        .await?;
    let mut jobs = Vec::with_capacity(beat.leases.len());
    for (held, outcome) in beat.leases.iter().zip(outcomes) {
        let status = outcome.status;
        if status != LeaseStatus::Held {
            tracing::debug_span!("job", job_id = held.job_id, attempt = held.attempt)
                .in_scope(|| tracing::info!(?status, "heartbeat for a job no longer held"));
        }
        jobs.push(JobStatus {
            job_id: held.job_id,
            status,
        });
    }
    tracing::debug!(leases = jobs.len(), "heartbeat");
    Ok(Json(WorkerHeartbeatAck { jobs }))
}

/// Stores every job report of the upload in one store transaction (each idempotently, with
/// its own lease check) and answers each job's status. A lost lease is that job's `lost`, not
/// an error of the call. Invalid input (e.g. an index outside the job) fails the whole call
/// with 400 and stores nothing of it.
#[tracing::instrument(name = "results", skip_all, fields(worker_id = field::Empty))]
pub(super) async fn results(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<WorkerReportAck>, ApiError> {
    let worker_id = parse_id(&id, "worker")?;
    Span::current().record("worker_id", worker_id);
    let upload: WorkerReport = json_body(&body)?;
    check_jobs_per_call("reports", upload.reports.len())?;
    // Also marks the worker seen, and answers NotFound (404) for an unregistered one.
    let outcomes = svc
        .store
        .report_many(
            worker_id,
            &upload.reports,
            svc.leases.lease,
            svc.leases.max_attempts,
        )
        .await?;
    let mut jobs = Vec::with_capacity(upload.reports.len());
    for (report, outcome) in upload.reports.iter().zip(outcomes) {
        let JobOutcome {
            status,
            accepted,
            duplicates,
        } = outcome;
        tracing::debug_span!("job", job_id = report.job_id, attempt = report.attempt).in_scope(
            || {
                tracing::debug!(
                    ?status,
                    accepted,
                    duplicates,
                    finished = report.finished,
                    "results stored"
                )
            },
        );
        jobs.push(JobAck {
            job_id: report.job_id,
            status,
            accepted,
            duplicates,
        });
    }
    Ok(Json(WorkerReportAck { jobs }))
}

/// Refuses calls naming more jobs than [`MAX_JOBS_PER_CALL`].
fn check_jobs_per_call(field: &str, n: usize) -> Result<(), ApiError> {
    if n > MAX_JOBS_PER_CALL {
        return Err(
            FieldError::new(field, format!("at most {MAX_JOBS_PER_CALL} jobs per call")).into(),
        );
    }
    Ok(())
}

#[tracing::instrument(name = "build_failed", skip_all, fields(job_id = field::Empty, worker_id = field::Empty))]
pub(super) async fn build_failed(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<BatchAck>, ApiError> {
    let job_id = parse_id(&id, "job")?;
    Span::current().record("job_id", job_id);
    let failure: BuildFailure = json_body(&body)?;
    Span::current().record("worker_id", failure.worker_id);
    tracing::warn!("build failed");
    Ok(Json(
        svc.store
            .build_failed(job_id, &failure, svc.leases.lease, svc.leases.max_attempts)
            .await?,
    ))
}

pub(super) async fn source(
    State(svc): State<Service>,
    Path(sha): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::NotFound(format!("source {sha}")));
    }
    let archive = svc
        .store
        .snapshot(&sha)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("source {sha}")))?;
    Ok(([(header::CONTENT_TYPE, "application/gzip")], archive))
}
