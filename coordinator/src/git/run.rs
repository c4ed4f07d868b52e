//! One git process, contained: a cleared environment, no configuration but ours, no
//! credentials, no ssh, only the one transport its URL needs; in a process group of its own
//! that is killed at the deadline (or when the caller gives up); files it writes capped in
//! size; what it prints read within bounds.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use super::allow::Scheme;

/// The only places git and its helpers are looked up.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Bytes of git's stderr kept (its end) for the log.
const STDERR_TAIL: usize = 2048;

/// The operator's own network settings, passed through: they are not the submitter's to set,
/// and a coordinator behind a proxy could fetch nothing without them.
const PASSED_THROUGH: &[&str] = &[
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// How a git process failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum RunError {
    /// git could not be started (not installed?).
    #[error("starting git: {0}")]
    Spawn(#[source] std::io::Error),
    /// Its deadline passed; its process group was killed.
    #[error("git did not finish in time")]
    TimedOut,
    /// It printed more than it may; its process group was killed.
    #[error("git printed more than {0} bytes")]
    TooMuchOutput(usize),
    /// Reading its output failed.
    #[error("reading git's output: {0}")]
    Io(#[source] std::io::Error),
    /// It exited unsuccessfully.
    #[error("git exited with {status}: {stderr}")]
    Failed {
        /// Its exit status.
        status: ExitStatus,
        /// The end of what it printed on stderr.
        stderr: String,
    },
}

impl RunError {
    /// Did a file git wrote reach the size limit (SIGXFSZ, caught by git or not)?
    pub(super) fn hit_file_limit(&self) -> bool {
        match self {
            RunError::Failed { status, stderr } => {
                status.signal() == Some(libc::SIGXFSZ)
                    || stderr.contains("File size limit exceeded")
                    || stderr.contains("signal 25")
            }
            _ => false,
        }
    }
}

/// What one git process may do.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits<'a> {
    /// Its `HOME`: a private, empty directory.
    pub home: &'a Path,
    /// The one transport it may use (none for local work on the cache).
    pub scheme: Option<Scheme>,
    /// Largest file it may write (the fetched pack).
    pub max_file_bytes: u64,
    /// Most bytes of stdout read; more kills it.
    pub max_stdout: usize,
    /// When it is killed.
    pub deadline: Instant,
}

/// Runs `git -C repo ARGS` under `limits`; its stdout.
pub(super) async fn git(
    repo: &Path,
    args: &[&str],
    limits: Limits<'_>,
) -> Result<Vec<u8>, RunError> {
    let mut child = command(repo, args, &limits)
        .spawn()
        .map_err(RunError::Spawn)?;
    let group = Group::of(&child);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut tail = tokio::spawn(read_tail(stderr));
    let finished = tokio::time::timeout_at(
        limits.deadline,
        finish(&mut child, stdout, limits.max_stdout),
    )
    .await
    .unwrap_or(Err(RunError::TimedOut));
    let (bytes, status) = match finished {
        Ok(done) => done,
        Err(e) => {
            group.kill();
            let _ = child.wait().await;
            group.disarm();
            tail.abort();
            return Err(e);
        }
    };
    group.disarm();
    // Its helpers share the pipe; one that outlived git must not hold us up.
    let stderr = match tokio::time::timeout(Duration::from_secs(1), &mut tail).await {
        Ok(Ok(text)) => text,
        _ => String::new(),
    };
    tail.abort();
    if !status.success() {
        return Err(RunError::Failed { status, stderr });
    }
    Ok(bytes)
}

/// Reads `child`'s stdout within `cap`, then waits for it to exit.
async fn finish(
    child: &mut Child,
    stdout: impl AsyncRead + Unpin,
    cap: usize,
) -> Result<(Vec<u8>, ExitStatus), RunError> {
    let bytes = read_capped(stdout, cap)
        .await
        .map_err(RunError::Io)?
        .ok_or(RunError::TooMuchOutput(cap))?;
    let status = child.wait().await.map_err(RunError::Io)?;
    Ok((bytes, status))
}

/// `git -C repo -c ... ARGS` with the contained environment.
fn command(repo: &Path, args: &[&str], limits: &Limits<'_>) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", PATH)
        .env("HOME", limits.home)
        .env("LC_ALL", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_SSH_COMMAND", "false");
    for name in PASSED_THROUGH {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.arg("-C").arg(repo);
    for setting in settings(limits.scheme) {
        cmd.arg("-c").arg(setting);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let max_file = limits.max_file_bytes;
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || limit_files(max_file));
    }
    cmd
}

/// The `-c` settings of every git run: every transport off but `scheme`'s, and nothing that
/// could reach a credential, a key, a hook or a second host.
fn settings(scheme: Option<Scheme>) -> Vec<OsString> {
    let mut out: Vec<OsString> = [
        "protocol.allow=never",
        "protocol.ext.allow=never",
        "protocol.fd.allow=never",
        "credential.helper=",
        "core.sshCommand=false",
        "core.hooksPath=/dev/null",
        // A redirect could lead a listed host's request to an internal one.
        "http.followRedirects=false",
        // One pack per fetch, so the file size limit bounds what a fetch stores.
        "fetch.unpackLimit=1",
        "transfer.unpackLimit=1",
        "submodule.recurse=false",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if let Some(s) = scheme {
        out.push(format!("protocol.{}.allow=always", s.protocol()).into());
    }
    out
}

/// In the child before exec: files it writes stop at `max` bytes (SIGXFSZ), and it dumps
/// no core when that signal kills it.
fn limit_files(max: u64) -> std::io::Result<()> {
    let fsize = libc::rlimit {
        rlim_cur: max as libc::rlim_t,
        rlim_max: max as libc::rlim_t,
    };
    let core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain system calls on stack values.
    let failed = unsafe {
        libc::setrlimit(libc::RLIMIT_FSIZE, &fsize) != 0
            || libc::setrlimit(libc::RLIMIT_CORE, &core) != 0
    };
    if failed {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A git process group, killed when dropped unless its leader was reaped (then its id may
/// belong to someone else).
struct Group {
    pgid: Option<i32>,
}

impl Group {
    fn of(child: &Child) -> Self {
        Self {
            pgid: child.id().map(|p| p as i32),
        }
    }

    fn kill(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: a plain system call; the leader is not reaped yet, so the group is ours.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    fn disarm(mut self) {
        self.pgid = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The caller gave up (e.g. its request was cancelled) while git still ran.
        self.kill();
    }
}

/// All of `r` if it is at most `cap` bytes; `None` as soon as it is longer.
async fn read_capped(r: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<Option<Vec<u8>>> {
    // Reserved whole (its pages are touched only as they fill): growing by doubling would
    // hold the old and the new buffer at once while it copies.
    let mut out = Vec::with_capacity(cap + 1);
    r.take(cap as u64 + 1).read_to_end(&mut out).await?;
    Ok((out.len() <= cap).then_some(out))
}

/// The last [`STDERR_TAIL`] bytes of `r`, as text; never more than twice that in memory.
async fn read_tail(mut r: impl AsyncRead + Unpin) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * STDERR_TAIL {
            kept.drain(..kept.len() - STDERR_TAIL);
        }
    }
    let start = kept.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&kept[start..]).trim().to_string()
}
