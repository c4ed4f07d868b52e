//! Who may call is decided before what they sent is read: over real HTTP against an
//! in-process coordinator, a caller without a token is answered 401 and one whose token may
//! not make the call 403, whatever body or query it sent; a caller that may make it learns
//! then that its body is invalid (422), or its query (400 or 422).

use std::path::PathBuf;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sweep_coordinator::service::Caller;
use sweep_coordinator::{Application, CoordinatorConfig};
use sweep_domain::auth::Role;
use tokio_util::sync::CancellationToken;

/// A coordinator on a fresh SQLite file, stopped when dropped.
struct Server {
    base: String,
    app_stop: CancellationToken,
    tokens: Tokens,
    _dir: tempfile::TempDir,
}

/// One token per kind of caller.
struct Tokens {
    admin: String,
    reader: String,
    submitter: String,
    worker: String,
    other_worker: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.app_stop.cancel();
    }
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

async fn server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let mut config = CoordinatorConfig::new(db.to_str().unwrap(), "127.0.0.1:0".parse().unwrap());
    config.engines_dir = repo("configs/engines");
    config.suites_dir = repo("suites");
    let app = Application::build(config).await.unwrap();
    let service = app.service().clone();
    let token = |role, name: &'static str| {
        let service = service.clone();
        async move {
            service
                .admin()
                .create_token(&Caller::Local, name, role)
                .await
                .unwrap()
                .1
        }
    };
    let tokens = Tokens {
        admin: token(Role::Admin, "admin").await,
        reader: token(Role::Reader, "reader").await,
        submitter: token(Role::Submitter, "submitter").await,
        worker: token(Role::Worker, "worker").await,
        other_worker: token(Role::Worker, "other-worker").await,
    };
    let base = format!("http://{}", app.addr());
    let app_stop = CancellationToken::new();
    tokio::spawn(app.run_until_stopped(app_stop.clone()));
    Server {
        base,
        app_stop,
        tokens,
        _dir: dir,
    }
}

impl Server {
    /// The status of `method path` with `body` sent as JSON, and the answer's body.
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> (StatusCode, Value) {
        let mut req = reqwest::Client::new()
            .request(method, format!("{}{path}", self.base))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Registers a worker with the `worker` token; its id.
    async fn worker(&self) -> i64 {
        let body = json!({"name": "w", "host": "h", "cores": 1}).to_string();
        let (status, v) = self
            .call(
                Method::POST,
                "/api/v1/workers",
                Some(&self.tokens.worker),
                &body,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        v["worker_id"].as_i64().unwrap()
    }
}

/// A body no route accepts: neither JSON nor a sweep config.
const GARBAGE: &str = "{ not json";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_may_not_call_are_refused_before_their_body_is_read() {
    let s = server().await;
    let worker = s.worker().await;
    let t = &s.tokens;
    // (method, path, the callers refused with 403, the caller that may call)
    let routes: Vec<(Method, String, Vec<&str>, &str)> = vec![
        (
            Method::POST,
            "/api/v1/workers".into(),
            vec![&t.reader, &t.submitter],
            &t.worker,
        ),
        (
            Method::POST,
            "/api/v1/sweeps".into(),
            vec![&t.reader, &t.worker],
            &t.submitter,
        ),
        (
            Method::POST,
            format!("/api/v1/workers/{worker}/lease"),
            vec![&t.reader, &t.submitter, &t.other_worker],
            &t.worker,
        ),
        (
            Method::POST,
            format!("/api/v1/workers/{worker}/heartbeat"),
            vec![&t.reader, &t.submitter, &t.other_worker],
            &t.worker,
        ),
        (
            Method::POST,
            format!("/api/v1/workers/{worker}/results"),
            vec![&t.reader, &t.submitter, &t.other_worker],
            &t.worker,
        ),
        // The worker is named in the body: only the role can be checked before it is read.
        (
            Method::POST,
            "/api/v1/jobs/1/build-failed".into(),
            vec![&t.reader, &t.submitter],
            &t.worker,
        ),
        (
            Method::POST,
            "/api/v1/jobs/1/built".into(),
            vec![&t.reader, &t.submitter],
            &t.worker,
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, refused, allowed) in &routes {
        let mut expect = vec![(None, StatusCode::UNAUTHORIZED)];
        expect.extend(refused.iter().map(|t| (Some(*t), StatusCode::FORBIDDEN)));
        expect.push((Some(*allowed), StatusCode::UNPROCESSABLE_ENTITY));
        for (i, (token, expected)) in expect.into_iter().enumerate() {
            let (status, v) = s.call(method.clone(), path, token, GARBAGE).await;
            if status != expected {
                wrong.push(format!(
                    "{method} {path}, caller {i}: {status}, not {expected}: {v}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_is_not_registered_is_not_found_before_its_body_is_read() {
    let s = server().await;
    let (status, v) = s
        .call(
            Method::POST,
            "/api/v1/workers/999/heartbeat",
            Some(&s.tokens.worker),
            GARBAGE,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_may_not_read_are_refused_before_their_query_is_read() {
    let s = server().await;
    let t = &s.tokens;
    // (path with a bad query, the callers refused with 403, the caller that may read, the
    // status that caller gets for the query). Sweep 1 does not exist: each query is refused
    // before the sweep is looked up.
    let reads: Vec<(&str, Vec<&str>, &str, StatusCode)> = vec![
        (
            "/api/v1/workers?limit=many",
            vec![&t.worker],
            &t.reader,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/v1/sweeps?limit=many",
            vec![&t.worker],
            &t.reader,
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/v1/sweeps/1/table?format=xml",
            vec![&t.worker],
            &t.reader,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/v1/sweeps/1/positions?page_size=0",
            vec![&t.worker],
            &t.reader,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/v1/sweeps/1/positions?offset=-1",
            vec![&t.worker],
            &t.reader,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/v1/sweeps/1/derive?filter=some",
            vec![&t.worker],
            &t.reader,
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "/api/v1/audit?limit=many",
            vec![&t.reader, &t.submitter, &t.worker],
            &t.admin,
            StatusCode::BAD_REQUEST,
        ),
    ];
    let mut wrong = Vec::new();
    for (path, refused, allowed, invalid) in &reads {
        let mut expect = vec![(None, StatusCode::UNAUTHORIZED)];
        expect.extend(refused.iter().map(|t| (Some(*t), StatusCode::FORBIDDEN)));
        expect.push((Some(*allowed), *invalid));
        for (i, (token, expected)) in expect.into_iter().enumerate() {
            let (status, v) = s.call(Method::GET, path, token, "").await;
            if status != expected {
                wrong.push(format!(
                    "GET {path}, caller {i}: {status}, not {expected}: {v}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
