//! `GET /healthz`: 200 when the database answers, 503 otherwise. The database's own error
//! (host names, user names, paths) goes to the log, not to whoever asks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use sweep_domain::wire::Health;

use crate::service::Service;

/// 200 when the database answers, 503 otherwise.
#[utoipa::path(
    get, path = "/healthz", tag = "service",
    responses(
        (status = 200, description = "The database answers.", body = Health),
        (status = 503, description = "The database does not answer (or the coordinator is \
            overloaded).", body = Health)
    )
)]
pub(super) async fn healthz(State(svc): State<Service>) -> (StatusCode, Json<Health>) {
    match svc.reads().ping().await {
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
