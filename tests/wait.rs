//! `sweep submit --wait` and `sweep status ID --wait` with real processes: a coordinator on a
//! fresh Postgres database, a worker for the fake `flaky` engine (tests/fixtures), and the CLI
//! as a child process, checked by its exit code, its stdout (the table) and its stderr.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::flaky::{flaky_config, start_fixture_coordinator, start_fixture_worker};
use common::{cli, get_json, repo, sweep_bin, tokens_for, TestDb};

/// Exit codes documented in the README (and `sweep submit --help`).
const DONE_WITH_ERRORS: i32 = 3;
const CANCELLED: i32 = 5;
const INTERRUPTED: i32 = 130;

/// The `sweep` CLI running in the background, with the admin token of the coordinator at
/// `base`; its stderr lines arrive on the receiver as they are written.
struct Running {
    child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(base: &str, args: &[&str]) -> Self {
        let mut child = Command::new(sweep_bin())
            .current_dir(repo())
            .env("SWEEP_TOKEN", tokens_for(base).unwrap().admin)
            .env("RUST_LOG", "info")
            .args(args)
            .args(["--coordinator", base])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sweep");
        let (tx, rx) = channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Running {
            child,
            stderr: rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a stderr line containing `text`.
    fn wait_for(&mut self, text: &str) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
                let hit = line.contains(text);
                self.seen.push(line);
                if hit {
                    return;
                }
            }
        }
        panic!("no `{text}` on stderr: {:#?}", self.seen);
    }

    /// Waits (at most `timeout`) for the process to end: (exit code, stdout, stderr).
    fn finish(mut self, timeout: Duration) -> (Option<i32>, String, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                panic!("still waiting after {timeout:?}: {:#?}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut stdout = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        // The reader thread ends with the pipe.
        self.seen.extend(self.stderr.iter());
        (status.code(), stdout, self.seen.join("\n"))
    }
}

fn id_in(stderr: &str) -> i64 {
    let after = stderr
        .split("submitted sweep ")
        .nth(1)
        .unwrap_or_else(|| panic!("no id in {stderr}"));
    after
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_wait_prints_the_table_and_exits_zero_for_a_clean_sweep() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &[]);
    let caches = tempfile::tempdir().unwrap();
    let _w = start_fixture_worker(&base, &caches.path().join("w1"), "w1");
    let config = flaky_config(caches.path(), "[6, 7]", 5, "");
    let config = config.to_str().unwrap();

    let (code, stdout, stderr) =
        Running::start(&base, &["submit", config, "--wait"]).finish(Duration::from_secs(300));
    assert_eq!(code, Some(0), "{stderr}");
    let id = id_in(&stderr);
    assert!(stderr.contains(&format!("sweep {id}: done")), "{stderr}");
    // stdout is the Markdown table alone (a heading naming the sweep, then the source): the
    // id and the progress went to stderr.
    assert!(
        stdout.starts_with(&format!("## sweep {id}: flaky (flaky), submitted ")),
        "{stdout}"
    );
    assert!(!stdout.contains("submitted sweep"), "{stdout}");
    // One row per build; variants named after their knob value are named by the value.
    for row in ["| head_reference (default) |", "| 6 |", "| 7 |"] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
    assert!(!stdout.contains("knodes/s"), "progress on stdout: {stdout}");

    // Waiting for a sweep that has already ended returns at once, here as JSON equal to the
    // coordinator's table.
    let (code, json, stderr) = cli(&[
        "status",
        &id.to_string(),
        "--wait",
        "--format",
        "json",
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let printed: Value = serde_json::from_str(&json).unwrap();
    let served = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_eq!(printed, served);
    let rows = printed["tables"][0]["rows"].as_array().unwrap();
    assert!(
        rows.iter().all(|r| r["combined"]["done"] == 10),
        "{printed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_build_makes_the_wait_exit_non_zero() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &[]);
    let caches = tempfile::tempdir().unwrap();
    let _w = start_fixture_worker(&base, &caches.path().join("w1"), "w1");
    // FAULT=9 never compiles; the baseline does, so the sweep ends with a gap in its table.
    let config = flaky_config(caches.path(), "[9]", 5, "");
    let config = config.to_str().unwrap();

    let (code, stdout, stderr) =
        Running::start(&base, &["submit", config, "--wait", "--format", "csv"])
            .finish(Duration::from_secs(300));
    assert_eq!(code, Some(DONE_WITH_ERRORS), "{stderr}");
    let id = id_in(&stderr);
    assert!(
        stderr.contains(&format!("sweep {id}: done_with_errors")),
        "{stderr}"
    );
    // The compiler's reason is shown (the worker kept the tail of 300 KB of output, and says
    // how much it cut), and the table still printed (as CSV).
    assert!(stderr.contains("build FAULT=9 failed"), "{stderr}");
    assert!(stderr.contains("FAULT=9 never compiles"), "{stderr}");
    assert!(
        stderr.contains("bytes cut; the last part follows"),
        "{stderr}"
    );
    assert!(stdout.contains("head_reference"), "{stdout}");
    assert!(stdout.contains("FAULT=9"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_wait_of_a_cancelled_sweep_exits_with_the_cancelled_code() {
    let db = TestDb::new().await;
    // No worker: the sweep stays queued until it is cancelled.
    let (_c, base) = start_fixture_coordinator(&db.url, &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = flaky_config(dir.path(), "[6]", 5, "");
    let config = config.to_str().unwrap();
    let (code, out, err) = cli(&["submit", config, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();

    let mut waiting = Running::start(&base, &["status", &id, "--wait"]);
    // The first progress line: it is following the sweep.
    waiting.wait_for("positions");
    let (code, _, err) = cli(&["cancel", &id, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");

    let (code, stdout, stderr) = waiting.finish(Duration::from_secs(30));
    assert_eq!(code, Some(CANCELLED), "{stderr}");
    assert!(
        stderr.contains(&format!("sweep {id}: cancelled")),
        "{stderr}"
    );
    // The (empty) table is still printed: every row pending.
    assert!(stdout.contains("| head_reference (default) |"), "{stdout}");

    // `sweep status` names the submitter (the test's admin token), over HTTP and from the
    // database alike.
    for source in [
        ["--coordinator", base.as_str()],
        ["--database", db.url.as_str()],
    ] {
        let (code, out, err) = cli(&["status", &id, source[0], source[1]]);
        assert_eq!(code, 0, "{err}");
        let first = out.lines().next().unwrap_or("");
        assert!(first.contains(" by test-admin-"), "{source:?}: {out}");
        assert!(first.contains(": cancelled"), "{source:?}: {out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_waiting_not_the_sweep() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &[]);
    let dir = tempfile::tempdir().unwrap();
    let config = flaky_config(dir.path(), "[7]", 5, "");
    let config = config.to_str().unwrap();

    let mut waiting = Running::start(&base, &["submit", config, "--wait"]);
    waiting.wait_for("positions");
    unsafe {
        libc::kill(waiting.child.id() as i32, libc::SIGINT);
    }
    let (code, stdout, stderr) = waiting.finish(Duration::from_secs(30));
    assert_eq!(code, Some(INTERRUPTED), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    let id = id_in(&stderr);
    assert!(
        stderr.contains(&format!("sweep {id} was NOT cancelled")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("sweep status {id} --wait")),
        "{stderr}"
    );
    let detail = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(detail["state"], "queued", "{detail}");
}
