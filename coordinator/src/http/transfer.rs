//! Sweeps that move between stores: `GET /api/v1/sweeps/{id}/export` (the export file of an
//! ended sweep) and `POST /api/v1/sweeps/import` (a file written as a new sweep of the
//! caller's). See `crate::transfer` for the file.

use axum::body::Bytes;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sweep_domain::wire::Submitted;

use super::call::{need, Call, SweepId};
use super::error::ApiError;
use super::openapi::{CreateErrors, InputErrors};

/// The export file of an ended sweep: gzip of a versioned header and the sweep whole (spec,
/// engine definition, suites, results, cross-checks, build records, speed runs, and the
/// snapshots it builds that the caller may read).
#[utoipa::path(
    get, path = "/api/v1/sweeps/{id}/export", tag = "sweeps",
    params(("id" = i64, Path, description = "Sweep id.")),
    responses(
        (status = 200, description = "The export file.",
            content((Vec<u8> = "application/gzip"))),
        InputErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn export(
    Call { svc, caller, .. }: Call<need::Read>,
    SweepId(id): SweepId,
) -> Result<Response, ApiError> {
    let file = svc.reads().export_sweep(&caller, id).await?;
    let name = format!("attachment; filename=\"sweep-{id}.sweep.gz\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/gzip".to_string()),
            (header::CONTENT_DISPOSITION, name),
        ],
        file,
    )
        .into_response())
}

/// Imports an export file as a new sweep of the caller's, ended as it ended where it ran;
/// its results are reused by later sweeps like measured ones. A file that cannot be
/// verified (not an export, another version, damaged) is refused naming `file`.
#[utoipa::path(
    post, path = "/api/v1/sweeps/import", tag = "sweeps",
    request_body(content = Vec<u8>, content_type = "application/gzip",
        description = "An export file (`sweep export`, `GET /api/v1/sweeps/{id}/export`)."),
    responses(
        (status = 201, description = "Imported: a new sweep.", body = Submitted),
        (status = 413, description = "The body is larger than an upload may be."),
        CreateErrors
    ),
    security(("token" = ["admin", "submitter"]))
)]
pub(super) async fn import(
    Call { svc, caller, .. }: Call<need::Submit>,
    body: Bytes,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let submitted = svc
        .submissions()
        .import_sweep(&caller, body.to_vec(), "an upload")
        .await?;
    Ok((StatusCode::CREATED, Json(submitted)))
}
