//! Command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{ArgGroup, Parser, Subcommand};

/// Distributed parameter sweeps for search engines.
#[derive(Debug, Parser)]
#[command(name = "sweep", version, about)]
pub struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

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

/// Where the coordinator is.
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// Coordinator base URL.
    #[arg(
        long,
        env = "SWEEP_COORDINATOR",
        default_value = "http://127.0.0.1:8080"
    )]
    pub coordinator: String,
    /// API token (`sweep token create` makes one).
    #[arg(long, env = "SWEEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// PEM bundle of CA certificates to trust for an https:// coordinator, instead of the
    /// system's roots.
    #[arg(long, env = "SWEEP_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

/// The coordinator's HTTPS certificate and key (both or neither).
#[derive(Debug, clap::Args)]
pub struct ServerTls {
    /// Serve HTTPS with this PEM certificate chain (server certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Where sweeps are read from: a coordinator, or a database directly (e.g. `./sweep.db`).
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Coordinator base URL.
    #[arg(
        long,
        env = "SWEEP_COORDINATOR",
        default_value = "http://127.0.0.1:8080"
    )]
    pub coordinator: String,
    /// API token (`sweep token create` makes one).
    #[arg(long, env = "SWEEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read a database directly instead (SQLite path or postgres:// URL); needs no token.
    #[arg(long, conflicts_with = "coordinator")]
    pub database: Option<String>,
    /// PEM bundle of CA certificates to trust for an https:// coordinator, instead of the
    /// system's roots.
    #[arg(long, env = "SWEEP_CA_CERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

/// Following a sweep to its end (`submit --wait`, `status --wait`).
#[derive(Debug, clap::Args)]
pub struct Wait {
    /// Follow the sweep until it ends (progress on stderr), then print its table on stdout.
    /// Exit code: 0 done, 3 done_with_errors, 4 failed, 5 cancelled, 130 when Ctrl-C stops
    /// the waiting (the sweep goes on), 1 when the command itself failed.
    #[arg(long)]
    pub wait: bool,
    /// Format of the table printed at the end.
    #[arg(long, default_value = "md", value_parser = ["md", "csv", "json"], requires = "wait")]
    pub format: String,
}

impl Wait {
    /// The table format to wait for, when waiting.
    pub fn format(&self) -> Option<&str> {
        self.wait.then_some(self.format.as_str())
    }
}

/// Default cache of sources and builds: `$XDG_CACHE_HOME/sweep` or `~/.cache/sweep`.
fn default_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("sweep")
}

fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a coordinator (HTTP API + Postgres).
    Coordinator {
        /// Postgres URL.
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// Address to listen on (port 0 picks a free port; the bound address is logged).
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Directory of engine definitions.
        #[arg(long, default_value = "configs/engines")]
        engines_dir: PathBuf,
        /// Directory of EPD suites.
        #[arg(long, default_value = "suites")]
        suites_dir: PathBuf,
        /// Seconds a lease lives without a heartbeat or report.
        #[arg(long, default_value_t = 30)]
        lease_secs: u64,
        /// Attempts a failing position or build gets before it is marked failed.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
        max_attempts: u32,
        /// Requests served at once; more are answered at once with 503 and Retry-After.
        #[arg(long, default_value_t = sweep_coordinator::config::DEFAULT_MAX_IN_FLIGHT)]
        max_in_flight: usize,
        /// Let anonymous clients read sweeps, tables, engines and suites (writes always
        /// need a token).
        #[arg(long)]
        public_read: bool,
        #[command(flatten)]
        log: LogArgs,
        #[command(flatten)]
        tls: ServerTls,
    },
    /// Run a worker: lease jobs, build variants, run engines, report results.
    Worker {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        log: LogArgs,
        /// Engine processes to run at once.
        #[arg(long, default_value_t = 1)]
        cores: usize,
        /// Where sources and built variants are cached.
        #[arg(long, default_value_os_t = default_cache())]
        cache_dir: PathBuf,
        /// Worker name (default: the host name).
        #[arg(long)]
        name: Option<String>,
        /// Programs a build may start (argv[0] of the coordinator's build command, matched
        /// exactly: a bare name is looked up in PATH, a path must be listed as written).
        /// Comma-separated or repeated; a build with another program is reported as failed
        /// without running anything.
        #[arg(long, value_delimiter = ',', default_values = sweep_worker::allow::DEFAULT_BUILD_PROGRAMS)]
        allow_build_programs: Vec<String>,
        /// Binaries of binary-only engines this worker may start (absolute paths, matched
        /// exactly). Comma-separated or repeated; only these are offered to the coordinator,
        /// and a job naming another is reported as a failed build without starting it.
        #[arg(long, value_delimiter = ',', default_values = sweep_worker::allow::DEFAULT_ENGINE_BINARIES)]
        allow_engine_binaries: Vec<String>,
    },
    /// Run a whole sweep locally: in-process coordinator, local worker, live progress, table.
    Run {
        /// Sweep config file (TOML).
        #[arg(required_unless_present = "resume")]
        config: Option<PathBuf>,
        /// Resume the sweep with this id instead.
        #[arg(long)]
        resume: Option<i64>,
        /// Database: a SQLite file (created if missing) or a postgres:// URL.
        #[arg(long, default_value = "./sweep.db")]
        database: String,
        /// Engine processes to run at once (default: all cores).
        #[arg(long, default_value_t = all_cores())]
        cores: usize,
        /// Format of the final table.
        #[arg(long, default_value = "md", value_parser = ["md", "csv", "json"])]
        format: String,
        /// Keep the HTTP API up on this address during the run, so remote workers can join.
        #[arg(long)]
        serve: Option<SocketAddr>,
        // With --serve: HTTPS there (the local worker uses a loopback port of its own).
        #[command(flatten)]
        tls: ServerTls,
        /// Where sources and built variants are cached.
        #[arg(long, default_value_os_t = default_cache())]
        cache_dir: PathBuf,
        /// Directory of engine definitions.
        #[arg(long, default_value = "configs/engines")]
        engines_dir: PathBuf,
        /// Directory of EPD suites.
        #[arg(long, default_value = "suites")]
        suites_dir: PathBuf,
        /// Sweep this directory instead of the engine definition's source (snapshotted as
        /// `sweep submit --source` does).
        #[arg(long = "source", value_name = "DIR", conflicts_with = "resume")]
        source_dir: Option<PathBuf>,
        /// With `json`, progress is logged as lines too (no bars).
        #[command(flatten)]
        log: LogArgs,
    },
    /// Submit a sweep config (TOML); prints the new sweep's id (with --wait: its table).
    Submit {
        /// The sweep config file.
        file: PathBuf,
        /// Sweep this directory (e.g. your working copy of the engine) instead of the source
        /// registered on the coordinator: it is snapshotted here (leaving out the engine's
        /// `exclude`, what the directory's .gitignore names, and dotfiles), uploaded unless the
        /// coordinator has it, and named in the config's `[source] sha256`.
        #[arg(long = "source", value_name = "DIR")]
        source_dir: Option<PathBuf>,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        wait: Wait,
    },
    /// Show a sweep's state and progress (with --wait: follow it and print its table).
    Status {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        source: Source,
        /// Print the raw JSON.
        #[arg(long, conflicts_with = "wait")]
        json: bool,
        #[command(flatten)]
        wait: Wait,
    },
    /// Print a sweep's delta table.
    Table {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        source: Source,
        /// Output format.
        #[arg(long, default_value = "md", value_parser = ["md", "csv", "json"])]
        format: String,
    },
    /// Cancel a sweep (submitters: their own; admins: any).
    Cancel {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        source: Source,
    },
    /// Give a build that failed to compile another chance (admin).
    Retry {
        /// Sweep id.
        id: i64,
        /// Build name, e.g. `NULLMOVE_SKIP=3`.
        #[arg(long)]
        build: String,
        #[command(flatten)]
        source: Source,
    },
    /// Print the audit log, newest first (admin).
    Audit {
        #[command(flatten)]
        source: Source,
        /// Entries to print.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Manage API tokens, straight in the database.
    Token {
        /// What to do.
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// List sweeps.
    List {
        #[command(flatten)]
        source: Source,
    },
    /// Register engines over the API without a restart (admin), or list them.
    Engine {
        /// What to do.
        #[command(subcommand)]
        command: EngineCommand,
    },
    /// Work with suites.
    Suite {
        /// What to do.
        #[command(subcommand)]
        command: SuiteCommand,
    },
}

/// `sweep token` subcommands. They work on the database itself (whoever can write it is
/// trusted), so the first admin token can be made before any token exists.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints it (and nothing else) on stdout. It is shown only this once.
    Create {
        /// Database (postgres:// URL or SQLite path).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// Role: admin, submitter, worker or reader.
        #[arg(long)]
        role: sweep_domain::auth::Role,
        /// Name, unique among live tokens (shown in sweep lists and the audit log).
        #[arg(long)]
        name: String,
    },
    /// List tokens (names, roles, dates; never secrets).
    List {
        /// Database (postgres:// URL or SQLite path).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// Revoke a token by name.
    Revoke {
        /// Database (postgres:// URL or SQLite path).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// Name of the token.
        name: String,
    },
}

/// `sweep engine` subcommands: the coordinator's engine catalog over its API.
#[derive(Debug, Subcommand)]
pub enum EngineCommand {
    /// Register or update the engine a definition file (TOML, as in configs/engines) defines
    /// (admin token). The coordinator validates it as it validates its own files, stores it
    /// in its database (it then wins over a file of the same name, also after a restart) and
    /// serves it at once; sweeps already submitted keep the definition they were submitted
    /// with. A source engine's `source.path` must be an absolute directory on the
    /// coordinator's machine.
    Add {
        /// The definition file.
        file: PathBuf,
        #[command(flatten)]
        remote: Remote,
    },
    /// List the engines sweeps may use, with their knobs and where each definition came from.
    List {
        #[command(flatten)]
        remote: Remote,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `sweep suite` subcommands.
#[derive(Debug, Subcommand)]
pub enum SuiteCommand {
    /// Write a subset of a finished sweep's suite as EPD, selected by one build's results.
    ///
    /// Filter (--solved, --unsolved or --any), then node range, then pick (--first N or
    /// --random N --seed S; default all); positions with an error or no result are never
    /// selected. The output is in suite order, and its header comments name the sweep, build,
    /// depth, suite and rule.
    Derive(DeriveArgs),
}

/// Options of `sweep suite derive`.
#[derive(Debug, clap::Args)]
#[command(group(ArgGroup::new("filter").required(true).args(["solved", "unsolved", "any"])))]
pub struct DeriveArgs {
    /// Sweep id.
    pub id: i64,
    #[command(flatten)]
    pub source: Source,
    /// Build whose results select the positions (e.g. head_reference).
    #[arg(long)]
    pub build: String,
    /// Suite of the sweep to take the positions from.
    #[arg(long)]
    pub suite: String,
    /// Keep positions the build solved.
    #[arg(long)]
    pub solved: bool,
    /// Keep positions the build did not solve.
    #[arg(long)]
    pub unsolved: bool,
    /// Keep every position with a result.
    #[arg(long)]
    pub any: bool,
    /// Keep the first N matching positions, in suite order.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "random")]
    pub first: Option<u32>,
    /// Keep N matching positions picked at random with --seed.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), requires = "seed")]
    pub random: Option<u32>,
    /// Seed of --random: the same seed picks the same positions on every machine.
    #[arg(long, requires = "random")]
    pub seed: Option<u64>,
    /// Keep positions the build searched with at least this many nodes.
    #[arg(long, value_name = "NODES")]
    pub min_nodes: Option<u64>,
    /// Keep positions the build searched with at most this many nodes.
    #[arg(long, value_name = "NODES")]
    pub max_nodes: Option<u64>,
    /// Derive from a sweep that has not finished (only positions with a result count).
    #[arg(long)]
    pub partial: bool,
    /// The search limit whose results select, e.g. `depth=8` or `nodes=100000` (default: the
    /// sweep's first).
    #[arg(long, value_name = "LIMIT")]
    pub limit: Option<sweep_domain::limit::Limit>,
    /// Write the EPD to this file (e.g. suites/NAME.epd) instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Overwrite --out if it exists.
    #[arg(long, requires = "out")]
    pub force: bool,
}

impl Command {
    /// The log line format the command asked for (text for commands without the option).
    pub fn log_format(&self) -> LogFormat {
        match self {
            Command::Coordinator { log, .. }
            | Command::Worker { log, .. }
            | Command::Run { log, .. } => log.log_format,
            _ => LogFormat::Text,
        }
    }
}
