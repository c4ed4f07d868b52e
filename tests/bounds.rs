//! Bounded input, against a real Postgres-backed coordinator over real HTTP: free text over
//! its limit or with control characters is a 4xx naming the field, an identical sweep still
//! running is returned instead of copied, and a flood of reads leaves the worker protocol
//! its database connections.

mod common;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::Connection;
use sweep_coordinator::service::READ_WAIT;
use sweep_domain::bounds::{MAX_BUILD_OUTPUT, MAX_DESCRIPTION};

use common::protocol::{lease, post_json, register};
use common::sweeps::{small_sweep_json, SMALL_SWEEP as GOOD};
use common::{cli, coordinator_config, InProcess, TestDb};

/// A coordinator on a fresh database.
async fn server() -> InProcess<TestDb> {
    let db = TestDb::new().await;
    let config = coordinator_config(&db.url);
    InProcess::start_with_tokens(config, db).await
}

/// Asserts a 422 naming `field` whose message contains `words`.
fn assert_refused(answer: &(StatusCode, Value), field: &str, words: &str) {
    let (status, v) = answer;
    assert_eq!(*status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], field, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains(words), "{v}");
    assert!(message.len() < 300, "the text is not echoed back: {v}");
}

#[tokio::test]
async fn free_text_is_bounded_at_the_edge() {
    let s = server().await;
    let sweeps = format!("{}/api/v1/sweeps", s.base);
    let mut config = small_sweep_json();
    config["description"] = json!("d".repeat(3_900_000));
    assert_refused(
        &post_json(&sweeps, &config).await,
        "description",
        &format!("at most {MAX_DESCRIPTION} bytes"),
    );
    config["description"] = json!("fine\nwith\ttabs");
    config["name"] = json!("nul\u{0}byte");
    assert_refused(&post_json(&sweeps, &config).await, "name", "U+0000");
    config["name"] = json!("ok");
    config["suites"] = json!(["bk\u{1b}[31m"]);
    assert_refused(&post_json(&sweeps, &config).await, "suites[0]", "U+001B");
    config["suites"] = json!(["bk"]);
    config["engine"] = json!("e".repeat(100_000));
    assert_refused(&post_json(&sweeps, &config).await, "engine", "at most");
    config["engine"] = json!("minnow");

    let workers = format!("{}/api/v1/workers", s.base);
    let worker = |name: &str, host: &str, engines: Value| json!({"name": name, "host": host, "cores": 1, "engines": engines});
    assert_refused(
        &post_json(&workers, &worker("w\u{0}", "h", json!([]))).await,
        "name",
        "U+0000",
    );
    assert_refused(
        &post_json(&workers, &worker(&"w".repeat(5000), "h", json!([]))).await,
        "name",
        "at most 200 bytes",
    );
    assert_refused(
        &post_json(&workers, &worker("w", "h\r\n", json!([]))).await,
        "host",
        "control character",
    );
    assert_refused(
        &post_json(&workers, &worker("w", "h", json!(["fish\u{7}"]))).await,
        "engines[0]",
        "U+0007",
    );
    let positions = common::get(&format!(
        "{}/api/v1/sweeps/1/positions?build={}",
        s.base,
        "b".repeat(1000)
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(positions.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // A valid sweep, then a build failure: NUL in the output is refused (and the job stays
    // leased), a long output is kept as its tail.
    let (status, v) = post_json(&sweeps, &config).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["id"].as_i64().unwrap();
    let w = register(&s.base, "w").await;
    let job = lease(&s.base, w).await.remove(0);
    let failed = format!("{}/api/v1/jobs/{}/build-failed", s.base, job["job_id"]);
    let failure =
        |output: String| json!({"worker_id": w, "attempt": job["attempt"], "output": output});
    assert_refused(
        &post_json(&failed, &failure("cc: error\u{0}".into())).await,
        "output",
        "U+0000",
    );
    let long = format!(
        "{}main.c:1: error: the real one\n",
        "noise\n".repeat(200_000)
    );
    let (status, v) = post_json(&failed, &failure(long)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let detail = common::get_json(&format!("{sweeps}/{id}")).await;
    let kept = detail["builds"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|b| b["build_error"].as_str())
        .expect("a build error");
    // The build error is a line saying where it failed, then the output as kept.
    let (_, output) = kept
        .split_once("last output:\n")
        .expect("the output follows");
    assert!(output.len() <= MAX_BUILD_OUTPUT, "{}", output.len());
    assert!(
        output.starts_with("[... ") && output.contains("bytes cut"),
        "says it was cut"
    );
    assert!(output.ends_with("error: the real one\n"), "keeps the tail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identical_running_sweep_is_returned_not_copied() {
    let s = server().await;
    let sweeps = format!("{}/api/v1/sweeps", s.base);
    let (status, first) = post_json(&sweeps, &small_sweep_json()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert_eq!(first["existing"], false);
    let (status, again) = post_json(&sweeps, &small_sweep_json()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["id"], &again["existing"]),
        (&first["id"], &json!(true))
    );
    assert_eq!(again["jobs"], first["jobs"]);

    // The CLI prints the id alone on stdout, and says on stderr that it is the running one.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.toml");
    std::fs::write(&file, GOOD).unwrap();
    let (code, stdout, stderr) = cli(&["submit", file.to_str().unwrap(), "--coordinator", &s.base]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), first["id"].to_string());
    assert!(stderr.contains("still running"), "{stderr}");

    // Concurrent identical submissions of another spec make one sweep between them.
    let mut other = small_sweep_json();
    other["name"] = json!("raced");
    let tasks: Vec<_> = (0..6)
        .map(|_| {
            let (url, body) = (sweeps.clone(), other.clone());
            tokio::spawn(async move { post_json(&url, &body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    let ids: std::collections::HashSet<String> =
        answers.iter().map(|(_, v)| v["id"].to_string()).collect();
    assert_eq!(ids.len(), 1, "{answers:?}");
    let created = answers
        .iter()
        .filter(|(st, _)| *st == StatusCode::CREATED)
        .count();
    assert_eq!(created, 1, "{answers:?}");

    // Cancelled, it no longer counts: the same submission makes a new sweep.
    let cancel = common::post(&format!("{sweeps}/{}/cancel", first["id"]))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), StatusCode::OK);
    let (status, fresh) = post_json(&sweeps, &small_sweep_json()).await;
    assert_eq!(status, StatusCode::CREATED, "{fresh}");
    assert_ne!(fresh["id"], first["id"]);
}

/// 200 concurrent table reads, each held inside the database (a lock on a table reads need
/// and the worker protocol does not), cannot take the connections a heartbeat needs: reads
/// use at most their share of the pool, the rest are answered 503 with `Retry-After`, and
/// the heartbeat is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_cannot_starve_the_worker_protocol() {
    let s = server().await;
    let sweeps = format!("{}/api/v1/sweeps", s.base);
    let (status, v) = post_json(&sweeps, &small_sweep_json()).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["id"].as_i64().unwrap();
    let w = register(&s.base, "w").await;
    let job = lease(&s.base, w).await.remove(0);

    let mut locker = sqlx::PgConnection::connect(&s.db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query("LOCK TABLE sweep_suites IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let reads: Vec<_> = (0..200)
        .map(|_| {
            let url = format!("{sweeps}/{id}/table");
            tokio::spawn(async move {
                let resp = common::get(&url).send().await.unwrap();
                let retry = resp.headers().get("retry-after").is_some();
                (resp.status(), retry)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Without the read bound the heartbeat would wait for a connection until the pool's
    // acquire timeout and be answered 503: the status says it, no timing threshold needed.
    let beat = post_json(
        &format!("{}/api/v1/workers/{w}/heartbeat", s.base),
        &json!({"leases": [{"job_id": job["job_id"], "attempt": job["attempt"]}]}),
    )
    .await;
    assert_eq!(beat.0, StatusCode::OK, "{}", beat.1);
    assert_eq!(beat.1["jobs"][0]["status"], "held", "{}", beat.1);

    // The in-flight bound (1,024) lets every read in; those without a read turn wait for one
    // up to READ_WAIT and are then answered 503. The lock is held past that, so they are.
    tokio::time::sleep(READ_WAIT).await;
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    let mut ok = 0;
    let mut shed = 0;
    for r in reads {
        match r.await.unwrap() {
            (StatusCode::OK, _) => ok += 1,
            (StatusCode::SERVICE_UNAVAILABLE, true) => shed += 1,
            other => panic!("a read answered {other:?}"),
        }
    }
    assert!(ok >= 1 && shed >= 1, "{ok} answered, {shed} shed");
    assert_eq!(ok + shed, 200);
}
