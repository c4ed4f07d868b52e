//! `sweep run` as a user runs it: a subprocess on a temp SQLite file, interrupted with SIGINT
//! midway and resumed by running the same command again.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

use common::direct::direct_totals;
use common::{assert_table_matches, cli, engines_alive, repo, sweep_bin, DEMO};

async fn results_in(db: &Path) -> (i64, i64) {
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    let counts = sqlx::query_as(
        "SELECT count(*), count(DISTINCT build_id || ':' || suite_id || ':' || position_index) FROM results",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    counts
}

/// (workers registered, workers that said they stopped) in the SQLite file `db`.
async fn workers_in(db: &Path) -> (i64, i64) {
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    let counts = sqlx::query_as("SELECT count(*), count(left_at) FROM workers")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_run_resumes_without_redoing_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let cache = dir.path().join("cache");
    let args = |extra: &[&str]| {
        let mut v: Vec<String> = vec![
            "run".into(),
            DEMO.into(),
            "--cores".into(),
            "2".into(),
            "--database".into(),
        ];
        v.push(db.to_str().unwrap().into());
        v.push("--cache-dir".into());
        v.push(cache.to_str().unwrap().into());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };

    let mut child = Command::new(sweep_bin())
        .current_dir(repo())
        .args(args(&["--format", "json"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt once some, but far from all, results are stored.
    let start = Instant::now();
    loop {
        if db.exists() && results_in(&db).await.0 >= 60 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "no progress");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(15),
            "sweep run did not stop within 15 s of SIGINT"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(130), "interrupted runs exit 130");
    assert_eq!(engines_alive(&cache), 0, "engines were left running");
    let (kept, distinct) = results_in(&db).await;
    assert_eq!(kept, distinct);
    assert!(
        (60..540).contains(&kept),
        "interrupted midway: {kept} results"
    );
    // The interrupted jobs were given back on the way out, not left leased for the lease's
    // 30 s, so a resume starts on them at once.
    let (code, status, err) = cli(&["status", "1", "--json", "--database", db.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["active_workers"], serde_json::json!([]), "{status}");
    // And its worker said it stopped, so no cross-check waits a lease for it.
    assert_eq!(workers_in(&db).await, (1, 1));

    // The same command again continues the same sweep.
    let (code, stdout, stderr) = cli(&args(&["--format", "json"])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_eq!(code, 0, "{stderr}");
    let table: Value = serde_json::from_str(&stdout).expect("JSON table");
    assert_eq!(
        results_in(&db).await,
        (540, 540),
        "one result per position, none redone"
    );
    assert_table_matches(&table, &direct_totals(DEMO).await);
    // The resumed run's worker, which held nothing at the end, said so too.
    assert_eq!(workers_in(&db).await, (2, 2));

    // Older sweeps stay readable without a coordinator.
    let (code, list, _) = cli(&["list", "--database", db.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        list.lines().count(),
        1,
        "resuming did not create a second sweep: {list}"
    );
    assert!(list.contains("done"), "{list}");
    let (code, md, _) = cli(&[
        "table",
        "1",
        "--database",
        db.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&md).unwrap(), table);
    let (code, _, stderr) = cli(&["table", "7", "--database", db.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(stderr.contains("not found"), "{stderr}");
}

/// Files named like the demo engine's binary under `dir`: what a build leaves in a cache.
fn binaries_under(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                binaries_under(&path)
            } else {
                usize::from(e.file_name() == "minnow")
            }
        })
        .sum()
}

/// The Markdown table without its heading, which names the sweep.
fn body(md: &str) -> Vec<&str> {
    md.lines().filter(|l| !l.starts_with("## sweep")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_of_a_finished_config_reuses_every_result_and_starts_no_engine() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let run = |cache: &str, extra: &[&str]| {
        let cache = dir.path().join(cache);
        let mut args = vec![
            "run".to_string(),
            DEMO.into(),
            "--cores".into(),
            "2".into(),
            "--database".into(),
            db.to_str().unwrap().into(),
            "--cache-dir".into(),
            cache.to_str().unwrap().into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
        (out, binaries_under(&cache))
    };
    let ((code, first, err), built) = run("cache-1", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(built > 0, "the first run builds the demo's variants");
    assert!(!err.contains("results reused"), "{err}");

    // Again, with an empty cache: nothing is built, so no engine can have started.
    let start = Instant::now();
    let ((code, second, err), built) = run("cache-2", &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(built, 0, "nothing was built for the second run: {err}");
    assert!(
        err.contains("540 of 540 results reused from earlier sweeps"),
        "{err}"
    );
    assert_eq!(body(&second), body(&first), "the same table");
    assert!(second.contains("## sweep 2:"), "{second}");
    eprintln!("second run took {:?}", start.elapsed());
    let (code, json, _) = cli(&[
        "table",
        "2",
        "--database",
        db.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let table: Value = serde_json::from_str(&json).unwrap();
    for row in table["tables"][0]["rows"].as_array().unwrap() {
        for cell in row["suites"].as_object().unwrap().values() {
            assert_eq!(cell["reused"], cell["done"], "{row}");
        }
    }

    // --force measures everything once more, and a deterministic engine repeats itself.
    let ((code, third, err), built) = run("cache-3", &["--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(built > 0);
    assert!(!err.contains("results reused"), "{err}");
    assert_eq!(
        body(&third),
        body(&first),
        "the same numbers, measured again"
    );
    assert_eq!(results_in(&db).await, (1620, 1620));
}

#[test]
fn bad_configs_fail_with_a_message_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(repo().join(DEMO))
            .unwrap()
            .replace("depth = 6", "depth = 0"),
    )
    .unwrap();
    let db = dir.path().join("x.db");
    let (code, stdout, stderr) = cli(&[
        "run",
        bad.to_str().unwrap(),
        "--database",
        db.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("depth") && stderr.contains("out of range"),
        "{stderr}"
    );
    let (code, _, stderr) = cli(&[
        "run",
        "no/such/file.toml",
        "--database",
        db.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("no/such/file.toml"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_workers_join_a_served_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    // Remote workers need a worker token from the run's database (made before the run, which
    // is how a user would do it: `sweep token create --database-url ./sweep.db ...`).
    common::register_tokens(
        &format!("http://{listen}"),
        common::test_tokens(db.to_str().unwrap()),
    );
    let cache = dir.path().join("local-cache");
    let mut run = common::spawn_served_demo_run(&listen, &db, &cache, &[]);
    // The served API answers while the run is on, and a remote worker can join it.
    let base = format!("http://{listen}");
    let start = Instant::now();
    common::wait_until_serving(
        &reqwest::Client::new(),
        &base,
        "the run never served its API",
    )
    .await;
    let _remote = common::start_worker(&base, &dir.path().join("remote-cache"), "remote", 1);
    let status = common::wait_exit(&mut run, start, Duration::from_secs(300), "the run").await;
    assert!(status.success());
    let table = common::json_stdout(&mut run);
    assert_table_matches(&table, &direct_totals(DEMO).await);
    assert_eq!(
        common::workers_with_results(&db).await,
        2,
        "the local and the remote worker both ran positions"
    );
}

/// Relative `--cache-dir`, `--database`, `--engines-dir` and `--suites-dir` name places in the
/// directory the run starts in, although its builds run `make` from inside the cache.
#[test]
fn relative_paths_are_from_the_directory_the_run_starts_in() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.toml"), common::sweeps::SMALL_SWEEP).unwrap();
    for (link, target) in [("engines", "configs/engines"), ("suites", "suites")] {
        std::os::unix::fs::symlink(repo().join(target), dir.path().join(link)).unwrap();
    }
    let out = Command::new(sweep_bin())
        .current_dir(dir.path())
        .args(["run", "small.toml", "--cores", "2", "--format", "json"])
        .args(["--cache-dir", "./cache", "--database", "./sweep.db"])
        .args(["--engines-dir", "engines", "--suites-dir", "suites"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(dir.path().join("sweep.db").is_file(), "{stderr}");
    let cache = dir.path().join("cache");
    assert!(binaries_under(&cache) > 0, "builds cached in ./cache");
    assert_eq!(engines_alive(&cache), 0);
    let table: Value = serde_json::from_slice(&out.stdout).expect("JSON table");
    let rows = table["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{table}");
    for row in rows {
        assert_eq!(row["state"], "ok", "{row}");
        let cell = &row["suites"]["bk"];
        assert_eq!(cell["errors"], 0, "{row}");
        assert_eq!(cell["done"], cell["positions"], "{row}");
    }
}
