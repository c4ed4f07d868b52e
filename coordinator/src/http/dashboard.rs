//! The dashboard: the static app in `dashboards/` (HTML, CSS, scripts that read the JSON API),
//! compiled into the binary so a coordinator serves it with no files beside it. No token is
//! needed for these files; the page asks for one to read the API.

use axum::http::header;
use axum::response::IntoResponse;

/// The dashboard's files: (route, content type, content).
const FILES: [(&str, &str, &str); 5] = [
    (
        "/",
        "text/html; charset=utf-8",
        include_str!("../../../dashboards/index.html"),
    ),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_str!("../../../dashboards/app.css"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/app.js"),
    ),
    (
        "/plot.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/plot.js"),
    ),
    (
        "/sweep.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../dashboards/sweep.js"),
    ),
];

/// Adds a route per dashboard file to `router`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>(
    mut router: axum::Router<S>,
) -> axum::Router<S> {
    for (path, content_type, body) in FILES {
        router = router.route(
            path,
            axum::routing::get(move || async move {
                (
                    [
                        (header::CONTENT_TYPE, content_type),
                        // Revalidated on every load, so a new coordinator's page is never
                        // mixed with an old cached script.
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    body,
                )
                    .into_response()
            }),
        );
    }
    router
}
