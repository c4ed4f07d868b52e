//! Tokens and roles over real HTTP against a real Postgres: every route x every kind of
//! caller, and the attacks that worked before tokens existed (each now fails).

mod common;

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sweep_coordinator::service::Caller;
use sweep_domain::auth::Role;

use common::{coordinator_config, InProcess, TestDb};

/// A coordinator on a fresh database; tests make their own tokens.
async fn server(public_read: bool) -> Server {
    let db = TestDb::new().await;
    let mut config = coordinator_config(&db.url);
    config.public_read = public_read;
    Server {
        coord: InProcess::start(config, db).await,
    }
}

/// The coordinator, with helpers for tokens and requests.
struct Server {
    coord: InProcess<TestDb>,
}

impl Server {
    /// A token of each (role, name), made in that order.
    async fn tokens<const N: usize>(&self, wanted: [(Role, &str); N]) -> [String; N] {
        let mut made = Vec::with_capacity(N);
        for (role, name) in wanted {
            made.push(self.token(role, name).await);
        }
        made.try_into().expect("one token each")
    }

    async fn token(&self, role: Role, name: &str) -> String {
        self.coord
            .service
            .admin()
            .create_token(&Caller::Local, name, role)
            .await
            .unwrap()
            .1
    }

    /// A POST of `body` (if any) as `token`.
    async fn post(
        &self,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        self.call(Method::POST, path, token, body).await
    }

    /// Submits [`config`] named `name` as `token`; returns the sweep's id.
    async fn submit(&self, token: &str, name: &str) -> i64 {
        let (_, v) = self
            .post("/api/v1/sweeps", Some(token), Some(&config(name)))
            .await;
        v["id"].as_i64().unwrap()
    }

    /// Registers a worker named `name` (one core) with worker token `token`; returns its id.
    async fn register(&self, token: &str, name: &str) -> i64 {
        let body = json!({"name": name, "host": "h", "cores": 1});
        let (status, v) = self.post("/api/v1/workers", Some(token), Some(&body)).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        v["worker_id"].as_i64().unwrap()
    }

    /// Leases one job for `worker` with its token; returns the job's lease.
    async fn lease_one(&self, token: &str, worker: i64) -> Value {
        let path = format!("/api/v1/workers/{worker}/lease");
        let (status, v) = self
            .post(&path, Some(token), Some(&json!({"max_jobs": 1})))
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        v["jobs"][0].clone()
    }

    /// A GET as `token`.
    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        self.call(Method::GET, path, token, None).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (StatusCode, Value) {
        let mut req = reqwest::Client::new().request(method, format!("{}{path}", self.coord.base));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

/// A small sweep config; `name` keeps each submission distinct.
fn config(name: &str) -> Value {
    json!({
        "name": name,
        "engine": "minnow",
        "knob": "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS",
        "values": [300],
        "suites": ["bk"],
        "depth": 1,
        "chunk_size": 24
    })
}

/// Where the source snapshot of a sweep (its `detail`) is served.
fn source_path(detail: &Value) -> String {
    format!(
        "/api/v1/sources/{}",
        detail["source_sha256"].as_str().unwrap()
    )
}

/// A row of the role table: method, path, body, and the status expected for each caller in
/// [`CALLERS`] order (0: not tried).
type Route<'a> = (Method, String, Option<&'a Value>, [u16; 7]);

/// A GET row of the role table.
fn get(path: impl Into<String>, expected: [u16; 7]) -> Route<'static> {
    (Method::GET, path.into(), None, expected)
}

/// A POST row of the role table.
fn post(path: impl Into<String>, body: Option<&Value>, expected: [u16; 7]) -> Route<'_> {
    (Method::POST, path.into(), body, expected)
}

/// Who calls, in the order of the matrix's columns.
const CALLERS: [&str; 7] = [
    "anonymous",
    "reader",
    "submitter",
    "other submitter",
    "worker",
    "other worker",
    "admin",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_caller_as_the_role_table_says() {
    let s = server(false).await;
    let [reader, alice, bob, w1, w2, admin] = s
        .tokens([
            (Role::Reader, "reader"),
            (Role::Submitter, "alice"),
            (Role::Submitter, "bob"),
            (Role::Worker, "w1"),
            (Role::Worker, "w2"),
            (Role::Admin, "root"),
        ])
        .await;
    let tokens: [Option<&str>; 7] = [
        None,
        Some(&reader),
        Some(&alice),
        Some(&bob),
        Some(&w1),
        Some(&w2),
        Some(&admin),
    ];

    // Alice's sweep, and a worker of w1 holding one of its jobs.
    let (status, v) = s
        .post("/api/v1/sweeps", Some(&alice), Some(&config("alice's")))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["id"].as_i64().unwrap();
    let worker = s.register(&w1, "w1-a").await;
    let job = s.lease_one(&w1, worker).await["job_id"].as_i64().unwrap();
    let (_, detail) = s.get(&format!("/api/v1/sweeps/{id}"), Some(&admin)).await;
    let sha = detail["source_sha256"].as_str().unwrap().to_string();
    assert_eq!(
        detail["submitter"], "alice",
        "the sweep records who submitted it"
    );

    // (method, path, body, expected status per caller in CALLERS order). 401 = no token;
    // 403 = wrong role or not the owner; other codes show the call got past the checks.
    let register = json!({"name": "x", "host": "h", "cores": 1});
    let lease = json!({"max_jobs": 1});
    let empty_beat = json!({"leases": []});
    let empty_upload = json!({"reports": []});
    let late_failure = json!({"worker_id": worker, "attempt": 999, "output": "x"});
    let late_record = json!({"worker_id": worker, "attempt": 999, "record": {
        "host": "h", "cpu_model": "c", "compiler": null, "argv": [],
        "binary_sha256": "0".repeat(64)}});
    const READ: [u16; 7] = [401, 200, 200, 200, 403, 403, 200];
    const CATALOG: [u16; 7] = [401, 200, 200, 200, 200, 200, 200];
    const OWN_WORKER: [u16; 7] = [401, 403, 403, 403, 200, 403, 403];
    let mut routes = vec![
        get("/healthz", [200; 7]),
        get("/", [200; 7]),
        get("/app.js", [200; 7]),
        get("/app.css", [200; 7]),
        get("/plot.js", [200; 7]),
        get("/sweep.js", [200; 7]),
        get("/api/v1/workers", READ),
        get("/api/v1/engines", CATALOG),
        get("/api/v1/suites", CATALOG),
        get("/api/v1/sweeps", READ),
        get("/metrics", READ),
        get(format!("/api/v1/sweeps/{id}"), READ),
        get(format!("/api/v1/sweeps/{id}/table"), READ),
        get(format!("/api/v1/sweeps/{id}/positions"), READ),
        // Past the checks: nothing has a result yet, hence 422.
        get(
            format!(
                "/api/v1/sweeps/{id}/derive?build=head_reference&suite=bk&filter=any&partial=true"
            ),
            [401, 422, 422, 422, 403, 403, 422],
        ),
        // A snapshot is served to its sweep's submitter, the admin and a worker holding a
        // lease of the sweep's job; to other submitters and workers it is not there.
        get(
            format!("/api/v1/sources/{sha}"),
            [401, 403, 200, 404, 200, 404, 200],
        ),
        get("/api/v1/audit", [401, 403, 403, 403, 403, 403, 200]),
        // Admins pass the check; a JSON body is no TOML engine definition, hence 422.
        (
            Method::PUT,
            "/api/v1/engines/minnow".into(),
            Some(&empty_upload),
            [401, 403, 403, 403, 403, 403, 422],
        ),
        // Admins pass the check; the build has not failed, hence 400.
        post(
            format!("/api/v1/sweeps/{id}/builds/head_reference/retry"),
            None,
            [401, 403, 403, 403, 403, 403, 400],
        ),
        post(
            "/api/v1/workers",
            Some(&register),
            [401, 403, 403, 403, 200, 200, 403],
        ),
    ];
    // The worker's own calls: only the token that registered it passes.
    routes.extend(
        [
            ("lease", &lease),
            ("heartbeat", &empty_beat),
            ("results", &empty_upload),
        ]
        .map(|(call, body)| {
            post(
                format!("/api/v1/workers/{worker}/{call}"),
                Some(body),
                OWN_WORKER,
            )
        }),
    );
    // The owner passes the check on a job's build failure and build record; attempt 999 is
    // not its lease, hence 409.
    routes.extend(
        [("build-failed", &late_failure), ("built", &late_record)].map(|(call, body)| {
            post(
                format!("/api/v1/jobs/{job}/{call}"),
                Some(body),
                [401, 403, 403, 403, 409, 403, 403],
            )
        }),
    );
    routes.push(
        // Another submitter may not cancel alice's sweep (alice and admin: below).
        post(
            format!("/api/v1/sweeps/{id}/cancel"),
            None,
            [401, 403, 0, 403, 403, 403, 0],
        ),
    );
    let mut mismatches = Vec::new();
    for (method, path, body, expected) in &routes {
        for (i, token) in tokens.iter().enumerate() {
            if expected[i] == 0 {
                continue;
            }
            let (status, v) = s.call(method.clone(), path, *token, *body).await;
            if status.as_u16() != expected[i] {
                mismatches.push(format!(
                    "{method} {path} as {}: {status}, expected {}: {v}",
                    CALLERS[i], expected[i]
                ));
            }
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                assert!(v["error"]["message"].is_string(), "{method} {path}: {v}");
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    // Submit: anonymous, reader and workers may not; submitters and admins may.
    for (i, token) in tokens.iter().enumerate() {
        let (status, v) = s
            .post(
                "/api/v1/sweeps",
                *token,
                Some(&config(&format!("by {}", CALLERS[i]))),
            )
            .await;
        let expected = [401, 403, 201, 201, 403, 403, 201][i];
        assert_eq!(status.as_u16(), expected, "submit as {}: {v}", CALLERS[i]);
    }

    // Alice cancels her own sweep; the admin cancels bob's; nobody cancels a finished one.
    let (status, v) = s
        .post(&format!("/api/v1/sweeps/{id}/cancel"), Some(&alice), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let bobs = s.submit(&bob, "bob's").await;
    let (status, v) = s
        .post(&format!("/api/v1/sweeps/{bobs}/cancel"), Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = s
        .post(&format!("/api/v1/sweeps/{bobs}/cancel"), Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");

    // The audit log names who did each write.
    let (_, log) = s.get("/api/v1/audit", Some(&admin)).await;
    let entries: Vec<(String, String, String)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_string(),
                e["action"].as_str().unwrap().to_string(),
                e["target"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(entries.contains(&("alice".into(), "cancel".into(), format!("sweep {id}"))));
    assert!(entries.contains(&("root".into(), "cancel".into(), format!("sweep {bobs}"))));
    assert!(entries.contains(&("bob".into(), "submit".into(), format!("sweep {bobs}"))));
    assert!(entries.contains(&("local".into(), "token_create".into(), "token alice".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_attacks_fail() {
    let s = server(false).await;
    let [alice, w1, w2] = s
        .tokens([
            (Role::Submitter, "alice"),
            (Role::Worker, "w1"),
            (Role::Worker, "w2"),
        ])
        .await;
    let id = s.submit(&alice, "demo").await;

    // A fake worker without a token cannot register, lease or upload.
    let (status, _) = s
        .post(
            "/api/v1/workers",
            None,
            Some(&json!({"name": "fake", "host": "h", "cores": 64})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A real worker's lease cannot be renewed, reported or failed by another worker token.
    let real = s.register(&w1, "real").await;
    let lease = s.lease_one(&w1, real).await;
    let (job, attempt) = (
        lease["job_id"].as_i64().unwrap(),
        lease["attempt"].as_i64().unwrap(),
    );
    let pos = &lease["positions"][0];
    let forged = json!({"reports": [{"job_id": job, "attempt": attempt, "finished": false,
        "results": [{"index": pos["index"], "nodes": 180_000_000u64, "bestmove": pos["bm"][0],
                     "solved": true, "score_cp": 0, "score_mate": null, "depth": 1,
                     "time_ms": 1, "error": null}]}]});
    for (path, body) in [
        (format!("/api/v1/workers/{real}/results"), forged.clone()),
        (
            format!("/api/v1/workers/{real}/heartbeat"),
            json!({"leases": [{"job_id": job, "attempt": attempt}]}),
        ),
        (
            format!("/api/v1/jobs/{job}/build-failed"),
            json!({"worker_id": real, "attempt": attempt, "output": "attacker's text"}),
        ),
    ] {
        let (status, v) = s.post(&path, Some(&w2), Some(&body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {v}");
    }
    // Nothing of it was stored, and the real worker still holds its lease.
    let (_, detail) = s.get(&format!("/api/v1/sweeps/{id}"), Some(&alice)).await;
    assert_eq!(detail["positions_done"], 0, "{detail}");
    assert!(detail["builds"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["build_error"].is_null()));
    let (status, v) = s
        .post(
            &format!("/api/v1/workers/{real}/heartbeat"),
            Some(&w1),
            Some(&json!({"leases": [{"job_id": job, "attempt": attempt}]})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["jobs"][0]["status"], "held", "{v}");

    // Anonymous cancels are refused, and so is a made-up token.
    let cancel = format!("/api/v1/sweeps/{id}/cancel");
    let (status, _) = s.post(&cancel, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, v) = s.post(&cancel, Some("sweep_0000"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{v}");

    // A revoked token stops working at once.
    s.coord
        .service
        .admin()
        .revoke_token(&Caller::Local, "alice")
        .await
        .unwrap();
    let (status, _) = s.get("/api/v1/sweeps", Some(&alice)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Sources are not public.
    let (status, _) = s.get(&source_path(&detail), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_rate_limited_per_token() {
    let s = server(false).await;
    let alice = s.token(Role::Submitter, "alice").await;
    let bob = s.token(Role::Submitter, "bob").await;
    // Cancels of a missing sweep cost a write each and change nothing.
    let mut limited = None;
    for n in 0..100 {
        let (status, _) = s
            .post("/api/v1/sweeps/999/cancel", Some(&alice), None)
            .await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(n);
            break;
        }
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    let n = limited.expect("100 writes in a burst were never limited");
    assert!(n >= 20, "limited after only {n} writes");
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/sweeps/999/cancel", s.coord.base))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().contains_key("retry-after"));
    // Another token's budget is its own, and reads are not limited.
    let (status, _) = s.post("/api/v1/sweeps/999/cancel", Some(&bob), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = s.get("/api/v1/sweeps", Some(&alice)).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (status, _) = s
        .post("/api/v1/sweeps/999/cancel", Some(&alice), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the budget refills");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_read_opens_reads_only() {
    let s = server(true).await;
    let alice = s.token(Role::Submitter, "alice").await;
    let id = s.submit(&alice, "demo").await;
    for path in [
        "/api/v1/sweeps".to_string(),
        format!("/api/v1/sweeps/{id}"),
        format!("/api/v1/sweeps/{id}/table"),
        "/api/v1/engines".to_string(),
        "/metrics".to_string(),
    ] {
        let (status, v) = s.get(&path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {v}");
    }
    let (_, detail) = s.get(&format!("/api/v1/sweeps/{id}"), None).await;
    let (status, _) = s.get(&source_path(&detail), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = s.post("/api/v1/sweeps", None, Some(&config("anon"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = s
        .post(&format!("/api/v1/sweeps/{id}/cancel"), None, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = s.get("/api/v1/audit", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[test]
fn the_cli_makes_lists_and_revokes_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tokens.db");
    let db = db.to_str().unwrap();
    let token = common::create_token(db, "submitter", "carol");
    assert!(
        token.starts_with("sweep_") && !token.contains(char::is_whitespace),
        "{token}"
    );
    // `sweep token create` on the database with `args`.
    let create = |args: &[&str]| {
        common::cli(&[&["token", "create", "--database-url", db][..], args].concat())
    };
    // A second live token of that name is refused with the reason.
    let (code, _, err) = create(&["--role", "reader", "--name", "carol"]);
    assert_ne!(code, 0);
    assert!(err.contains("carol") && err.contains("exists"), "{err}");
    let (code, _, err) = create(&["--role", "root", "--name", "dave"]);
    assert_ne!(code, 0);
    assert!(err.contains("root"), "{err}");
    let (code, out, err) = common::cli(&["token", "list", "--database-url", db]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("carol") && out.contains("submitter"), "{out}");
    assert!(!out.contains(&token), "list never shows secrets: {out}");
    let (code, _, err) = common::cli(&["token", "revoke", "--database-url", db, "carol"]);
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = common::cli(&["token", "list", "--database-url", db]);
    assert!(out.contains("revoked"), "{out}");
    let (code, out, err) = common::cli(&["audit", "--database", db]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("token_create") && out.contains("token_revoke"),
        "{out}"
    );
}
