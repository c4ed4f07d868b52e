//! What a search yields, or why it failed: shared by both protocol drivers and the session.

use std::collections::BTreeMap;
use std::time::Duration;

/// The engine's evaluation at the end of a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    /// Centipawns from the side to move.
    Cp(i32),
    /// Mate in this many moves (negative: being mated).
    Mate(i32),
}

/// What one search reported.
/// Empty (the `Default`) until the engine reports something.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchOutcome {
    /// The move: UCI's `bestmove` verbatim, xboard's `move` converted to UCI coordinates
    /// (neither checked for legality yet).
    pub bestmove: String,
    /// The `ponder` move, if given.
    pub ponder: Option<String>,
    /// Last `depth` reported.
    pub depth: u32,
    /// Last `seldepth` reported.
    pub seldepth: u32,
    /// The search's node count: the last `info ... nodes` (UCI) or thinking line (xboard), or
    /// the last match of the engine's `[report] nodes` pattern, which replaces those. `None`
    /// while the engine has reported none: a driver never returns such an outcome (it is
    /// [`EngineError::NoNodeCount`]), so a count nobody reported never becomes 0.
    pub nodes: Option<u64>,
    /// Last score reported.
    pub score: Option<Score>,
    /// `info string counters k=v ...`, if the engine prints them (last one wins). Only pairs
    /// a result may carry are kept (see [`parse_counters`](crate::engine::uci::parse_counters)).
    pub counters: BTreeMap<String, u64>,
    /// Wall time from sending the commands to reading `bestmove` (xboard: `move`).
    pub time: Duration,
    /// Lines the protocol does not define (UCI: neither `info`, `bestmove` nor `readyok`;
    /// xboard: not thinking output, `move`, or debug/user/result chatter), ignored.
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
    /// An xboard engine sent `feature done=0` but not `done=1` in time.
    #[error("no `feature done=1` within {limit:?}")]
    NoFeatureDone {
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
    /// The search ended but the engine never said how many nodes it searched (no `info ...
    /// nodes`, no thinking line, or the `[report] nodes` pattern matched no line): an error
    /// result, never a count of 0.
    #[error("no node count: {0}")]
    NoNodeCount(String),
    /// Reading from or writing to the engine failed.
    #[error("engine I/O error: {0}")]
    Io(std::io::Error),
}
