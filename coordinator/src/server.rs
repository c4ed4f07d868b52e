//! Serving HTTP with bounds: at most `max_in_flight` requests at once per class (the worker
//! protocol's calls from worker tokens, source uploads, and everything else), and at most
//! [`BODY_BUDGET_BYTES`] of their declared bodies (one more is answered at once with 503 and
//! `Retry-After`, not queued behind the database pool; a flood of reads or uploads never
//! sheds a heartbeat); a request's body must arrive within the body timeout of the slot it
//! took (else 408, and the slot is free again); connections that send no complete request
//! headers within `header_timeout` (slow, idle or half-open) are closed, and shutdown lets
//! in-flight requests finish under a deadline. With TLS the same holds, and the handshake
//! runs under the header timeout too.
//!
//! The caller is authenticated before a request takes a slot (`http::authenticated`, the
//! layer outside this one): a request without a valid token never queues here, and only a
//! worker token's calls take the worker protocol's slots.

use std::time::Duration;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use sweep_domain::auth::Role;
use sweep_domain::wire::{ErrorBody, ErrorDetail};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::http::error::RETRY_AFTER_SECS;
use crate::service::Caller;

/// How long shutdown waits for in-flight requests.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Request bodies in flight at most per class, by their declared length: the count bound is
/// high enough that 1,000 workers are never shed, so it no longer bounds memory by itself
/// (1,024 bodies of the 4 MiB limit would be 4 GiB). A worker's upload is some KiB, so only
/// a flood of large bodies meets this.
pub const BODY_BUDGET_BYTES: usize = 256 * 1024 * 1024;

/// The budget's unit: a permit per KiB keeps the counts far below the semaphore's maximum.
const BUDGET_UNIT: usize = 1024;

/// The bounds a router is served under (see [`bounded`]).
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Requests in flight at most, per class.
    pub max_in_flight: usize,
    /// How long a request's body may take to arrive once it holds a slot.
    pub body_timeout: Duration,
}

/// Wraps every route of the router in the in-flight bounds: one per class of request (see
/// [`Which`]), each of `max_in_flight` requests and [`BODY_BUDGET_BYTES`] of bodies; a
/// request over either bound of its class is shed with a fast 503. A request that holds a
/// slot has `body_timeout` to send its body.
pub fn bounded(router: Router, bounds: Bounds) -> Router {
    bounded_with_budget(router, bounds, BODY_BUDGET_BYTES)
}

fn bounded_with_budget(router: Router, bounds: Bounds, body_budget: usize) -> Router {
    let classes = InFlight {
        worker: Class::new(bounds.max_in_flight, body_budget),
        uploads: Class::new(bounds.max_in_flight, body_budget),
        other: Class::new(bounds.max_in_flight, body_budget),
        body_timeout: bounds.body_timeout,
    };
    // `route_layer` wraps every route on its own, after routing (a path no route has is
    // answered 404 without a slot); the semaphores are shared, so the bounds are for all
    // routes of a class together.
    router.route_layer(middleware::from_fn_with_state(classes, shed_over_bound))
}

/// The in-flight permits of each class.
#[derive(Clone)]
struct InFlight {
    worker: Class,
    uploads: Class,
    other: Class,
    body_timeout: Duration,
}

/// The classes of requests, each bounded on its own (see [`Which::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    /// The worker protocol, called with a worker token.
    Worker,
    /// Source uploads (`PUT /api/v1/sources/{sha256}`): large bodies a slow client may take
    /// long to send.
    Uploads,
    /// Everything else: reads, submissions, anonymous callers.
    Other,
}

impl Which {
    /// The class of a request to `path` by `method` from `caller` (`None`: the route takes
    /// no caller). Only a worker token's calls take the worker protocol's slots, so neither
    /// uploads nor anonymous callers (nor another role's stray calls) can shed a heartbeat.
    fn of(method: &Method, path: &str, caller: Option<&Caller>) -> Which {
        if method == Method::PUT && path.starts_with("/api/v1/sources/") {
            return Which::Uploads;
        }
        let worker_token = matches!(caller, Some(Caller::Token(p)) if p.role == Role::Worker);
        if worker_token && is_worker_protocol(path) {
            Which::Worker
        } else {
            Which::Other
        }
    }
}

/// One class's bounds: requests, and KiB of their bodies.
#[derive(Clone)]
struct Class {
    requests: Arc<Semaphore>,
    body_units: Arc<Semaphore>,
    /// The most one request is charged: the whole budget, so a single large body can still
    /// go through when nothing else holds any of it.
    max_units: u32,
}

impl Class {
    fn new(max_in_flight: usize, body_budget: usize) -> Self {
        let units = (body_budget / BUDGET_UNIT).clamp(1, u32::MAX as usize);
        Class {
            requests: Arc::new(Semaphore::new(max_in_flight.max(1))),
            body_units: Arc::new(Semaphore::new(units)),
            max_units: units as u32,
        }
    }

    /// What a request's body is charged, in units: its declared length, rounded up, or, for
    /// a body without one (chunked), the largest any route accepts.
    fn charge(&self, headers: &HeaderMap) -> u32 {
        let bytes = match declared_length(headers) {
            Some(n) => n,
            None if headers.contains_key(header::TRANSFER_ENCODING) => {
                crate::http::MAX_SOURCE_BODY_BYTES
            }
            None => 0,
        };
        let units = bytes.div_ceil(BUDGET_UNIT).min(self.max_units as usize);
        units as u32
    }
}

/// The body length a request declares (`Content-Length`), if it does.
fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
}

/// Does `path` belong to the worker protocol (register, lease, heartbeat, results, build
/// failures, sources)? Those calls, from a worker token, keep their own bound, so no amount
/// of reads, uploads and submissions can shed them.
pub fn is_worker_protocol(path: &str) -> bool {
    ["/api/v1/workers", "/api/v1/jobs/", "/api/v1/sources/"]
        .iter()
        .any(|p| path.starts_with(p))
}

async fn shed_over_bound(State(bounds): State<InFlight>, req: Request, next: Next) -> Response {
    let which = Which::of(req.method(), req.uri().path(), req.extensions().get());
    let class = match which {
        Which::Worker => &bounds.worker,
        Which::Uploads => &bounds.uploads,
        Which::Other => &bounds.other,
    };
    // Both permits live until the answer is made: a handler holds its parsed body that long.
    let Ok(_request) = class.requests.clone().try_acquire_owned() else {
        return overloaded();
    };
    let units = class.charge(req.headers());
    let Ok(_body) = class.body_units.clone().try_acquire_many_owned(units) else {
        return overloaded();
    };
    match body_in_time(req, bounds.body_timeout).await {
        Ok(req) => next.run(req).await,
        Err(answer) => answer,
    }
}

/// The request with its body read in full within `limit`, so a client that sends headers
/// and then its body slowly (or never) holds its slot no longer than that: 408 then. A body
/// longer than its route accepts is left to the route's own limit when its length is
/// declared (413 before anything is read), and answered 413 here when it is not.
async fn body_in_time(req: Request, limit: Duration) -> Result<Request, Response> {
    let path_limit = crate::http::body_limit(req.uri().path());
    if declared_length(req.headers()).is_some_and(|n| n > path_limit) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(limit, axum::body::to_bytes(body, path_limit)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(e)) if too_long(&e) => Err(StatusCode::PAYLOAD_TOO_LARGE.into_response()),
        Ok(Err(e)) => Err(error_answer(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("reading the request body: {e}"),
        )),
        Err(_) => Err(error_answer(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!(
                "the request body did not arrive within {} s",
                limit.as_secs().max(1)
            ),
        )),
    }
}

/// Whether reading a body failed because it was longer than the limit it was read under.
fn too_long(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        // `http_body_util::LengthLimitError`, which axum does not re-export.
        if c.to_string().contains("length limit exceeded") {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The answer to a request over the bound.
pub fn overloaded() -> Response {
    let mut resp = error_answer(
        StatusCode::SERVICE_UNAVAILABLE,
        "overloaded",
        format!("too many requests in flight; retry after {RETRY_AFTER_SECS} s"),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    resp
}

/// An error answer in the API's JSON form (`http::error` makes the handlers'; the bounds
/// answer before any handler, and `http::error` reads this module's `Retry-After`).
fn error_answer(status: StatusCode, code: &str, message: String) -> Response {
    let body = ErrorBody {
        error: ErrorDetail {
            code: code.into(),
            field: None,
            message,
        },
    };
    (status, axum::Json(body)).into_response()
}

/// A bound port and how it speaks: plain HTTP, or HTTPS with this acceptor.
pub struct Listener {
    /// The bound socket.
    pub tcp: TcpListener,
    /// `Some` for HTTPS: each connection's TLS handshake runs before HTTP.
    pub tls: Option<TlsAcceptor>,
}

/// Serves `app` on every listener until `shutdown` fires, then waits up to
/// [`DRAIN_TIMEOUT`] for open connections to finish their requests. The in-flight bound
/// (see [`bounded`]) is the router's, so it holds across listeners.
pub async fn serve(
    listeners: Vec<Listener>,
    app: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut loops = tokio::task::JoinSet::new();
    for listener in listeners {
        loops.spawn(serve_one(
            listener,
            app.clone(),
            header_timeout,
            shutdown.clone(),
        ));
    }
    while let Some(done) = loops.join_next().await {
        done?;
    }
    Ok(())
}

/// The accept loop of one listener and its drain.
async fn serve_one(
    listener: Listener,
    app: Router,
    header_timeout: Duration,
    shutdown: CancellationToken,
) {
    // HTTP/1 only: hyper-util's version detection would first wait for a preface with no
    // timeout at all. In hyper 1.6+ the header timeout also runs while a kept-alive
    // connection waits for its next request, so it is the idle timeout too.
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.tcp.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, typically: back off instead of spinning; the
                    // header timeout is what frees them.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let Some(acceptor) = &listener.tls else {
            let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                // A client that goes away or times out is its own business.
                let _ = conn.await;
            });
            continue;
        };
        // The handshake runs in the connection's task so a slow one holds up no other.
        tokio::spawn(serve_tls(
            acceptor.accept(stream),
            builder.clone(),
            service,
            graceful.watcher(),
            header_timeout,
            shutdown.clone(),
        ));
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
}

/// One TLS connection: its handshake runs under the header timeout (a client that opens a
/// socket and sends nothing is closed like one that sends no headers) and ends at shutdown
/// (a handshake is no request in flight); then its requests are served.
async fn serve_tls(
    handshake: tokio_rustls::Accept<tokio::net::TcpStream>,
    builder: http1::Builder,
    service: TowerToHyperService<Router>,
    watcher: Watcher,
    header_timeout: Duration,
    stop: CancellationToken,
) {
    let tls = tokio::select! {
        _ = stop.cancelled() => return,
        done = tokio::time::timeout(header_timeout, handshake) => match done {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                // Plain HTTP to the TLS port, or a client that does not trust us.
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!("TLS handshake timed out");
                return;
            }
        },
    };
    let _ = watcher
        .watch(builder.serve_connection(TokioIo::new(tls), service))
        .await;
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use axum::routing::{get, post};
    use tokio::sync::Notify;
    use tokio::task::JoinHandle;
    use tower::ServiceExt;

    use super::*;

    /// A bound of one with a GET of `held` in flight: its handler waits for `release`.
    struct Holding {
        app: Router,
        first: JoinHandle<Result<Response, std::convert::Infallible>>,
        release: Arc<Notify>,
    }

    /// Routes `held` (a handler that waits) and `other` under a bound of one, and sends a
    /// GET of `held` that is inside its handler on return.
    async fn holding(held: &str, other: &str) -> Holding {
        let release = Arc::new(Notify::new());
        let entered = Arc::new(Notify::new());
        let (r, e) = (release.clone(), entered.clone());
        let router = Router::new()
            .route(
                held,
                get(move || async move {
                    e.notify_one();
                    r.notified().await;
                    "held"
                }),
            )
            .route(other, get(|| async { "other" }));
        let app = bounded(router, bounds(1));
        let first = send(&app, held);
        entered.notified().await;
        Holding {
            app,
            first,
            release,
        }
    }

    /// Bounds of `n` requests per class.
    fn bounds(n: usize) -> Bounds {
        Bounds {
            max_in_flight: n,
            body_timeout: Duration::from_secs(5),
        }
    }

    /// A caller with a token of `role`, as the authentication layer leaves it.
    fn token(role: Role) -> Caller {
        Caller::Token(crate::service::Principal {
            token_id: 1,
            name: "t".into(),
            role,
        })
    }

    /// A GET of `path` on `app`, sent without waiting for its answer.
    fn send(app: &Router, path: &str) -> JoinHandle<Result<Response, std::convert::Infallible>> {
        send_as(app, path, None)
    }

    /// A GET of `path` on `app` by `caller` (`None`: a route that takes none), sent without
    /// waiting for its answer.
    fn send_as(
        app: &Router,
        path: &str,
        caller: Option<Caller>,
    ) -> JoinHandle<Result<Response, std::convert::Infallible>> {
        let mut req = Request::get(path).body(Body::empty()).unwrap();
        if let Some(caller) = caller {
            req.extensions_mut().insert(caller);
        }
        tokio::spawn(app.clone().oneshot(req))
    }

    /// The answer to a GET of `path` on `app`.
    async fn get_now(app: &Router, path: &str) -> Response {
        send(app, path).await.unwrap().unwrap()
    }

    /// Reads holding every permit of their class do not shed the worker protocol's calls of
    /// a worker token; the same call without one is no worker protocol's, and is shed.
    #[tokio::test]
    async fn the_worker_protocol_has_its_own_bound() {
        let Holding {
            app,
            first,
            release,
        } = holding("/api/v1/sweeps", "/api/v1/workers/{id}/heartbeat").await;
        let read = get_now(&app, "/api/v1/sweeps").await;
        assert_eq!(read.status(), StatusCode::SERVICE_UNAVAILABLE);
        let beat = send_as(
            &app,
            "/api/v1/workers/7/heartbeat",
            Some(token(Role::Worker)),
        );
        assert_eq!(beat.await.unwrap().unwrap().status(), StatusCode::OK);
        for stranger in [None, Some(Caller::Anonymous), Some(token(Role::Submitter))] {
            let beat = send_as(&app, "/api/v1/workers/7/heartbeat", stranger.clone());
            let status = beat.await.unwrap().unwrap().status();
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{stranger:?}");
        }
        release.notify_one();
        first.await.unwrap().unwrap();
        assert!(is_worker_protocol("/api/v1/workers"));
        assert!(is_worker_protocol("/api/v1/jobs/3/build-failed"));
        assert!(!is_worker_protocol("/api/v1/sweeps/3/table"));
    }

    /// With one request held inside a handler and a bound of one, a request to another route
    /// is answered at once with 503, `Retry-After` and a JSON body; once the first is done,
    /// requests go through again.
    #[tokio::test]
    async fn a_request_over_the_bound_is_shed_at_once() {
        let Holding {
            app,
            first,
            release,
        } = holding("/slow", "/fast").await;
        let shed = get_now(&app, "/fast").await;
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(shed.headers()[header::RETRY_AFTER], "1");
        let body = axum::body::to_bytes(shed.into_body(), 4096).await.unwrap();
        let parsed: ErrorBody = serde_json::from_slice(&body).unwrap();
        assert_eq!(parsed.error.code, "overloaded");
        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        let again = get_now(&app, "/fast").await;
        assert_eq!(again.status(), StatusCode::OK);
    }

    /// A POST of `path` with a body of `len` bytes, its length declared (or, with `chunked`,
    /// sent without one), sent without waiting for its answer.
    fn send_post(
        app: &Router,
        path: &str,
        len: usize,
        chunked: bool,
    ) -> JoinHandle<Result<Response, std::convert::Infallible>> {
        let req = Request::post(path);
        let req = if chunked {
            req.header(header::TRANSFER_ENCODING, "chunked")
        } else {
            req.header(header::CONTENT_LENGTH, len)
        };
        let req = req.body(Body::from(vec![b'x'; len])).unwrap();
        tokio::spawn(app.clone().oneshot(req))
    }

    /// With 6 KiB of an 8 KiB body budget held by a request inside its handler, a 4 KiB body
    /// and a body of undeclared length are shed at once, while a request without a body and a
    /// 2 KiB one go through (the count bound, 10, is far from full); once the first is done,
    /// the 4 KiB body goes through. A body larger than the whole budget is charged the whole
    /// budget, so it is served when nothing else holds any.
    #[tokio::test]
    async fn bodies_in_flight_have_a_byte_budget() {
        let release = Arc::new(Notify::new());
        let entered = Arc::new(Notify::new());
        let (r, e) = (release.clone(), entered.clone());
        let router = Router::new()
            .route(
                "/held",
                post(move || async move {
                    e.notify_one();
                    r.notified().await;
                    "held"
                }),
            )
            .route(
                "/other",
                post(|| async { "other" }).get(|| async { "other" }),
            );
        let app = bounded_with_budget(router, bounds(10), 8 * 1024);
        let first = send_post(&app, "/held", 6 * 1024, false);
        entered.notified().await;

        let big = send_post(&app, "/other", 4 * 1024, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(big.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(big.headers()[header::RETRY_AFTER], "1");
        let chunked = send_post(&app, "/other", 10, true).await.unwrap().unwrap();
        assert_eq!(chunked.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(get_now(&app, "/other").await.status(), StatusCode::OK);
        let small = send_post(&app, "/other", 2 * 1024, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(small.status(), StatusCode::OK);

        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        let again = send_post(&app, "/other", 4 * 1024, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(again.status(), StatusCode::OK);
        let huge = send_post(&app, "/other", 64 * 1024, false)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(huge.status(), StatusCode::OK);
    }

    /// A body of undeclared length longer than its route accepts is answered 413 as it is
    /// read (the route's handler never sees it); one within the limit reaches the handler.
    #[tokio::test]
    async fn an_undeclared_body_over_the_routes_limit_is_refused() {
        let router = Router::new().route(
            "/other",
            post(|body: String| async move { body.len().to_string() }),
        );
        let app = bounded(router, bounds(10));
        let over = crate::http::MAX_BODY_BYTES + 1;
        let refused = send_post(&app, "/other", over, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let taken = send_post(&app, "/other", 1000, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(taken.status(), StatusCode::OK);
        let body = axum::body::to_bytes(taken.into_body(), 100).await.unwrap();
        assert_eq!(&body[..], b"1000");
    }

    /// Uploads have a class of their own; only a worker token's calls of the worker
    /// protocol (sources included) take its slots; everything else is "other".
    #[test]
    fn requests_are_classed_by_route_and_caller() {
        let worker = token(Role::Worker);
        let submitter = token(Role::Submitter);
        let sha = format!("/api/v1/sources/{}", "a".repeat(64));
        let cases = [
            (Method::PUT, sha.as_str(), Some(&submitter), Which::Uploads),
            (Method::PUT, sha.as_str(), Some(&worker), Which::Uploads),
            (Method::GET, sha.as_str(), Some(&worker), Which::Worker),
            (Method::GET, sha.as_str(), Some(&submitter), Which::Other),
            (
                Method::POST,
                "/api/v1/workers/3/lease",
                Some(&worker),
                Which::Worker,
            ),
            (
                Method::POST,
                "/api/v1/workers",
                Some(&worker),
                Which::Worker,
            ),
            (
                Method::POST,
                "/api/v1/workers",
                Some(&Caller::Anonymous),
                Which::Other,
            ),
            (
                Method::POST,
                "/api/v1/jobs/3/build-failed",
                None,
                Which::Other,
            ),
            (Method::GET, "/api/v1/sweeps", Some(&worker), Which::Other),
        ];
        for (method, path, caller, expected) in cases {
            assert_eq!(
                Which::of(&method, path, caller),
                expected,
                "{method} {path} {caller:?}"
            );
        }
    }
}
