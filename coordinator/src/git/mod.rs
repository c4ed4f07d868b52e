//! Git sources: resolve a revision of a repository to a commit and archive that commit.
//!
//! Only URLs under the operator's allow-list are fetched ([`allow`]); nothing else starts
//! git. Each git process runs contained ([`run`]): a cleared environment with a private
//! `HOME`, no system or global configuration, no credential helpers, no ssh, only the
//! transport its URL needs, a deadline after which its process group is killed, a cap on
//! the files it writes and on what it prints. The repository is fetched into a bare cache
//! per URL (`CACHE/<sha256 of the URL>.git`), branches and tags included, then the revision
//! is resolved there and archived ([`resolve`]). Options cannot be injected: the URL comes
//! after `--`, the revision after `--end-of-options`, and both were refused by the domain if
//! they start with `-`.
//!
//! Git work runs in a [`GitPool`]: a few operations at once, one at a time per URL (they
//! share its cache), so one slow fetch holds up no submission of another URL; a submission
//! that cannot get a turn soon is told to retry ([`GitError::Busy`]).

pub mod allow;
mod resolve;
mod run;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, Semaphore, SemaphorePermit};

pub use allow::{AllowEntry, GitAllowList, Refusal};

/// Seconds a git source's fetch, resolve and archive may take together by default.
pub const DEFAULT_GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Largest a repository may grow in the cache by default (256 MiB).
pub const DEFAULT_GIT_MAX_FETCH_BYTES: u64 = 256 * 1024 * 1024;
/// Git operations at once by default.
pub const DEFAULT_GIT_JOBS: usize = 2;
/// How long a submission waits for its URL and a turn in the pool before it is answered 503.
pub const DEFAULT_GIT_QUEUE_WAIT: Duration = Duration::from_secs(10);
/// Most bytes of `git archive` output read: the most of a tar stream a snapshot may be read
/// from (file data, headers and padding). More, and git is killed and the source refused,
/// so a small repository whose tree expands to gigabytes costs at most this much memory.
pub const MAX_GIT_ARCHIVE_BYTES: usize = sweep_archive::MAX_STREAM_BYTES as usize;

/// How the coordinator runs git for git sources.
#[derive(Debug, Clone)]
pub struct GitSettings {
    /// URL prefixes git sources may come from (`--git-allow`); empty refuses every git
    /// source.
    pub allow: GitAllowList,
    /// A git source's fetch, resolve and archive must finish within this; then git's process
    /// group is killed (`--git-timeout-secs`).
    pub timeout: Duration,
    /// Largest a repository may grow in the cache (each file git writes is capped at this
    /// too, with `RLIMIT_FSIZE`) (`--git-max-fetch-mib`).
    pub max_fetch_bytes: u64,
    /// Git sources resolved at once (`--git-jobs`, at least 1).
    pub jobs: usize,
    /// Where repositories are fetched to; git's private `HOME` is `home` in it.
    pub cache_dir: PathBuf,
    /// How long a submission waits for a turn before it is answered 503.
    pub queue_wait: Duration,
}

impl Default for GitSettings {
    /// No git sources; 120 s, 256 MiB, 2 at once, cached in `sweep-git` in the temp
    /// directory.
    fn default() -> Self {
        Self {
            allow: GitAllowList::default(),
            timeout: DEFAULT_GIT_TIMEOUT,
            max_fetch_bytes: DEFAULT_GIT_MAX_FETCH_BYTES,
            jobs: DEFAULT_GIT_JOBS,
            cache_dir: default_cache_dir(),
            queue_wait: DEFAULT_GIT_QUEUE_WAIT,
        }
    }
}

/// Why a git source could not be resolved. The texts are Sweep's own: git's output goes
/// to the coordinator's log only, never to the caller.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The allow-list refused the URL; git never ran.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The repository could not be fetched (unreachable, not a repository, refused).
    #[error("could not fetch {url}: not reachable or not a git repository (details in the coordinator's log)")]
    Fetch {
        /// The URL, credentials redacted.
        url: String,
    },
    /// Git took longer than the coordinator allows.
    #[error("{url} took longer than {secs} s to fetch and archive (the coordinator's --git-timeout-secs)")]
    TimedOut {
        /// The URL, credentials redacted.
        url: String,
        /// The limit.
        secs: u64,
    },
    /// The repository, or the commit's archive, is larger than allowed.
    #[error("{what} is larger than {limit} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// The limit it went over.
        limit: u64,
    },
    /// The revision names no commit of the repository.
    #[error("{rev} is no branch, tag or commit of {url}")]
    UnknownRev {
        /// The URL, credentials redacted.
        url: String,
        /// As the config gave it.
        rev: String,
    },
    /// Every turn is taken: retry later.
    #[error("too many git sources are being fetched; retry later")]
    Busy,
    /// Anything else (git missing, the cache unwritable).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// A resolved revision: the commit and its `git archive` (a plain tar).
#[derive(Debug)]
pub struct Resolved {
    /// Full commit id.
    pub commit: String,
    /// `git archive --format=tar COMMIT`, at most [`MAX_GIT_ARCHIVE_BYTES`].
    pub tar: Vec<u8>,
}

/// Where git work runs: at most `jobs` at once, one at a time per URL.
#[derive(Debug)]
pub struct GitPool {
    settings: GitSettings,
    slots: Semaphore,
    /// One lock per URL being worked on (entries nobody holds are pruned as others are
    /// added).
    urls: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A turn in the pool: the URL's lock and a slot.
struct Turn<'a> {
    _url: OwnedMutexGuard<()>,
    _slot: SemaphorePermit<'a>,
}

impl GitPool {
    /// A pool running git by `settings`.
    pub fn new(settings: GitSettings) -> Self {
        Self {
            slots: Semaphore::new(settings.jobs.max(1)),
            settings,
            urls: Mutex::default(),
        }
    }

    /// How it runs git.
    pub fn settings(&self) -> &GitSettings {
        &self.settings
    }

    /// Checks `url` against the allow-list, waits for a turn (at most the queue wait, else
    /// [`GitError::Busy`]), fetches it into the cache and resolves `rev` there.
    pub async fn resolve(&self, url: &str, rev: &str) -> Result<Resolved, GitError> {
        if url.starts_with('-') || rev.starts_with('-') {
            return Err(anyhow::anyhow!("git URL and rev may not start with `-`").into());
        }
        let allowed = self.settings.allow.check(url)?;
        let _turn = self.turn(url).await?;
        resolve::Job::new(&self.settings, url, allowed)
            .resolve(rev)
            .await
    }

    async fn turn(&self, url: &str) -> Result<Turn<'_>, GitError> {
        let lock = self.url_lock(url);
        let wait = async {
            let url = lock.lock_owned().await;
            let slot = self
                .slots
                .acquire()
                .await
                .expect("the pool is never closed");
            Turn {
                _url: url,
                _slot: slot,
            }
        };
        tokio::time::timeout(self.settings.queue_wait, wait)
            .await
            .map_err(|_| GitError::Busy)
    }

    fn url_lock(&self, url: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut urls = self.urls.lock().expect("git url locks");
        urls.retain(|_, lock| Arc::strong_count(lock) > 1);
        urls.entry(url.to_string()).or_default().clone()
    }
}

/// Default cache of fetched repositories: `sweep-git` in the temp directory.
pub fn default_cache_dir() -> PathBuf {
    std::env::temp_dir().join("sweep-git")
}
