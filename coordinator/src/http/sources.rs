//! Source uploads: `HEAD /api/v1/sources/{sha256}` (200 when stored, 404 when not) and
//! `PUT /api/v1/sources/{sha256}` with the gzip'ed tar as the body (submitters and admins;
//! verified before it is stored). `GET` is in the worker protocol (`workers::source`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

use super::error::ApiError;
use crate::service::{Caller, Service, Uploaded};

/// Answer of a source upload.
#[derive(Debug, Serialize)]
pub(super) struct SourceAck {
    /// The snapshot's sha256.
    sha256: String,
    /// Size of the archive in bytes.
    bytes: usize,
    /// It was stored already (nothing changed).
    existing: bool,
}

pub(super) async fn has_source(
    State(svc): State<Service>,
    caller: Caller,
    Path(sha): Path<String>,
) -> Result<StatusCode, ApiError> {
    Ok(if svc.has_source(&caller, &sha).await? {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    })
}

pub(super) async fn put_source(
    State(svc): State<Service>,
    caller: Caller,
    Path(sha): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<SourceAck>), ApiError> {
    let bytes = body.len();
    let outcome = svc.put_source(&caller, &sha, body.to_vec()).await?;
    let status = match outcome {
        Uploaded::Stored => StatusCode::CREATED,
        Uploaded::Present => StatusCode::OK,
    };
    Ok((
        status,
        Json(SourceAck {
            sha256: sha,
            bytes,
            existing: outcome == Uploaded::Present,
        }),
    ))
}
