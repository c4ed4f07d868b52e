//! The xboard (CECP) driver: the same process handling, deadlines, crash and garbage rules as
//! the UCI driver (both build on `pipe.rs` and `driver.rs`), speaking protocol version 2.
//!
//! Start: `xboard`, `protover 2`, then `feature` lines until `feature done=1`, each answered
//! with `accepted NAME` or `rejected NAME`. An engine that sends `done=0` gets the whole init
//! timeout to send `done=1`; otherwise, as in xboard itself, the driver carries on after two
//! seconds (a protocol-1 engine sends no features at all). Then `easy` (no pondering), one
//! `option NAME=VALUE` per configured option (only options the engine announced), and, if the
//! engine announced `ping=1`, `ping`/`pong` to confirm it took all that.
//!
//! Per search: `new`, `force`, the position, `st`, `sd DEPTH`, `post`, (`ping N`), `go`; thinking
//! lines (`ply score time nodes pv...`) give depth, score and nodes, and `move MOVE` ends the
//! search. The position goes by `setboard FEN` when the engine announced `setboard=1`, and by
//! edit mode otherwise (see [`XboardEngine::search`] for what edit mode cannot express).

use std::path::Path;
use std::time::Duration;

use sweep_domain::epd::engine_move_to_uci;
use tokio::time::Instant;

use super::driver::Driver;
use super::outcome::{EngineError, SearchOutcome};
use super::pipe::{has_line_break, ReadError};
use super::report::{after_move, finish, PatternReading, SyncCommand};
use crate::sandbox::Confinement;

mod parse;

pub use parse::parse_thinking;
use parse::{edit_commands, is_chatter, option_name, parse_features, setup_rejected, side_to_move};

/// How long an engine that has not sent `feature done=0` gets for its features (xboard's
/// own rule); silence that long means a protocol-1 engine.
const FEATURE_WAIT: Duration = Duration::from_secs(2);

/// What an xboard engine announced with `feature` at startup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XboardFeatures {
    /// `setboard=1`: positions can be sent as FEN; otherwise edit mode is used.
    pub setboard: bool,
    /// `ping=1`: `ping N` is answered with `pong N`, which the driver uses to synchronise.
    pub ping: bool,
    /// `usermove=1`: moves sent to the engine need a `usermove` prefix.
    pub usermove: bool,
    /// `reuse=0`: the engine would rather be restarted for every game.
    pub no_reuse: bool,
    /// `myname`, if given.
    pub name: Option<String>,
    /// Names of the options announced with `feature option="NAME -type ..."`.
    pub options: Vec<String>,
    /// Did the engine send `feature done=1` (false: protocol 1, or features without `done`)?
    pub done: bool,
}

/// A running xboard engine.
pub type XboardEngine = Driver<Xboard>;

/// What an xboard engine told the driver at startup, and the last `ping` sent to it.
#[derive(Debug, Default)]
pub struct Xboard {
    /// Its features.
    features: XboardFeatures,
    /// The number of the last `ping N` (0: none yet).
    ping: u32,
}

impl Driver<Xboard> {
    /// Starts `binary`, reads its features, sets `options` (each must have been announced)
    /// and, if the engine supports `ping`, waits for the `pong`; each wait is bounded by
    /// `init_timeout`.
    pub async fn start(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
    ) -> Result<Self, EngineError> {
        Self::start_confined(binary, options, init_timeout, &Confinement::default()).await
    }

    /// [`Driver::<Xboard>::start`] with the engine run as `confinement` says (its sandbox).
    pub async fn start_confined(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
        confinement: &Confinement,
    ) -> Result<Self, EngineError> {
        let refuse = |name: &str, value: &str| {
            (has_line_break(name) || has_line_break(value) || name.contains('=')).then(|| {
                format!(
                    "xboard option `{}` contains a line break or `=`",
                    name.escape_debug()
                )
            })
        };
        let hello = "xboard\nprotover 2\n";
        let mut engine =
            Driver::<Xboard>::launch(binary, options, refuse, hello, confinement).await?;
        // Options can only be set on an engine that announces them (protocol 2), so with
        // options configured a slow start is not taken for protocol 1 (a loaded machine can
        // keep an engine silent for over two seconds).
        let expect_features = !options.is_empty();
        engine.read_features(init_timeout, expect_features).await?;
        if engine.protocol.features.no_reuse {
            tracing::warn!(
                binary = %binary.display(),
                "xboard engine announced reuse=0; consider fresh_process_per_position"
            );
        }
        for (name, _) in options {
            if !engine.protocol.features.options.iter().any(|o| o == name) {
                engine.p.kill().await;
                return Err(EngineError::BadInput(format!(
                    "option `{name}` was not announced by the engine (announced: {})",
                    if engine.protocol.features.options.is_empty() {
                        "none".to_string()
                    } else {
                        engine.protocol.features.options.join(", ")
                    }
                )));
            }
        }
        engine.p.cmd.push_str("easy\n");
        for (name, value) in options {
            engine.p.cmd.push_str(&format!("option {name}={value}\n"));
        }
        if engine.protocol.features.ping {
            engine.protocol.ping += 1;
            let pong = format!("pong {}", engine.protocol.ping);
            engine
                .p
                .cmd
                .push_str(&format!("ping {}\n", engine.protocol.ping));
            engine.p.send().await?;
            if !engine
                .p
                .wait_for(|l| l == pong, Instant::now() + init_timeout)
                .await?
            {
                engine.p.kill().await;
                return Err(EngineError::Protocol(format!(
                    "no `{pong}` within {init_timeout:?} after setting options"
                )));
            }
        } else {
            engine.p.send().await?;
        }
        engine.p.usable = true;
        Ok(engine)
    }

    /// Reads `feature` lines, answering each, until `done=1`, the two-second silence rule, or
    /// (after `done=0`) the init timeout. With `expect_features`, the silence rule counts from
    /// the latest `feature` line, and before the first only the init timeout bounds the wait.
    async fn read_features(
        &mut self,
        init_timeout: Duration,
        expect_features: bool,
    ) -> Result<(), EngineError> {
        let hard = Instant::now() + init_timeout;
        let mut silence_from = (!expect_features).then(Instant::now);
        let mut wait_for_done = false;
        let mut garbage = 0;
        loop {
            let deadline = match silence_from {
                Some(from) if !wait_for_done => hard.min(from + FEATURE_WAIT),
                _ => hard,
            };
            match self.p.next_line(deadline).await {
                Ok(true) => {}
                Ok(false) => return Err(self.p.crashed().await),
                Err(ReadError::Timeout) if wait_for_done => {
                    self.p.kill().await;
                    return Err(EngineError::NoFeatureDone {
                        limit: init_timeout,
                    });
                }
                Err(ReadError::Timeout) => return Ok(()),
                Err(e) => return Err(self.p.fail(e).await),
            }
            let text = String::from_utf8_lossy(self.p.line()).trim().to_string();
            let Some(rest) = text.strip_prefix("feature ") else {
                if !is_chatter(&text) {
                    self.p.garbage_line(&mut garbage).await?;
                }
                continue;
            };
            if expect_features {
                silence_from = Some(Instant::now());
            }
            for (name, value) in parse_features(rest) {
                let accepted = self.note_feature(&name, &value);
                let reply = if accepted { "accepted" } else { "rejected" };
                self.p.cmd.push_str(&format!("{reply} {name}\n"));
                if name == "done" {
                    wait_for_done = value == "0";
                    self.protocol.features.done = value == "1";
                }
            }
            self.p.send().await?;
            if self.protocol.features.done {
                return Ok(());
            }
        }
    }

    /// Records one feature; `true` if the driver accepts it.
    fn note_feature(&mut self, name: &str, value: &str) -> bool {
        let on = value == "1";
        let f = &mut self.protocol.features;
        match name {
            "ping" => f.ping = on,
            "setboard" => f.setboard = on,
            "usermove" => f.usermove = on,
            "reuse" => f.no_reuse = value == "0",
            "myname" => f.name = Some(value.to_string()),
            "option" => {
                if let Some(name) = option_name(value) {
                    f.options.push(name.to_string());
                }
            }
            // Moves go out in coordinates; an engine that rejects those cannot be driven.
            "san" => return !on,
            // Features that only tell the GUI what it may send (the driver sends none of
            // those commands) or describe the engine: nothing to do.
            "done" | "time" | "draw" | "sigint" | "sigterm" | "analyze" | "variants" | "colors"
            | "ics" | "name" | "pause" | "nps" | "debug" | "playother" | "exclude" | "setscore"
            | "highlight" => {}
            // `memory`, `smp`, `egt` and anything unknown: the driver will not send the
            // commands they ask for, so it says so.
            _ => return false,
        }
        true
    }

    /// Searches `fen` to `depth` and returns the engine's move in UCI coordinates.
    ///
    /// Without `setboard=1` the position goes by edit mode, which cannot carry everything a
    /// FEN says: the engine assumes castling rights wherever king and rook stand on their
    /// home squares, no en-passant capture on the first move, a fresh fifty-move count and no
    /// game history. Black to move is set up by playing `a2a3` first (the protocol's own
    /// recipe, since `edit` keeps the side to move). A move that is illegal under the real
    /// FEN (say, castling the FEN forbids) is caught by the session's legality check.
    ///
    /// Thinking lines give the node count, or the `[report] nodes` pattern does (read on after
    /// `move`, see [`super::report`]); a search without one is [`EngineError::NoNodeCount`].
    /// After `timeout` the engine gets `?` (move now) and a second to answer; it stays usable
    /// if it does, and is killed otherwise.
    pub async fn search(
        &mut self,
        fen: &str,
        depth: u32,
        timeout: Duration,
    ) -> Result<SearchOutcome, EngineError> {
        if has_line_break(fen) {
            return Err(EngineError::BadInput("FEN contains a line break".into()));
        }
        let setup = if self.protocol.features.setboard {
            side_to_move(fen)?;
            format!("setboard {fen}\n")
        } else {
            edit_commands(fen, self.protocol.features.usermove)?
        };
        let started = self.p.begin_search()?;
        let deadline = started + timeout;
        // The engine's own clock must never end a search before Sweep's timeout does: the
        // depth limit alone decides, or the node counts would depend on machine load.
        let st = timeout.as_secs().max(1) * 2;
        self.p.cmd.push_str("new\nforce\n");
        self.p.cmd.push_str(&setup);
        self.p.cmd.push_str(&format!("st {st}\nsd {depth}\npost\n"));
        let mut synced = true;
        if self.protocol.features.ping {
            // Output before this `pong` is left over from an earlier search.
            self.protocol.ping += 1;
            self.p
                .cmd
                .push_str(&format!("ping {}\n", self.protocol.ping));
            synced = false;
        }
        self.p.cmd.push_str("go\n");
        self.p.send().await?;
        let pong = format!("pong {}", self.protocol.ping);

        let mut out = SearchOutcome::default();
        let mut reading = PatternReading::default();
        loop {
            let line = self
                .p
                .search_line(deadline, ("?\n", "move "), timeout, &mut out.garbage_lines)
                .await?;
            let Some(text) = line else { continue };
            if let Some(problem) = setup_rejected(text) {
                let problem = problem.to_string();
                self.p.kill().await;
                return Err(EngineError::Protocol(format!(
                    "engine rejected the position setup: {problem}"
                )));
            }
            if !synced {
                synced = text == pong;
                continue;
            }
            let wanted = match &self.report {
                Some(p) => reading.line(p, text, &mut out, false),
                None => false,
            };
            if let Some(mv) = text.strip_prefix("move ") {
                out.bestmove = engine_move_to_uci(fen, mv.trim());
                out.time = started.elapsed();
                self.p.usable = true;
                return self.after_move(out, reading).await;
            }
            if parse_thinking(text, &mut out) || is_chatter(text) || wanted {
                continue;
            }
            self.p.garbage_line(&mut out.garbage_lines).await?;
        }
    }

    /// Reads on after `move` for the `[report]` patterns (a `ping`, when the engine has it,
    /// marks the end of what it printed for the search) and finishes the outcome.
    async fn after_move(
        &mut self,
        mut out: SearchOutcome,
        mut reading: PatternReading,
    ) -> Result<SearchOutcome, EngineError> {
        let patterns = self.report.as_ref();
        let (ping, pong);
        let sync = if patterns.is_some() && self.protocol.features.ping {
            // A ping of its own number: a late pong is skipped by the next search's sync.
            self.protocol.ping += 1;
            ping = format!("ping {}\n", self.protocol.ping);
            pong = format!("pong {}", self.protocol.ping);
            Some(SyncCommand {
                command: &ping,
                answer: &pong,
            })
        } else {
            None
        };
        after_move(&mut self.p, patterns, sync, &mut reading, &mut out).await?;
        finish(
            out,
            patterns,
            reading,
            "the engine printed no thinking line for this search",
        )
    }

    /// What the engine announced at startup.
    pub fn features(&self) -> &XboardFeatures {
        &self.protocol.features
    }
}
