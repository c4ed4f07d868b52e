//! Worker settings: where the coordinator is, how many engines to run, where to cache.

use std::path::PathBuf;
use std::time::Duration;

use crate::sandbox::SandboxMode;

/// Everything a [`crate::Worker`] needs to know before it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Base URL of the coordinator, e.g. `http://127.0.0.1:8080` (no trailing `/api/v1`).
    pub coordinator: String,
    /// Worker token sent with every request (`Authorization: Bearer`); the coordinator
    /// accepts this worker's calls only with the token that registered it.
    pub token: Option<String>,
    /// Engine processes run at once: one job slot per core, fed by the worker's single lease
    /// loop (which also keeps one job per 8 slots waiting, so a free slot never waits for a
    /// round trip).
    pub cores: usize,
    /// Root of the on-disk cache: `sources/<sha256>/` and `builds/v2/<key>/<binary>` live here
    /// and survive restarts, so a restarted worker neither re-downloads nor rebuilds.
    pub cache_dir: PathBuf,
    /// Display name sent on registration (defaults to the host name).
    pub name: String,
    /// Host name sent on registration.
    pub host: String,
    /// Pause between lease polls when the coordinator has no work; jittered and grown up to
    /// [`WorkerConfig::poll_interval_max`] while nothing comes, so idle workers stay cheap.
    pub poll_interval: Duration,
    /// Longest pause between lease polls while idle.
    pub poll_interval_max: Duration,
    /// Results per upload at most, over all jobs of the worker; a full batch goes up at once.
    pub upload_batch_max: usize,
    /// Longest time a finished result (or a finished job's close) waits before it is
    /// uploaded, so progress stays visible even for slow positions. With the batch limit this
    /// bounds a busy worker to about one upload per interval, however many cores it has.
    pub upload_interval: Duration,
    /// Timeout of one ordinary API request (source downloads get a longer one).
    pub request_timeout: Duration,
    /// On shutdown, how long to keep trying to upload results already computed.
    pub shutdown_grace: Duration,
    /// Programs a build may start (argv[0] of the coordinator's build command, matched
    /// exactly: a bare name is looked up in `PATH`, a path must be listed as written). A
    /// build with any other program is reported as failed without running anything.
    pub build_programs: Vec<String>,
    /// Binaries of binary-only engines this worker may start, as absolute paths matched
    /// exactly. Only those are announced at registration; a lease naming another is
    /// reported as a failed build without starting anything.
    pub engine_binaries: Vec<String>,
    /// PEM bundle of the CA certificates to trust for an `https://` coordinator, instead of
    /// the system's roots (see [`sweep_client::trust`]).
    pub ca_cert: Option<PathBuf>,
    /// Lease at most this many jobs in all, and return once every one of them has ended
    /// (finished and its results reported, or stopped by the coordinator): for batch
    /// schedulers that give a worker a fixed share of a sweep. `None`: no limit.
    pub max_jobs: Option<u64>,
    /// Return once this worker has held no job and every lease request for this long was
    /// answered "no job" (the queue is empty, or holds only jobs it cannot take): for batch
    /// schedulers, so a worker frees its allocation when the sweeps are done. A coordinator
    /// that cannot be reached does not count as idle. `None`: wait for work forever.
    pub exit_when_idle: Option<Duration>,
    /// How builds and engines are contained (see [`crate::sandbox`]): bubblewrap by default,
    /// and the worker refuses to start without it unless this says `Off` (or `Auto`).
    pub sandbox: SandboxMode,
    /// Directories the sandbox shows read-only besides `/usr` and `/opt`: a toolchain
    /// installed elsewhere (e.g. `~/.rustup`, `~/.cargo` for `cargo` builds).
    pub sandbox_read_only: Vec<PathBuf>,
}

impl WorkerConfig {
    /// A config with defaults for everything but the coordinator URL and the cache directory:
    /// one slot per available CPU, the host name as name, 750 ms idle polling (up to 5 s),
    /// uploads of 1,000 results or every second, the default build programs (`make`, `cmake`,
    /// `cargo`) and engine binaries (those of the bundled definitions: `/usr/games/stockfish`,
    /// `fairymax`, `glaurung` and `toga2`), and the bubblewrap sandbox.
    pub fn new(coordinator: impl Into<String>, cache_dir: impl Into<PathBuf>) -> Self {
        let host = host_name();
        WorkerConfig {
            coordinator: coordinator.into(),
            token: None,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            cache_dir: cache_dir.into(),
            name: host.clone(),
            host,
            poll_interval: Duration::from_millis(750),
            poll_interval_max: Duration::from_secs(5),
            upload_batch_max: 1000,
            upload_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
            build_programs: crate::allow::DEFAULT_BUILD_PROGRAMS
                .iter()
                .map(|p| p.to_string())
                .collect(),
            engine_binaries: crate::allow::DEFAULT_ENGINE_BINARIES
                .iter()
                .map(|p| p.to_string())
                .collect(),
            ca_cert: None,
            max_jobs: None,
            exit_when_idle: None,
            sandbox: SandboxMode::On,
            sandbox_read_only: Vec::new(),
        }
    }
}

/// The machine's host name, or `"unknown"` when it cannot be read.
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes at most that many.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..end]) {
        Ok(s) if !s.is_empty() => s.to_string(),
        _ => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_sane() {
        let c = WorkerConfig::new("http://x", "/tmp/c");
        assert!(c.cores >= 1);
        assert!(!c.host.is_empty());
        assert_eq!(c.name, c.host);
        assert!(c.poll_interval <= c.poll_interval_max);
    }
}
