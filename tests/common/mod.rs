//! Test support: a fresh Postgres database per test, and real `sweep` processes.
#![allow(dead_code)]

pub mod direct;
pub mod exposition;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[allow(unused_imports)]
pub use sweep_testkit::{pg_base, TestDb};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `sweep` binary under test.
pub fn sweep_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sweep")
}

/// A child process killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Sends a signal (e.g. libc::SIGSTOP).
    pub fn signal(&self, sig: i32) {
        unsafe {
            libc::kill(self.0.id() as i32, sig);
        }
    }
}

/// Starts `sweep coordinator` on port 0 and returns it with its base URL (read from its log).
pub fn start_coordinator(db_url: &str, lease_secs: u64) -> (Proc, String) {
    start_coordinator_on(db_url, lease_secs, "127.0.0.1:0")
}

/// A port that was free a moment ago (for a coordinator that must come back on the same one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `sweep coordinator` on `listen`.
pub fn start_coordinator_on(db_url: &str, lease_secs: u64, listen: &str) -> (Proc, String) {
    let lease = lease_secs.to_string();
    start_coordinator_with(db_url, &["--listen", listen, "--lease-secs", &lease])
}

/// The tokens a test coordinator was started with: every coordinator needs them for anything
/// but `/healthz`.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// An admin token (reads, submits, cancels anything).
    pub admin: String,
    /// A worker token (what `start_worker` gives its workers).
    pub worker: String,
}

/// Tokens by coordinator base URL, so helpers given only a URL can authenticate.
static TOKENS: std::sync::Mutex<Vec<(String, Tokens)>> = std::sync::Mutex::new(Vec::new());

/// The tokens of the coordinator whose base URL starts `url`.
pub fn tokens_for(url: &str) -> Option<Tokens> {
    TOKENS
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(base, _)| url.starts_with(base.as_str()))
        .map(|(_, t)| t.clone())
}

/// Makes `url`'s helpers ([`get`], [`post`], [`cli`], [`start_worker`]) use `tokens`.
pub fn register_tokens(base: &str, tokens: Tokens) {
    TOKENS.lock().unwrap().push((base.to_string(), tokens));
}

/// An admin and a worker token made through an in-process coordinator's service.
pub async fn service_tokens(svc: &sweep_coordinator::service::Service) -> Tokens {
    use sweep_coordinator::service::Caller;
    use sweep_domain::auth::Role;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let make = |role: Role| {
        let name = format!("test-{role}-{}-{n}", std::process::id());
        async move {
            svc.create_token(&Caller::Local, &name, role)
                .await
                .unwrap()
                .1
        }
    };
    Tokens {
        admin: make(Role::Admin).await,
        worker: make(Role::Worker).await,
    }
}

/// Creates a token in the database with `sweep token create`.
pub fn create_token(db_url: &str, role: &str, name: &str) -> String {
    let (code, out, err) = cli(&[
        "token",
        "create",
        "--database-url",
        db_url,
        "--role",
        role,
        "--name",
        name,
    ]);
    assert_eq!(code, 0, "sweep token create: {err}");
    out.trim().to_string()
}

/// A fresh admin and worker token in `db_url` (names made unique, since a restarted
/// coordinator on the same database gets new ones).
pub fn test_tokens(db_url: &str) -> Tokens {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    Tokens {
        admin: create_token(db_url, "admin", &format!("test-admin-{pid}-{n}")),
        worker: create_token(db_url, "worker", &format!("test-workers-{pid}-{n}")),
    }
}

/// A GET request carrying the admin token of the coordinator `url` belongs to.
pub fn get(url: &str) -> reqwest::RequestBuilder {
    authed(reqwest::Client::new().get(url), url)
}

/// A POST request carrying the admin token of the coordinator `url` belongs to.
pub fn post(url: &str) -> reqwest::RequestBuilder {
    authed(reqwest::Client::new().post(url), url)
}

fn authed(req: reqwest::RequestBuilder, url: &str) -> reqwest::RequestBuilder {
    match tokens_for(url) {
        Some(t) => req.bearer_auth(t.admin),
        None => req,
    }
}

/// Starts `sweep coordinator` with extra arguments (port 0 unless `--listen` is given), after
/// creating an admin and a worker token for it (see [`tokens_for`]).
pub fn start_coordinator_with(db_url: &str, args: &[&str]) -> (Proc, String) {
    let tokens = test_tokens(db_url);
    let (proc, base) = spawn_coordinator(db_url, args);
    register_tokens(&base, tokens);
    (proc, base)
}

/// Starts `sweep coordinator` without making tokens.
pub fn spawn_coordinator(db_url: &str, args: &[&str]) -> (Proc, String) {
    let mut child = Command::new(sweep_bin())
        .current_dir(repo())
        .arg("coordinator")
        .args(if args.contains(&"--listen") {
            &[][..]
        } else {
            &["--listen", "127.0.0.1:0"][..]
        })
        .args(args)
        .env("DATABASE_URL", db_url)
        .env("RUST_LOG", "info,sqlx=warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the coordinator");
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if std::env::var_os("SWEEP_TEST_LOGS").is_some() {
                eprintln!("[coordinator] {line}");
            }
        }
    });
    // The coordinator's one stdout line: `{"listening": "http://ADDR"}`.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        if let Some(line) = lines.next() {
            let _ = tx.send(line);
        }
        // Keep reading so the coordinator never blocks on a full pipe.
        for _ in lines {}
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the coordinator never announced its address");
    let announced: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("`{line}`: {e}"));
    let base = announced["listening"]
        .as_str()
        .unwrap_or_else(|| panic!("no `listening` in `{line}`"))
        .to_string();
    (Proc(child), base)
}

/// Starts `sweep worker` with one core.
pub fn start_worker(base: &str, cache: &Path, name: &str, cores: usize) -> Proc {
    start_worker_with(base, cache, name, cores, &[])
}

/// [`start_worker`] with more arguments (e.g. `--allow-engine-binaries`).
pub fn start_worker_with(
    base: &str,
    cache: &Path,
    name: &str,
    cores: usize,
    extra: &[&str],
) -> Proc {
    let log = std::env::var_os("SWEEP_TEST_LOGS").is_some();
    let token = tokens_for(base).map(|t| t.worker).unwrap_or_default();
    let child = Command::new(sweep_bin())
        .current_dir(repo())
        .env("SWEEP_TOKEN", token)
        .args(["worker", "--coordinator", base, "--cores"])
        .arg(cores.to_string())
        .arg("--cache-dir")
        .arg(cache)
        .args(["--name", name])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(if log { Stdio::inherit() } else { Stdio::null() })
        .spawn()
        .expect("starting a worker");
    Proc(child)
}

/// Engine processes (any process whose executable lies under `cache`) still running.
pub fn engines_alive(cache: &Path) -> usize {
    let cache = cache.canonicalize().unwrap_or_else(|_| cache.to_path_buf());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path().join("exe")).ok())
        .filter(|exe| exe.starts_with(&cache))
        .count()
}

/// Runs the `sweep` CLI to completion, returning (exit code, stdout, stderr). A command
/// aimed at a test coordinator (`--coordinator URL`) carries its admin token in
/// `SWEEP_TOKEN` unless it names `--token` itself.
pub fn cli(args: &[&str]) -> (i32, String, String) {
    let token = args
        .iter()
        .position(|a| *a == "--coordinator")
        .and_then(|i| args.get(i + 1))
        .and_then(|base| tokens_for(base))
        .map(|t| t.admin);
    let mut cmd = Command::new(sweep_bin());
    if let Some(token) = token {
        cmd.env("SWEEP_TOKEN", token);
    }
    let out = cmd
        .current_dir(repo())
        .args(args)
        .output()
        .expect("running sweep");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// GETs JSON.
pub async fn get_json(url: &str) -> Value {
    get(url)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON body")
}

/// Asserts the sweep's table has, for every build and suite, exactly the direct-run numbers.
pub fn assert_table_matches(
    table: &Value,
    expected: &std::collections::BTreeMap<(String, String), (u64, u64)>,
) {
    let rows = table["tables"][0]["rows"].as_array().expect("table rows");
    let builds: std::collections::BTreeSet<&String> = expected.keys().map(|(b, _)| b).collect();
    assert_eq!(rows.len(), builds.len(), "{table}");
    for ((build, suite), (nodes, solved)) in expected {
        let row = rows
            .iter()
            .find(|r| r["build"] == build.as_str())
            .unwrap_or_else(|| panic!("no row {build}"));
        let cell = &row["suites"][suite.as_str()];
        assert_eq!(
            cell["nodes"].as_u64(),
            Some(*nodes),
            "{build} {suite}: {cell}"
        );
        assert_eq!(
            cell["solved"].as_u64(),
            Some(*solved),
            "{build} {suite}: {cell}"
        );
        assert_eq!(cell["errors"].as_u64(), Some(0), "{build} {suite}: {cell}");
        assert_eq!(cell["done"], cell["positions"], "{build} {suite}: {cell}");
    }
}

/// Polls a sweep until its state is final, or panics after `timeout`.
pub async fn wait_final(base: &str, id: i64, timeout: Duration) -> Value {
    let start = Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        let state = d["state"].as_str().unwrap_or("").to_string();
        if ["done", "done_with_errors", "failed", "cancelled"].contains(&state.as_str()) {
            return d;
        }
        assert!(
            start.elapsed() < timeout,
            "sweep {id} still {state} after {timeout:?}: {d}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A JSON table without `sweep` (its id, submission date and Sweep's version): what two
/// sweeps of one config must agree on.
pub fn numbers_of(table: &serde_json::Value) -> serde_json::Value {
    let mut table = table.clone();
    if let Some(o) = table.as_object_mut() {
        o.remove("sweep");
    }
    table
}
