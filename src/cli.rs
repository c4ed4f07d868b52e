//! Command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

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

/// Where the coordinator is.
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// Coordinator base URL.
    #[arg(long, env = "SWEEP_COORDINATOR", default_value = "http://127.0.0.1:8080")]
    pub coordinator: String,
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
    },
    /// Run a worker: lease jobs, build variants, run engines, report results.
    Worker {
        #[command(flatten)]
        remote: Remote,
        /// Engine processes to run at once.
        #[arg(long, default_value_t = 1)]
        cores: usize,
        /// Where sources and built variants are cached.
        #[arg(long, default_value = ".sweep-cache")]
        cache_dir: PathBuf,
        /// Worker name (default: the host name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Submit a sweep config (TOML); prints the new sweep's id.
    Submit {
        /// The sweep config file.
        file: PathBuf,
        #[command(flatten)]
        remote: Remote,
    },
    /// Show a sweep's state and progress.
    Status {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        remote: Remote,
        /// Print the raw JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a sweep's delta table.
    Table {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        remote: Remote,
        /// Output format.
        #[arg(long, default_value = "md", value_parser = ["md", "csv", "json"])]
        format: String,
    },
    /// Cancel a sweep.
    Cancel {
        /// Sweep id.
        id: i64,
        #[command(flatten)]
        remote: Remote,
    },
    /// List sweeps.
    List {
        #[command(flatten)]
        remote: Remote,
    },
}
