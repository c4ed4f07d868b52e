//! `GET /healthz`: 200 when the database answers, 503 otherwise. The database's own error
//! (host names, user names, paths) goes to the log, not to whoever asks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use sweep_domain::wire::Health;

use crate::service::Service;

pub(super) async fn healthz(State(svc): State<Service>) -> (StatusCode, Json<Health>) {
    match svc.ping().await {
        Ok(()) => (
            StatusCode::OK,
            Json(Health {
                status: "ok".into(),
                database: "ok".into(),
            }),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "health check: database unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    status: "unavailable".into(),
                    database: "unavailable".into(),
                }),
            )
        }
    }
}
