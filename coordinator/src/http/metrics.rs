//! `GET /metrics` for Prometheus, and the middleware that times every request.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::call::{need, Call};
use super::error::ApiError;
use super::openapi::RoleErrors;
use crate::metrics::CONTENT_TYPE;
use crate::service::Service;

/// The metrics in the text exposition format (a reader token, or none with `--public-read`).
#[utoipa::path(
    get, path = "/metrics", tag = "service",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4.",
            content_type = "text/plain; version=0.0.4", body = String),
        RoleErrors
    ),
    security(("token" = ["admin", "submitter", "reader"]))
)]
pub(super) async fn scrape(
    Call { svc, caller, .. }: Call<need::Metrics>,
) -> Result<impl IntoResponse, ApiError> {
    let text = svc.reads().metrics_text(&caller).await?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text))
}

/// Times a request under its route template (`/api/v1/sweeps/{id}`, never the raw path, so
/// ids do not become series); a request no route matched counts as `unmatched`.
pub(super) async fn track(State(svc): State<Service>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let method = req.method().clone();
    let start = Instant::now();
    let resp = next.run(req).await;
    svc.metrics().observe_request(
        route.as_deref().unwrap_or("unmatched"),
        &method,
        resp.status(),
        start.elapsed(),
    );
    resp
}
