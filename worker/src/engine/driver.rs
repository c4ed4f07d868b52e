//! What every protocol driver is: one engine process (`pipe.rs`) spoken to by a protocol. The
//! parts that do not depend on the protocol (its process id, its binary, whether it can search
//! again, quitting, killing) are written here once; each protocol module adds its start and
//! search to its own `Driver<P>` ([`super::uci::UciEngine`], [`super::xboard::XboardEngine`]).

use std::fmt;
use std::path::Path;

use sweep_domain::engine::ReportPatterns;

use super::outcome::EngineError;
use super::pipe::EngineProcess;
use crate::sandbox::Confinement;

/// The command that asks an engine of either protocol to exit.
pub(super) const QUIT: &str = "quit\n";

/// A running engine speaking protocol `P`, whose state (what the engine announced at startup)
/// `P` holds.
pub struct Driver<P> {
    pub(super) p: EngineProcess,
    pub(super) protocol: P,
    /// The engine definition's `[report]` patterns, read over every line of a search.
    pub(super) report: Option<ReportPatterns>,
}

impl<P> Driver<P> {
    /// Can the driver search again?
    pub fn is_usable(&self) -> bool {
        self.p.usable
    }

    /// Process id (until the process is reaped).
    pub fn pid(&self) -> Option<u32> {
        self.p.pid()
    }

    /// The binary this engine runs.
    pub fn binary(&self) -> &Path {
        self.p.binary()
    }

    /// Asks the engine to exit (`quit`), killing it if it has not within a second.
    pub async fn quit(mut self) {
        self.p.quit(QUIT).await;
    }

    /// Kills the engine's process group now and reaps it.
    pub async fn kill(&mut self) {
        self.p.kill().await;
    }

    /// Reads every later search's node count (and counters) with `report` (see
    /// [`ReportPatterns`]) besides the protocol's own lines.
    pub fn set_report(&mut self, report: Option<ReportPatterns>) {
        self.report = report;
    }
}

impl<P: Default> Driver<P> {
    /// Starts `binary` as `confinement` says and sends it `hello`, once no option is refused
    /// by `refuse` (which
    /// says why): an option that would break a protocol line is refused before anything
    /// starts.
    pub(super) async fn launch(
        binary: &Path,
        options: &[(String, String)],
        refuse: impl Fn(&str, &str) -> Option<String>,
        hello: &str,
        confinement: &Confinement,
    ) -> Result<Self, EngineError> {
        if let Some(problem) = options.iter().find_map(|(name, value)| refuse(name, value)) {
            return Err(EngineError::BadInput(problem));
        }
        let mut engine = Driver {
            p: EngineProcess::spawn(binary, confinement)?,
            protocol: P::default(),
            report: None,
        };
        engine.p.cmd.push_str(hello);
        engine.p.send().await?;
        Ok(engine)
    }
}

impl<P: fmt::Debug> fmt::Debug for Driver<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Driver")
            .field("binary", &self.p.binary())
            .field("pid", &self.pid())
            .field("usable", &self.p.usable)
            .field("protocol", &self.protocol)
            .finish()
    }
}
