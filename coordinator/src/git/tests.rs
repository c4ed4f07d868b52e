//! git runs contained and bounded, and the pool's turns, with the real `git`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use super::allow::Scheme;
use super::run::{git, Limits, RunError};
use super::*;

/// A repository in `dir` with one commit of `files` (name, contents) on `main`.
fn make_repo(dir: &Path, files: &[(&str, &[u8])]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, data) in files {
        std::fs::write(dir.join(name), data).unwrap();
    }
    for args in [
        &["init", "--quiet", "--initial-branch=main"][..],
        &["add", "-A"],
        &["commit", "--quiet", "-m", "one"],
    ] {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

fn limits(home: &Path, secs: u64) -> Limits<'_> {
    Limits {
        home,
        scheme: None,
        max_file_bytes: 1024 * 1024,
        max_stdout: 1024 * 1024,
        deadline: Instant::now() + Duration::from_secs(secs),
    }
}

fn settings(cache: &Path, allow: &[&str]) -> GitSettings {
    GitSettings {
        allow: GitAllowList::new(allow.iter().map(|e| e.parse().unwrap()).collect()),
        cache_dir: cache.to_path_buf(),
        timeout: Duration::from_secs(20),
        ..GitSettings::default()
    }
}

/// Runs `git -c alias.x='!SCRIPT' x` (a shell git starts) under `limits`.
async fn script(dir: &Path, script: &str, limits: Limits<'_>) -> Result<Vec<u8>, RunError> {
    let alias = format!("alias.x=!{script}");
    git(dir, &["-c", &alias, "x"], limits).await
}

#[tokio::test]
async fn git_sees_no_environment_but_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // cargo runs tests with CARGO_* set: none of them may reach git.
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    let out = script(tmp.path(), "env", limits(&home, 10)).await.unwrap();
    let env = String::from_utf8(out).unwrap();
    for want in [
        format!("HOME={}", home.display()),
        "GIT_CONFIG_NOSYSTEM=1".into(),
        "GIT_CONFIG_GLOBAL=/dev/null".into(),
        "GIT_TERMINAL_PROMPT=0".into(),
        "GIT_SSH_COMMAND=false".into(),
    ] {
        assert!(env.lines().any(|l| l == want), "{want} missing from\n{env}");
    }
    // git puts its own exec path first; the rest is ours.
    let path = env.lines().find(|l| l.starts_with("PATH=")).unwrap();
    assert!(path.ends_with(":/usr/local/bin:/usr/bin:/bin"), "{path}");
    for leaked in ["CARGO", "SSH_AUTH_SOCK", "RUST_", "USER="] {
        assert!(
            !env.lines().any(|l| l.starts_with(leaked)),
            "{leaked} leaked:\n{env}"
        );
    }
}

#[tokio::test]
async fn a_transport_is_off_unless_it_is_the_urls_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (src, cache) = (tmp.path().join("src"), tmp.path().join("cache.git"));
    std::fs::create_dir_all(&home).unwrap();
    make_repo(&src, &[("a.txt", b"a")]);
    std::fs::create_dir(&cache).unwrap();
    git(&cache, &["init", "--quiet", "--bare"], limits(&home, 10))
        .await
        .unwrap();
    let src = src.display().to_string();
    let fetch = ["fetch", "--quiet", "--", &src, "+refs/heads/*:refs/heads/*"];
    let err = git(&cache, &fetch, limits(&home, 10)).await.unwrap_err();
    assert!(
        err.to_string().contains("transport 'file' not allowed"),
        "{err}"
    );
    let file = Limits {
        scheme: Some(Scheme::File),
        ..limits(&home, 10)
    };
    git(&cache, &fetch, file).await.unwrap();
}

#[tokio::test]
async fn a_timeout_kills_gits_children_too() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let started = Instant::now();
    let run = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let err = script(tmp.path(), &run, limits(tmp.path(), 1))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::TimedOut), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed with its group; reaped by init (it was git's child, not ours) shortly after.
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) != 0 }
    });
    assert!(gone, "sleep {pid} outlived its git");
}

#[tokio::test]
async fn output_and_files_are_capped() {
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = script(tmp.path(), "yes", limits(tmp.path(), 30))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::TooMuchOutput(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let big = tmp.path().join("big");
    let run = format!("head -c 3000000 /dev/zero > {}", big.display());
    let err = script(tmp.path(), &run, limits(tmp.path(), 30))
        .await
        .unwrap_err();
    assert!(matches!(err, RunError::Failed { .. }), "{err}");
    let size = std::fs::metadata(&big).unwrap().len();
    assert_eq!(size, 1024 * 1024, "the file stops at the limit");
}

#[tokio::test]
async fn a_fetch_over_the_cache_bound_is_refused_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("repos/big");
    // Random bytes do not compress: the pack is as large as the file.
    let noise: Vec<u8> = (0..3 * 1024 * 1024).map(|_| rand::random::<u8>()).collect();
    make_repo(&src, &[("noise.bin", &noise)]);
    let cache = tmp.path().join("cache");
    let allow = format!("file://{}/repos/", tmp.path().display());
    let pool = GitPool::new(GitSettings {
        max_fetch_bytes: 1024 * 1024,
        ..settings(&cache, &[&allow])
    });
    let url = src.display().to_string();
    let err = pool.resolve(&url, "main").await.unwrap_err();
    assert!(
        matches!(
            err,
            GitError::TooLarge {
                what: "the repository",
                ..
            }
        ),
        "{err}"
    );
    let repos: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".git"))
        .collect();
    assert!(repos.is_empty(), "the oversized cache stays: {repos:?}");
}

#[tokio::test]
async fn an_unreachable_host_is_told_in_sweeps_words_only() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = GitPool::new(settings(tmp.path(), &["http://127.0.0.1:1/"]));
    let err = pool
        .resolve("http://127.0.0.1:1/repo.git", "main")
        .await
        .unwrap_err();
    assert!(matches!(err, GitError::Fetch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("not reachable or not a git repository"),
        "{text}"
    );
    for git_words in ["fatal", "Failed to connect", "unable to access", "port 1"] {
        assert!(!text.contains(git_words), "{text}");
    }
}

#[tokio::test]
async fn a_local_repository_resolves_and_archives() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("repos/engine");
    make_repo(&src, &[("main.c", b"int main(void) { return 0; }\n")]);
    let allow = format!("file://{}/repos/", tmp.path().display());
    let pool = GitPool::new(settings(&tmp.path().join("cache"), &[&allow]));
    let resolved = pool
        .resolve(&src.display().to_string(), "HEAD")
        .await
        .unwrap();
    assert_eq!(resolved.commit.len(), 40);
    let has_file = resolved
        .tar
        .windows(b"int main".len())
        .any(|w| w == b"int main");
    assert!(has_file, "the archive holds main.c");
    let err = pool
        .resolve(&src.display().to_string(), "no-such-branch")
        .await
        .unwrap_err();
    assert!(matches!(err, GitError::UnknownRev { .. }), "{err}");
}

#[tokio::test]
async fn turns_are_per_url_and_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = GitPool::new(GitSettings {
        jobs: 2,
        queue_wait: Duration::from_millis(300),
        ..settings(tmp.path(), &["https://git.example.org/"])
    });
    let a = pool.turn("https://git.example.org/a").await.unwrap();
    // Another URL gets the second slot at once; the same URL waits, then is told to retry.
    let b = pool.turn("https://git.example.org/b").await.unwrap();
    let again = pool.turn("https://git.example.org/a").await;
    assert!(matches!(again, Err(GitError::Busy)));
    // Both slots taken: a third URL is told to retry too, without git ever running.
    let c = pool.resolve("https://git.example.org/c", "main").await;
    assert!(matches!(c, Err(GitError::Busy)), "{c:?}");
    drop((a, b));
    assert!(pool.turn("https://git.example.org/a").await.is_ok());
}
