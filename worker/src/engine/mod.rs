//! Engine drivers: one module per protocol, plus the session that turns a position into a
//! [`PositionResult`](sweep_domain::wire::PositionResult) with restarts after failures.

use std::collections::BTreeMap;
use std::time::Duration;

use sweep_domain::wire::BuildSpec;

pub mod session;
pub mod uci;

/// Timeout for an engine to answer `uci` with `uciok` (and `isready` after the options).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The engine's evaluation at the end of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    /// Centipawns from the side to move.
    Cp(i32),
    /// Mate in this many moves (negative: being mated).
    Mate(i32),
}

/// What one search reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOutcome {
    /// The move after `bestmove`, verbatim (not yet checked for legality).
    pub bestmove: String,
    /// The `ponder` move, if given.
    pub ponder: Option<String>,
    /// Last `depth` reported.
    pub depth: u32,
    /// Last `seldepth` reported.
    pub seldepth: u32,
    /// Last `nodes` reported before `bestmove`.
    pub nodes: u64,
    /// Last score reported.
    pub score: Option<Score>,
    /// `info string counters k=v ...`, if the engine prints them (last one wins).
    pub counters: BTreeMap<String, i64>,
    /// Wall time from sending the commands to reading `bestmove`.
    pub time: Duration,
    /// Lines that were neither `info`, `bestmove` nor `readyok` (ignored).
    pub garbage_lines: u32,
}

/// Why an engine could not produce a search result.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The binary could not be started.
    #[error("cannot start engine: {0}")]
    Spawn(std::io::Error),
    /// The engine did not answer `uci` with `uciok` in time.
    #[error("no uciok within {limit:?}")]
    NoUciOk {
        /// The timeout.
        limit: Duration,
    },
    /// The search ran past its time limit (the engine was stopped or killed).
    #[error("timeout: no bestmove within {limit:?}")]
    Timeout {
        /// The limit.
        limit: Duration,
    },
    /// The engine's output ended: it exited or crashed.
    #[error("engine crashed ({status})")]
    Crashed {
        /// Exit status as text (`exit status: 1`, `signal: 11 (SIGSEGV)`, ...).
        status: String,
    },
    /// The engine said something that breaks the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The request cannot be sent safely (e.g. a FEN or option with a line break).
    #[error("bad input: {0}")]
    BadInput(String),
    /// Reading from or writing to the engine failed.
    #[error("engine I/O error: {0}")]
    Io(std::io::Error),
}

/// How engines of one build are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSettings {
    /// `setoption` name/value pairs, sent in order after `uciok`.
    pub options: Vec<(String, String)>,
    /// Start a new process for every position.
    pub fresh_process_per_position: bool,
    /// Time one position may take.
    pub position_timeout: Duration,
    /// Time for `uciok` / `readyok` at startup.
    pub init_timeout: Duration,
}

impl EngineSettings {
    /// The settings a leased build asks for.
    pub fn from_build(spec: &BuildSpec) -> Self {
        EngineSettings {
            options: spec.options.clone(),
            fresh_process_per_position: spec.fresh_process_per_position,
            position_timeout: Duration::from_secs(spec.position_timeout_secs.max(1)),
            init_timeout: Duration::from_secs(spec.init_timeout_secs.max(1)),
        }
    }

    /// Reused process, 120 s per position (the engine definition's default), these options.
    pub fn with_options(options: Vec<(String, String)>) -> Self {
        EngineSettings {
            options,
            fresh_process_per_position: false,
            position_timeout: Duration::from_secs(120),
            init_timeout: INIT_TIMEOUT,
        }
    }
}
