//! Command-line arguments.

pub mod paths;
mod roles;

use std::path::PathBuf;

use clap::{ArgGroup, Parser, Subcommand};

pub use roles::{
    all_cores, CatalogDirs, CompareArgs, CoordinatorArgs, LogFormat, RunArgs, ServerTls,
    SourceArgs, WorkerArgs, DEFAULT_RUN_DATABASE,
};

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

/// The coordinator a command talks to when none is named.
pub const DEFAULT_COORDINATOR: &str = "http://127.0.0.1:8080";

/// Where the coordinator is.
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// Coordinator base URL (`host:port` alone means http://host:port).
    #[arg(
        long,
        env = "SWEEP_COORDINATOR",
        value_name = "URL",
        default_value = DEFAULT_COORDINATOR
    )]
    pub coordinator: String,
    /// Token and CA bundle.
    #[command(flatten)]
    pub credentials: Credentials,
}

/// What a client shows a coordinator, and trusts of it.
#[derive(Debug, clap::Args)]
pub struct Credentials {
    /// API token (`sweep token create` makes one).
    #[arg(
        long,
        env = "SWEEP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// PEM bundle of CA certificates to trust for an https:// coordinator, instead of the
    /// system's roots.
    #[arg(long, env = "SWEEP_CA_CERT", value_name = "FILE", value_parser = paths::absolute_path())]
    pub ca_cert: Option<PathBuf>,
}

/// Where sweeps are read from: a coordinator, or a database directly (e.g. `./sweep.db`).
///
/// `SWEEP_COORDINATOR` is read by hand rather than by clap: clap would count a URL from the
/// environment as given on the command line and refuse it beside `--database`, although an
/// explicit `--database` is plainly what the user wants.
#[derive(Debug, clap::Args)]
pub struct Source {
    /// Coordinator base URL (`host:port` alone means http://host:port) [env:
    /// SWEEP_COORDINATOR] [default: http://127.0.0.1:8080].
    #[arg(long, value_name = "URL", conflicts_with = "database")]
    pub coordinator: Option<String>,
    /// Token and CA bundle (for a coordinator).
    #[command(flatten)]
    pub credentials: Credentials,
    /// Read this database directly instead of asking a coordinator: a SQLite file (e.g. the
    /// ./sweep.db of `sweep run`) or a postgres:// URL. Needs no token; wins over
    /// SWEEP_COORDINATOR. The database is opened as it is: never created or migrated.
    #[arg(long, value_name = "DB", value_parser = paths::database)]
    pub database: Option<String>,
}

impl Source {
    /// The coordinator URL: `--coordinator`, else `SWEEP_COORDINATOR`, else the default.
    pub fn coordinator_url(&self) -> String {
        self.coordinator
            .clone()
            .or_else(|| {
                std::env::var("SWEEP_COORDINATOR")
                    .ok()
                    .filter(|u| !u.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_COORDINATOR.to_string())
    }
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
    #[arg(long, default_value = "md", value_parser = ["md", "csv", "json", "review"], requires = "wait")]
    pub format: String,
}

impl Wait {
    /// The table format to wait for, when waiting.
    pub fn format(&self) -> Option<&str> {
        self.wait.then_some(self.format.as_str())
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a coordinator (HTTP API over a Postgres or SQLite database).
    Coordinator(CoordinatorArgs),
    /// Run a worker: lease jobs, build variants, run engines, report results.
    ///
    /// Runs until Ctrl-C or SIGTERM (then it reports what it finished and gives back the
    /// jobs it did not, so they go to another worker at once), or, for batch schedulers,
    /// until --max-jobs or --exit-when-idle says it is done. Exit status 0 in all those
    /// cases; 1 when it cannot work at all (bad URL or token, unwritable cache).
    Worker(WorkerArgs),
    /// Run a whole sweep locally: in-process coordinator, local worker, live progress, table.
    Run(RunArgs),
    /// Compare a patch with its base: two revisions of the config's `[source] git`
    /// repository, run locally as `sweep run` does, printed as Markdown for a pull request
    /// (the paired statistics first, each row naming its commit).
    Compare(CompareArgs),
    /// Submit a sweep config (TOML); prints the new sweep's id (with --wait: its table).
    Submit {
        /// The sweep config file.
        #[arg(value_name = "CONFIG")]
        file: PathBuf,
        #[command(flatten)]
        sources: SourceArgs,
        /// Measure every position again, even those an earlier sweep of the same build (same
        /// source, defines, recipe and options) already measured; the config's
        /// `recompute = true` does the same. Without it, those results are reused.
        #[arg(long)]
        force: bool,
        /// Submit nothing: print what the sweep would make (builds, jobs, searches, results
        /// reuse would take) and cost (engine-seconds at the engine's earlier searches of the
        /// same suites and limits).
        #[arg(long, conflicts_with = "wait")]
        dry_run: bool,
        /// With --dry-run: print the estimate as JSON.
        #[arg(long, requires = "dry_run")]
        json: bool,
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        wait: Wait,
    },
    /// Show a sweep's state and progress (with --wait: follow it and print its table).
    Status {
        /// Sweep id.
        #[arg(value_name = "ID")]
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
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        source: Source,
        /// Output format.
        #[arg(long, default_value = "md", value_parser = ["md", "csv", "json", "review"])]
        format: String,
    },
    /// Write an ended sweep's export file (self-contained, versioned, gzip): its spec, engine,
    /// suites, results, cross-checks, build records, speed runs and the snapshots you may
    /// read. To standard output unless `--output`.
    Export {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        source: Source,
        /// Write the file here instead of standard output.
        #[arg(long, short, value_name = "FILE", value_parser = paths::absolute_path())]
        output: Option<std::path::PathBuf>,
    },
    /// Import an export file as a new sweep (into a database directly, created when new, or
    /// through a coordinator as a submitter); prints its id. Its results are reused by later
    /// sweeps like measured ones.
    Import {
        /// The export file.
        #[arg(value_name = "FILE", value_parser = paths::absolute_path())]
        file: std::path::PathBuf,
        #[command(flatten)]
        source: Source,
    },
    /// Delete a sweep whole, its results with it (submitters: their own; admins: any); a
    /// running sweep is cancelled first. Export it first to keep it (`sweep export`).
    Delete {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        source: Source,
    },
    /// Cancel a sweep (submitters: their own; admins: any).
    Cancel {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        source: Source,
    },
    /// Give a build that failed to compile another chance (admin).
    Retry {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        /// Build name, e.g. `NULLMOVE_SKIP=3`.
        #[arg(long, value_name = "NAME")]
        build: String,
        #[command(flatten)]
        source: Source,
    },
    /// Let a sweep held for approval run (admin; see `sweep coordinator
    /// --approve-over-engine-hours`).
    Approve {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        remote: Remote,
    },
    /// Reject a sweep held for approval, saying why (admin): it is cancelled, and its
    /// submitter sees the reason.
    Reject {
        /// Sweep id.
        #[arg(value_name = "ID")]
        id: i64,
        /// Why, for the submitter.
        #[arg(long, value_name = "TEXT")]
        why: String,
        #[command(flatten)]
        remote: Remote,
    },
    /// Print the audit log, newest first (admin).
    Audit {
        #[command(flatten)]
        source: Source,
        /// Entries to print.
        #[arg(long, default_value_t = 100, value_name = "N")]
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
    /// Print the JSON Schema of sweep config files (what `configs/sweep.schema.json` holds),
    /// or with `--engine` of engine definitions (`configs/engine.schema.json`).
    Schema {
        /// The schema of engine definitions (`configs/engines/*.toml`) instead.
        #[arg(long)]
        engine: bool,
    },
    /// List one build's positions beside the baseline's: gained, lost, and the largest node
    /// changes.
    Positions(PositionsArgs),
    /// Print a shell completion script, e.g. `sweep completions bash >
    /// /etc/bash_completion.d/sweep` or `sweep completions zsh > ~/.zfunc/_sweep`.
    Completions {
        /// The shell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

/// Options of `sweep positions`.
#[derive(Debug, clap::Args)]
pub struct PositionsArgs {
    /// Sweep id.
    #[arg(value_name = "ID")]
    pub id: i64,
    /// The build to compare with the baseline, e.g. `NULLMOVE_SKIP=3`.
    #[arg(long, value_name = "NAME")]
    pub build: String,
    /// The search limit, e.g. `depth=8` (default: the sweep's first).
    #[arg(long, value_name = "LIMIT")]
    pub limit: Option<sweep_domain::limit::Limit>,
    /// Rows of the largest node changes to show (gained and lost are always all shown).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Output format: md (a report) or json (the API's document).
    #[arg(long, default_value = "md", value_parser = ["md", "json"])]
    pub format: String,
    #[command(flatten)]
    pub source: Source,
}

/// The database a `sweep token` subcommand works on.
#[derive(Debug, clap::Args)]
pub struct Database {
    /// Database: a postgres:// URL or a SQLite file.
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DB",
        alias = "database-url",
        value_parser = paths::database
    )]
    pub database: String,
}

/// `sweep token` subcommands. They work on the database itself (whoever can write it is
/// trusted), so the first admin token can be made before any token exists.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints it (and nothing else) on stdout. It is shown only this once.
    Create {
        #[command(flatten)]
        database: Database,
        /// Role: admin, submitter, worker or reader.
        #[arg(long, value_name = "ROLE")]
        role: sweep_domain::auth::Role,
        /// Name, unique among live tokens (shown in sweep lists and the audit log).
        #[arg(long, value_name = "NAME")]
        name: String,
    },
    /// List tokens (names, roles, dates; never secrets).
    List {
        #[command(flatten)]
        database: Database,
    },
    /// Revoke a token by name.
    Revoke {
        #[command(flatten)]
        database: Database,
        /// Name of the token.
        #[arg(value_name = "NAME")]
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
        #[arg(value_name = "FILE")]
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
    #[arg(value_name = "ID")]
    pub id: i64,
    #[command(flatten)]
    pub source: Source,
    /// Build whose results select the positions (e.g. head_reference).
    #[arg(long, value_name = "NAME")]
    pub build: String,
    /// Suite of the sweep to take the positions from.
    #[arg(long, value_name = "NAME")]
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
    #[arg(long, requires = "random", value_name = "SEED")]
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
    #[arg(long, value_name = "FILE", value_parser = paths::absolute_path())]
    pub out: Option<PathBuf>,
    /// Overwrite --out if it exists.
    #[arg(long, requires = "out")]
    pub force: bool,
}

impl Command {
    /// The log line format the command asked for (text for commands without the option).
    pub fn log_format(&self) -> LogFormat {
        match self {
            Command::Coordinator(CoordinatorArgs { log, .. })
            | Command::Worker(WorkerArgs { log, .. })
            | Command::Run(RunArgs { log, .. })
            | Command::Compare(CompareArgs {
                run: RunArgs { log, .. },
                ..
            }) => log.log_format,
            _ => LogFormat::Text,
        }
    }
}
