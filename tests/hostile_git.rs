//! Git sources that cannot reach what they should not (issue 46 item 4): a coordinator
//! process on Postgres fetches only what its `--git-allow` lists, refuses credentials and
//! local paths it was not given, tells submitters what failed in its own words, and runs
//! git within a deadline, a memory bound and a pool where one slow URL stalls no other.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::sweeps::OWN_SOURCE_SWEEP;
use common::{get_json, get_text, post_toml, start_coordinator_with, Proc, TestDb};
use serde_json::Value;

/// The sweep each test submits with a source of its own.
const SWEEP: &str = OWN_SOURCE_SWEEP;

/// A coordinator allowing `allow` (none when empty) with its git cache in a directory of its
/// own, plus `extra` arguments.
struct Coordinator {
    proc: Proc,
    base: String,
    cache: tempfile::TempDir,
}

impl Coordinator {
    fn start(db: &TestDb, allow: &str, extra: &[&str]) -> Self {
        let cache = tempfile::tempdir().unwrap();
        let cache_dir = cache.path().to_str().unwrap().to_string();
        let mut args = vec!["--git-cache-dir", &cache_dir];
        if !allow.is_empty() {
            args.extend(["--git-allow", allow]);
        }
        args.extend(extra);
        let (proc, base) = start_coordinator_with(&db.url, &args);
        Self { proc, base, cache }
    }

    /// Submits the sweep with `[source] git = URL, rev = REV`; panics without an answer
    /// within a minute (git that hangs must fail the test, not stall it).
    async fn submit(&self, url: &str, rev: &str) -> reqwest::Response {
        let body = format!("{SWEEP}\n[source]\ngit = {url:?}\nrev = {rev:?}\n");
        let sweeps = format!("{}/api/v1/sweeps", self.base);
        tokio::time::timeout(Duration::from_secs(60), post_toml(&sweeps, body))
            .await
            .unwrap_or_else(|_| panic!("no answer to a submission of {url} within 60 s"))
    }

    /// Repositories git has made in the cache: none means git never ran for a source.
    fn cached_repos(&self) -> Vec<String> {
        std::fs::read_dir(self.cache.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".git"))
            .collect()
    }

    async fn sweep_count(&self) -> usize {
        let list = get_json(&format!("{}/api/v1/sweeps", self.base)).await;
        list["sweeps"].as_array().unwrap().len()
    }

    /// Peak resident memory of the coordinator process, in bytes (`VmHWM`).
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.0.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    }
}

/// Asserts a 422 naming `source.git`; its message.
async fn refused(resp: reqwest::Response) -> String {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["field"], "source.git", "{body}");
    body["error"]["message"].as_str().unwrap().to_string()
}

/// Runs git in `dir` (with an identity for commits); its trimmed stdout.
fn git_in(dir: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A git repository of engines/minnow's source (one commit on `main`) at `dir`.
fn minnow_repo(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    common::copy_minnow(dir);
    git_in(dir, &["init", "--quiet", "--initial-branch=main"], None);
    git_in(dir, &["add", "-A"], None);
    git_in(dir, &["commit", "--quiet", "-m", "one"], None);
    dir.to_path_buf()
}

/// A listener on 127.0.0.1 that accepts connections, counts them, and never answers (a
/// tarpit: they stay open until the test ends). Its port and count.
fn tarpit() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            seen.fetch_add(1, Ordering::SeqCst);
            held.push(conn);
        }
    });
    (port, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_sources_are_off_unless_the_operator_lists_some() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    let secret = minnow_repo(&tmp.path().join("secret"));
    let c = Coordinator::start(&db, "", &[]);
    for url in [
        secret.display().to_string(),
        format!("file://{}", secret.display()),
        "https://github.com/official-stockfish/Stockfish".to_string(),
    ] {
        let message = refused(c.submit(&url, "main").await).await;
        assert_eq!(
            message,
            "git sources are off on this coordinator: its operator allows none (--git-allow)"
        );
    }
    assert!(c.cached_repos().is_empty(), "{:?}", c.cached_repos());
    assert_eq!(c.sweep_count().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_paths_are_fetched_only_under_a_listed_file_prefix() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    // The coordinator's own files: a repository it must never archive for a submitter.
    let secret = minnow_repo(&tmp.path().join("secret"));
    let allowed = minnow_repo(&tmp.path().join("allowed/minnow"));
    std::os::unix::fs::symlink(&secret, tmp.path().join("allowed/link")).unwrap();
    let root = tmp.path().display();
    let allow = format!("https://github.com/,file://{root}/allowed/");
    let c = Coordinator::start(&db, &allow, &[]);
    for url in [
        secret.display().to_string(),
        format!("file://{}", secret.display()),
        format!("{root}/allowed/../secret"),
        format!("file://{root}/allowed/%2e%2e/secret"),
        format!("{root}/allowed/link"),
        "allowed/minnow".to_string(),
    ] {
        let message = refused(c.submit(&url, "main").await).await;
        assert!(!message.contains("could not fetch"), "{url}: {message}");
    }
    assert!(c.cached_repos().is_empty(), "{:?}", c.cached_repos());
    assert_eq!(c.sweep_count().await, 0);
    // What is listed is fetched, as a path or as a file URL (the same commit: the same
    // sweep, still queued).
    let resp = c.submit(&allowed.display().to_string(), "main").await;
    assert_eq!(resp.status().as_u16(), 201);
    let first: Value = resp.json().await.unwrap();
    let resp = c
        .submit(&format!("file://{}", allowed.display()), "main")
        .await;
    assert_eq!(resp.status().as_u16(), 200);
    let again: Value = resp.json().await.unwrap();
    assert_eq!(again["existing"], true, "{again}");
    assert_eq!(again["id"], first["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_urls_are_refused_and_stored_ones_never_shown() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    let allowed = minnow_repo(&tmp.path().join("minnow"));
    let allow = format!("https://git.example.org/,file://{}/", tmp.path().display());
    let c = Coordinator::start(&db, &allow, &[]);
    for url in [
        "https://alice:s3cret@git.example.org/minnow.git",
        "https://alice@git.example.org/minnow.git",
    ] {
        let message = refused(c.submit(url, "main").await).await;
        assert!(message.contains("credentials"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }
    assert!(c.cached_repos().is_empty());

    // A sweep stored before such URLs were refused keeps showing, without its secret.
    let resp = c.submit(&allowed.display().to_string(), "main").await;
    assert_eq!(resp.status().as_u16(), 201);
    let id = resp.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query("UPDATE sweeps SET source_git_url = $1 WHERE id = $2")
        .bind("https://alice:s3cret@git.example.org/minnow.git")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let base = &c.base;
    let shown = "https://***@git.example.org/minnow.git";
    for url in [
        format!("{base}/api/v1/sweeps"),
        format!("{base}/api/v1/sweeps/{id}"),
        format!("{base}/api/v1/sweeps/{id}/table?format=md"),
        format!("{base}/api/v1/sweeps/{id}/table?format=json"),
    ] {
        let text = get_text(&url).await;
        assert!(!text.contains("s3cret"), "{url}: {text}");
        assert!(text.contains(shown), "{url}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_not_listed_are_refused_without_touching_the_network() {
    let db = TestDb::new().await;
    let (listed, listed_seen) = tarpit();
    let (other, other_seen) = tarpit();
    let allow = format!("http://127.0.0.1:{listed}/team/");
    let c = Coordinator::start(&db, &allow, &["--git-timeout-secs", "2"]);
    for url in [
        format!("http://127.0.0.1:{listed}/other/r.git"),
        format!("http://127.0.0.1:{listed}/team/../other/r.git"),
        format!("http://127.0.0.1:{listed}/team%2F..%2Fother/r.git"),
        format!("http://127.0.0.1:{listed}/teamster/r.git"),
        format!("http://127.0.0.1.evil.org:{listed}/team/r.git"),
        format!("http://localhost:{listed}/team/r.git"),
        format!("https://127.0.0.1:{listed}/team/r.git"),
        format!("http://127.0.0.1:{other}/team/r.git"),
        format!("ssh://127.0.0.1:{listed}/team/r.git"),
        "git@127.0.0.1:team/r.git".to_string(),
        "ext::sh -c touch% /tmp/pwned".to_string(),
    ] {
        refused(c.submit(&url, "main").await).await;
    }
    assert!(c.cached_repos().is_empty(), "{:?}", c.cached_repos());
    assert_eq!(listed_seen.load(Ordering::SeqCst), 0);
    assert_eq!(other_seen.load(Ordering::SeqCst), 0);
    // The control: the listed prefix is fetched (and the tarpit times out).
    let url = format!("http://127.0.0.1:{listed}/team/r.git");
    let message = refused(c.submit(&url, "main").await).await;
    assert!(message.contains("took longer than 2 s"), "{message}");
    assert!(listed_seen.load(Ordering::SeqCst) > 0);
    assert_eq!(other_seen.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_of_listed_sources_are_told_in_sweeps_words_not_gits() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("not-a-repo")).unwrap();
    let allow = format!("http://127.0.0.1:1/,file://{}/", tmp.path().display());
    let c = Coordinator::start(&db, &allow, &[]);
    let unreachable = "http://127.0.0.1:1/r.git".to_string();
    let not_a_repo = tmp.path().join("not-a-repo").display().to_string();
    for url in [unreachable, not_a_repo] {
        let message = refused(c.submit(&url, "main").await).await;
        assert_eq!(
            message,
            format!("could not fetch {url}: not reachable or not a git repository (details in the coordinator's log)")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tarpit_times_out_while_another_url_is_served() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    let allowed = minnow_repo(&tmp.path().join("minnow"));
    let (port, seen) = tarpit();
    let allow = format!("http://127.0.0.1:{port}/,file://{}/", tmp.path().display());
    let c = Arc::new(Coordinator::start(
        &db,
        &allow,
        &["--git-timeout-secs", "5"],
    ));
    let start = Instant::now();
    let slow = {
        let c = c.clone();
        let url = format!("http://127.0.0.1:{port}/r.git");
        tokio::spawn(async move {
            let message = refused(c.submit(&url, "main").await).await;
            (message, start.elapsed())
        })
    };
    reached(&seen, start).await;
    let resp = c.submit(&allowed.display().to_string(), "main").await;
    assert_eq!(resp.status().as_u16(), 201);
    let served_at = start.elapsed();
    let (message, failed_at) = tokio::time::timeout(Duration::from_secs(60), slow)
        .await
        .expect("the tarpit was never given up")
        .unwrap();
    assert!(message.contains("took longer than 5 s"), "{message}");
    assert!(served_at < failed_at, "{served_at:?} vs {failed_at:?}");
    assert!(failed_at < Duration::from_secs(20), "{failed_at:?}");
}

/// Waits until git has connected to the tarpit counting into `seen` (at most 30 s from
/// `start`).
async fn reached(seen: &AtomicUsize, start: Instant) {
    while seen.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "git never reached the tarpit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_its_turns_a_submission_is_answered_503() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    let allowed = minnow_repo(&tmp.path().join("minnow"));
    let (port, seen) = tarpit();
    let allow = format!("http://127.0.0.1:{port}/,file://{}/", tmp.path().display());
    let extra = ["--git-jobs", "1", "--git-timeout-secs", "60"];
    let c = Arc::new(Coordinator::start(&db, &allow, &extra));
    let _slow = {
        let c = c.clone();
        let url = format!("http://127.0.0.1:{port}/r.git");
        tokio::spawn(async move { c.submit(&url, "main").await })
    };
    let start = Instant::now();
    reached(&seen, start).await;
    let resp = c.submit(&allowed.display().to_string(), "main").await;
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded", "{body}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// A repository whose tree holds `copies` names for one blob of 16 MiB of zeros, on branch
/// `branch`: a few KiB to fetch, `copies` × 16 MiB to archive.
fn expanding_repo(dir: &Path, branch: &str, copies: usize) {
    if !dir.join(".git").exists() {
        std::fs::create_dir_all(dir).unwrap();
        git_in(dir, &["init", "--quiet", "--initial-branch=main"], None);
    }
    let zeros = dir.join("zeros");
    std::fs::write(&zeros, vec![0u8; 16 * 1024 * 1024]).unwrap();
    let blob = git_in(dir, &["hash-object", "-w", "zeros"], None);
    std::fs::remove_file(&zeros).unwrap();
    let listing: String = (0..copies)
        .map(|i| format!("100644 blob {blob}\tf{i:03}\n"))
        .collect();
    let tree = git_in(dir, &["mktree"], Some(&listing));
    let commit = git_in(dir, &["commit-tree", &tree, "-m", "zeros"], None);
    git_in(
        dir,
        &["update-ref", &format!("refs/heads/{branch}"), &commit],
        None,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_over_the_cap_is_refused_within_bounded_memory() {
    let db = TestDb::new().await;
    let tmp = tempfile::tempdir().unwrap();
    let bomb = tmp.path().join("bomb");
    // 2 GiB of files behind a commit, and 80 MiB (over the snapshot's 64 MiB of files).
    expanding_repo(&bomb, "main", 128);
    expanding_repo(&bomb, "medium", 5);
    let allow = format!("file://{}/", tmp.path().display());
    let c = Coordinator::start(&db, &allow, &[]);
    let before = c.peak_rss();
    let url = bomb.display().to_string();
    let message = refused(c.submit(&url, "main").await).await;
    assert!(
        message.contains("the commit's archive is larger than"),
        "{message}"
    );
    let message = refused(c.submit(&url, "medium").await).await;
    assert!(message.contains("cannot be a source snapshot"), "{message}");
    let peak = c.peak_rss();
    assert!(
        peak < 400 * 1024 * 1024,
        "the coordinator's peak RSS went from {before} to {peak} bytes"
    );
    assert_eq!(c.sweep_count().await, 0);
}
