//! Engines added at runtime: `PUT /api/v1/engines/{name}` with a TOML definition (admin).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sweep_domain::wire::EngineInfo;

use super::error::ApiError;
use crate::service::{Caller, Service};

/// Registers or replaces an engine: 201 with the engine when it is new to the database, 200
/// when it replaced a stored definition; 422 naming the field for a bad definition.
pub(super) async fn add(
    State(svc): State<Service>,
    caller: Caller,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<EngineInfo>), ApiError> {
    let added = svc.add_engine(&caller, &name, &body).await?;
    let status = if added.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(added.engine)))
}
