//! The API's OpenAPI 3.1 document, served at `GET /api/v1/openapi.json` to anyone (it
//! describes the API and holds no data).
//!
//! The operations come from the handlers' `#[utoipa::path]` attributes, collected by the same
//! `routes!` calls that build the router (see [`super::router`]), so a route cannot be served
//! without being described; the schemas come from the wire types' `ToSchema` derives. What is
//! shared by every operation lives here: the bearer security scheme, the error responses, and
//! the named sets of them an operation answers besides its success.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use sweep_domain::wire::ErrorBody;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Ref, RefOr, Response};
use utoipa::{IntoResponses, Modify, OpenApi, ToResponse};

/// Name of the bearer security scheme the operations refer to (spelled out in each
/// `#[utoipa::path]`, which takes only a literal). An operation's roles are the
/// scopes of its requirement (OpenAPI 3.1 allows role names for non-OAuth schemes).
pub const BEARER: &str = "token";

/// What the document holds besides the operations: title, tags, security scheme, the
/// shared error responses.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sweep coordinator",
        description = "Parameter sweeps for chess engines: submit sweeps, read their tables, \
            and the worker protocol. Every route but `/`, `/healthz` and this document needs \
            `Authorization: Bearer TOKEN`; each operation's security requirement lists the \
            roles that may call it (a coordinator started with `--public-read` also lets \
            anonymous callers read sweeps, tables, engines and suites). Errors answer an \
            `ErrorBody` whose `code` says what went wrong and whose `field` names the \
            offending field.",
        license(name = "MIT", identifier = "MIT")
    ),
    modifiers(&BearerToken),
    components(
        schemas(ErrorBody),
        responses(
            BadRequest,
            Unauthenticated,
            Forbidden,
            NotFound,
            LeaseLost,
            Invalid,
            RateLimited,
            TooManyWorkers,
            Unavailable
        )
    ),
    tags(
        (name = "sweeps", description = "Submit, follow, read and cancel sweeps."),
        (name = "catalog", description = "Engines and suites the coordinator knows."),
        (name = "sources", description = "Engine source snapshots (gzip'ed tar, by sha256)."),
        (name = "workers", description = "The worker protocol: register, lease, heartbeat, \
            results, build failures."),
        (name = "admin", description = "Retries and the audit log (admin tokens)."),
        (name = "service", description = "Health, the dashboard page and this document.")
    )
)]
pub struct ApiDoc;

/// Adds the bearer token scheme.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A token made by `sweep token create --role ROLE` (admin, submitter, \
                         reader or worker).",
                    ))
                    .build(),
            ),
        );
    }
}

/// The request as a whole is malformed (`bad_request`), e.g. an unparsable query.
#[derive(ToResponse)]
#[response(description = "The request as a whole is malformed (`bad_request`).")]
pub struct BadRequest(pub ErrorBody);

/// No token, or an unknown or revoked one (`unauthenticated`).
#[derive(ToResponse)]
#[response(
    description = "No token, or an unknown or revoked one (`unauthenticated`).",
    headers(("WWW-Authenticate" = String, description = "`Bearer`"))
)]
pub struct Unauthenticated(pub ErrorBody);

/// The token's role may not do this, or the worker belongs to another token (`forbidden`).
#[derive(ToResponse)]
#[response(
    description = "The token's role may not do this, or the worker was registered with \
        another token (`forbidden`)."
)]
pub struct Forbidden(pub ErrorBody);

/// No such sweep, build, worker, job or source (`not_found`).
#[derive(ToResponse)]
#[response(description = "No such sweep, build, worker, job or source (`not_found`).")]
pub struct NotFound(pub ErrorBody);

/// The worker no longer holds the lease it reports for (`lease_lost`).
#[derive(ToResponse)]
#[response(description = "The worker no longer holds the lease it reports for (`lease_lost`).")]
pub struct LeaseLost(pub ErrorBody);

/// A field is invalid (`invalid_field`, with `field` naming it).
#[derive(ToResponse)]
#[response(description = "A field is invalid (`invalid_field`; `field` names it).")]
pub struct Invalid(pub ErrorBody);

/// Too many writes from this token (`rate_limited`).
#[derive(ToResponse)]
#[response(
    description = "Too many writes from this token: a burst of 30, then 2 per second \
        (`rate_limited`).",
    headers(("Retry-After" = u64, description = "Seconds to wait."))
)]
pub struct RateLimited(pub ErrorBody);

/// The token holds as many live workers as one may (`too_many_workers`).
#[derive(ToResponse)]
#[response(
    description = "The token holds as many live workers as one may (the coordinator's \
        `--max-workers-per-token`, 64 by default); a worker's place is freed when it stops, or \
        a lease after it was last seen (`too_many_workers`).",
    headers(("Retry-After" = u64, description = "Seconds to wait: a lease."))
)]
pub struct TooManyWorkers(pub ErrorBody);

/// The database is unavailable or the coordinator is overloaded.
#[derive(ToResponse)]
#[response(
    description = "The database is unavailable (`unavailable`) or too many requests are in \
        flight (`overloaded`); retry later.",
    headers(("Retry-After" = u64, description = "Seconds to wait."))
)]
pub struct Unavailable(pub ErrorBody);

/// A shared error response, with the status `super::error::ApiError` answers it with.
trait SharedError: ToResponse<'static> {
    const STATUS: StatusCode;
}

/// Gives each shared error response its status.
macro_rules! statuses {
    ($($error:ident => $status:ident),+ $(,)?) => {
        $(impl SharedError for $error {
            const STATUS: StatusCode = StatusCode::$status;
        })+
    };
}

statuses! {
    BadRequest => BAD_REQUEST,
    Unauthenticated => UNAUTHORIZED,
    Forbidden => FORBIDDEN,
    NotFound => NOT_FOUND,
    LeaseLost => CONFLICT,
    Invalid => UNPROCESSABLE_ENTITY,
    RateLimited => TOO_MANY_REQUESTS,
    TooManyWorkers => TOO_MANY_REQUESTS,
    Unavailable => SERVICE_UNAVAILABLE,
}

/// `E` under its status, as a reference to its component (listed in [`ApiDoc`]).
fn entry<E: SharedError>() -> (String, RefOr<Response>) {
    let (name, _) = E::response();
    (
        E::STATUS.as_u16().to_string(),
        RefOr::Ref(Ref::from_response_name(name)),
    )
}

/// Declares a named set of shared error responses: a type for the `responses(...)` of a
/// `#[utoipa::path]`, beside the operation's own success responses.
macro_rules! error_set {
    ($(#[doc = $doc:expr])+ $name:ident = [$($error:ident),+ $(,)?]) => {
        $(#[doc = $doc])+
        pub struct $name;

        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                BTreeMap::from([$(entry::<$error>()),+])
            }
        }
    };
}

error_set! {
    /// Reading the catalog: any token will do.
    CatalogErrors = [Unauthenticated, Unavailable]
}
error_set! {
    /// A call that needs a token of some roles.
    RoleErrors = [Unauthenticated, Forbidden, Unavailable]
}
error_set! {
    /// A list whose query may not parse.
    ListErrors = [BadRequest, Unauthenticated, Forbidden, Unavailable]
}
error_set! {
    /// Reading one thing by its id or hash.
    ReadErrors = [Unauthenticated, Forbidden, NotFound, Unavailable]
}
error_set! {
    /// A call on one thing whose input may be malformed as a whole or in a field.
    InputErrors = [BadRequest, Unauthenticated, Forbidden, NotFound, Invalid, Unavailable]
}
error_set! {
    /// Registering a worker.
    RegisterErrors = [Unauthenticated, Forbidden, Invalid, TooManyWorkers, Unavailable]
}
error_set! {
    /// The workers page's list, whose limit may not parse or be out of range.
    WorkerListErrors = [BadRequest, Unauthenticated, Forbidden, Invalid, Unavailable]
}
error_set! {
    /// A worker protocol call for a worker named in the path.
    WorkerCallErrors = [Unauthenticated, Forbidden, NotFound, Invalid, Unavailable]
}
error_set! {
    /// A worker protocol call about a job held under a lease.
    JobCallErrors = [Unauthenticated, Forbidden, NotFound, LeaseLost, Invalid, Unavailable]
}
error_set! {
    /// A write naming things that must exist (a sweep, an engine), counted against the
    /// token's write budget.
    WriteErrors = [Unauthenticated, Forbidden, NotFound, Invalid, RateLimited, Unavailable]
}
error_set! {
    /// A write of a thing the call itself names (an engine, a source), counted against the
    /// token's write budget.
    CreateErrors = [Unauthenticated, Forbidden, Invalid, RateLimited, Unavailable]
}

/// The whole document, as served.
pub fn document() -> utoipa::openapi::OpenApi {
    super::routes().split_for_parts().1
}

/// The document's JSON, made once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    document()
        .to_pretty_json()
        .expect("an OpenAPI document serializes")
});

/// This document.
#[utoipa::path(
    get, path = "/api/v1/openapi.json", tag = "service",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document of this API.",
            content_type = "application/json", body = Object),
        (status = 503, response = Unavailable)
    )
)]
pub(super) async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}
