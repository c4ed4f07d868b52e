//! `GET /api/v1/openapi.json` on a real coordinator process: served to anyone, the same
//! document the code describes, and every operation in it is answered by the server at its
//! path and method (with 401 for a caller without a token wherever the document asks for one).

mod common;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use common::{start_coordinator, TestDb};

/// `path` with its parameters filled in: ids that exist nowhere, names that parse.
fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "minnow")
        .replace("{build}", "head_reference")
        .replace("{sha256}", &"0".repeat(64))
}

#[tokio::test]
async fn the_document_is_served_to_anyone() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    // No token.
    let resp = reqwest::get(format!("{base}/api/v1/openapi.json"))
        .await
        .expect("GET openapi.json");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(
        resp.headers()[reqwest::header::CONTENT_TYPE],
        "application/json"
    );
    let served: Value = resp.json().await.expect("a JSON body");
    assert!(served["openapi"].as_str().unwrap().starts_with("3.1."));
    let described = serde_json::to_value(sweep_coordinator::http::openapi::document()).unwrap();
    assert_eq!(
        served, described,
        "the server serves the document the code describes"
    );
}

#[tokio::test]
async fn every_documented_operation_is_served() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let doc = serde_json::to_value(sweep_coordinator::http::openapi::document()).unwrap();
    let client = reqwest::Client::new();
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{method} {path}");
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let resp = client
                .request(method.clone(), format!("{base}{}", concrete(path)))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{what}: {body}");
            assert!(
                !body.contains("route not found"),
                "{what} is documented but not routed"
            );
            let required_query = op["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["in"] == "query" && p["required"] == true)
            });
            if op.get("security").is_some() && op.get("requestBody").is_some() {
                // A call with a body is authenticated before its body (here missing) is read.
                assert_eq!(
                    status,
                    StatusCode::UNAUTHORIZED,
                    "{what} must refuse a caller without a token first: {body}"
                );
            } else if op.get("security").is_some() && required_query {
                // Reads check their query (here missing) before the caller.
                assert!(
                    [StatusCode::UNAUTHORIZED, StatusCode::UNPROCESSABLE_ENTITY].contains(&status),
                    "{what} needs a token and input: {status} {body}"
                );
            } else if op.get("security").is_some() {
                assert_eq!(
                    status,
                    StatusCode::UNAUTHORIZED,
                    "{what} needs a token: {body}"
                );
            } else {
                assert_eq!(status, StatusCode::OK, "{what} is open to anyone: {body}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} operations");

    // And a route the document does not have is not served.
    let resp = client
        .get(format!("{base}/api/v1/nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(resp.text().await.unwrap().contains("route not found"));

    // A query that does not parse answers the documented error body, not axum's plain text.
    for url in [
        format!("{base}/api/v1/sweeps?limit=many"),
        format!("{base}/api/v1/audit?limit=-1"),
        format!("{base}/api/v1/sweeps/1/table?format=md&format=csv"),
    ] {
        let resp = common::get(&url).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{url}");
        let body: Value = resp.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["code"], "bad_request", "{url}: {body}");
    }
}
