//! HTTP adapters: thin handlers that parse, call the [`Service`], and map errors.

mod caller;
mod dashboard;
mod engines;
pub mod error;
mod health;
mod metrics;
mod sources;
mod sweeps;
mod workers;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post, put};
use axum::Router;
use serde::de::DeserializeOwned;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;

use crate::service::Service;
use error::ApiError;

/// Largest request body accepted (a worker's upload of 1,000 results is about 250 KB).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Largest body of a source upload (`PUT /api/v1/sources/{sha256}`), its route alone.
pub const MAX_SOURCE_BODY_BYTES: usize = crate::snapshot::MAX_SNAPSHOT_BYTES;

/// The whole API.
pub fn router(service: Service) -> Router {
    let api = dashboard::routes(Router::new())
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::scrape))
        .route("/api/v1/engines", get(sweeps::engines))
        .route("/api/v1/engines/{name}", put(engines::add))
        .route("/api/v1/suites", get(sweeps::suites))
        .route("/api/v1/sweeps", post(sweeps::submit).get(sweeps::list))
        .route("/api/v1/sweeps/{id}", get(sweeps::detail))
        .route("/api/v1/sweeps/{id}/table", get(sweeps::table))
        .route("/api/v1/sweeps/{id}/positions", get(sweeps::positions))
        .route("/api/v1/sweeps/{id}/derive", get(sweeps::derive))
        .route("/api/v1/sweeps/{id}/cancel", post(sweeps::cancel))
        .route(
            "/api/v1/sweeps/{id}/builds/{build}/retry",
            post(sweeps::retry_build),
        )
        .route("/api/v1/audit", get(sweeps::audit))
        .route(
            "/api/v1/workers",
            post(workers::register).get(workers::list),
        )
        .route("/api/v1/workers/{id}/lease", post(workers::lease))
        .route("/api/v1/workers/{id}/heartbeat", post(workers::heartbeat))
        .route("/api/v1/workers/{id}/results", post(workers::results))
        .route(
            "/api/v1/jobs/{id}/build-failed",
            post(workers::build_failed),
        )
        .route("/api/v1/jobs/{id}/built", post(workers::built))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES));
    // Source snapshots: served to workers, checked and uploaded by submitters, under a
    // body limit of their own.
    let sources = Router::new()
        .route(
            "/api/v1/sources/{sha256}",
            get(workers::source)
                .head(sources::has_source)
                .put(sources::put_source),
        )
        .layer(RequestBodyLimitLayer::new(MAX_SOURCE_BODY_BYTES));
    api.merge(sources)
        .fallback(|| async { ApiError::NotFound("route".into()) })
        .layer(DefaultBodyLimit::disable())
        .layer(TraceLayer::new_for_http())
        .with_state(service)
}

/// `app` with every request timed for `/metrics` (by route template, method and status
/// class). Wrapped around the in-flight bound (see [`crate::server::bounded`]), so requests
/// shed with 503 are counted too: an overloaded coordinator shows on the dashboard.
pub fn timed(app: Router, service: Service) -> Router {
    app.layer(middleware::from_fn_with_state(service, metrics::track))
}

/// Parses a JSON body with field-naming errors (axum's `Json` rejections are plain text).
fn json_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    Ok(sweep_domain::decode::deserialize_json(body)?)
}

/// Parses an id path segment.
fn parse_id(raw: &str, what: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::NotFound(format!("{what} {raw}")))
}
