//! Git sources: resolve a revision of a repository to a commit and archive that commit.
//!
//! The `git` program runs with a fixed argv (never through a shell): the repository is
//! fetched into a bare cache per URL (`CACHE/<sha256 of the URL>.git`), branches and tags
//! included, then the revision is resolved there (`rev-parse --verify --end-of-options
//! REV^{commit}`) and archived (`git archive COMMIT`). Options cannot be injected: the URL
//! comes after `--`, the revision after `--end-of-options`, and both were refused by the
//! domain if they start with `-`. The `ext::` and `fd::` transports (which run commands) are
//! disabled, and git never prompts for credentials.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// Why a git source could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The repository could not be fetched (unreachable, not a repository).
    #[error("fetching {url}: {reason}")]
    Fetch {
        /// As the config gave it.
        url: String,
        /// git's own words.
        reason: String,
    },
    /// The revision names no commit of the repository.
    #[error("{rev} is no branch, tag or commit of {url}")]
    UnknownRev {
        /// As the config gave it.
        url: String,
        /// As the config gave it.
        rev: String,
    },
    /// Anything else (git missing, the cache unwritable).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// A resolved revision: the commit and its `git archive` (a plain tar).
#[derive(Debug)]
pub struct Resolved {
    /// Full commit id.
    pub commit: String,
    /// `git archive --format=tar COMMIT`.
    pub tar: Vec<u8>,
}

/// Fetches `url` into the cache under `cache_dir` and resolves `rev` there (blocking: run it
/// off the async runtime). Callers serialize calls on one cache.
pub fn resolve(cache_dir: &Path, url: &str, rev: &str) -> Result<Resolved, GitError> {
    if url.starts_with('-') || rev.starts_with('-') {
        return Err(anyhow::anyhow!("git URL and rev may not start with `-`").into());
    }
    let repo = cache_dir.join(format!("{}.git", hex::encode(Sha256::digest(url))));
    if !repo.join("HEAD").exists() {
        std::fs::create_dir_all(&repo)
            .with_context(|| format!("creating the git cache {}", repo.display()))?;
        run(&repo, &["init", "--quiet", "--bare"]).map_err(GitError::Other)?;
    }
    run(
        &repo,
        &[
            "fetch",
            "--quiet",
            "--force",
            "--prune",
            "--no-recurse-submodules",
            "--",
            url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ],
    )
    .map_err(|e| GitError::Fetch {
        url: url.to_string(),
        reason: format!("{e:#}"),
    })?;
    // `HEAD` of the cache is not the remote's: resolve it as the remote's default branch.
    let wanted = if rev == "HEAD" {
        remote_head(&repo, url).unwrap_or_else(|| "HEAD".to_string())
    } else {
        rev.to_string()
    };
    let commit = run(
        &repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{wanted}^{{commit}}"),
        ],
    )
    .map_err(|_| GitError::UnknownRev {
        url: url.to_string(),
        rev: rev.to_string(),
    })?;
    let commit = String::from_utf8_lossy(&commit).trim().to_string();
    let tar = run(&repo, &["archive", "--format=tar", &commit]).map_err(GitError::Other)?;
    Ok(Resolved { commit, tar })
}

/// The branch `url`'s HEAD points at, from `git ls-remote --symref`.
fn remote_head(repo: &Path, url: &str) -> Option<String> {
    let out = run(repo, &["ls-remote", "--symref", "--", url, "HEAD"]).ok()?;
    let text = String::from_utf8_lossy(&out);
    let line = text.lines().find(|l| l.starts_with("ref: "))?;
    let target = line.strip_prefix("ref: ")?.split_whitespace().next()?;
    Some(target.to_string())
}

/// Runs `git ARGS` in `repo` with a fixed environment; its stdout, or its stderr as the error.
fn run(repo: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args([
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "protocol.fd.allow=never",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "true")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(std::process::Stdio::null())
        .output()
        .context("running git (is it installed?)")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        bail!(
            "git {}: {}",
            args[0],
            err.chars().take(2000).collect::<String>()
        );
    }
    Ok(out.stdout)
}

/// Default cache of fetched repositories: `sweep-git` in the temp directory.
pub fn default_cache_dir() -> PathBuf {
    std::env::temp_dir().join("sweep-git")
}
