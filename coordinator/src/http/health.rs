//! `GET /healthz`: 200 when the database answers, 503 otherwise. The database's own error
//! (host names, user names, paths) goes to the log, not to whoever asks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::service::Service;

pub(super) async fn healthz(State(svc): State<Service>) -> (StatusCode, Json<Value>) {
    match svc.ping().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({"status": "ok", "database": "ok"})),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "health check: database unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "database": "unavailable"})),
            )
        }
    }
}
