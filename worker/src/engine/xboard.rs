//! The xboard (CECP) driver: the same process handling, deadlines, crash and garbage rules as
//! the UCI driver (both build on `pipe.rs`), speaking protocol version 2.
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

use super::pipe::{has_line_break, EngineProcess, ReadError, GRACE};
use super::{EngineError, Score, SearchOutcome};

/// How long an engine that has not sent `feature done=0` gets for its features (xboard's
/// own rule); silence that long means a protocol-1 engine.
const FEATURE_WAIT: Duration = Duration::from_secs(2);
/// Setup commands an engine may not know without that changing the position it searches.
const OPTIONAL_COMMANDS: [&str; 3] = ["st", "easy", "post"];

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
pub struct XboardEngine {
    p: EngineProcess,
    features: XboardFeatures,
    ping: u32,
}

impl std::fmt::Debug for XboardEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XboardEngine")
            .field("binary", &self.p.binary())
            .field("pid", &self.pid())
            .field("usable", &self.p.usable)
            .field("features", &self.features)
            .finish()
    }
}

impl XboardEngine {
    /// Starts `binary`, reads its features, sets `options` (each must have been announced)
    /// and, if the engine supports `ping`, waits for the `pong`; each wait is bounded by
    /// `init_timeout`.
    pub async fn start(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
    ) -> Result<Self, EngineError> {
        for (name, value) in options {
            if has_line_break(name) || has_line_break(value) || name.contains('=') {
                return Err(EngineError::BadInput(format!(
                    "xboard option `{}` contains a line break or `=`",
                    name.escape_debug()
                )));
            }
        }
        let mut engine = XboardEngine {
            p: EngineProcess::spawn(binary)?,
            features: XboardFeatures::default(),
            ping: 0,
        };
        engine.p.cmd.push_str("xboard\nprotover 2\n");
        engine.p.send().await?;
        engine.read_features(init_timeout).await?;
        if engine.features.no_reuse {
            tracing::warn!(
                binary = %binary.display(),
                "xboard engine announced reuse=0; consider fresh_process_per_position"
            );
        }
        for (name, _) in options {
            if !engine.features.options.iter().any(|o| o == name) {
                engine.p.kill().await;
                return Err(EngineError::BadInput(format!(
                    "option `{name}` was not announced by the engine (announced: {})",
                    if engine.features.options.is_empty() {
                        "none".to_string()
                    } else {
                        engine.features.options.join(", ")
                    }
                )));
            }
        }
        engine.p.cmd.push_str("easy\n");
        for (name, value) in options {
            engine.p.cmd.push_str(&format!("option {name}={value}\n"));
        }
        if engine.features.ping {
            engine.ping += 1;
            let pong = format!("pong {}", engine.ping);
            engine.p.cmd.push_str(&format!("ping {}\n", engine.ping));
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
    /// (after `done=0`) the init timeout.
    async fn read_features(&mut self, init_timeout: Duration) -> Result<(), EngineError> {
        let started = Instant::now();
        let hard = started + init_timeout;
        let mut wait_for_done = false;
        let mut garbage = 0;
        loop {
            let deadline = if wait_for_done {
                hard
            } else {
                hard.min(started + FEATURE_WAIT)
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
                    garbage += 1;
                    self.p.check_garbage(garbage).await?;
                }
                continue;
            };
            for (name, value) in parse_features(rest) {
                let accepted = self.note_feature(&name, &value);
                let reply = if accepted { "accepted" } else { "rejected" };
                self.p.cmd.push_str(&format!("{reply} {name}\n"));
                if name == "done" {
                    wait_for_done = value == "0";
                    self.features.done = value == "1";
                }
            }
            self.p.send().await?;
            if self.features.done {
                return Ok(());
            }
        }
    }

    /// Records one feature; `true` if the driver accepts it.
    fn note_feature(&mut self, name: &str, value: &str) -> bool {
        let on = value == "1";
        match name {
            "ping" => self.features.ping = on,
            "setboard" => self.features.setboard = on,
            "usermove" => self.features.usermove = on,
            "reuse" => self.features.no_reuse = value == "0",
            "myname" => self.features.name = Some(value.to_string()),
            "option" => {
                if let Some(name) = option_name(value) {
                    self.features.options.push(name.to_string());
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
        let setup = if self.features.setboard {
            side_to_move(fen)?;
            format!("setboard {fen}\n")
        } else {
            edit_commands(fen, self.features.usermove)?
        };
        if !self.p.usable {
            return Err(EngineError::Protocol(
                "engine is not in a usable state".into(),
            ));
        }
        // Stays false if this future is dropped half-way: the process state is then unknown.
        self.p.usable = false;
        let started = Instant::now();
        let deadline = started + timeout;
        // The engine's own clock must never end a search before Sweep's timeout does: the
        // depth limit alone decides, or the node counts would depend on machine load.
        let st = timeout.as_secs().max(1) * 2;
        self.p.cmd.push_str("new\nforce\n");
        self.p.cmd.push_str(&setup);
        self.p.cmd.push_str(&format!("st {st}\nsd {depth}\npost\n"));
        let mut synced = true;
        if self.features.ping {
            // Output before this `pong` is left over from an earlier search.
            self.ping += 1;
            self.p.cmd.push_str(&format!("ping {}\n", self.ping));
            synced = false;
        }
        self.p.cmd.push_str("go\n");
        self.p.send().await?;
        let pong = format!("pong {}", self.ping);

        let mut out = SearchOutcome {
            bestmove: String::new(),
            ponder: None,
            depth: 0,
            seldepth: 0,
            nodes: 0,
            score: None,
            counters: Default::default(),
            time: Duration::ZERO,
            garbage_lines: 0,
        };
        loop {
            match self.p.next_line(deadline).await {
                Ok(true) => {}
                Ok(false) => return Err(self.p.crashed().await),
                Err(ReadError::Timeout) => return Err(self.after_timeout(timeout).await),
                Err(e) => return Err(self.p.fail(e).await),
            }
            let Ok(text) = std::str::from_utf8(self.p.line()) else {
                out.garbage_lines += 1;
                self.p.check_garbage(out.garbage_lines).await?;
                continue;
            };
            let text = text.trim();
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
            if let Some(mv) = text.strip_prefix("move ") {
                out.bestmove = engine_move_to_uci(fen, mv.trim());
                out.time = started.elapsed();
                self.p.usable = true;
                return Ok(out);
            }
            if parse_thinking(text, &mut out) || is_chatter(text) {
                continue;
            }
            out.garbage_lines += 1;
            self.p.check_garbage(out.garbage_lines).await?;
        }
    }

    /// What the engine announced at startup.
    pub fn features(&self) -> &XboardFeatures {
        &self.features
    }

    /// Can [`XboardEngine::search`] be called again?
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
        self.p.quit("quit\n").await;
    }

    /// Kills the engine's process group now and reaps it.
    pub async fn kill(&mut self) {
        self.p.kill().await;
    }

    async fn after_timeout(&mut self, timeout: Duration) -> EngineError {
        self.p.cmd.push_str("?\n");
        let moved = self.p.send().await.is_ok()
            && matches!(
                self.p
                    .wait_for(|l| l.starts_with("move "), Instant::now() + GRACE)
                    .await,
                Ok(true)
            );
        if moved {
            // It obeyed "move now": the process is in a known state and can be reused.
            self.p.usable = true;
        } else {
            self.p.kill().await;
        }
        EngineError::Timeout { limit: timeout }
    }
}

/// Starts `binary`, searches one position and quits (`fresh_process_per_position`).
pub async fn one_shot(
    binary: &Path,
    options: &[(String, String)],
    init_timeout: Duration,
    fen: &str,
    depth: u32,
    timeout: Duration,
) -> Result<SearchOutcome, EngineError> {
    let mut engine = XboardEngine::start(binary, options, init_timeout).await?;
    let result = engine.search(fen, depth, timeout).await;
    if engine.is_usable() {
        engine.quit().await;
    } else {
        engine.kill().await;
    }
    result
}

/// Lines the protocol defines that carry nothing for a search: debug output (`#`), messages
/// for the GUI's user or ICS, hints, game results, resignations and draw offers, and `pong`s.
fn is_chatter(line: &str) -> bool {
    let first = line.split_ascii_whitespace().next().unwrap_or("");
    line.starts_with('#')
        || first.starts_with("tell")
        || matches!(
            first,
            "askuser" | "Hint:" | "1-0" | "0-1" | "1/2-1/2" | "resign" | "offer" | "pong"
        )
}

/// `Error (...): COMMAND` or `Illegal move...` about anything but an optional command: the
/// engine is not searching the position it was given.
fn setup_rejected(line: &str) -> Option<&str> {
    if line.starts_with("Illegal move") {
        return Some(line);
    }
    let rest = line.strip_prefix("Error")?;
    let command = rest.rsplit(':').next().unwrap_or("").trim();
    let word = command.split_ascii_whitespace().next().unwrap_or("");
    (!OPTIONAL_COMMANDS.contains(&word)).then_some(line)
}

/// Folds a thinking line (`ply score time nodes pv...`) into `out`; `false` if it is not one.
/// Scores are centipawns; `100000 + N` / `-100000 - N` are the protocol's mate in N moves.
pub fn parse_thinking(line: &str, out: &mut SearchOutcome) -> bool {
    let mut words = line.split_ascii_whitespace();
    let (Some(ply), Some(score), Some(time), Some(nodes)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return false;
    };
    // Some engines mark the ply (`9.`, `9&`, `9+`) for fail highs and the like.
    let ply = ply.trim_end_matches(|c: char| !c.is_ascii_digit());
    let (Ok(ply), Ok(score), Ok(_), Ok(nodes)) = (
        ply.parse::<u32>(),
        score.parse::<i32>(),
        time.parse::<i64>(),
        nodes.parse::<u64>(),
    ) else {
        return false;
    };
    out.depth = ply;
    out.nodes = nodes;
    out.score = Some(if score >= 100_000 {
        Score::Mate(score - 100_000)
    } else if score <= -100_000 {
        Score::Mate(score + 100_000)
    } else {
        Score::Cp(score)
    });
    true
}

/// `NAME=VALUE` pairs of a feature line; values may be quoted (and then contain spaces).
fn parse_features(mut rest: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    loop {
        rest = rest.trim_start();
        let Some((name, after)) = rest.split_once('=') else {
            return pairs;
        };
        let (value, after) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.split_once('"') {
                Some((v, a)) => (v, a),
                None => (quoted, ""),
            }
        } else {
            after.split_once(char::is_whitespace).unwrap_or((after, ""))
        };
        pairs.push((name.trim().to_string(), value.to_string()));
        rest = after;
    }
}

/// The name in an option feature's value, `NAME -TYPE ...`.
fn option_name(value: &str) -> Option<&str> {
    const TYPES: [&str; 10] = [
        "check", "spin", "combo", "slider", "string", "file", "path", "button", "save", "reset",
    ];
    let mut search = value;
    let mut consumed = 0;
    while let Some(i) = search.find(" -") {
        let after = &search[i + 2..];
        if TYPES
            .iter()
            .any(|t| after.split_ascii_whitespace().next() == Some(t))
        {
            return Some(value[..consumed + i].trim()).filter(|n| !n.is_empty());
        }
        consumed += i + 2;
        search = after;
    }
    None
}

/// The FEN's side to move: `false` for white, `true` for black.
fn side_to_move(fen: &str) -> Result<bool, EngineError> {
    match fen.split_ascii_whitespace().nth(1) {
        Some("w") => Ok(false),
        Some("b") => Ok(true),
        other => Err(EngineError::BadInput(format!(
            "FEN side to move must be `w` or `b`, got {other:?}"
        ))),
    }
}

/// The edit-mode commands that set up `fen` after `new` and `force`.
fn edit_commands(fen: &str, usermove: bool) -> Result<String, EngineError> {
    let black = side_to_move(fen)?;
    let board = fen.split_ascii_whitespace().next().unwrap_or("");
    let ranks: Vec<&str> = board.split('/').collect();
    if ranks.len() != 8 {
        return Err(EngineError::BadInput(format!(
            "FEN board must have 8 ranks, has {}",
            ranks.len()
        )));
    }
    let (mut white_pieces, mut black_pieces) = (String::new(), String::new());
    for (i, rank) in ranks.iter().enumerate() {
        let rank_no = 8 - i;
        let mut file = 0u32;
        for c in rank.chars() {
            if let Some(d) = c.to_digit(10) {
                file += d;
                continue;
            }
            if !"pnbrqkPNBRQK".contains(c) || file >= 8 {
                return Err(EngineError::BadInput(format!(
                    "FEN rank {rank_no} is malformed at `{c}`"
                )));
            }
            let square = format!("{}{rank_no}", (b'a' + file as u8) as char);
            let list = if c.is_ascii_uppercase() {
                &mut white_pieces
            } else {
                &mut black_pieces
            };
            list.push(c.to_ascii_uppercase());
            list.push_str(&square);
            list.push('\n');
            file += 1;
        }
        if file != 8 {
            return Err(EngineError::BadInput(format!(
                "FEN rank {rank_no} covers {file} squares, not 8"
            )));
        }
    }
    let mut cmd = String::new();
    if black {
        // `edit` keeps the side to move, so a harmless white move makes it black's turn.
        cmd.push_str(if usermove {
            "usermove a2a3\n"
        } else {
            "a2a3\n"
        });
    }
    cmd.push_str("edit\n#\n");
    cmd.push_str(&white_pieces);
    cmd.push_str("c\n");
    cmd.push_str(&black_pieces);
    cmd.push_str(".\n");
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> SearchOutcome {
        SearchOutcome {
            bestmove: String::new(),
            ponder: None,
            depth: 0,
            seldepth: 0,
            nodes: 0,
            score: None,
            counters: Default::default(),
            time: Duration::ZERO,
            garbage_lines: 0,
        }
    }

    #[test]
    fn thinking_lines() {
        let mut o = outcome();
        assert!(parse_thinking(
            " 4      0        0       1171 d2d4 d7d5",
            &mut o
        ));
        assert_eq!((o.depth, o.nodes, o.score), (4, 1171, Some(Score::Cp(0))));
        assert!(parse_thinking("9.  -35  120  99000  e2e4", &mut o));
        assert_eq!((o.depth, o.score), (9, Some(Score::Cp(-35))));
        assert!(parse_thinking(" 5 100001 0 184 a1a8", &mut o));
        assert_eq!(o.score, Some(Score::Mate(1)));
        assert!(parse_thinking(" 5 -100003 0 184", &mut o));
        assert_eq!(o.score, Some(Score::Mate(-3)));
        for junk in [
            "move e2e4",
            "1 2 3",
            "# 1 2 3 4",
            "1 2 x 4 pv",
            "tellics say 1 2 3",
        ] {
            assert!(!parse_thinking(junk, &mut o), "{junk}");
        }
        assert_eq!(o.nodes, 184, "junk leaves the last values alone");
    }

    #[test]
    fn feature_lines() {
        let f = parse_features(
            r#"setboard=0 xedit=1 ping=1 done=0 myname="Fairy-Max 5.0b" option="Resign Threshold -spin 800 200 1200""#,
        );
        assert_eq!(f.len(), 6);
        assert_eq!(f[4], ("myname".into(), "Fairy-Max 5.0b".into()));
        assert_eq!(option_name(&f[5].1), Some("Resign Threshold"));
        assert_eq!(option_name("Dummy -x -string happy"), Some("Dummy -x"));
        assert_eq!(option_name("Info -button"), Some("Info"));
        assert_eq!(option_name("no type here"), None);
        assert_eq!(parse_features("broken"), vec![]);
        assert_eq!(parse_features(r#"a="unterminated"#)[0].1, "unterminated");
    }

    #[test]
    fn rejected_setups() {
        assert!(setup_rejected("Error (unknown command): setboard").is_some());
        assert!(setup_rejected("Illegal move: a2a3").is_some());
        assert!(setup_rejected("Error (unknown command): st").is_none());
        assert!(setup_rejected(" 1 2 3 4 e2e4").is_none());
    }

    #[test]
    fn edit_mode_setup() {
        let fen = "4k3/8/8/8/4P3/8/8/4K2R b K e3 0 1";
        let cmd = edit_commands(fen, false).unwrap();
        assert_eq!(cmd, "a2a3\nedit\n#\nPe4\nKe1\nRh1\nc\nKe8\n.\n");
        let white = edit_commands("4k3/8/8/8/8/8/8/4K3 w - - 0 1", true).unwrap();
        assert!(white.starts_with("edit\n"), "{white}");
        assert!(edit_commands(fen, true)
            .unwrap()
            .starts_with("usermove a2a3\n"));
        for (bad, why) in [
            ("4k3/8/8 w - - 0 1", "8 ranks"),
            ("4k3/8/8/8/8/8/8/4K4 w - - 0 1", "9 squares"),
            ("4k3/8/8/8/8/8/8/4X3 w - - 0 1", "`X`"),
            ("4k3/8/8/8/8/8/8/4K3 x - - 0 1", "side to move"),
        ] {
            let err = edit_commands(bad, false).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
