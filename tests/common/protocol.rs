//! Plain HTTP calls to a test coordinator, with a given token or with the ones registered
//! for it (see [`super::register_tokens`]): for tests that play a worker step by step.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use super::tokens_for;

/// POSTs `body` as `content_type`, with the worker token for the worker protocol and the
/// admin token for the rest; returns the status and the JSON answer (null if none).
pub async fn post_as(
    url: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> (StatusCode, Value) {
    let tokens = tokens_for(url).expect("tokens of the test server");
    let token = if url.contains("/api/v1/workers") || url.contains("/api/v1/jobs/") {
        tokens.worker
    } else {
        tokens.admin
    };
    send(Method::POST, url, &token, content_type, body).await
}

/// Sends `body` as `content_type` to `url` with `token`; returns the status and the JSON
/// answer (null if none).
pub async fn send(
    method: Method,
    url: &str,
    token: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> (StatusCode, Value) {
    let resp = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// [`post_as`] with a JSON body.
pub async fn post_json(url: &str, body: &Value) -> (StatusCode, Value) {
    post_as(url, "application/json", serde_json::to_vec(body).unwrap()).await
}

/// Registers a one-core worker called `name`; returns its id.
pub async fn register(base: &str, name: &str) -> i64 {
    let (status, v) = post_json(
        &format!("{base}/api/v1/workers"),
        &json!({"name": name, "host": "test", "cores": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["worker_id"].as_i64().unwrap()
}

/// Asks for one job for `worker`; returns the jobs leased (none or one).
pub async fn lease(base: &str, worker: i64) -> Vec<Value> {
    let (status, v) = post_json(
        &format!("{base}/api/v1/workers/{worker}/lease"),
        &json!({"max_jobs": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["jobs"].as_array().unwrap().clone()
}
