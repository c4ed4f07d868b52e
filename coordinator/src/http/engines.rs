//! Engines added at runtime: `PUT /api/v1/engines/{name}` with a TOML definition (admin).

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::Json;
use sweep_domain::wire::EngineInfo;

use super::call::{created_unless, need, Call};
use super::error::ApiError;
use super::openapi::CreateErrors;

/// Registers or replaces an engine: 201 with the engine when it is new to the database, 200
/// when it replaced a stored definition; 422 naming the field for a bad definition.
#[utoipa::path(
    put, path = "/api/v1/engines/{name}", tag = "catalog",
    params(("name" = String, Path, description = "Engine name (the definition's `name`).")),
    request_body(content = String, content_type = "application/toml",
        description = "The engine definition, as in `configs/engines/*.toml`."),
    responses(
        (status = 201, description = "Added: new to the database.", body = EngineInfo),
        (status = 200, description = "Replaced a stored definition.", body = EngineInfo),
        CreateErrors
    ),
    security(("token" = ["admin"]))
)]
pub(super) async fn add(
    Call { svc, caller, .. }: Call<need::Admin>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<EngineInfo>), ApiError> {
    let added = svc.submissions().add_engine(&caller, &name, &body).await?;
    Ok((created_unless(!added.created), Json(added.engine)))
}
