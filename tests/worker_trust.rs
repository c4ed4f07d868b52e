//! A `sweep worker` process against a stand-in coordinator that hands it whatever it likes:
//! the worker's children die with the worker (even by `kill -9`), and a build program or
//! engine binary not on the worker's allow-lists is refused and reported, with nothing run.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use sweep_domain::engine::Protocol;
use sweep_domain::limit::Limit;
use sweep_domain::wire::*;
use sweep_testkit::stand_in::{serve, Shared};

use common::{worker_command, Proc};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/children");

/// A lease of one position (the start position) for `build`.
fn lease(job_id: i64, build: BuildSpec) -> JobLease {
    JobLease {
        job_id,
        attempt: 1,
        sweep_id: 1,
        build,
        suite: "s".into(),
        limit: Limit::Depth(30),
        positions: vec![JobPosition {
            index: 0,
            id: "start".into(),
            fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".into(),
            bm: vec!["e2e4".into()],
            am: vec![],
        }],
        cross_check: false,
        speed: None,
    }
}

/// A build spec running `argv` on the source `sha`.
fn build(name: &str, sha: &str, argv: &[&str]) -> BuildSpec {
    BuildSpec {
        name: name.into(),
        engine: "fixture".into(),
        source_sha256: sha.into(),
        defines: BTreeMap::new(),
        build_command: argv.iter().map(|s| s.to_string()).collect(),
        build_timeout_secs: 600,
        binary: "fixture".into(),
        binary_path: None,
        protocol: Protocol::Uci,
        options: vec![],
        checked_options: vec![],
        fresh_process_per_position: false,
        position_timeout_secs: 600,
        init_timeout_secs: 10,
        report: None,
        bench: None,
    }
}

/// Starts `sweep worker` (one core per job it should run at once) with extra arguments.
fn start_worker(base: &str, cache: &Path, cores: usize, extra: &[&str]) -> Proc {
    let child = worker_command(base, cache, cores)
        .args(extra)
        .spawn()
        .expect("starting a worker");
    Proc(child)
}

/// A stand-in coordinator handing out `leases` of the source `source`; every lease stays held.
async fn serve_leases(source: Vec<u8>, leases: Vec<JobLease>) -> (Shared, String) {
    let state: Shared = Default::default();
    {
        let mut s = state.lock().unwrap();
        // Worker 1, with a one-minute lease and a heartbeat every five seconds.
        (s.worker_id, s.lease_secs, s.heartbeat_secs) = (1, 60, 5);
        s.source = source;
        s.queue.extend(leases);
    }
    let base = serve(state.clone()).await;
    (state, base)
}

/// Waits for the first build-failed report; returns its (job id, output).
async fn first_build_failure(state: &Shared) -> (i64, String) {
    wait_until("the build failure", Duration::from_secs(60), || {
        !state.lock().unwrap().build_failures.is_empty()
    })
    .await;
    let s = state.lock().unwrap();
    s.build_failures[0].clone()
}

/// (pid, parent pid, command name) of every process.
fn processes() -> Vec<(i32, i32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        out.push((pid, ppid, comm));
    }
    out
}

/// Every descendant of `root` (pid → command name).
fn descendants(root: i32) -> BTreeMap<i32, String> {
    let all = processes();
    let mut found = BTreeMap::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, ppid, comm) in &all {
            if *ppid == parent && found.insert(*pid, comm.clone()).is_none() {
                frontier.push(*pid);
            }
        }
    }
    found
}

/// Is `pid` still running? A zombie is not (its parent, maybe init, has yet to reap it).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 2..].chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

async fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_takes_its_builds_and_engines_along() {
    let snapshot = sweep_coordinator::snapshot::snapshot_dir(
        &Path::new(FIXTURES).join("source"),
        &Default::default(),
    )
    .unwrap();
    // A build that never ends (make -> sh -> sleep)...
    let endless = build("endless", &snapshot.sha256, &["make", "-C", "{source}"]);
    // ...and an engine whose search never ends (sh -> sleep).
    let mut engine = build("sleepy", "", &[]);
    engine.binary = "sleepy_engine.sh".into();
    engine.binary_path = Some(format!("{FIXTURES}/sleepy_engine.sh"));
    let (_state, base) =
        serve_leases(snapshot.archive, vec![lease(1, endless), lease(2, engine)]).await;
    let cache = tempfile::tempdir().unwrap();
    let engine = format!("{FIXTURES}/sleepy_engine.sh");
    let mut worker = start_worker(
        &base,
        cache.path(),
        2,
        &["--allow-engine-binaries", &engine],
    );
    let worker_pid = worker.0.id() as i32;

    // Both `sleep`s are grandchildren: the build's under make's shell, the engine's under the
    // engine script.
    let mut tree = BTreeMap::new();
    wait_until(
        "the build and the engine to be running",
        Duration::from_secs(60),
        || {
            tree = descendants(worker_pid);
            tree.values().filter(|c| *c == "sleep").count() == 2
        },
    )
    .await;
    let names: BTreeSet<&str> = tree.values().map(String::as_str).collect();
    for expected in ["make", "sh", "sleep", "sweep-reaper"] {
        assert!(names.contains(expected), "no {expected} in {tree:?}");
    }

    worker.signal(libc::SIGKILL);
    let _ = worker.0.wait();
    let started = Instant::now();
    wait_until(
        "every descendant of the killed worker to die",
        Duration::from_secs(5),
        || tree.keys().all(|&pid| !running(pid)),
    )
    .await;
    eprintln!(
        "{} descendants gone {} ms after the worker's SIGKILL",
        tree.len(),
        started.elapsed().as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_program_not_allowed_is_refused_and_reported() {
    let snapshot = sweep_coordinator::snapshot::snapshot_dir(
        &Path::new(FIXTURES).join("source"),
        &Default::default(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let touch = format!("touch {}", marker.display());
    let hostile = build("hostile", &snapshot.sha256, &["/bin/sh", "-c", &touch]);

    // A worker with the default list refuses it without running anything.
    let (state, base) =
        serve_leases(snapshot.archive.clone(), vec![lease(1, hostile.clone())]).await;
    let _worker = start_worker(&base, &dir.path().join("cache"), 1, &[]);
    let (job, output) = first_build_failure(&state).await;
    assert_eq!(job, 1);
    assert!(output.contains("`/bin/sh`"), "{output}");
    assert!(output.contains("not allowed"), "{output}");
    assert!(output.contains("--allow-build-programs"), "{output}");
    // Nothing ran, and nothing was even fetched into the cache.
    assert!(!marker.exists());
    assert!(!dir.path().join("cache").join("builds").exists());

    // The same lease runs once its program is listed (so the refusal above is the list's
    // doing, not a broken fixture): comma-separated and repeated both count. Unsandboxed, so
    // the marker it touches outside its tree lands on this machine's disk.
    let (_state, base) = serve_leases(snapshot.archive, vec![lease(2, hostile)]).await;
    let _allowed = start_worker(
        &base,
        &dir.path().join("cache2"),
        1,
        &[
            "--allow-build-programs",
            "make,cmake",
            "--allow-build-programs",
            "/bin/sh",
            "--sandbox",
            "off",
        ],
    );
    wait_until("the allowed build to run", Duration::from_secs(60), || {
        marker.exists()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_binary_not_allowed_is_refused_and_reported() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    // Any executable the coordinator names (`/sbin/reboot`, say) would be started as an engine.
    let evil = dir.path().join("evil.sh");
    std::fs::write(&evil, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut engine = build("evil", "", &[]);
    engine.binary = "evil.sh".into();
    engine.binary_path = Some(evil.display().to_string());
    let (state, base) = serve_leases(Vec::new(), vec![lease(1, engine)]).await;
    let _worker = start_worker(&base, &dir.path().join("cache"), 1, &[]);
    let (job, output) = first_build_failure(&state).await;
    assert_eq!(job, 1);
    assert!(
        output.contains(&format!("engine binary `{}`", evil.display())),
        "{output}"
    );
    assert!(output.contains("--allow-engine-binaries"), "{output}");
    assert!(!marker.exists());
}
