//! `GET /healthz`: 200 when the database answers, 503 with the reason otherwise.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::service::Service;

pub(super) async fn healthz(State(svc): State<Service>) -> (StatusCode, Json<Value>) {
    match svc.store.ping().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({"status": "ok", "database": "ok"})),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unavailable", "database": e.to_string()})),
        ),
    }
}
