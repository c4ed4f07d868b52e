//! The caller of a request, from its `Authorization: Bearer` header: every handler that
//! needs one takes a [`Caller`] argument, and the service decides what it may do. The
//! [`authenticate_first`] layer finds it before the request takes an in-flight slot and
//! leaves it in the request's extensions, where the handler's [`Caller`] is taken from.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::service::{Caller, Service};

impl FromRequestParts<Service> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, svc: &Service) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        Ok(svc.authenticate(bearer(&parts.headers)?).await?)
    }
}

/// The bearer token of a request's `Authorization` header (`None` without one); a header
/// of another form is answered 401.
fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Some)
        .ok_or_else(|| {
            ApiError::Unauthenticated("the Authorization header must be `Bearer TOKEN`".to_string())
        })
}

/// Authenticates the caller of a request to a route before anything else is done with it:
/// an unknown, revoked or malformed token, or no token where the route needs one, is
/// answered 401 here, before the request takes an in-flight slot or its body is read; the
/// caller found is left in the request's extensions for the handler and the bound. Routes
/// open to anyone (health, the dashboard, the OpenAPI document) take no caller: their
/// bearer, if any, is not looked at.
pub(crate) async fn authenticate_first(
    State(svc): State<Service>,
    req: Request,
    next: Next,
) -> Response {
    if !needs_token(req.uri().path()) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let caller = match bearer(&parts.headers) {
        Ok(bearer) => svc.authenticate(bearer).await.map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let caller = match caller {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    if caller == Caller::Anonymous && !public_read(&svc, &parts.method, parts.uri.path()) {
        return ApiError::Unauthenticated(
            "this call needs a token: send `Authorization: Bearer TOKEN` \
             (sweep ... --token, or SWEEP_TOKEN)"
                .to_string(),
        )
        .into_response();
    }
    parts.extensions.insert(caller);
    next.run(Request::from_parts(parts, body)).await
}

/// Whether a request without a token to `path` (a route that needs one) by `method` may go
/// on to its handler: on a coordinator with `--public-read`, reads other than sources may
/// (their handlers decide, by the role table of `service/auth.rs`).
fn public_read(svc: &Service, method: &Method, path: &str) -> bool {
    let read = method == Method::GET || method == Method::HEAD;
    read && !path.starts_with("/api/v1/sources/") && svc.anonymous_reads()
}

/// Whether the route at `path` is for token holders (and, with `--public-read`, anonymous
/// readers): the API but its OpenAPI document, and `/metrics`. The others (health, the
/// dashboard) are open to anyone.
fn needs_token(path: &str) -> bool {
    (path.starts_with("/api/") && path != "/api/v1/openapi.json") || path == "/metrics"
}

#[cfg(test)]
mod tests {
    use super::needs_token;

    /// The operations the OpenAPI document says anyone may call are exactly those whose
    /// path needs no token: the layer that answers 401 early and the handlers agree.
    #[test]
    fn open_routes_are_those_the_document_leaves_open() {
        let doc = serde_json::to_value(crate::http::openapi::document()).unwrap();
        let mut checked = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let secured = op.get("security").is_some();
                assert_eq!(needs_token(path), secured, "{method} {path}");
                checked += 1;
            }
        }
        assert!(checked >= 20, "{checked} operations");
    }
}
