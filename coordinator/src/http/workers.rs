//! The worker protocol: register, lease, heartbeat, results, build failures, sources.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use sweep_domain::wire::{
    BatchAck, BuildFailure, Heartbeat, LeaseRequest, LeaseResponse, RegisterWorker, Registered,
    ResultBatch,
};
use sweep_domain::FieldError;

use super::error::ApiError;
use super::{json_body, parse_id};
use crate::service::Service;

/// Most jobs one lease call may take.
const MAX_JOBS_PER_LEASE: u32 = 64;

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
    let worker_id = svc.store.register_worker(&req).await?;
    tracing::info!(worker_id, name = %req.name, host = %req.host, cores = req.cores, "worker registered");
    Ok(Json(Registered {
        worker_id,
        lease_secs: svc.leases.lease.as_secs().max(1),
        heartbeat_secs: svc.leases.heartbeat.as_secs().max(1),
    }))
}

pub(super) async fn lease(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<LeaseResponse>, ApiError> {
    let worker_id = parse_id(&id, "worker")?;
    let req: LeaseRequest = json_body(&body)?;
    if req.max_jobs == 0 || req.max_jobs > MAX_JOBS_PER_LEASE {
        return Err(
            FieldError::new("max_jobs", format!("must be 1 to {MAX_JOBS_PER_LEASE}")).into(),
        );
    }
    let jobs = svc
        .store
        .lease_jobs(worker_id, req.max_jobs, svc.leases.lease)
        .await?;
    for j in &jobs {
        tracing::info!(
            worker_id,
            job_id = j.job_id,
            sweep_id = j.sweep_id,
            attempt = j.attempt,
            "job leased"
        );
    }
    Ok(Json(LeaseResponse { jobs }))
}

pub(super) async fn heartbeat(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<BatchAck>, ApiError> {
    let job_id = parse_id(&id, "job")?;
    let beat: Heartbeat = json_body(&body)?;
    Ok(Json(
        svc.store.heartbeat(job_id, &beat, svc.leases.lease).await?,
    ))
}

pub(super) async fn results(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<BatchAck>, ApiError> {
    let job_id = parse_id(&id, "job")?;
    let batch: ResultBatch = json_body(&body)?;
    let ack = svc
        .store
        .report(job_id, &batch, svc.leases.lease, svc.leases.max_attempts)
        .await?;
    tracing::debug!(
        job_id,
        worker_id = batch.worker_id,
        accepted = ack.accepted,
        duplicates = ack.duplicates,
        finished = batch.finished,
        "results stored"
    );
    Ok(Json(ack))
}

pub(super) async fn build_failed(
    State(svc): State<Service>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<BatchAck>, ApiError> {
    let job_id = parse_id(&id, "job")?;
    let failure: BuildFailure = json_body(&body)?;
    tracing::warn!(job_id, worker_id = failure.worker_id, "build failed");
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
