//! Engine drivers: one module per protocol, plus the session that turns a position into a
//! [`PositionResult`](sweep_domain::wire::PositionResult) with restarts after failures.

use std::path::Path;
use std::time::Duration;
use sweep_domain::limit::Limit;

use sweep_domain::engine::Protocol;
use sweep_domain::wire::BuildSpec;

mod driver;
mod outcome;
mod pipe;
pub mod session;
pub mod uci;
pub mod xboard;

pub use driver::Driver;
pub use outcome::{EngineError, Score, SearchOutcome};

use driver::QUIT;
use pipe::EngineProcess;

/// Timeout for an engine to answer `uci` with `uciok` (and `isready` after the options), or
/// for an xboard engine to finish its features.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How engines of one build are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSettings {
    /// Protocol the engine speaks.
    pub protocol: Protocol,
    /// Option name/value pairs, sent in order at startup (UCI `setoption`, xboard `option`).
    pub options: Vec<(String, String)>,
    /// Start a new process for every position.
    pub fresh_process_per_position: bool,
    /// Time one position may take.
    pub position_timeout: Duration,
    /// Time for `uciok` / `readyok` (xboard: `feature done=1` / `pong`) at startup.
    pub init_timeout: Duration,
}

impl EngineSettings {
    /// The settings a leased build asks for.
    pub fn from_build(spec: &BuildSpec) -> Self {
        EngineSettings {
            protocol: spec.protocol,
            options: spec.options.clone(),
            fresh_process_per_position: spec.fresh_process_per_position,
            position_timeout: Duration::from_secs(spec.position_timeout_secs.max(1)),
            init_timeout: Duration::from_secs(spec.init_timeout_secs.max(1)),
        }
    }

    /// UCI, reused process, 120 s per position (the engine definition's default), these
    /// options.
    pub fn with_options(options: Vec<(String, String)>) -> Self {
        EngineSettings {
            protocol: Protocol::Uci,
            options,
            fresh_process_per_position: false,
            position_timeout: Duration::from_secs(120),
            init_timeout: INIT_TIMEOUT,
        }
    }
}

/// A running engine of either protocol, so the session need not care which one it drives.
#[derive(Debug)]
pub enum Engine {
    /// A UCI engine.
    Uci(uci::UciEngine),
    /// An xboard engine.
    Xboard(xboard::XboardEngine),
}

impl Engine {
    /// Starts `binary` speaking `protocol` (see [`uci::UciEngine::start`] and
    /// [`xboard::XboardEngine::start`]).
    pub async fn start(
        protocol: Protocol,
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
    ) -> Result<Self, EngineError> {
        Ok(match protocol {
            Protocol::Uci => {
                Engine::Uci(uci::UciEngine::start(binary, options, init_timeout).await?)
            }
            Protocol::Xboard => {
                Engine::Xboard(xboard::XboardEngine::start(binary, options, init_timeout).await?)
            }
        })
    }

    /// Searches `fen` to `limit` within `timeout`.
    pub async fn search(
        &mut self,
        fen: &str,
        limit: Limit,
        timeout: Duration,
    ) -> Result<SearchOutcome, EngineError> {
        match self {
            Engine::Uci(e) => e.search(fen, limit, timeout).await,
            Engine::Xboard(e) => e.search(fen, xboard_depth(limit)?, timeout).await,
        }
    }

    /// Can [`Engine::search`] be called again?
    pub fn is_usable(&self) -> bool {
        self.process().usable
    }

    /// Process id (until the process is reaped).
    pub fn pid(&self) -> Option<u32> {
        self.process().pid()
    }

    /// Asks the engine to exit, killing it if it has not within a second.
    pub async fn quit(mut self) {
        self.process_mut().quit(QUIT).await;
    }

    /// Kills the engine's process group now and reaps it.
    pub async fn kill(&mut self) {
        self.process_mut().kill().await;
    }

    /// Ends the process after a one-shot search: `quit` when it is in a known state, a kill
    /// otherwise.
    async fn close(mut self) {
        self.process_mut().close(QUIT).await;
    }

    /// The process either driver speaks to.
    fn process(&self) -> &EngineProcess {
        match self {
            Engine::Uci(e) => &e.p,
            Engine::Xboard(e) => &e.p,
        }
    }

    /// See [`Engine::process`].
    fn process_mut(&mut self) -> &mut EngineProcess {
        match self {
            Engine::Uci(e) => &mut e.p,
            Engine::Xboard(e) => &mut e.p,
        }
    }
}

/// Starts an engine, searches one position and quits (`fresh_process_per_position`). An
/// xboard engine asked for a limit it cannot search to is refused before a process starts.
pub async fn one_shot(
    binary: &Path,
    settings: &EngineSettings,
    fen: &str,
    limit: Limit,
) -> Result<SearchOutcome, EngineError> {
    if settings.protocol == Protocol::Xboard {
        xboard_depth(limit)?;
    }
    let s = settings;
    let mut engine = Engine::start(s.protocol, binary, &s.options, s.init_timeout).await?;
    let result = engine.search(fen, limit, s.position_timeout).await;
    engine.close().await;
    result
}

/// The depth of an xboard search: CECP has `sd N` but nothing like `go nodes N` (sweeps
/// refuse node limits for xboard engines at submission; this guards a hand-made lease).
fn xboard_depth(limit: Limit) -> Result<u32, EngineError> {
    limit.depth().ok_or_else(|| {
        EngineError::BadInput(format!(
            "xboard engines search to a depth only, not `{limit}`"
        ))
    })
}
