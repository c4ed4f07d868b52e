//! Arguments of the long-running roles: `sweep coordinator`, `sweep worker` and `sweep run`.
//! Each command's arguments are one struct, handed whole to the command that runs it.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::paths::{absolute_path, database};
use super::Remote;

/// How a long-running command writes its log lines on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON object per line, with the fields of the spans it happened in (sweep_id,
    /// job_id, worker_id, ...), for log collectors.
    Json,
}

/// The log options of the long-running commands (coordinator, worker, run).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct LogArgs {
    /// Log line format on stderr: `text`, or `json` (one object per line, span fields
    /// included) for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "SWEEP_LOG_FORMAT")]
    pub log_format: LogFormat,
}

/// The coordinator's HTTPS certificate and key (both or neither).
#[derive(Debug, clap::Args)]
pub struct ServerTls {
    /// Serve HTTPS with this PEM certificate chain (server certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key", value_parser = absolute_path())]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert", value_parser = absolute_path())]
    pub tls_key: Option<PathBuf>,
}

/// Where engine definitions and suites are read from.
#[derive(Debug, clap::Args)]
pub struct CatalogDirs {
    /// Directory of engine definitions.
    #[arg(long, default_value = "configs/engines", value_name = "DIR", value_parser = absolute_path())]
    pub engines_dir: PathBuf,
    /// Directory of EPD suites.
    #[arg(long, default_value = "suites", value_name = "DIR", value_parser = absolute_path())]
    pub suites_dir: PathBuf,
}

/// Where `sweep run` keeps its database unless `--database` says otherwise.
pub const DEFAULT_RUN_DATABASE: &str = "./sweep.db";

/// Default cache of sources and builds: `$XDG_CACHE_HOME/sweep` or `~/.cache/sweep`.
fn default_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("sweep")
}

/// Every core of this machine: what `--cores` means when not given.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Options of `sweep coordinator`.
#[derive(Debug, clap::Args)]
pub struct CoordinatorArgs {
    /// Database: a postgres:// URL or a SQLite file (created if missing); migrations are
    /// applied at start.
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DB",
        alias = "database-url",
        value_parser = database
    )]
    pub database: String,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Engine definitions and suites.
    #[command(flatten)]
    pub dirs: CatalogDirs,
    /// Seconds a lease lives without a heartbeat or report.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub lease_secs: u64,
    /// Attempts a failing position or build gets before it is marked failed.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,
    /// Requests served at once; more are answered at once with 503 and Retry-After.
    #[arg(long, default_value_t = sweep_coordinator::config::DEFAULT_MAX_IN_FLIGHT, value_name = "N")]
    pub max_in_flight: usize,
    /// Live workers one worker token may hold at once; one more registration is answered
    /// 429 until one of them stops or goes a lease without being seen.
    #[arg(long, default_value_t = sweep_coordinator::service::DEFAULT_MAX_WORKERS_PER_TOKEN, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_workers_per_token: u32,
    /// Let anonymous clients read sweeps, tables, engines and suites (writes always
    /// need a token).
    #[arg(long)]
    pub public_read: bool,
    /// Log line format.
    #[command(flatten)]
    pub log: LogArgs,
    /// HTTPS certificate and key.
    #[command(flatten)]
    pub tls: ServerTls,
    /// Which git sources may be fetched, and git's bounds.
    #[command(flatten)]
    pub git: GitArgs,
    /// Where to POST an event when a sweep ends (`sweep.finished`, `sweep.failed`,
    /// `crosscheck.mismatch`); repeat for several receivers.
    #[arg(long = "webhook", value_name = "URL")]
    pub webhooks: Vec<String>,
    /// The key every webhook event is signed with (HMAC-SHA256 of the body, in the
    /// `X-Sweep-Signature` header); required with --webhook.
    #[arg(
        long,
        env = "SWEEP_WEBHOOK_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub webhook_secret: Option<String>,
    /// Hold a submitter's sweep for an admin's approval (`sweep approve`, `sweep reject`)
    /// when its estimate (as `sweep submit --dry-run` gives it) is over this many
    /// engine-hours, or when it cannot be estimated; admins' sweeps are never held.
    #[arg(long, value_name = "HOURS", value_parser = positive_hours)]
    pub approve_over_engine_hours: Option<f64>,
    /// Let this role's tokens submit `priority = "high"` sweeps too (repeatable; admins
    /// always may): `submitter`.
    #[arg(long, value_name = "ROLE")]
    pub high_priority_for: Vec<sweep_domain::auth::Role>,
    /// Delete sweeps that ended more than this many days ago (a fraction is allowed), each
    /// first archived to an export file in --archive-dir and checked.
    #[arg(long, value_name = "DAYS", value_parser = keep_days, requires = "archive_dir")]
    pub keep_finished_days: Option<f64>,
    /// Where --keep-finished-days writes each sweep's export file (`sweep-ID.sweep.gz`)
    /// before deleting it.
    #[arg(long, value_name = "DIR", value_parser = super::paths::absolute_path(), requires = "keep_finished_days")]
    pub archive_dir: Option<std::path::PathBuf>,
}

/// A positive, finite number of hours.
fn positive_hours(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(h) if h.is_finite() && h > 0.0 => Ok(h),
        _ => Err(format!("`{s}` is not a positive number of hours")),
    }
}

/// A keep of at least 0 days and at most about 27 years (a finite number of seconds).
fn keep_days(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() && (0.0..=10_000.0).contains(&d) => Ok(d),
        _ => Err(format!("`{s}` is not a number of days from 0 to 10000")),
    }
}

/// Git sources (`[source] git` in a sweep config): where the coordinator may fetch from
/// and the bounds git runs under.
#[derive(Debug, clap::Args)]
pub struct GitArgs {
    /// URL prefixes git sources may come from, comma-separated or repeated
    /// (`https://github.com/,https://git.example.org/team/`), matched on scheme, host, port
    /// and whole path segments; `file:///srv/repos/` allows local repositories under that
    /// directory. Schemes: https, http, git, file (never ssh). Default: none, so git sources
    /// are refused.
    #[arg(long, value_delimiter = ',', value_name = "PREFIXES")]
    pub git_allow: Vec<sweep_coordinator::git::AllowEntry>,
    /// Seconds a git source's fetch and archive may take; then git is killed and the
    /// submission refused.
    #[arg(long, default_value_t = 120, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub git_timeout_secs: u64,
    /// MiB a fetched repository may take in the git cache.
    #[arg(long, default_value_t = 256, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub git_max_fetch_mib: u64,
    /// Git sources fetched at once; more wait briefly, then are answered 503.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub git_jobs: u64,
    /// Where git sources are fetched to (and git's private HOME).
    #[arg(long, default_value_os_t = sweep_coordinator::git::default_cache_dir(), value_name = "DIR", value_parser = absolute_path())]
    pub git_cache_dir: PathBuf,
}

impl GitArgs {
    /// The coordinator's git settings these flags make.
    pub fn settings(&self) -> sweep_coordinator::git::GitSettings {
        sweep_coordinator::git::GitSettings {
            allow: sweep_coordinator::git::GitAllowList::new(self.git_allow.clone()),
            timeout: std::time::Duration::from_secs(self.git_timeout_secs),
            max_fetch_bytes: self.git_max_fetch_mib * 1024 * 1024,
            jobs: self.git_jobs as usize,
            cache_dir: self.git_cache_dir.clone(),
            ..Default::default()
        }
    }
}

/// Options of `sweep worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The coordinator to work for.
    #[command(flatten)]
    pub remote: Remote,
    /// Log line format.
    #[command(flatten)]
    pub log: LogArgs,
    /// Engine processes to run at once [default: all cores].
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Where sources and built variants are cached.
    #[arg(long, default_value_os_t = default_cache(), value_name = "DIR", value_parser = absolute_path())]
    pub cache_dir: PathBuf,
    /// Worker name (default: the host name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Exit (status 0) once the worker has been idle for --idle-secs: it held no job, and
    /// each time it asked the coordinator for work in that span the answer was "no job"
    /// (nothing queued, or only jobs it cannot take). A coordinator that cannot be reached
    /// does not count as idle (the worker keeps retrying). For batch jobs (Slurm, PBS)
    /// that should free their allocation when the sweeps are done.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// How long "idle" must last before --exit-when-idle exits, in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS", requires = "exit_when_idle", value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_secs: u64,
    /// Exit (status 0) after N jobs: lease no more than N in all, and exit once each has
    /// finished and its results are reported (or the coordinator took it back, e.g. its
    /// sweep was cancelled). A job is one chunk of positions (the sweep's `chunk_size`) of
    /// one build and suite. With --exit-when-idle too, whichever comes first.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_jobs: Option<u64>,
    /// Programs a build may start (argv[0] of the coordinator's build command, matched
    /// exactly: a bare name is looked up in PATH, a path must be listed as written).
    /// Comma-separated or repeated; a build with another program is reported as failed
    /// without running anything.
    #[arg(long, value_delimiter = ',', value_name = "PROGRAMS", default_values = sweep_worker::allow::DEFAULT_BUILD_PROGRAMS)]
    pub allow_build_programs: Vec<String>,
    /// Binaries of binary-only engines this worker may start (absolute paths, matched
    /// exactly). Comma-separated or repeated; only these are offered to the coordinator,
    /// and a job naming another is reported as a failed build without starting it.
    #[arg(long, value_delimiter = ',', value_name = "PATHS", default_values = sweep_worker::allow::DEFAULT_ENGINE_BINARIES)]
    pub allow_engine_binaries: Vec<String>,
    /// How builds and engines are contained: `on` runs them in a bubblewrap sandbox (Debian's
    /// `bubblewrap`) and refuses to start without it; `off` runs contributors' Makefiles
    /// and engines unconfined, as this worker's user (every build record says so).
    #[arg(long, value_enum, default_value = "on", value_name = "MODE")]
    pub sandbox: SandboxFlag,
    /// Directories the sandbox shows read-only besides /usr and /opt (a toolchain installed
    /// elsewhere). Comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "DIRS", value_parser = absolute_path())]
    pub sandbox_ro: Vec<PathBuf>,
}

/// The values of `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxFlag {
    /// bubblewrap, required.
    On,
    /// No sandbox.
    Off,
    /// bubblewrap where it works, else none (with a warning).
    Auto,
}

impl From<SandboxFlag> for sweep_worker::sandbox::SandboxMode {
    fn from(flag: SandboxFlag) -> Self {
        match flag {
            SandboxFlag::On => Self::On,
            SandboxFlag::Off => Self::Off,
            SandboxFlag::Auto => Self::Auto,
        }
    }
}

/// Options of `sweep run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Sweep config file (TOML).
    #[arg(required_unless_present = "resume", value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Resume the sweep with this id instead.
    #[arg(long, value_name = "ID")]
    pub resume: Option<i64>,
    /// Run nothing: print what the sweep would make and cost on this database, as
    /// `sweep submit --dry-run` does on a coordinator.
    #[arg(long, conflicts_with_all = ["resume", "serve"])]
    pub dry_run: bool,
    /// Database: a postgres:// URL or a SQLite file (created if missing). DATABASE_URL is
    /// not read here: a local run keeps to its own file unless this flag says otherwise.
    #[arg(
        long,
        default_value = DEFAULT_RUN_DATABASE,
        value_name = "DB",
        alias = "database-url",
        value_parser = database
    )]
    pub database: String,
    /// Engine processes to run at once [default: all cores].
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Format of the final table.
    #[arg(long, default_value = "md", value_parser = ["md", "csv", "json", "review"])]
    pub format: String,
    /// Keep the HTTP API up on this address during the run, so remote workers can join.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<SocketAddr>,
    /// With --serve: HTTPS there (the local worker uses a loopback port of its own).
    #[command(flatten)]
    pub tls: ServerTls,
    /// Where sources and built variants are cached.
    #[arg(long, default_value_os_t = default_cache(), value_name = "DIR", value_parser = absolute_path())]
    pub cache_dir: PathBuf,
    /// Engine definitions and suites.
    #[command(flatten)]
    pub dirs: CatalogDirs,
    /// `--source DIR` and `--variant-source NAME=DIR` (not with `--resume`).
    #[command(flatten)]
    pub sources: SourceArgs,
    /// Measure every position again, even those an earlier sweep of the same build (same
    /// source, defines, recipe and options) already measured; the config's
    /// `recompute = true` does the same. Without it, those results are reused.
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
    /// How builds and engines are contained: `auto` (the default here, where the code is
    /// usually your own) runs them in a bubblewrap sandbox when Debian's `bubblewrap` works on
    /// this machine and unconfined otherwise, with a warning; `on` requires it; `off` never.
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE")]
    pub sandbox: SandboxFlag,
    /// Directories the sandbox shows read-only besides /usr and /opt (a toolchain installed
    /// elsewhere). Comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "DIRS", value_parser = absolute_path())]
    pub sandbox_ro: Vec<PathBuf>,
    /// With `json`, progress is logged as lines too (no bars).
    #[command(flatten)]
    pub log: LogArgs,
    /// Which git sources the run's coordinator may fetch (none unless listed), and git's
    /// bounds.
    #[command(flatten)]
    pub git: GitArgs,
}

/// The code a submission runs on, from directories of this machine (`sweep submit`, `sweep
/// run`): each snapshotted here (leaving out the engine's `exclude`, what the directory's
/// .gitignore names, and dotfiles), stored or uploaded unless the coordinator has it, and
/// named in the config.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceArgs {
    /// Sweep this directory (e.g. your working copy of the engine) instead of the source
    /// registered on the coordinator; named in the config's `[source] sha256`.
    #[arg(long = "source", value_name = "DIR", value_parser = absolute_path())]
    pub dir: Option<PathBuf>,
    /// Build variant NAME (one of the config's `[[variants]]`) from DIR, e.g. a patched copy
    /// beside the baseline's; named in that variant's `sha256`. Repeatable.
    #[arg(long = "variant-source", value_name = "NAME=DIR", value_parser = super::paths::variant_dir)]
    pub variants: Vec<super::paths::VariantDir>,
}

impl SourceArgs {
    /// Whether any directory was given.
    pub fn any(&self) -> bool {
        self.dir.is_some() || !self.variants.is_empty()
    }
}

/// Arguments of `sweep compare`: the two revisions, and everything `sweep run` takes (the
/// config file among them).
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The base revision (branch, tag or commit) of the config's `[source] git`: the
    /// baseline row, `base`.
    #[arg(long, value_name = "REV")]
    pub base: String,
    /// The revision to compare with it (the patch): the row `test`.
    #[arg(long, value_name = "REV")]
    pub test: String,
    /// As for `sweep run`; `--format md` (the default) prints `review`: the paired
    /// statistics first.
    #[command(flatten)]
    pub run: RunArgs,
}
