//! HTTP adapters: thin handlers that parse, call one part of the [`Service`] (submissions, the
//! worker protocol, reads, administration), and map its error (`error.rs`).

mod call;
mod caller;
mod dashboard;
mod engines;
pub mod error;
mod health;
mod metrics;
pub mod openapi;
mod sources;
mod sweeps;
mod transfer;
mod workers;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::Router;
use serde::de::DeserializeOwned;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::service::Service;
use error::ApiError;

/// Largest request body accepted (a worker's upload of 1,000 results is about 250 KB).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Largest body of a source upload (`PUT /api/v1/sources/{sha256}`), its route alone.
pub const MAX_SOURCE_BODY_BYTES: usize = crate::snapshot::MAX_SNAPSHOT_BYTES;

/// The body limit of the route at `path`: source snapshots' and imports' own, else
/// [`MAX_BODY_BYTES`].
/// The routes carry these limits themselves ([`routes`]); the in-flight bound reads a body
/// under the same one (`crate::server`).
pub(crate) fn body_limit(path: &str) -> usize {
    if path.starts_with("/api/v1/sources/") || path == "/api/v1/sweeps/import" {
        MAX_SOURCE_BODY_BYTES
    } else {
        MAX_BODY_BYTES
    }
}

/// The whole API.
pub fn router(service: Service) -> Router {
    let (routes, _document) = routes().split_for_parts();
    routes
        .fallback(|| async { ApiError::NotFound("route".into()) })
        .layer(DefaultBodyLimit::disable())
        .layer(TraceLayer::new_for_http())
        .with_state(service)
}

/// Every route with its OpenAPI operation: each `routes!` call registers its handlers at the
/// path and methods of their `#[utoipa::path]` attributes and adds those operations to the
/// document, so what is served and what is described cannot differ. Register routes only
/// this way (never `.route(...)`): the `openapi` tests check the document against the
/// server.
pub(crate) fn routes() -> OpenApiRouter<Service> {
    let api = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(dashboard::index))
        .routes(routes!(dashboard::app_css))
        .routes(routes!(dashboard::app_js))
        .routes(routes!(dashboard::plot_js))
        .routes(routes!(dashboard::sweep_js))
        .routes(routes!(health::healthz))
        .routes(routes!(metrics::scrape))
        .routes(routes!(openapi::openapi_json))
        .routes(routes!(sweeps::engines))
        .routes(routes!(engines::add))
        .routes(routes!(sweeps::suites))
        .routes(routes!(sweeps::submit, sweeps::list))
        .routes(routes!(sweeps::estimate))
        .routes(routes!(sweeps::detail, sweeps::delete))
        .routes(routes!(sweeps::table))
        .routes(routes!(sweeps::positions))
        .routes(routes!(sweeps::derive))
        .routes(routes!(sweeps::cancel))
        .routes(routes!(sweeps::retry_build))
        .routes(routes!(sweeps::approve))
        .routes(routes!(sweeps::reject))
        .routes(routes!(sweeps::audit))
        .routes(routes!(transfer::export))
        .routes(routes!(workers::register, workers::list))
        .routes(routes!(workers::lease))
        .routes(routes!(workers::heartbeat))
        .routes(routes!(workers::results))
        .routes(routes!(workers::build_failed))
        .routes(routes!(workers::built))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES));
    // Source snapshots (served to workers, checked and uploaded by submitters) and export
    // files (which may carry snapshots), under a body limit of their own.
    let sources = OpenApiRouter::new()
        .routes(routes!(
            workers::source,
            sources::has_source,
            sources::put_source
        ))
        .routes(routes!(transfer::import))
        .layer(RequestBodyLimitLayer::new(MAX_SOURCE_BODY_BYTES));
    api.merge(sources)
}

/// `app` with the caller of every request to a route authenticated first (see
/// [`caller::authenticate_first`]): wrapped around the in-flight bound (see
/// [`crate::server::bounded`]), so a request without a valid token is answered 401 before it
/// takes a slot, and the bound knows whose request it is.
pub fn authenticated(app: Router, service: Service) -> Router {
    app.route_layer(middleware::from_fn_with_state(
        service,
        caller::authenticate_first,
    ))
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
