//! Monitoring: `GET /metrics` after real sweeps (a coordinator and a worker process on a fresh
//! Postgres database; one clean sweep, one with failing positions and builds), the Grafana
//! dashboard against a live coordinator's metrics (SQLite), and `--log-format json` on the
//! coordinator, the worker and `sweep run`.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use common::exposition::{parse_exposition, scrape, value};
use common::flaky::{flaky_config, start_fixture_coordinator, start_fixture_worker};
use common::{
    cli, create_token, get, register_tokens, repo, start_coordinator_with, submit_and_wait,
    sweep_bin, test_tokens, tokens_for, Proc, TestDb,
};

/// Lines a child process writes on stderr, collected as they come.
type Lines = Arc<Mutex<Vec<String>>>;

fn collect_stderr(child: &mut std::process::Child) -> Lines {
    let lines: Lines = Arc::default();
    let sink = lines.clone();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

/// `sweep coordinator --log-format json` on port 0, with its stderr collected.
fn json_coordinator(db_url: &str) -> (Proc, String, Lines) {
    let tokens = test_tokens(db_url);
    let mut child = Command::new(sweep_bin())
        .current_dir(repo())
        .args([
            "coordinator",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ])
        // Heartbeats every second, so even a short sweep has some.
        .args(["--lease-secs", "6"])
        .env("DATABASE_URL", db_url)
        // Debug for the coordinator: leases are logged per job at that level.
        .env("RUST_LOG", "info,sqlx=warn,sweep_coordinator=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the coordinator");
    let lines = collect_stderr(&mut child);
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = stdout.next().expect("announced").expect("readable");
    std::thread::spawn(move || for _ in stdout {});
    let announced: Value = serde_json::from_str(&first).unwrap();
    let base = announced["listening"].as_str().unwrap().to_string();
    register_tokens(&base, tokens);
    (Proc(child), base, lines)
}

/// `sweep worker --log-format json` with one core, with its stderr collected.
fn json_worker(base: &str, cache: &Path) -> (Proc, Lines) {
    let mut child = Command::new(sweep_bin())
        .current_dir(repo())
        .env("SWEEP_TOKEN", tokens_for(base).unwrap().worker)
        .args([
            "worker",
            "--coordinator",
            base,
            "--cores",
            "1",
            "--name",
            "w1",
        ])
        .arg("--cache-dir")
        .arg(cache)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting a worker");
    let lines = collect_stderr(&mut child);
    (Proc(child), lines)
}

/// Every line is a JSON object with a level and a message; some line was logged inside a job
/// span carrying `job_id`, and with `worker_id` in its spans. Returns how many lines that is.
fn assert_json_lines_about_jobs(who: &str, lines: &[String]) -> usize {
    assert!(!lines.is_empty(), "{who} logged nothing");
    let mut about_jobs = 0;
    for line in lines {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{who}: `{line}`: {e}"));
        assert!(v["level"].is_string(), "{who}: no level in `{line}`");
        assert!(v["fields"].is_object(), "{who}: no fields in `{line}`");
        let spans = v["spans"].as_array().cloned().unwrap_or_default();
        let has = |field: &str| {
            spans.iter().any(|s| s.get(field).is_some()) || v["fields"].get(field).is_some()
        };
        if v["span"]["name"] == "job" && has("job_id") && has("worker_id") {
            about_jobs += 1;
        }
    }
    assert!(
        about_jobs > 0,
        "{who}: no line carries job_id and worker_id"
    );
    about_jobs
}

/// A sweep small enough for a test: two builds on one quick suite at a low depth.
fn tiny_config(dir: &Path) -> String {
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        r#"name = "metrics: tiny"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [300]
suites = ["ecm_confident_quick"]
depth = 3
chunk_size = 15

[baseline]
name = "head_reference"
"#,
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

/// After a sweep, `/metrics` (a reader token; anonymous 401, a worker token 403) counts
/// exactly what the database holds: results stored, jobs leased (every job once: nothing
/// failed), nothing queued or held, one live worker; lease, upload and heartbeat calls match the request histogram of
/// their route templates (no raw paths with ids). Both processes logged JSON lines, and
/// lines about jobs carry `job_id` and `worker_id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_sweep_shows_in_metrics_and_json_logs() {
    let db = TestDb::new().await;
    let (_coordinator, base, coordinator_log) = json_coordinator(&db.url);
    let dir = tempfile::tempdir().unwrap();
    let (_worker, worker_log) = json_worker(&base, &dir.path().join("cache"));
    let config = tiny_config(dir.path());
    submit_and_wait(&base, &config, Duration::from_secs(600), "done").await;

    let (status, _, body) = scrape(&base, None).await;
    assert_eq!(status, 401, "anonymous: {body}");
    let worker_token = tokens_for(&base).unwrap().worker;
    let (status, _, body) = scrape(&base, Some(&worker_token)).await;
    assert_eq!(status, 403, "worker token: {body}");
    let reader = create_token(&db.url, "reader", "prometheus");
    let (status, ctype, body) = scrape(&base, Some(&reader)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ctype.as_deref(), Some("text/plain; version=0.0.4"));
    let samples = parse_exposition(&body);

    let mut conn = db.connect().await;
    let (results, jobs): (i64, i64) = sqlx::query_as(
        // Cross-check measurements are stored results of the worker protocol too. Nothing
        // failed or expired, so every job was handed out exactly once.
        "SELECT (SELECT count(*) FROM results) + (SELECT count(*) FROM cross_checks),
                (SELECT sum(job_count)::bigint FROM sweeps)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(results > 0 && jobs > 0);
    assert_eq!(
        value(&samples, "sweep_results_accepted_total", &[]),
        results as f64
    );
    assert_eq!(value(&samples, "sweep_jobs_leased_total", &[]), jobs as f64);
    assert_eq!(value(&samples, "sweep_position_errors_total", &[]), 0.0);
    assert_eq!(value(&samples, "sweep_build_failures_total", &[]), 0.0);
    // Done: nothing waits, nothing is held, and no lease row is left.
    let leases: i64 = sqlx::query_scalar("SELECT count(*) FROM leases")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(leases, 0);
    for state in ["queued", "leased"] {
        assert_eq!(
            value(&samples, "sweep_jobs", &[("state", state)]),
            0.0,
            "jobs {state}"
        );
    }
    assert_eq!(value(&samples, "sweep_workers_alive", &[]), 1.0);
    assert_eq!(
        value(
            &samples,
            "sweep_db_pool_max_connections",
            &[("pool", "main")]
        ),
        16.0
    );
    let idle = value(
        &samples,
        "sweep_db_pool_connections",
        &[("pool", "main"), ("state", "idle")],
    );
    assert!(idle >= 1.0, "the pool has idle connections after the sweep");

    // Each protocol counter equals the successful requests timed under its route template.
    for (counter, route) in [
        ("sweep_lease_calls_total", "/api/v1/workers/{id}/lease"),
        ("sweep_result_uploads_total", "/api/v1/workers/{id}/results"),
        ("sweep_heartbeats_total", "/api/v1/workers/{id}/heartbeat"),
    ] {
        let calls = value(&samples, counter, &[]);
        let timed = value(
            &samples,
            "sweep_http_request_duration_seconds_count",
            &[("route", route), ("method", "POST"), ("status", "2xx")],
        );
        assert_eq!(calls, timed, "{counter} against {route}");
        assert!(calls > 0.0, "{counter}");
    }
    let routes: BTreeSet<&str> = samples
        .iter()
        .filter_map(|s| s.labels.get("route").map(String::as_str))
        .collect();
    for route in &routes {
        // Templates name their ids (`{id}`); a raw path would have ids in its segments.
        let raw = route.split('/').any(|seg| {
            !seg.starts_with('{') && !seg.is_empty() && seg.chars().all(|c| c.is_ascii_hexdigit())
        });
        assert!(!raw, "a raw path became a label: {route}");
    }
    assert!(routes.contains("/api/v1/sweeps/{id}"), "{routes:?}");

    assert_json_lines_about_jobs("worker", &worker_log.lock().unwrap());
    assert_json_lines_about_jobs("coordinator", &coordinator_log.lock().unwrap());
}

/// Every metric the Grafana dashboard queries is exported by a live coordinator (on SQLite,
/// with `--public-read`, scraped anonymously), and the dashboard takes its datasource as the
/// `DS_PROMETHEUS` input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_queries_only_exported_metrics() {
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dashboards/grafana-sweep.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    assert_eq!(dashboard["__inputs"][0]["name"], "DS_PROMETHEUS");
    let mut used = BTreeSet::new();
    let panels = dashboard["panels"].as_array().expect("panels");
    for panel in panels {
        assert_eq!(panel["datasource"]["uid"], "${DS_PROMETHEUS}", "{panel}");
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            assert_eq!(target["datasource"]["uid"], "${DS_PROMETHEUS}");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
                if word.starts_with("sweep_") {
                    used.insert(word.to_string());
                }
            }
        }
    }
    assert!(used.len() >= 12, "the dashboard queries {used:?}");

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let db = db.to_str().unwrap();
    let (_coordinator, base) = start_coordinator_with(db, &["--public-read"]);
    // A request first: latency series exist once a route was timed.
    let resp = get(&format!("{base}/api/v1/sweeps")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let (status, ctype, body) = scrape(&base, None).await;
    assert_eq!(status, 200, "anonymous with --public-read: {body}");
    assert_eq!(ctype.as_deref(), Some("text/plain; version=0.0.4"));
    let samples = parse_exposition(&body);
    let exported: BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    for name in &used {
        assert!(exported.contains(name.as_str()), "{name} is not exported");
    }
    // SQLite's gauges: no jobs in any state, both pools, no live worker.
    for state in ["queued", "leased"] {
        assert_eq!(value(&samples, "sweep_jobs", &[("state", state)]), 0.0);
    }
    for pool in ["writer", "reader"] {
        assert!(value(&samples, "sweep_db_pool_max_connections", &[("pool", pool)]) >= 1.0);
    }
    assert_eq!(value(&samples, "sweep_workers_alive", &[]), 0.0);
}

/// `sweep run --log-format json`: the table on stdout, and every stderr line (progress, the
/// closing state) a JSON object; the closing line names the sweep.
#[test]
fn a_local_run_with_json_logs_writes_only_json_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let config = tiny_config(dir.path());
    let db = dir.path().join("sweep.db");
    let cache = dir.path().join("cache");
    let (code, stdout, stderr) = cli(&[
        "run",
        &config,
        "--database",
        db.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--cores",
        "1",
        "--log-format",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("| head_reference (default) |"), "{stdout}");
    let lines: Vec<Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{l}`: {e}")))
        .collect();
    let last = lines.last().expect("some log lines");
    assert_eq!(last["fields"]["message"], "sweep 1: done", "{last}");
    assert_eq!(last["fields"]["sweep_id"], 1);
}

/// Failures are counted where they are recorded: a position whose fake engine crashes is tried
/// three times (three failed tries, one final error result), and a variant that never builds is
/// one build failure on the only worker; `sweep_jobs` shows its jobs failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_errors_and_build_failures_are_counted_as_recorded() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let _worker = start_fixture_worker(&base, &dir.path().join("cache"), "w1");
    let file = flaky_config(dir.path(), "[1, 9]", 5, "");
    submit_and_wait(
        &base,
        file.to_str().unwrap(),
        Duration::from_secs(300),
        "done_with_errors",
    )
    .await;

    let (status, _, body) = scrape(&base, Some(&tokens_for(&base).unwrap().admin)).await;
    assert_eq!(status, 200, "{body}");
    let samples = parse_exposition(&body);
    let mut conn = db.connect().await;
    let (tries, build_failures, failed_builds): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM position_failures), (SELECT count(*) FROM build_failures),
                (SELECT count(*) FROM builds WHERE build_error IS NOT NULL)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(tries, 3, "the poison position was tried three times");
    assert_eq!(
        value(&samples, "sweep_position_errors_total", &[]),
        tries as f64
    );
    assert_eq!(build_failures, 1);
    assert_eq!(
        value(&samples, "sweep_build_failures_total", &[]),
        build_failures as f64
    );
    assert_eq!(failed_builds, 1);
    // The failed build's jobs are closed: none waits, none is held.
    for state in ["queued", "leased"] {
        assert_eq!(value(&samples, "sweep_jobs", &[("state", state)]), 0.0);
    }
}
