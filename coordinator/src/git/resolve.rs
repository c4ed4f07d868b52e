//! The steps of resolving one git source in the cache: fetch, check the cache's size,
//! resolve the revision, archive the commit. Every git run shares one deadline.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sha2::{Digest, Sha256};
use sweep_domain::source::redact_git_url;
use tokio::time::Instant;

use super::allow::{Allowed, Scheme};
use super::run::{git, Limits, RunError};
use super::{GitError, GitSettings, Resolved, MAX_GIT_ARCHIVE_BYTES};

/// Most bytes read of what git prints besides an archive (ids, `ls-remote` lines).
const MAX_SMALL_OUTPUT: usize = 64 * 1024;

/// One git source being resolved, within its turn of the pool.
pub(super) struct Job<'a> {
    settings: &'a GitSettings,
    /// As shown: credentials redacted (the allow-list refuses them, but be safe in logs).
    shown: String,
    allowed: Allowed,
    repo: PathBuf,
    home: PathBuf,
    deadline: Instant,
}

impl<'a> Job<'a> {
    pub(super) fn new(settings: &'a GitSettings, url: &str, allowed: Allowed) -> Self {
        let cache = &settings.cache_dir;
        Self {
            settings,
            shown: redact_git_url(url).into_owned(),
            allowed,
            repo: cache.join(format!("{}.git", hex::encode(Sha256::digest(url)))),
            home: cache.join("home"),
            deadline: Instant::now() + settings.timeout,
        }
    }

    /// Fetches, then resolves `rev` to a commit and archives it.
    pub(super) async fn resolve(&self, rev: &str) -> Result<Resolved, GitError> {
        self.prepare().await?;
        self.fetch().await?;
        // `HEAD` of the cache is not the remote's: resolve it as the remote's default branch.
        let wanted = match rev {
            "HEAD" => self.remote_head().await?.unwrap_or_else(|| "HEAD".into()),
            _ => rev.to_string(),
        };
        let commit = self
            .local(
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &format!("{wanted}^{{commit}}"),
                ],
                MAX_SMALL_OUTPUT,
            )
            .await
            .map_err(|e| match e {
                RunError::TimedOut => self.timed_out(),
                _ => GitError::UnknownRev {
                    url: self.shown.clone(),
                    rev: rev.to_string(),
                },
            })?;
        let commit = String::from_utf8_lossy(&commit).trim().to_string();
        let tar = self
            .local(&["archive", "--format=tar", &commit], MAX_GIT_ARCHIVE_BYTES)
            .await
            .map_err(|e| match e {
                RunError::TooMuchOutput(_) => GitError::TooLarge {
                    what: "the commit's archive",
                    limit: MAX_GIT_ARCHIVE_BYTES as u64,
                },
                e => self.failed("archive", e),
            })?;
        Ok(Resolved { commit, tar })
    }

    /// The private `HOME` and the URL's bare repository in the cache, made if missing.
    async fn prepare(&self) -> Result<(), GitError> {
        for dir in [&self.settings.cache_dir, &self.home] {
            make_private_dir(dir)?;
        }
        if !self.repo.join("HEAD").exists() {
            make_private_dir(&self.repo)?;
            self.local(&["init", "--quiet", "--bare"], MAX_SMALL_OUTPUT)
                .await
                .map_err(|e| self.failed("init", e))?;
        }
        Ok(())
    }

    /// Fetches every branch and tag; a failure or a cache over its bound removes the cache
    /// (a later submission fetches afresh).
    async fn fetch(&self) -> Result<(), GitError> {
        let url = self.allowed.target.as_str();
        let args = [
            "fetch",
            "--quiet",
            "--force",
            "--prune",
            "--no-recurse-submodules",
            "--",
            url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ];
        let fetched = self.remote(&args, MAX_SMALL_OUTPUT).await;
        let max = self.settings.max_fetch_bytes;
        let too_large = fetched.as_ref().err().is_some_and(RunError::hit_file_limit)
            || dir_size(&self.repo) >= max;
        let outcome = match fetched {
            _ if too_large => Err(GitError::TooLarge {
                what: "the repository",
                limit: max,
            }),
            Ok(_) => Ok(()),
            Err(RunError::TimedOut) => Err(self.timed_out()),
            Err(e) => {
                self.log("fetch", &e);
                Err(GitError::Fetch {
                    url: self.shown.clone(),
                })
            }
        };
        if outcome.is_err() {
            let _ = std::fs::remove_dir_all(&self.repo);
        }
        outcome
    }

    /// The branch the remote's `HEAD` points at, from `git ls-remote --symref`.
    async fn remote_head(&self) -> Result<Option<String>, GitError> {
        let url = self.allowed.target.as_str();
        let out = match self
            .remote(
                &["ls-remote", "--symref", "--", url, "HEAD"],
                MAX_SMALL_OUTPUT,
            )
            .await
        {
            Ok(out) => out,
            Err(RunError::TimedOut) => return Err(self.timed_out()),
            Err(e) => {
                self.log("ls-remote", &e);
                return Ok(None);
            }
        };
        let text = String::from_utf8_lossy(&out);
        let head = text
            .lines()
            .find_map(|l| l.strip_prefix("ref: "))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string);
        Ok(head)
    }

    /// git on the cache alone: every transport off.
    async fn local(&self, args: &[&str], max_stdout: usize) -> Result<Vec<u8>, RunError> {
        git(&self.repo, args, self.limits(None, max_stdout)).await
    }

    /// git talking to the URL: its transport only.
    async fn remote(&self, args: &[&str], max_stdout: usize) -> Result<Vec<u8>, RunError> {
        let scheme = Some(self.allowed.scheme);
        git(&self.repo, args, self.limits(scheme, max_stdout)).await
    }

    fn limits(&self, scheme: Option<Scheme>, max_stdout: usize) -> Limits<'_> {
        Limits {
            home: &self.home,
            scheme,
            max_file_bytes: self.settings.max_fetch_bytes,
            max_stdout,
            deadline: self.deadline,
        }
    }

    fn timed_out(&self) -> GitError {
        tracing::warn!(url = %self.shown, "git source timed out");
        GitError::TimedOut {
            url: self.shown.clone(),
            secs: self.settings.timeout.as_secs(),
        }
    }

    /// A failure of git on our own cache: the caller gets an internal error, the log git's
    /// words.
    fn failed(&self, op: &str, e: RunError) -> GitError {
        if matches!(e, RunError::TimedOut) {
            return self.timed_out();
        }
        self.log(op, &e);
        GitError::Other(anyhow::anyhow!(
            "git {op} failed on the cache of {}",
            self.shown
        ))
    }

    fn log(&self, op: &str, e: &RunError) {
        tracing::warn!(url = %self.shown, op, error = %e, "git failed");
    }
}

/// Makes `dir` (owner-only when new): another local user must not plant a repository
/// (with hooks) or a `HOME` in a shared temp directory.
fn make_private_dir(dir: &Path) -> Result<(), GitError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the git cache {}", dir.display()))?;
    Ok(())
}

/// Bytes of the regular files under `dir` (0 if it is unreadable).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
