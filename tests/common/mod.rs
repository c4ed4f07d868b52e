//! Test support: a fresh Postgres database per test, and real `sweep` processes.
#![allow(dead_code)]

pub mod direct;
pub mod exposition;
pub mod flaky;
pub mod in_process;
pub mod protocol;
pub mod ranking;
pub mod sweeps;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[allow(unused_imports)]
pub use in_process::{coordinator_config, InProcess};
#[allow(unused_imports)]
pub use sweep_testkit::{pg_base, TestDb};
#[allow(unused_imports)]
pub use sweeps::{
    assert_table_matches, numbers_of, row, run_json, run_json_in, submit, submit_and_wait,
    submit_with, wait_final,
};

/// Whether the packaged engine `binary` is installed; says what to install when it is not
/// (`.ci/run` installs every one the tests use, so there they always run).
pub fn installed(binary: &str, package: &str) -> bool {
    let there = Path::new(binary).exists();
    if !there {
        eprintln!("skipped: {binary} is not installed (apt-get install {package})");
    }
    there
}

/// The demo sweep (`configs/sweeps/demo.toml`, relative to the repository root).
pub const DEMO: &str = "configs/sweeps/demo.toml";

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
            svc.admin()
                .create_token(&Caller::Local, &name, role)
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

/// [`start_coordinator_with`] knowing the engine definitions of `engines` and the fixture
/// suites (`tests/fixtures/suites`).
pub fn start_coordinator_with_engines(db_url: &str, engines: &Path) -> (Proc, String) {
    let engines = engines.to_str().expect("a UTF-8 path");
    let args = [
        "--engines-dir",
        engines,
        "--suites-dir",
        "tests/fixtures/suites",
    ];
    start_coordinator_with(db_url, &args)
}

/// A copy of engines/minnow's source (no build outputs) in `dst`.
pub fn copy_minnow(dst: &Path) {
    let status = Command::new("cp")
        .arg("-r")
        .arg(repo().join("engines/minnow"))
        .arg(dst)
        .status()
        .unwrap();
    assert!(status.success());
    for out in ["minnow", "build", "target"] {
        let _ = std::fs::remove_dir_all(dst.join(out));
        let _ = std::fs::remove_file(dst.join(out));
    }
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
    let token = tokens_for(base).map(|t| t.worker).unwrap_or_default();
    let child = worker_command(base, cache, cores)
        .env("SWEEP_TOKEN", token)
        .args(["--name", name])
        .args(extra)
        .spawn()
        .expect("starting a worker");
    Proc(child)
}

/// Two one-core workers, `w1` and `w2`, with their caches in a temp dir: stopped, and the
/// caches removed, when dropped.
pub struct TwoWorkers {
    _workers: [Proc; 2],
    _caches: tempfile::TempDir,
}

/// Starts [`TwoWorkers`] for `base`, each with the `extra` arguments.
pub fn start_two_workers(base: &str, extra: &[&str]) -> TwoWorkers {
    let caches = tempfile::tempdir().unwrap();
    let start = |name: &str| start_worker_with(base, &caches.path().join(name), name, 1, extra);
    TwoWorkers {
        _workers: [start("w1"), start("w2")],
        _caches: caches,
    }
}

/// `sweep worker` for `base` with `cores` and its cache in `cache`, its log shown only when
/// `SWEEP_TEST_LOGS` is set; callers add their arguments (token, name, CA) and spawn it.
/// Workers sandbox builds and engines by default, so a machine without bubblewrap fails here,
/// naming the package, rather than in a sweep that never ends.
pub fn worker_command(base: &str, cache: &Path, cores: usize) -> Command {
    assert!(
        ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
            .iter()
            .any(|p| Path::new(p).exists()),
        "workers run builds and engines in a bubblewrap sandbox: install Debian's `bubblewrap` \
         package (apt-get install bubblewrap; .ci/run installs it)"
    );
    let log = std::env::var_os("SWEEP_TEST_LOGS").is_some();
    let mut cmd = Command::new(sweep_bin());
    cmd.current_dir(repo())
        .args(["worker", "--coordinator", base, "--cores"])
        .arg(cores.to_string())
        .arg("--cache-dir")
        .arg(cache)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(if log { Stdio::inherit() } else { Stdio::null() });
    cmd
}

/// Waits until `base` answers `/healthz` through `client`, or panics after a minute naming
/// `what` never came up.
pub async fn wait_until_serving(client: &reqwest::Client, base: &str, what: &str) {
    let start = Instant::now();
    while client.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for `proc` (`what`) to exit, or panics once `timeout` has passed since `start`.
pub async fn wait_exit(
    proc: &mut Proc,
    start: Instant,
    timeout: Duration,
    what: &str,
) -> ExitStatus {
    loop {
        if let Some(status) = proc.0.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < timeout,
            "{what} still running after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The JSON document a finished process printed on its (piped) stdout.
pub fn json_stdout(proc: &mut Proc) -> Value {
    let mut out = String::new();
    std::io::Read::read_to_string(proc.0.stdout.as_mut().unwrap(), &mut out).unwrap();
    serde_json::from_str(&out).expect("JSON table")
}

/// How many workers stored results in the SQLite database at `db` (opened read-only).
pub async fn workers_with_results(db: &Path) -> i64 {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    sqlx::query_scalar("SELECT count(DISTINCT worker_id) FROM results")
        .fetch_one(&mut conn)
        .await
        .unwrap()
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

/// GETs a text body (a Markdown table, the metrics exposition).
pub async fn get_text(url: &str) -> String {
    get(url)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("text body")
}

/// GETs a binary body (a source snapshot).
pub async fn get_bytes(url: &str) -> Vec<u8> {
    get(url)
        .send()
        .await
        .expect("GET")
        .bytes()
        .await
        .expect("body")
        .to_vec()
}

/// POSTs a TOML sweep config to `url` (with the admin token) and returns the answer as it is.
pub async fn post_toml(url: &str, config: String) -> reqwest::Response {
    post(url)
        .header("content-type", "application/toml")
        .body(config)
        .send()
        .await
        .expect("POST")
}

/// Starts `sweep run` of the demo sweep on one core of a local worker, serving its API on
/// `listen`, with its database at `db`, its build cache in `cache` and `extra` arguments (TLS);
/// its stdout (the JSON table) is piped, its stderr dropped.
pub fn spawn_served_demo_run(
    listen: &str,
    db: &Path,
    cache: &Path,
    extra: &[&std::ffi::OsStr],
) -> Proc {
    Proc(
        Command::new(sweep_bin())
            .current_dir(repo())
            .args(["run", DEMO, "--cores", "1"])
            .args(["--format", "json", "--serve", listen])
            .args(extra)
            .arg("--database")
            .arg(db)
            .arg("--cache-dir")
            .arg(cache)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting sweep run"),
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
