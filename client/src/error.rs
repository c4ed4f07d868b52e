//! What a failed call to a coordinator means to its caller.
//!
//! Every call maps its failure into [`ClientError`] so callers can branch on what to do next:
//! drop the job ([`ClientError::LeaseLost`]), try again later ([`ClientError::Retryable`],
//! [`ClientError::Overloaded`]), or give up and report ([`ClientError::Fatal`],
//! [`ClientError::Untrusted`]).

use std::time::Duration;

use sweep_domain::wire::ErrorBody;

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
}

/// Most a `Retry-After` is honoured for: a confused server cannot park workers for hours.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

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

/// Classifies a request that got no (whole) answer; `what` names it in the message. An
/// untrusted certificate is never retried (it may be an impostor), nor is a malformed URL;
/// anything else (refused, reset, timed out, cut off) may heal.
pub fn transport_error(what: &str, e: reqwest::Error) -> ClientError {
    if e.is_builder() {
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
        // A Retry-After turns a retryable answer into "overloaded", and is capped.
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::RETRY_AFTER, "3".parse().unwrap());
        assert!(matches!(
            classify_response(503, &headers, b""),
            ClientError::Overloaded { retry_after, .. } if retry_after == Duration::from_secs(3)
        ));
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
}
