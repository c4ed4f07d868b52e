//! The dashboard: the static app in `dashboards/` (HTML, CSS, scripts that read the JSON API),
//! compiled into the binary so a coordinator serves it with no files beside it. No token is
//! needed for these files; the page asks for one to read the API. One handler per file, so
//! each is a documented route like any other.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// A file of the app, revalidated on every load so a new coordinator's page is never mixed
/// with an old cached script.
fn file(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// The dashboard page (it reads the JSON API and asks for a token).
#[utoipa::path(get, path = "/", tag = "service",
    responses((status = 200, description = "The dashboard page.", content_type = "text/html", body = String)))]
pub(super) async fn index() -> Response {
    file(
        "text/html; charset=utf-8",
        include_str!("../../../dashboards/index.html"),
    )
}

/// The dashboard's style sheet.
#[utoipa::path(get, path = "/app.css", tag = "service",
    responses((status = 200, description = "CSS.", content_type = "text/css", body = String)))]
pub(super) async fn app_css() -> Response {
    file(
        "text/css; charset=utf-8",
        include_str!("../../../dashboards/app.css"),
    )
}

/// The dashboard's shell: routing, the sweep list, the workers page, the submit form.
#[utoipa::path(get, path = "/app.js", tag = "service",
    responses((status = 200, description = "JavaScript.", content_type = "text/javascript", body = String)))]
pub(super) async fn app_js() -> Response {
    file(
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/app.js"),
    )
}

/// The dashboard's SVG plots.
#[utoipa::path(get, path = "/plot.js", tag = "service",
    responses((status = 200, description = "JavaScript.", content_type = "text/javascript", body = String)))]
pub(super) async fn plot_js() -> Response {
    file(
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/plot.js"),
    )
}

/// The dashboard's sweep page.
#[utoipa::path(get, path = "/sweep.js", tag = "service",
    responses((status = 200, description = "JavaScript.", content_type = "text/javascript", body = String)))]
pub(super) async fn sweep_js() -> Response {
    file(
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/sweep.js"),
    )
}
