//! The `sweep` binary's rough edges, as a user meets them: batch-friendly workers
//! (`--exit-when-idle`, `--max-jobs`, leases given back on Ctrl-C) against a real coordinator
//! on a fresh Postgres database, shell completions, and the messages of commands given bad
//! input (config errors, missing files, unreachable coordinators, read-only databases).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

use common::flaky::{flaky_config, start_fixture_coordinator};
use common::{cli, get_json, repo, start_worker_with, sweep_bin, tokens_for, TestDb};

/// Submits `config` to the coordinator at `base`; returns the sweep id.
fn submit(base: &str, config: &Path) -> i64 {
    common::submit(base, config.to_str().unwrap())
}

/// Waits for a child to exit within `limit`; returns its exit code.
async fn wait_exit(proc: &mut common::Proc, limit: Duration, what: &str) -> i32 {
    let status = common::wait_exit(proc, Instant::now(), limit, what).await;
    status.code().unwrap_or(-1)
}

/// Work jobs of `sweep` ever handed out (those its build cursors moved past) and jobs held
/// now (by the lease rows), straight from Postgres.
async fn leased_jobs(db_url: &str, sweep: i64) -> (i64, i64) {
    let mut conn = sqlx::PgConnection::connect(db_url).await.unwrap();
    let counts = sqlx::query_as(
        "SELECT (SELECT count(*) FROM jobs WHERE sweep_id = $1 AND kind = 'work')
                - COALESCE((SELECT sum(remaining) FROM build_queue WHERE sweep_id = $1), 0)
                  ::bigint,
                (SELECT count(*) FROM leases l
                 CROSS JOIN LATERAL unnest(l.jobs) WITH ORDINALITY AS u(job, n)
                 JOIN jobs j ON j.id = u.job
                 WHERE j.sweep_id = $1 AND (l.closed >> (u.n - 1)::int) & 1 = 0)",
    )
    .bind(sweep)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    counts
}

const WORKER_ARGS: [&str; 2] = ["--allow-build-programs", "make,sh"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_max_jobs_runs_that_many_and_exits_zero() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "30"]);
    let dir = tempfile::tempdir().unwrap();
    // 3 builds x 2 chunks of 5 positions: 6 jobs.
    let id = submit(&base, &flaky_config(dir.path(), "[6, 7]", 5, ""));
    let mut args = WORKER_ARGS.to_vec();
    args.extend(["--max-jobs", "2"]);
    let mut worker = start_worker_with(&base, &dir.path().join("cache"), "w1", 1, &args);
    let code = wait_exit(&mut worker, Duration::from_secs(60), "worker --max-jobs 2").await;
    assert_eq!(code, 0, "--max-jobs ends with status 0");
    let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(d["positions_done"], 10, "two jobs of 5 positions: {d}");
    assert_eq!(d["state"], "running", "{d}");
    assert_eq!(
        leased_jobs(&db.url, id).await,
        (2, 0),
        "exactly two jobs were ever leased, and none is held now"
    );

    // `sweep positions` over HTTP reads every page of the comparison.
    let id_arg = id.to_string();
    let (code, json, err) = cli(&[
        "positions",
        &id_arg,
        "--build",
        "FAULT=6",
        "--format",
        "json",
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["build"], "FAULT=6");
    assert_eq!(
        report["rows"].as_array().unwrap().len() as u64,
        report["total"].as_u64().unwrap(),
        "{report}"
    );
    let (code, md, err) = cli(&[
        "positions",
        &id_arg,
        "--build",
        "FAULT=6",
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        md.starts_with(&format!(
            "## sweep {id} `flaky` (flaky): FAULT=6 vs head_reference"
        )),
        "{md}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_exit_when_idle_finishes_the_queue_then_exits_zero() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "30"]);
    let dir = tempfile::tempdir().unwrap();
    let id = submit(&base, &flaky_config(dir.path(), "[6]", 5, ""));
    let mut args = WORKER_ARGS.to_vec();
    args.extend(["--exit-when-idle", "--idle-secs", "2"]);
    let mut worker = start_worker_with(&base, &dir.path().join("cache"), "w1", 1, &args);
    let code = wait_exit(
        &mut worker,
        Duration::from_secs(90),
        "worker --exit-when-idle",
    )
    .await;
    assert_eq!(code, 0, "--exit-when-idle ends with status 0");
    let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(d["state"], "done", "the queue was finished first: {d}");

    // With nothing queued at all it exits after about the grace.
    let started = Instant::now();
    let mut idle = start_worker_with(&base, &dir.path().join("cache"), "w2", 1, &args);
    assert_eq!(
        wait_exit(&mut idle, Duration::from_secs(30), "idle worker").await,
        0
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it waited out --idle-secs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_worker_gives_its_jobs_back_at_once() {
    let db = TestDb::new().await;
    // A long lease: without the release the job would stay held for a minute.
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "60"]);
    let dir = tempfile::tempdir().unwrap();
    // Every build hangs on the poison position until the 2 s position timeout, so a job is
    // held for seconds.
    let id = submit(
        &base,
        &flaky_config(
            dir.path(),
            "[2]",
            10,
            "[baseline]\ndefines = { FAULT = 2 }\n",
        ),
    );
    let mut worker = start_worker_with(&base, &dir.path().join("cache"), "w1", 1, &WORKER_ARGS);
    let start = Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        if d["active_workers"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no job leased: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    worker.signal(libc::SIGINT);
    assert_eq!(
        wait_exit(&mut worker, Duration::from_secs(20), "interrupted worker").await,
        0
    );
    let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(
        d["active_workers"],
        serde_json::json!([]),
        "the worker released its lease on the way out: {d}"
    );
    let (ever, held) = leased_jobs(&db.url, id).await;
    assert!(ever >= 1, "a job was leased");
    assert_eq!(held, 0, "no job is left leased");
}

#[test]
fn completions_are_generated_for_each_shell() {
    let (code, bash, err) = cli(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    for word in [
        "worker",
        "submit",
        "positions",
        "--exit-when-idle",
        "--max-jobs",
    ] {
        assert!(bash.contains(word), "bash completion lacks {word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = cli(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains("coordinator"), "{shell}: {out}");
    }
    let (code, _, err) = cli(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error");
    assert!(err.contains("bash"), "the error lists the shells: {err}");
}

#[test]
fn help_shows_each_default_once_and_names_values() {
    for cmd in ["run", "worker", "coordinator"] {
        let (code, help, _) = cli(&[cmd, "--help"]);
        assert_eq!(code, 0);
        for placeholder in [
            "<RESUME>",
            "<LISTEN>",
            "<SERVE>",
            "<CORES>",
            "<DATABASE_URL>",
        ] {
            assert!(
                !help.contains(placeholder),
                "{cmd} --help: {placeholder}\n{help}"
            );
        }
        if cmd != "coordinator" {
            // The --cores entry: its line and any continuation lines before the next flag.
            let mut lines = help.lines().skip_while(|l| !l.contains("--cores"));
            let mut cores = lines.next().unwrap_or_default().to_string();
            cores.extend(lines.take_while(|l| !l.trim_start().starts_with('-')));
            assert_eq!(cores.matches("default").count(), 1, "{cmd}: {cores}");
            assert!(cores.contains("all cores"), "{cmd}: {cores}");
        }
    }
    let (_, help, _) = cli(&["coordinator", "--help"]);
    assert!(help.contains("--database <DB>"), "{help}");
    assert!(help.contains("SQLite"), "{help}");
    let (_, help, _) = cli(&["worker", "--help"]);
    assert!(
        help.contains("--idle-secs <SECS>") && help.contains("status 0"),
        "{help}"
    );
}

#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let mut child = Command::new(sweep_bin())
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, then hang up, as `| head -1` does.
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.success() || status.signal() == Some(libc::SIGPIPE),
        "{status:?}"
    );
}

#[test]
fn config_errors_name_the_file_line_column_and_a_likely_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let run = |config: &Path| {
        cli(&[
            "run",
            config.to_str().unwrap(),
            "--database",
            db.to_str().unwrap(),
        ])
    };
    let bad = dir.path().join("syntax.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\nengine = \"minnow\"\nvalues = [1, 2\ndepth = 3\n",
    )
    .unwrap();
    let (code, _, err) = run(&bad);
    assert_eq!(code, 1);
    // Where the parser noticed the missing `]`: the start of the next line.
    assert!(
        err.contains("syntax.toml: line 4, column 1: invalid array"),
        "{err}"
    );
    assert!(!err.contains("body"), "no HTTP words: {err}");
    let typo = dir.path().join("typo.toml");
    std::fs::write(
        &typo,
        "name = \"x\"\nengine = \"minnow\"\nknob = \"K\"\nvaluez = [1]\nsuites = [\"bk\"]\ndepth = 3\n",
    )
    .unwrap();
    let (code, _, err) = run(&typo);
    assert_eq!(code, 1);
    assert!(err.contains("typo.toml: valuez: line 4"), "{err}");
    assert!(err.contains("did you mean `values`?"), "{err}");
    assert!(
        !db.exists(),
        "no database made for a config that does not parse"
    );
}

#[test]
fn a_run_outside_the_checkout_names_what_is_missing_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(sweep_bin())
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["run", "nope.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("reading nope.toml"), "{err}");
    let config = repo().join("configs/sweeps/demo.toml");
    let (code, err) = run(&["run", config.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("configs/engines") && err.contains("--engines-dir"),
        "{err}"
    );
    let (code, err) = run(&["run", "--resume", "99"]);
    assert_eq!(code, 1);
    // The default ./sweep.db, made absolute against the directory the command started in
    // (which the command sees with its symlinks resolved).
    let db = std::fs::canonicalize(dir.path()).unwrap().join("sweep.db");
    assert!(
        err.contains(&format!(
            "no database at {} to resume sweep 99 from",
            db.display()
        )),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "no sweep.db, -shm or -wal: {left:?}");
}

#[test]
fn unreachable_or_unknown_coordinators_get_a_hint() {
    // A port nothing listens on.
    let port = common::free_port();
    let (code, _, err) = cli(&["list", "--coordinator", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(code, 1);
    assert!(err.contains("Start one with `sweep coordinator`"), "{err}");
    assert!(err.contains("--database ./sweep.db"), "{err}");
    // Without a scheme the address is taken as http://, not refused as "relative URL".
    let (code, _, err) = cli(&["list", "--coordinator", &format!("127.0.0.1:{port}")]);
    assert_eq!(code, 1);
    assert!(!err.contains("relative URL"), "{err}");
    assert!(err.contains(&format!("http://127.0.0.1:{port}")), "{err}");
}

#[test]
fn a_missing_postgres_database_is_named_once_with_its_url() {
    let url = format!("{}/sweep_no_such_database", common::pg_base());
    let (code, _, err) = cli(&["list", "--database", &url]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&sweep_coordinator::store::redact(&url)),
        "{err}"
    );
    assert_eq!(
        err.matches("sweep_no_such_database").count(),
        2,
        "the URL and the error once: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sweeps_are_named_once_with_where_they_were_looked_for() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "30"]);
    let (code, _, err) = cli(&["status", "99", "--coordinator", &base]);
    assert_eq!(code, 1);
    // "sweep 99", not "99": the coordinator's port may hold those digits too.
    assert_eq!(err.matches("sweep 99").count(), 1, "{err}");
    assert!(
        err.contains(&format!("sweep 99 not found on the coordinator at {base}")),
        "{err}"
    );
    assert!(tokens_for(&base).is_some());
}

/// Runs a small flaky sweep locally into `db` (SQLite); returns its stdout (the table).
fn local_flaky_run(dir: &Path, db: &Path) -> String {
    let config = flaky_config(dir, "[6, 7]", 5, "");
    let (code, out, err) = cli(&[
        "run",
        config.to_str().unwrap(),
        "--engines-dir",
        "tests/fixtures/engines",
        "--suites-dir",
        "tests/fixtures/suites",
        "--cores",
        "1",
        "--database",
        db.to_str().unwrap(),
        "--cache-dir",
        dir.join("cache").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_databases_are_read_as_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    local_flaky_run(dir.path(), &db);
    let db_arg = db.to_str().unwrap();
    let (code, _, err) = cli(&["run", "--resume", "99", "--database", db_arg]);
    assert_eq!(code, 1);
    // "sweep 99", not "99": the database's temporary path may hold those digits too.
    assert_eq!(err.matches("sweep 99").count(), 1, "{err}");
    assert!(err.contains("sweep 99 not found in"), "{err}");

    // SWEEP_COORDINATOR set (as the README suggests) does not stop --database.
    let out = Command::new(sweep_bin())
        .current_dir(repo())
        .env("SWEEP_COORDINATOR", "http://127.0.0.1:9")
        .args(["list", "--database", db_arg])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("flaky"));
    assert!(
        stderr.contains("SWEEP_COORDINATOR") && stderr.contains("not used"),
        "{stderr}"
    );

    // One build's positions beside the baseline's.
    let (code, md, err) = cli(&["positions", "1", "--build", "FAULT=6", "--database", db_arg]);
    assert_eq!(code, 0, "{err}");
    assert!(
        md.starts_with("## sweep 1 `flaky` (flaky): FAULT=6 vs head_reference, depth 1"),
        "{md}"
    );
    assert!(
        md.contains("### gained: 0") && md.contains("### lost: 0"),
        "{md}"
    );
    assert!(md.contains("of 10 compared"), "{md}");
    let (code, json, _) = cli(&[
        "positions",
        "1",
        "--build",
        "FAULT=6",
        "--database",
        db_arg,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["rows"].as_array().unwrap().len(), 10, "{report}");
    let (code, _, err) = cli(&["positions", "1", "--build", "NOPE", "--database", db_arg]);
    assert_eq!(code, 1);
    assert!(err.contains("no build `NOPE`"), "{err}");

    // A database that needs migrations is reported, and left as it was.
    let migrations = |conn_db: PathBuf| async move {
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", conn_db.display()))
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        (conn, n)
    };
    let (mut conn, before) = migrations(db.clone()).await;
    sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let (code, _, err) = cli(&["list", "--database", db_arg]);
    assert_eq!(code, 1);
    assert!(err.contains("needs migration"), "{err}");
    let (conn, after) = migrations(db.clone()).await;
    conn.close().await.unwrap();
    assert_eq!(after, before - 1, "reading did not migrate");

    // Not a Sweep database, and no database at all.
    let other = dir.path().join("other.db");
    std::fs::write(&other, "not sqlite").unwrap();
    let (code, _, err) = cli(&["list", "--database", other.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not a SQLite database") || err.contains("not a Sweep database"),
        "{err}"
    );
    let missing = dir.path().join("missing.db");
    let (code, _, err) = cli(&["list", "--database", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(err.matches("missing.db").count(), 1, "named once: {err}");
    assert!(!missing.exists(), "a read creates no database");
}
