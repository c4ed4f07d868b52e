//! What one caller can do to the others over HTTP (issue 46), against real coordinators on
//! Postgres: a worker token holds at most `--max-workers-per-token` live workers; slow source
//! uploads and callers without a valid token never take the worker protocol's in-flight
//! slots; a body that does not arrive is answered 408 and frees its slot; and a flood of one
//! random bearer reaches the database once.

mod common;

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::exposition::{parse_exposition, scrape, value};
use common::protocol::{post_json, register, send};
use common::{coordinator_config, start_coordinator_with, tokens_for, InProcess, TestDb};

/// The `host:port` of a base URL (`http://host:port`).
fn addr(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// Opens a connection to `base` and sends `head` (a request line and headers, without the
/// blank line ending them), declaring a body of `len` bytes that never comes.
async fn held_request(base: &str, head: &str, len: usize) -> TcpStream {
    let mut conn = TcpStream::connect(addr(base)).await.unwrap();
    let request = format!("{head}\r\nHost: x\r\nContent-Length: {len}\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    conn
}

/// What the server answered on `conn` within `limit` (empty when it answered nothing).
async fn answer_within(conn: &mut TcpStream, limit: Duration) -> String {
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(limit, conn.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_registers_at_most_its_cap_of_live_workers() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator_with(
        &db.url,
        &["--max-workers-per-token", "2", "--lease-secs", "1"],
    );
    let workers = format!("{base}/api/v1/workers");
    let worker = |name: &str| json!({"name": name, "host": "h", "cores": 1});
    register(&base, "a").await;
    register(&base, "b").await;
    let resp = reqwest::Client::new()
        .post(&workers)
        .bearer_auth(tokens_for(&base).unwrap().worker)
        .json(&worker("c"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_workers", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("2 live workers") && message.contains("--max-workers-per-token"),
        "{body}"
    );
    // Another worker token is not held back.
    let other = common::create_token(&db.url, "worker", "other-workers");
    let (status, v) = send(
        Method::POST,
        &workers,
        &other,
        "application/json",
        serde_json::to_vec(&worker("x")).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    // `a` and `b` go a lease (1 s) without a heartbeat: their places are free again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, v) = post_json(&workers, &worker("c")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

/// 200 uploads that sent their headers but never their bodies, each declaring 2 MiB (400 MiB
/// in all: more than a class's body budget), and 200 anonymous requests to the worker
/// protocol doing the same: a worker still registers, leases and heartbeats, and the
/// anonymous ones are answered 401 at once, without waiting for their bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_and_anonymous_callers_leave_the_worker_protocol_its_slots() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator_with(&db.url, &[]);
    let admin = tokens_for(&base).unwrap().admin;
    let mut uploads = Vec::new();
    for n in 0..200 {
        let sha = format!("{n:064x}");
        let head = format!(
            "PUT /api/v1/sources/{sha} HTTP/1.1\r\nAuthorization: Bearer {admin}\r\n\
             Content-Type: application/gzip"
        );
        uploads.push(held_request(&base, &head, 2 * 1024 * 1024).await);
    }
    let mut anonymous = Vec::new();
    for _ in 0..200 {
        let head = "POST /api/v1/workers HTTP/1.1\r\nContent-Type: application/json";
        anonymous.push(held_request(&base, head, 1000).await);
    }
    // Let the server take in every one of them.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let started = Instant::now();
    let w = register(&base, "w").await;
    let (status, v) = post_json(
        &format!("{base}/api/v1/workers/{w}/lease"),
        &json!({"max_jobs": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = post_json(
        &format!("{base}/api/v1/workers/{w}/heartbeat"),
        &json!({"leases": []}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(started.elapsed() < Duration::from_secs(10));

    // Each anonymous request was answered 401 without its body.
    for conn in &mut anonymous {
        let answer = answer_within(conn, Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    // The uploads are still waiting for their bodies (or were shed, once their class's
    // budget was spent): none was answered otherwise.
    let mut shed = 0;
    for conn in &mut uploads {
        let answer = answer_within(conn, Duration::from_millis(20)).await;
        if answer.starts_with("HTTP/1.1 503") {
            shed += 1;
        } else {
            assert_eq!(answer, "", "an upload was answered");
        }
    }
    assert!(shed > 0 && shed < 200, "{shed} uploads shed");
}

/// With a body timeout of one second and one request in flight per class: a worker's call
/// whose body never comes holds the worker protocol's slot (callers without a valid token
/// are answered 401 meanwhile, never 503), is answered 408 after that second, and the slot it
/// held serves the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_arrive_is_answered_408_and_frees_its_slot() {
    let db = TestDb::new().await;
    let mut config = coordinator_config(&db.url);
    config.max_in_flight = 1;
    config.body_timeout = Duration::from_secs(1);
    let coord = InProcess::start_with_tokens(config, db).await;
    let base = coord.base.clone();
    let worker = tokens_for(&base).unwrap().worker;
    let head = format!(
        "POST /api/v1/workers HTTP/1.1\r\nAuthorization: Bearer {worker}\r\n\
         Content-Type: application/json"
    );
    let started = Instant::now();
    let mut slow = held_request(&base, &head, 100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // It holds the worker protocol's one slot meanwhile.
    let (status, _) = post_json(
        &format!("{base}/api/v1/workers"),
        &json!({"name": "w", "host": "h", "cores": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // Callers without a valid token are answered 401 before they would take a slot, not 503.
    let stranger = json!({"name": "x", "host": "h", "cores": 1});
    for bearer in [
        None,
        Some("sweep_0000"),
        Some(&*format!("sweep_{}", "0".repeat(64))),
    ] {
        let mut req = reqwest::Client::new().post(format!("{base}/api/v1/workers"));
        if let Some(bearer) = bearer {
            req = req.bearer_auth(bearer);
        }
        let status = req.json(&stranger).send().await.unwrap().status();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{bearer:?}");
    }
    let answer = answer_within(&mut slow, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    register(&base, "w").await;
}

/// The samples of `base`'s `/metrics`, read anonymously (the coordinator has public reads).
async fn token_lookups(base: &str) -> f64 {
    let (status, _, text) = scrape(base, None).await;
    assert_eq!(status, 200, "{text}");
    value(&parse_exposition(&text), "sweep_token_lookups_total", &[])
}

/// 300 requests at once with one random bearer of a token's form cost one lookup in the
/// database, and as many again cost none; bearers of no token's form cost none at all; the
/// worker token still works meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_a_random_bearer_reaches_the_database_once() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator_with(&db.url, &["--public-read"]);
    let sweeps = format!("{base}/api/v1/sweeps");
    let flood = |bearers: Vec<String>| {
        let url = sweeps.clone();
        async move {
            let client = reqwest::Client::new();
            let calls: Vec<_> = bearers
                .into_iter()
                .map(|b| {
                    let req = client.post(&url).bearer_auth(b).json(&json!({}));
                    tokio::spawn(async move { req.send().await.unwrap().status() })
                })
                .collect();
            for c in calls {
                assert_eq!(c.await.unwrap(), StatusCode::UNAUTHORIZED);
            }
        }
    };
    let random = format!("sweep_{}", "5eed".repeat(16));
    let before = token_lookups(&base).await;
    flood(vec![random.clone(); 300]).await;
    assert_eq!(token_lookups(&base).await - before, 1.0);
    flood(vec![random; 300]).await;
    let malformed = (0..300).map(|n| format!("not-a-token-{n}")).collect();
    flood(malformed).await;
    assert_eq!(token_lookups(&base).await - before, 1.0);
    register(&base, "w").await;
}

/// A snapshot is served to the submitter of a sweep that uses it, to whoever uploaded it and
/// to a worker token one of whose workers holds a lease of that sweep's job; to another
/// submitter or worker it is not there (404, `HEAD` too), and naming its hash in a sweep's
/// `[source]` does not make it readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_served_only_to_those_who_need_it() {
    use sweep_coordinator::service::Caller;
    use sweep_domain::auth::Role;

    let db = TestDb::new().await;
    let coord = InProcess::start(coordinator_config(&db.url), db).await;
    let base = coord.base.clone();
    let token = |role: Role, name: &'static str| {
        let svc = coord.service.clone();
        async move {
            svc.admin()
                .create_token(&Caller::Local, name, role)
                .await
                .unwrap()
                .1
        }
    };
    let alice = token(Role::Submitter, "alice").await;
    let bob = token(Role::Submitter, "bob").await;
    let workers = token(Role::Worker, "workers").await;
    let call = |method: Method, path: String, token: String, body: Vec<u8>| {
        let url = format!("{base}{path}");
        async move {
            let resp = reqwest::Client::new()
                .request(method, url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            (resp.status(), resp.bytes().await.unwrap().to_vec())
        }
    };
    let json_body = |v: &Value| serde_json::to_vec(v).unwrap();

    let mut config = common::sweeps::small_sweep_json();
    let (status, created) = call(
        Method::POST,
        "/api/v1/sweeps".into(),
        alice.clone(),
        json_body(&config),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = serde_json::from_slice::<Value>(&created).unwrap()["id"].clone();
    let (_, detail) = call(
        Method::GET,
        format!("/api/v1/sweeps/{id}"),
        alice.clone(),
        vec![],
    )
    .await;
    let detail: Value = serde_json::from_slice(&detail).unwrap();
    let sha = detail["source_sha256"].as_str().unwrap().to_string();
    let source = format!("/api/v1/sources/{sha}");

    let (status, archive) = call(Method::GET, source.clone(), alice.clone(), vec![]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!archive.is_empty());
    for method in [Method::GET, Method::HEAD] {
        let (status, _) = call(method.clone(), source.clone(), bob.clone(), vec![]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} as bob");
    }
    // Bob cannot get it by naming it in a sweep of his own.
    config["name"] = json!("bob's");
    config["source"] = json!({"sha256": sha});
    let (status, refused) = call(
        Method::POST,
        "/api/v1/sweeps".into(),
        bob.clone(),
        json_body(&config),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let refused: Value = serde_json::from_slice(&refused).unwrap();
    assert_eq!(refused["error"]["field"], "source.sha256", "{refused}");

    // A worker of the worker token: nothing while it holds no lease, the archive with one.
    let register = json!({"name": "w", "host": "h", "cores": 1});
    let (status, registered) = call(
        Method::POST,
        "/api/v1/workers".into(),
        workers.clone(),
        json_body(&register),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let w = serde_json::from_slice::<Value>(&registered).unwrap()["worker_id"].clone();
    let (status, _) = call(Method::GET, source.clone(), workers.clone(), vec![]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, leased) = call(
        Method::POST,
        format!("/api/v1/workers/{w}/lease"),
        workers.clone(),
        json_body(&json!({"max_jobs": 1})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let leased: Value = serde_json::from_slice(&leased).unwrap();
    assert_eq!(leased["jobs"].as_array().unwrap().len(), 1, "{leased}");
    let (status, fetched) = call(Method::GET, source.clone(), workers.clone(), vec![]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, archive);

    // Bob uploads the very bytes: holding them, he may read them back.
    let (status, _) = call(Method::PUT, source.clone(), bob.clone(), archive.clone()).await;
    assert_eq!(status, StatusCode::OK, "already stored");
    let (status, again) = call(Method::GET, source.clone(), bob.clone(), vec![]).await;
    assert_eq!((status, again), (StatusCode::OK, archive));
}
