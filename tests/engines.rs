//! Engines without a restart: definitions added over the API (`sweep engine add`,
//! `PUT /api/v1/engines/{name}`) are sweepable at once, admin-only, validated like files and
//! stored (winning over a file at the next start); sweeps keep the definition they were
//! submitted with; a broken file in the engines directory does not stop the coordinator.

mod common;

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sweep_coordinator::service::Caller;
use sweep_domain::auth::Role;

use common::{cli, coordinator_config, repo, InProcess, TestDb};

/// The bundled minnow definition under another name, its source given as an absolute path
/// (a definition sent over the API has no file to resolve a relative one against).
fn minnow_as(name: &str, hash: u32) -> String {
    let text = std::fs::read_to_string(repo().join("configs/engines/minnow.toml")).unwrap();
    let source = repo().join("engines/minnow");
    let out = text
        .replace("name = \"minnow\"", &format!("name = \"{name}\""))
        .replace(
            "path = \"../../engines/minnow\"",
            &format!("path = \"{}\"", source.display()),
        )
        .replace("Hash = 16", &format!("Hash = {hash}"));
    assert!(out.contains(&format!("Hash = {hash}")) && out.contains(&source.display().to_string()));
    out
}

fn write(dir: &Path, file: &str, text: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A one-variant depth-1 sweep of `engine` on the 24 positions of bk.
fn sweep(name: &str, engine: &str) -> Value {
    json!({
        "name": name,
        "engine": engine,
        "knob": "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS",
        "values": [300],
        "suites": ["bk"],
        "depth": 1,
        "chunk_size": 24
    })
}

/// PUTs the engine definition `body` as `name` with `token`.
async fn put(base: &str, name: &str, token: &str, body: String) -> (StatusCode, Value) {
    let url = format!("{base}/api/v1/engines/{name}");
    common::protocol::send(reqwest::Method::PUT, &url, token, "application/toml", body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_added_with_the_cli_is_sweepable_at_once() {
    let db = TestDb::new().await;
    let (_coordinator, base) = common::start_coordinator(&db.url, 30);
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "live.toml", &minnow_as("minnow_live", 16));

    // Not known yet.
    let resp = common::post(&format!("{base}/api/v1/sweeps"))
        .json(&sweep("too early", "minnow_live"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // A submitter may not add engines, but may list them.
    let submitter = common::create_token(&db.url, "submitter", "alice");
    let (code, _, err) = cli(&[
        "engine",
        "add",
        &file,
        "--coordinator",
        &base,
        "--token",
        &submitter,
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("403"), "{err}");

    let (code, out, err) = cli(&["engine", "add", &file, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("engine minnow_live added"), "{out}");
    let (code, out, err) = cli(&[
        "engine",
        "list",
        "--coordinator",
        &base,
        "--token",
        &submitter,
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("minnow_live "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("database, by test-admin"), "{line}");
    assert!(line.contains("NULLMOVE_R_BASE 1..6"), "{line}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("minnow ") && l.contains("file minnow.toml")),
        "{out}"
    );

    // Sweepable at once, and a worker finishes it.
    let resp = common::post(&format!("{base}/api/v1/sweeps"))
        .json(&sweep("live engine", "minnow_live"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let id = resp.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let _worker = common::start_worker(&base, cache.path(), "w1", 2);
    let detail = common::wait_final(&base, id, Duration::from_secs(240)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    assert_eq!(detail["engine"], "minnow_live", "{detail}");

    // Adding it again updates it (the CLI says so), and both adds are in the audit log.
    let (code, out, err) = cli(&["engine", "add", &file, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("engine minnow_live updated"), "{out}");
    let audit = common::get_json(&format!("{base}/api/v1/audit")).await;
    let adds: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "engine_add")
        .collect();
    assert_eq!(adds.len(), 2, "{audit}");
    assert_eq!(adds[0]["target"], "engine minnow_live");
    assert_eq!(adds[0]["detail"], "updated");
    assert_eq!(adds[1]["detail"], "source engine added");

    // A bad definition is refused naming the field, by the CLI too.
    let bad = write(
        dir.path(),
        "bad.toml",
        &minnow_as("minnow_live", 16).replace("max = 6", "max = 0"),
    );
    let (code, _, err) = cli(&["engine", "add", &bad, "--coordinator", &base]);
    assert_ne!(code, 0);
    assert!(err.contains("422") && err.contains("knobs[0]"), "{err}");
}

/// Two coordinators on one database (as behind a load balancer): an engine added through
/// one is sweepable through the other within seconds, with no restart, and a worker of the
/// other runs it; a revoked token is refused by both within the token cache's 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_added_through_one_coordinator_is_sweepable_through_another() {
    let db = TestDb::new().await;
    let (_a, a) = common::start_coordinator(&db.url, 30);
    let (_b, b) = common::start_coordinator(&db.url, 30);
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "shared.toml", &minnow_as("minnow_shared", 16));
    let (code, _, err) = cli(&["engine", "add", &file, "--coordinator", &a]);
    assert_eq!(code, 0, "{err}");
    let added = std::time::Instant::now();
    let id = loop {
        let resp = common::post(&format!("{b}/api/v1/sweeps"))
            .json(&sweep("through b", "minnow_shared"))
            .send()
            .await
            .unwrap();
        if resp.status() == StatusCode::CREATED {
            break resp.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
        }
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            added.elapsed() < Duration::from_secs(10),
            "coordinator b still does not know the engine after {:?}",
            added.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("sweepable through b {:?} after the add", added.elapsed());
    let cache = tempfile::tempdir().unwrap();
    let _worker = common::start_worker(&b, cache.path(), "wb", 2);
    let detail = common::wait_final(&b, id, Duration::from_secs(240)).await;
    assert_eq!(
        (detail["state"].as_str(), detail["engine"].as_str()),
        (Some("done"), Some("minnow_shared")),
        "{detail}"
    );

    // A reader token works on both (and is cached by both); revoked (`sweep token revoke`,
    // on the database), every coordinator refuses it within 5 s.
    let reader = common::create_token(&db.url, "reader", "shared-reader");
    let status_on = |base: &str| {
        let request = reqwest::Client::new()
            .get(format!("{base}/api/v1/sweeps"))
            .bearer_auth(&reader);
        async move { request.send().await.unwrap().status() }
    };
    assert_eq!(status_on(&a).await, StatusCode::OK);
    assert_eq!(status_on(&b).await, StatusCode::OK);
    let (code, _, err) = cli(&["token", "revoke", "--database", &db.url, "shared-reader"]);
    assert_eq!(code, 0, "{err}");
    let revoked = std::time::Instant::now();
    for base in [&a, &b] {
        while status_on(base).await != StatusCode::UNAUTHORIZED {
            assert!(
                revoked.elapsed() < Duration::from_millis(6500),
                "{base} still takes a revoked token after {:?}",
                revoked.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    eprintln!(
        "refused by both {:?} after the revocation",
        revoked.elapsed()
    );
}

/// A coordinator and an admin, a worker and a reader token of it.
struct Server {
    coord: InProcess,
    admin: String,
    worker: String,
    reader: String,
}

async fn server(db: &TestDb, engines_dir: &Path) -> Server {
    let mut config = coordinator_config(&db.url);
    config.engines_dir = engines_dir.to_path_buf();
    let coord = InProcess::start(config, ()).await;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let token = |role: Role| {
        let svc = coord.service.clone();
        async move {
            svc.admin()
                .create_token(&Caller::Local, &format!("{role}-{n}"), role)
                .await
                .unwrap()
                .1
        }
    };
    let (admin, worker, reader) = (
        token(Role::Admin).await,
        token(Role::Worker).await,
        token(Role::Reader).await,
    );
    Server {
        coord,
        admin,
        worker,
        reader,
    }
}

impl Server {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> Value {
        let mut req = reqwest::Client::new()
            .request(method, format!("{}{path}", self.coord.base))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let v: Value = resp.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    async fn engines(&self) -> Vec<Value> {
        let v = self
            .call(reqwest::Method::GET, "/api/v1/engines", &self.reader, None)
            .await;
        v["engines"].as_array().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updating_an_engine_leaves_submitted_sweeps_alone() {
    let db = TestDb::new().await;
    let s = server(&db, &repo().join("configs/engines")).await;
    let (status, v) = put(
        &s.coord.base,
        "minnow_hash",
        &s.admin,
        minnow_as("minnow_hash", 16),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["origin"]["from"], "database", "{v}");
    let first = s
        .call(
            reqwest::Method::POST,
            "/api/v1/sweeps",
            &s.admin,
            Some(sweep("before", "minnow_hash")),
        )
        .await["id"]
        .as_i64()
        .unwrap();

    // The update replaces the definition for new sweeps only.
    let (status, v) = put(
        &s.coord.base,
        "minnow_hash",
        &s.admin,
        minnow_as("minnow_hash", 32),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["options"]["Hash"], 32, "{v}");
    let second = s
        .call(
            reqwest::Method::POST,
            "/api/v1/sweeps",
            &s.admin,
            Some(sweep("after", "minnow_hash")),
        )
        .await["id"]
        .as_i64()
        .unwrap();

    // What workers are told to build and run comes from each sweep's own stored definition.
    let reg = s
        .call(
            reqwest::Method::POST,
            "/api/v1/workers",
            &s.worker,
            Some(json!({"name": "w", "host": "h", "cores": 1})),
        )
        .await;
    let worker = reg["worker_id"].as_i64().unwrap();
    let leased = s
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/workers/{worker}/lease"),
            &s.worker,
            Some(json!({"max_jobs": 64})),
        )
        .await;
    let jobs = leased["jobs"].as_array().unwrap();
    let hash_of = |sweep: i64| -> Vec<String> {
        jobs.iter()
            .filter(|j| j["sweep_id"] == sweep)
            .map(|j| {
                let options = j["build"]["options"].as_array().unwrap();
                let hash = options.iter().find(|o| o[0] == "Hash").unwrap();
                hash[1].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(hash_of(first), ["16", "16"], "{leased}");
    assert_eq!(hash_of(second), ["32", "32"], "{leased}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_definitions_are_refused_naming_the_field() {
    let db = TestDb::new().await;
    let s = server(&db, &repo().join("configs/engines")).await;
    let good = minnow_as("m2", 16);
    let cases: Vec<(&str, String, &str)> = vec![
        ("m2", good.replace("max = 6", "max = 0"), "knobs[0]"),
        (
            "m2",
            good.replace("protocol = \"uci\"", "protocol = \"cecp\""),
            "protocol",
        ),
        ("m2", format!("shell = \"sh\"\n{good}"), "shell"),
        (
            "m2",
            good.replace(
                &repo().join("engines/minnow").display().to_string(),
                "/nonexistent/minnow",
            ),
            "source.path",
        ),
        (
            "m2",
            good.replace(
                &repo().join("engines/minnow").display().to_string(),
                "engines/minnow",
            ),
            "source.path",
        ),
        ("other", good.clone(), "name"),
        // `[report]` and `bench` patterns are compiled at registration, not on a worker.
        (
            "m2",
            format!("{good}\n[report]\nnodes = '(unclosed'\n"),
            "report.nodes",
        ),
        (
            "m2",
            format!("{good}\n[report]\nnodes = 'saw (\\d+) nodes'\n"),
            "report.nodes",
        ),
        (
            "m2",
            format!("{good}\n[report]\ncounters = {{ cuts = 'cuts=(?P<nodes>\\d+)' }}\n"),
            "report.counters.cuts",
        ),
        (
            "m2",
            good.replace(
                "bench = { command = \"bench\",",
                "bench = { command = \"bench\", argv = [\"bench\"],",
            ),
            "bench",
        ),
        ("m2", "name = \"m2\"\nprotocol = [\n".to_string(), ""),
    ];
    for (name, body, field) in cases {
        let (status, v) = put(&s.coord.base, name, &s.admin, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {v}");
        let got = v["error"]["field"].as_str().unwrap_or_default();
        assert!(got.starts_with(field), "want {field}: {v}");
    }
    // Non-admins are refused before anything is read; nothing was registered.
    for token in [&s.reader, &s.worker] {
        let (status, _) = put(&s.coord.base, "m2", token, good.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    assert!(s.engines().await.iter().all(|e| e["name"] != "m2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_files_are_skipped_and_stored_engines_survive_a_restart() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let bundled = repo().join("configs/engines");
    for file in ["stockfish.toml", "fairymax.toml"] {
        std::fs::copy(bundled.join(file), dir.path().join(file)).unwrap();
    }
    write(
        dir.path(),
        "broken.toml",
        "name = \"broken\"\nprotocol = [\n",
    );
    write(
        dir.path(),
        "bad_knob.toml",
        "name = \"bad\"\nprotocol = \"uci\"\nbinary = \"/x\"\n[[knobs]]\nname = \"H\"\nmin = 1\nmax = 2\ndefault = 1\n",
    );
    std::fs::copy(
        repo().join("configs/sweeps/demo.toml"),
        dir.path().join("stray_sweep.toml"),
    )
    .unwrap();

    let names = |engines: &[Value]| -> Vec<String> {
        engines
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    let s = server(&db, dir.path()).await;
    let engines = s.engines().await;
    assert_eq!(names(&engines), ["fairymax", "stockfish"]);
    assert_eq!(
        engines[1]["origin"],
        json!({"from": "file", "file": "stockfish.toml"})
    );

    // Replace the file's stockfish over the API, and add a new engine.
    let stockfish = std::fs::read_to_string(dir.path().join("stockfish.toml"))
        .unwrap()
        .replace("max = 8", "max = 4");
    let (status, v) = put(&s.coord.base, "stockfish", &s.admin, stockfish).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let (status, v) = put(
        &s.coord.base,
        "minnow_db",
        &s.admin,
        minnow_as("minnow_db", 16),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    drop(s);

    // After a restart both come from the database; the file's stockfish is shadowed.
    let s = server(&db, dir.path()).await;
    let engines = s.engines().await;
    assert_eq!(names(&engines), ["fairymax", "minnow_db", "stockfish"]);
    assert_eq!(engines[2]["origin"]["from"], "database", "{:?}", engines[2]);
    let by = engines[2]["origin"]["updated_by"].as_str().unwrap();
    assert!(by.starts_with("admin-"), "{:?}", engines[2]);
    let multipv = engines[2]["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "MultiPV")
        .unwrap()
        .clone();
    assert_eq!(multipv["max"], 4);
    let sweep = json!({
        "name": "stored minnow",
        "engine": "minnow_db",
        "knob": "NULLMOVE_R_BASE",
        "values": [2],
        "suites": ["bk"],
        "depth": 1,
    });
    let v = s
        .call(
            reqwest::Method::POST,
            "/api/v1/sweeps",
            &s.admin,
            Some(sweep),
        )
        .await;
    assert!(v["id"].as_i64().is_some(), "{v}");
}
