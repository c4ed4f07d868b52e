//! HTTP client for the coordinator's worker protocol, and the retry policy around it.
//!
//! Every call maps its failure into [`ClientError`] so callers can branch on what to do next:
//! drop the job ([`ClientError::LeaseLost`]), try again later ([`ClientError::Retryable`]), or
//! give up and report ([`ClientError::Fatal`]).

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sweep_domain::provenance::{BuildRecorded, BuildReport};
use sweep_domain::wire::{
    BatchAck, BuildFailure, EngineList, ErrorBody, HeldLease, LeaseRequest, LeaseResponse,
    RegisterWorker, Registered, WorkerHeartbeat, WorkerHeartbeatAck, WorkerReport, WorkerReportAck,
};
use tokio_util::sync::CancellationToken;

/// Largest engine source snapshot accepted (the archive's own bound on compressed input), so
/// a confused or hostile server cannot fill memory with a download the unpacker would refuse.
pub const MAX_SOURCE_BYTES: usize = sweep_archive::MAX_COMPRESSED_BYTES;

/// Source downloads may be large and slow; ordinary calls use the configured timeout.
const SOURCE_TIMEOUT: Duration = Duration::from_secs(300);

/// Why a coordinator call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The job was re-leased to someone else (or finished): stop working on it at once.
    #[error("lease lost: {0}")]
    LeaseLost(String),
    /// The coordinator is unreachable, restarting, overloaded or its database is down: the same
    /// request may succeed later.
    #[error("coordinator unavailable: {0}")]
    Retryable(String),
    /// The coordinator is overloaded and said when to come back (`Retry-After`): retry, but
    /// not before then.
    #[error("coordinator overloaded (retry after {}s): {message}", retry_after.as_secs())]
    Overloaded {
        /// The wait the coordinator asked for.
        retry_after: Duration,
        /// What it said.
        message: String,
    },
    /// The coordinator rejected the request; retrying the same request will not help.
    #[error("coordinator rejected the request (HTTP {status}, {code}): {message}")]
    Fatal {
        /// HTTP status.
        status: u16,
        /// The server's error code (`not_found`, `invalid_field`, ...), or `bad_response`.
        code: String,
        /// The server's explanation.
        message: String,
    },
    /// The coordinator's TLS certificate is not trusted (unknown issuer, wrong host name,
    /// expired): it may be an impostor, so nothing is retried.
    #[error("coordinator not trusted: {0} (wrong --ca-cert, or a different server?)")]
    Untrusted(String),
    /// A retry loop stopped because its cancellation token fired.
    #[error("cancelled")]
    Cancelled,
}

impl ClientError {
    /// May the same request succeed if sent again later?
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Retryable(_) | ClientError::Overloaded { .. }
        )
    }

    /// How long to wait before retrying: the backoff's next step, or longer when the
    /// coordinator asked for a longer wait. A random part of up to half the asked wait is
    /// added, so the workers it turned away do not all come back at the same instant.
    pub fn pause(&self, backoff: &mut Backoff) -> Duration {
        let step = backoff.next_delay();
        match self {
            ClientError::Overloaded { retry_after, .. } => {
                let spread = rand::thread_rng().gen_range(Duration::ZERO..=*retry_after / 2);
                step.max(*retry_after + spread)
            }
            _ => step,
        }
    }
}

/// Most a `Retry-After` is honoured for: a confused server cannot park workers for hours.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Classifies a non-success answer like [`classify_status`], and a retryable one that
/// carries `Retry-After` (in seconds) as [`ClientError::Overloaded`].
pub fn classify_response(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    body: &[u8],
) -> ClientError {
    let err = classify_status(status, body);
    let retry_after = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|secs| Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    match (err, retry_after) {
        (ClientError::Retryable(message), Some(retry_after)) => ClientError::Overloaded {
            retry_after,
            message,
        },
        (err, _) => err,
    }
}

/// Classifies a non-success HTTP answer from its status and (maybe JSON) body.
pub fn classify_status(status: u16, body: &[u8]) -> ClientError {
    let parsed: Option<ErrorBody> = serde_json::from_slice(body).ok();
    let (code, message) = match parsed {
        Some(b) => (b.error.code, b.error.message),
        None => (
            "unknown".to_string(),
            String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
        ),
    };
    match status {
        409 if code == "lease_lost" => ClientError::LeaseLost(message),
        // 408 and 429 are the server asking us to come back; 5xx is the server's own trouble.
        408 | 429 | 500..=599 => ClientError::Retryable(format!("HTTP {status} {code}: {message}")),
        _ => ClientError::Fatal {
            status,
            code,
            message,
        },
    }
}

fn transport_error(what: &str, e: reqwest::Error) -> ClientError {
    if e.is_builder() {
        // A malformed URL never heals by waiting.
        return ClientError::Fatal {
            status: 0,
            code: "bad_request".to_string(),
            message: format!("{what}: {e}"),
        };
    }
    if crate::trust::is_certificate_error(&e) {
        return ClientError::Untrusted(format!("{what}: {}", error_chain(&e)));
    }
    ClientError::Retryable(format!("{what}: {e}"))
}

/// `e` and its causes, `: `-separated (reqwest's own message alone says only "error sending
/// request").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// Client for the `/api/v1` worker endpoints of one coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
}

impl CoordinatorClient {
    /// A client for the coordinator at `base` (e.g. `http://127.0.0.1:8080`); each request
    /// times out after `timeout`. An `https://` coordinator is checked against the system's
    /// roots.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, ClientError> {
        Self::with_ca_cert(base, timeout, None)
    }

    /// As [`CoordinatorClient::new`], trusting the CA certificates in the PEM file `ca_cert`
    /// instead of the system's roots (see [`crate::trust`]).
    pub fn with_ca_cert(
        base: &str,
        timeout: Duration,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, ClientError> {
        Self::connect(base, timeout, None, ca_cert)
    }

    /// As [`CoordinatorClient::with_ca_cert`], sending `token` (a worker token) as
    /// `Authorization: Bearer` with every request.
    pub fn connect(
        base: &str,
        timeout: Duration,
        token: Option<&str>,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, ClientError> {
        let mut headers = reqwest::header::HeaderMap::new();
        // An empty SWEEP_TOKEN means none.
        if let Some(token) = token.filter(|t| !t.is_empty()) {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| ClientError::Fatal {
                    status: 0,
                    code: "bad_token".to_string(),
                    message: "the token holds characters a header cannot carry".to_string(),
                })?;
            // Kept out of debug output and logs.
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let http = crate::trust::client_builder(ca_cert)
            .map_err(|e| ClientError::Fatal {
                status: 0,
                code: "bad_request".to_string(),
                message: e.to_string(),
            })?
            .default_headers(headers)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            // Below the coordinator's idle timeout (30 s by default), so a pooled connection
            // is not reused just as the coordinator closes it.
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| transport_error("building the HTTP client", e))?;
        Ok(CoordinatorClient {
            http,
            base: format!("{}/api/v1", base.trim_end_matches('/')),
        })
    }

    /// `POST /workers`: introduces the worker.
    pub async fn register(&self, req: &RegisterWorker) -> Result<Registered, ClientError> {
        self.post("/workers".to_string(), req).await
    }

    /// `GET /engines`: the registered engines (a worker looks for the binary-only ones).
    pub async fn engines(&self) -> Result<EngineList, ClientError> {
        let path = "/engines";
        let request = self.http.get(format!("{}{path}", self.base));
        send_json("GET", path, request).await
    }

    /// `POST /workers/{id}/lease`: asks for up to `max_jobs` jobs (possibly none).
    pub async fn lease(&self, worker_id: i64, max_jobs: u32) -> Result<LeaseResponse, ClientError> {
        self.post(
            format!("/workers/{worker_id}/lease"),
            &LeaseRequest { max_jobs },
        )
        .await
    }

    /// `POST /workers/{id}/heartbeat`: renews every lease named; the ack gives each job's
    /// status (held, cancelled, lost) in the same order.
    pub async fn heartbeat(
        &self,
        worker_id: i64,
        hb: &WorkerHeartbeat,
    ) -> Result<WorkerHeartbeatAck, ClientError> {
        self.post(format!("/workers/{worker_id}/heartbeat"), hb)
            .await
    }

    /// `POST /workers/{id}/heartbeat` with `release`: gives the named leases back (the worker
    /// is stopping), so their jobs are queued again at once.
    pub async fn release(
        &self,
        worker_id: i64,
        leases: Vec<HeldLease>,
    ) -> Result<WorkerHeartbeatAck, ClientError> {
        let hb = WorkerHeartbeat {
            leases,
            release: true,
        };
        self.post(format!("/workers/{worker_id}/heartbeat"), &hb)
            .await
    }

    /// `POST /workers/{id}/results`: uploads the results of several jobs at once
    /// (idempotent: re-sent results are duplicates); the ack gives each job's status.
    pub async fn report(
        &self,
        worker_id: i64,
        report: &WorkerReport,
    ) -> Result<WorkerReportAck, ClientError> {
        self.post(format!("/workers/{worker_id}/results"), report)
            .await
    }

    /// `POST /jobs/{id}/build-failed`: reports that the job's build cannot be built.
    pub async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
    ) -> Result<BatchAck, ClientError> {
        self.post(format!("/jobs/{job_id}/build-failed"), failure)
            .await
    }

    /// `POST /jobs/{id}/built`: how this worker got the binary of the job's build.
    pub async fn record_build(
        &self,
        job_id: i64,
        report: &BuildReport,
    ) -> Result<BuildRecorded, ClientError> {
        self.post(format!("/jobs/{job_id}/built"), report).await
    }

    /// `GET /sources/{sha256}`: the raw gzip'ed tar snapshot (not yet verified).
    pub async fn fetch_source(&self, sha256: &str) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}/sources/{sha256}", self.base);
        let mut resp = self
            .http
            .get(&url)
            .timeout(SOURCE_TIMEOUT)
            .send()
            .await
            .map_err(|e| transport_error("GET source", e))?;
        let status = resp.status();
        if !status.is_success() {
            let headers = resp.headers().clone();
            let body = resp.bytes().await.unwrap_or_default();
            return Err(classify_response(status.as_u16(), &headers, &body));
        }
        let mut out = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| transport_error("reading source", e))?
        {
            if out.len() + chunk.len() > MAX_SOURCE_BYTES {
                return Err(ClientError::Fatal {
                    status: status.as_u16(),
                    code: "too_large".to_string(),
                    message: format!("source snapshot exceeds {MAX_SOURCE_BYTES} bytes"),
                });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: String,
        body: &B,
    ) -> Result<R, ClientError> {
        let request = self.http.post(format!("{}{path}", self.base)).json(body);
        send_json("POST", &path, request).await
    }
}

/// Sends `request` (`method path`, for messages) and decodes the JSON answer.
async fn send_json<R: DeserializeOwned>(
    method: &str,
    path: &str,
    request: reqwest::RequestBuilder,
) -> Result<R, ClientError> {
    let resp = request
        .send()
        .await
        .map_err(|e| transport_error(&format!("{method} {path}"), e))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    // A body cut off mid-way is a transport problem (retry), unlike a body that arrives
    // whole but does not parse (a protocol mismatch: fatal).
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| transport_error(&format!("reading {method} {path}"), e))?;
    if !status.is_success() {
        return Err(classify_response(status.as_u16(), &headers, &bytes));
    }
    serde_json::from_slice(&bytes).map_err(|e| ClientError::Fatal {
        status: status.as_u16(),
        code: "bad_response".to_string(),
        message: format!("{method} {path}: unexpected response body: {e}"),
    })
}

/// Exponential backoff with full jitter: waits grow from `initial` to `cap`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `initial`, never waiting longer than `cap`.
    pub fn new(initial: Duration, cap: Duration) -> Self {
        Backoff {
            initial,
            cap,
            attempt: 0,
        }
    }

    /// The policy for coordinator calls: 100 ms doubling up to 5 s.
    pub fn coordinator() -> Self {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(5))
    }

    /// The next wait: a random duration between half and all of the current step, so many
    /// workers retrying after a coordinator restart do not arrive in lockstep.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32 << self.attempt.min(16);
        let step = self.initial.saturating_mul(factor).min(self.cap);
        self.attempt = self.attempt.saturating_add(1);
        let half = step / 2;
        half + rand::thread_rng().gen_range(Duration::ZERO..=half)
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// Sleeps for `d` unless `cancel` fires first; returns `false` when cancelled.
pub async fn sleep_or_cancel(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

/// Runs `call` until it succeeds or fails for a reason retrying cannot fix, waiting with
/// [`Backoff::coordinator`] between retryable failures. Returns [`ClientError::Cancelled`] as
/// soon as `cancel` fires, even in the middle of a request.
pub async fn with_retry<T, F, Fut>(
    what: &str,
    cancel: &CancellationToken,
    mut call: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    let mut backoff = Backoff::coordinator();
    loop {
        let result = tokio::select! {
            _ = cancel.cancelled() => return Err(ClientError::Cancelled),
            r = call() => r,
        };
        match result {
            Err(e) if e.is_retryable() => {
                let delay = e.pause(&mut backoff);
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "{what} failed; retrying");
                if !sleep_or_cancel(delay, cancel).await {
                    return Err(ClientError::Cancelled);
                }
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        let lost = br#"{"error":{"code":"lease_lost","message":"attempt 2 is current"}}"#;
        assert_eq!(
            classify_status(409, lost),
            ClientError::LeaseLost("attempt 2 is current".into())
        );
        assert!(classify_status(503, b"db down").is_retryable());
        assert!(classify_status(502, b"").is_retryable());
        assert!(classify_status(429, b"").is_retryable());
        let bad = br#"{"error":{"code":"invalid_field","field":"x","message":"nope"}}"#;
        match classify_status(400, bad) {
            ClientError::Fatal {
                status,
                code,
                message,
            } => {
                assert_eq!(
                    (status, code.as_str(), message.as_str()),
                    (400, "invalid_field", "nope")
                );
            }
            e => panic!("{e:?}"),
        }
        // A Retry-After turns a retryable answer into "overloaded", waited for at least that
        // long (plus up to half again), and is capped.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "3".parse().unwrap());
        let busy = classify_response(503, &headers, b"");
        assert!(busy.is_retryable());
        for _ in 0..20 {
            let pause = busy.pause(&mut Backoff::coordinator());
            assert!(pause >= Duration::from_secs(3) && pause <= Duration::from_millis(4500));
        }
        headers.insert(reqwest::header::RETRY_AFTER, "86400".parse().unwrap());
        assert!(matches!(
            classify_response(429, &headers, b""),
            ClientError::Overloaded { retry_after, .. } if retry_after == MAX_RETRY_AFTER
        ));
        // Not for answers that are not retryable.
        assert!(matches!(
            classify_response(400, &headers, b""),
            ClientError::Fatal { .. }
        ));
        // A 409 that is not about the lease is not a lease loss.
        assert!(matches!(
            classify_status(409, br#"{"error":{"code":"conflict","message":"m"}}"#),
            ClientError::Fatal { .. }
        ));
    }

    #[test]
    fn backoff_grows_to_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let first = b.next_delay();
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        for _ in 0..40 {
            let d = b.next_delay();
            assert!(d <= Duration::from_secs(5));
        }
        let late = b.next_delay();
        assert!(late >= Duration::from_millis(2500), "{late:?}");
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn retry_stops_on_cancel_and_on_fatal() {
        let cancel = CancellationToken::new();
        let mut calls = 0;
        let r: Result<(), _> = with_retry("t", &cancel, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(ClientError::Retryable("down".into()))
                } else {
                    Err(ClientError::LeaseLost("gone".into()))
                }
            }
        })
        .await;
        assert_eq!(r, Err(ClientError::LeaseLost("gone".into())));
        assert_eq!(calls, 3);

        cancel.cancel();
        let r: Result<(), _> = with_retry("t", &cancel, || async {
            Err(ClientError::Retryable("down".into()))
        })
        .await;
        assert_eq!(r, Err(ClientError::Cancelled));
    }
}
