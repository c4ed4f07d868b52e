//! One request to a coordinator and its whole answer: a success's body, or the failure
//! classified as [`ClientError`].

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde::de::DeserializeOwned;

use crate::error::{classify_response, transport_error, ClientError};

/// A token that cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the token holds characters an HTTP header cannot carry")]
pub struct BadToken;

/// Default headers that send `token` as `Authorization: Bearer` with every request, marked
/// sensitive so it stays out of debug output and logs. No token, or an empty one (an empty
/// `SWEEP_TOKEN`), sends none.
pub fn bearer_headers(token: Option<&str>) -> Result<HeaderMap, BadToken> {
    let mut headers = HeaderMap::new();
    if let Some(token) = token.filter(|t| !t.is_empty()) {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| BadToken)?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}

/// Sends `request` (named `what` in messages, e.g. `GET /engines`) and returns the body of
/// a success.
pub async fn send(what: &str, request: reqwest::RequestBuilder) -> Result<Vec<u8>, ClientError> {
    receive(what, request, |_, body| Ok(body.to_vec())).await
}

/// Sends `request` (named `what` in messages) and decodes the JSON answer of a success; one
/// that does not decode is [`ClientError::Fatal`] (`bad_response`): the two sides disagree on
/// the protocol, and asking again will not change that.
pub async fn send_json<R: DeserializeOwned>(
    what: &str,
    request: reqwest::RequestBuilder,
) -> Result<R, ClientError> {
    receive(what, request, |status, body| {
        serde_json::from_slice(body).map_err(|e| ClientError::Fatal {
            status,
            code: "bad_response".to_string(),
            message: format!("{what}: unexpected response body: {e}"),
        })
    })
    .await
}

async fn receive<T>(
    what: &str,
    request: reqwest::RequestBuilder,
    decode: impl FnOnce(u16, &[u8]) -> Result<T, ClientError>,
) -> Result<T, ClientError> {
    let resp = request.send().await.map_err(|e| transport_error(what, e))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    // A body cut off mid-way is a transport problem (retry), unlike a body that arrives
    // whole but does not parse (a protocol mismatch: fatal).
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| transport_error(&format!("reading {what}"), e))?;
    if !status.is_success() {
        return Err(classify_response(status.as_u16(), &headers, &bytes));
    }
    decode(status.as_u16(), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_sent_as_a_sensitive_bearer() {
        let headers = bearer_headers(Some("w-123")).unwrap();
        let value = &headers[AUTHORIZATION];
        assert_eq!(value, "Bearer w-123");
        assert!(value.is_sensitive());
        assert!(!format!("{headers:?}").contains("w-123"));
        // No token and an empty one send nothing; one a header cannot hold is refused.
        assert!(bearer_headers(None).unwrap().is_empty());
        assert!(bearer_headers(Some("")).unwrap().is_empty());
        assert_eq!(bearer_headers(Some("a\nb")), Err(BadToken));
    }
}
