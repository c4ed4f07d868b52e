//! Engine drivers: one module per protocol, plus the session that turns a position into a
//! [`PositionResult`](sweep_domain::wire::PositionResult) with restarts after failures.

use std::path::Path;
use std::time::Duration;
use sweep_domain::limit::Limit;

use sweep_domain::engine::{Protocol, ReportPatterns};
use sweep_domain::wire::BuildSpec;
use sweep_domain::FieldError;

use crate::sandbox::{Confinement, Sandbox};

mod driver;
mod outcome;
mod pipe;
mod report;
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
    /// The engine definition's `[report]` patterns, compiled.
    pub report: Option<ReportPatterns>,
    /// How each engine process runs: its sandbox (none unless the worker sets one).
    pub confinement: Confinement,
}

impl EngineSettings {
    /// The settings a leased build asks for, unsandboxed (the worker sets its sandbox); its
    /// `[report]` patterns are compiled here, and a set the coordinator should never have sent
    /// (it checks them at registration) is refused, naming the field.
    pub fn from_build(spec: &BuildSpec) -> Result<Self, FieldError> {
        Ok(EngineSettings {
            protocol: spec.protocol,
            options: spec.options.clone(),
            fresh_process_per_position: spec.fresh_process_per_position,
            position_timeout: Duration::from_secs(spec.position_timeout_secs.max(1)),
            init_timeout: Duration::from_secs(spec.init_timeout_secs.max(1)),
            report: spec
                .report
                .as_ref()
                .map(ReportPatterns::compile)
                .transpose()?,
            confinement: Confinement {
                sandbox: Sandbox::Off,
                binary_dir: spec.binary_path.is_some(),
            },
        })
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
            report: None,
            confinement: Confinement::default(),
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
    /// Starts `binary` as `settings` say (see [`uci::UciEngine::start`] and
    /// [`xboard::XboardEngine::start`]), reading searches with its `[report]` patterns.
    pub async fn start(binary: &Path, settings: &EngineSettings) -> Result<Self, EngineError> {
        let (options, init) = (&settings.options, settings.init_timeout);
        let (report, confined) = (settings.report.clone(), &settings.confinement);
        Ok(match settings.protocol {
            Protocol::Uci => {
                let mut e = uci::UciEngine::start_confined(binary, options, init, confined).await?;
                e.set_report(report);
                Engine::Uci(e)
            }
            Protocol::Xboard => {
                let mut e =
                    xboard::XboardEngine::start_confined(binary, options, init, confined).await?;
                e.set_report(report);
                Engine::Xboard(e)
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

    /// Asks the engine to exit and waits until it has and was reaped, so the CPU time it (and,
    /// inside the sandbox, everything under it) used is in the worker's reaped children's: the
    /// end of a timed run. An engine that does not exit within a second is killed, and that is
    /// an error, since its time is then not all counted.
    pub async fn quit_reaped(mut self) -> Result<(), EngineError> {
        self.process_mut().quit_reaped(QUIT).await
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
    let mut engine = Engine::start(binary, settings).await?;
    let result = engine.search(fen, limit, settings.position_timeout).await;
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
