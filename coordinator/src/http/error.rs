//! The one mapping from errors to HTTP statuses: each part of the service has its own error
//! type (submissions, the worker protocol, reads, administration, and authentication), and
//! each is mapped here once. Client errors carry a JSON body naming the problem; internal
//! errors are logged with their cause chain and answered with an opaque 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use sweep_domain::wire::{ErrorBody, ErrorDetail};
use sweep_domain::FieldError;

use crate::service::{
    AdminError, AuthError, Denied, ProtocolError, RateLimited, ReadError, SubmitError, Unavailable,
};

/// Seconds an overloaded coordinator (or a busy part of it) asks callers to wait: in every
/// 503's `Retry-After`, the server's in-flight bound's included.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Errors a handler can return.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The request as a whole is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// No such resource.
    #[error("{0} not found")]
    NotFound(String),
    /// The worker no longer holds the lease it reports for.
    #[error("{0}")]
    LeaseLost(String),
    /// No token, or an unknown or revoked one.
    #[error("{0}")]
    Unauthenticated(String),
    /// The token may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Too many writes from one token; retry after this many seconds.
    #[error("too many writes")]
    RateLimited(u64),
    /// The database is unreachable; retry later.
    #[error("service unavailable: {0}")]
    Unavailable(String),
    /// Too many requests of this kind at once; retry later.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// The token holds as many live workers as one may (`--max-workers-per-token`).
    #[error("too many workers")]
    TooManyWorkers {
        /// Live workers a token may hold.
        limit: u32,
        /// Seconds a lease lasts: the longest a place stays taken by a worker gone away.
        lease_secs: u64,
    },
    /// A bug or an unexpected failure.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

// The one mapping from the service's errors to the API's: one conversion per part of the
// service (and one per failure the parts share), each naming every case, so a case added to
// a part's error fails to compile until it has its status here.

impl From<Denied> for ApiError {
    fn from(e: Denied) -> Self {
        match e {
            Denied::Unauthenticated(m) => ApiError::Unauthenticated(m),
            Denied::Forbidden(m) => ApiError::Forbidden(m),
        }
    }
}

impl From<RateLimited> for ApiError {
    fn from(e: RateLimited) -> Self {
        ApiError::RateLimited(e.retry_after_secs)
    }
}

impl From<Unavailable> for ApiError {
    fn from(e: Unavailable) -> Self {
        ApiError::Unavailable(e.cause().to_string())
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Unauthenticated(m) => ApiError::Unauthenticated(m),
            e @ AuthError::Busy => ApiError::Overloaded(e.to_string()),
            AuthError::Unavailable(e) => e.into(),
            AuthError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::Invalid(field) => ApiError::Invalid(field),
            SubmitError::Denied(e) => e.into(),
            SubmitError::RateLimited(e) => e.into(),
            SubmitError::NotFound(what) => ApiError::NotFound(what),
            SubmitError::Rejected(m) => ApiError::BadRequest(m),
            e @ SubmitError::GitBusy => ApiError::Overloaded(e.to_string()),
            SubmitError::Unavailable(e) => e.into(),
            SubmitError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<ProtocolError> for ApiError {
    fn from(e: ProtocolError) -> Self {
        match e {
            ProtocolError::Invalid(field) => ApiError::Invalid(field),
            ProtocolError::Denied(e) => e.into(),
            ProtocolError::NotFound(what) => ApiError::NotFound(what),
            e @ ProtocolError::LeaseLost { .. } => ApiError::LeaseLost(e.to_string()),
            ProtocolError::Rejected(m) => ApiError::BadRequest(m),
            ProtocolError::TooManyWorkers { limit, lease_secs } => {
                ApiError::TooManyWorkers { limit, lease_secs }
            }
            ProtocolError::Unavailable(e) => e.into(),
            ProtocolError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<ReadError> for ApiError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Invalid(field) => ApiError::Invalid(field),
            ReadError::Denied(e) => e.into(),
            ReadError::NotFound(what) => ApiError::NotFound(what),
            e @ ReadError::Busy => ApiError::Overloaded(e.to_string()),
            ReadError::Unavailable(e) => e.into(),
            ReadError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::Invalid(field) => ApiError::Invalid(field),
            AdminError::Denied(e) => e.into(),
            AdminError::RateLimited(e) => e.into(),
            AdminError::NotFound(what) => ApiError::NotFound(what),
            AdminError::Rejected(m) => ApiError::BadRequest(m),
            AdminError::Unavailable(e) => e.into(),
            AdminError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl ApiError {
    /// The status, code, field and message the caller is answered with; what it is not told
    /// (a database error, a bug) goes to the log here.
    fn answer(&self) -> (StatusCode, &'static str, Option<String>, String) {
        match self {
            ApiError::Invalid(e) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_field",
                Some(e.field.clone()),
                e.problem.clone(),
            ),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, "bad_request", None, m.clone()),
            ApiError::NotFound(m) => (
                StatusCode::NOT_FOUND,
                "not_found",
                None,
                format!("{m} not found"),
            ),
            ApiError::LeaseLost(m) => (StatusCode::CONFLICT, "lease_lost", None, m.clone()),
            ApiError::Unauthenticated(m) => {
                (StatusCode::UNAUTHORIZED, "unauthenticated", None, m.clone())
            }
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, "forbidden", None, m.clone()),
            ApiError::RateLimited(secs) => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                None,
                format!("too many writes from this token; retry after {secs} s"),
            ),
            ApiError::TooManyWorkers { limit, lease_secs } => too_many_workers(*limit, *lease_secs),
            ApiError::Unavailable(m) => unavailable(m),
            ApiError::Overloaded(m) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                None,
                format!("{m} (retry after {} s)", RETRY_AFTER_SECS),
            ),
            ApiError::Internal(e) => internal(e),
        }
    }
}

/// A worker token's registrations are all taken.
fn too_many_workers(
    limit: u32,
    lease_secs: u64,
) -> (StatusCode, &'static str, Option<String>, String) {
    let message = format!(
        "this token already holds {limit} live workers, the most one token may \
         (the coordinator's --max-workers-per-token); a worker's place is freed \
         when it stops, or {lease_secs} s after it was last seen"
    );
    (
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_workers",
        None,
        message,
    )
}

/// The database cannot be reached: its error is logged, never sent.
fn unavailable(cause: &str) -> (StatusCode, &'static str, Option<String>, String) {
    tracing::warn!(error = %cause, "database unavailable");
    let message = "the database is unavailable; retry later".to_string();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        None,
        message,
    )
}

/// Anything else: logged with its cause chain, answered opaquely.
fn internal(e: &anyhow::Error) -> (StatusCode, &'static str, Option<String>, String) {
    tracing::error!(error = ?e, "internal error");
    let message = "internal error".to_string();
    (StatusCode::INTERNAL_SERVER_ERROR, "internal", None, message)
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, field, message) = self.answer();
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.to_string(),
                field,
                message,
            },
        };
        let mut resp = (status, Json(body)).into_response();
        match &self {
            ApiError::Unauthenticated(_) => {
                resp.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer"),
                );
            }
            ApiError::RateLimited(secs)
            | ApiError::TooManyWorkers {
                lease_secs: secs, ..
            } => {
                resp.headers_mut().insert(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from(*secs),
                );
            }
            _ => {}
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // Workers wait this long (plus jitter) before they ask again.
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(RETRY_AFTER_SECS),
            );
        }
        resp
    }
}
