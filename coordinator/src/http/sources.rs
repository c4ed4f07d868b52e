//! Source uploads: `HEAD /api/v1/sources/{sha256}` (200 when stored, 404 when not) and
//! `PUT /api/v1/sources/{sha256}` with the gzip'ed tar as the body (submitters and admins;
//! verified before it is stored). `GET` is in the worker protocol (`workers::source`).

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

use utoipa::ToSchema;

use super::call::{created_unless, need, Call};
use super::error::ApiError;
use super::openapi::{CreateErrors, RoleErrors};
use crate::service::Uploaded;

/// Answer of a source upload.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SourceAck {
    /// The snapshot's sha256.
    sha256: String,
    /// Size of the archive in bytes.
    bytes: usize,
    /// It was stored already (nothing changed).
    existing: bool,
}

/// Is this snapshot stored, for the caller? 200 when it is and the caller may read it (see
/// `GET`), 404 when not (no body either way).
#[utoipa::path(
    head, path = "/api/v1/sources/{sha256}", tag = "sources",
    params(("sha256" = String, Path, description = "The snapshot's sha256 (64 lowercase hex digits).")),
    responses(
        (status = 200, description = "Stored."),
        (status = 404, description = "Not stored."),
        RoleErrors
    ),
    security(("token" = ["admin", "submitter", "worker"]))
)]
pub(super) async fn has_source(
    Call { svc, caller, .. }: Call<need::Source>,
    Path(sha): Path<String>,
) -> Result<StatusCode, ApiError> {
    Ok(if svc.submissions().has_source(&caller, &sha).await? {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    })
}

/// Uploads a snapshot: a gzip'ed tar whose sha256 is the one in the path, checked before it
/// is stored.
#[utoipa::path(
    put, path = "/api/v1/sources/{sha256}", tag = "sources",
    params(("sha256" = String, Path, description = "The snapshot's sha256 (64 lowercase hex digits).")),
    request_body(content = Vec<u8>, content_type = "application/gzip",
        description = "The snapshot: a gzip'ed tar."),
    responses(
        (status = 201, description = "Stored.", body = SourceAck),
        (status = 200, description = "Already stored (nothing changed).", body = SourceAck),
        (status = 413, description = "The body is larger than a snapshot may be."),
        CreateErrors
    ),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn put_source(
    Call { svc, caller, .. }: Call<need::Submit>,
    Path(sha): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<SourceAck>), ApiError> {
    let bytes = body.len();
    let outcome = svc
        .submissions()
        .put_source(&caller, &sha, body.to_vec())
        .await?;
    let existing = outcome == Uploaded::Present;
    let ack = SourceAck {
        sha256: sha,
        bytes,
        existing,
    };
    Ok((created_unless(existing), Json(ack)))
}
