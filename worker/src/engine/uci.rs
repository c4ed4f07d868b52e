//! The UCI driver: one engine process, spoken to line by line.
//!
//! Per-position overhead matters (suites have thousands of shallow searches), so the driver
//! never sleeps: commands of a step go out in one write, and replies are read line-buffered into
//! one reused buffer. Every wait has a deadline, and every failure that leaves the process in an
//! unknown state kills it, so the caller only has to check [`UciEngine::is_usable`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

use super::{EngineError, Score, SearchOutcome};
use crate::process::{kill_group, own_group, GroupGuard};

pub mod options;

pub use options::{check_options, parse_option_line, UciOption, UciOptionType};

/// Longest line accepted from an engine; longer means it is not speaking UCI.
const MAX_LINE: usize = 1 << 20;
/// Unrecognised lines tolerated per command before the engine is declared broken.
const MAX_GARBAGE: u32 = 10_000;
/// After `stop` (timeout) or `quit`, how long the engine gets before it is killed.
const GRACE: Duration = Duration::from_secs(1);

enum ReadError {
    Timeout,
    TooLong,
    Io(std::io::Error),
}

/// A running UCI engine.
pub struct UciEngine {
    child: GroupGuard,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    line_done: bool,
    cmd: String,
    binary: PathBuf,
    usable: bool,
    announced: Vec<UciOption>,
}

impl std::fmt::Debug for UciEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UciEngine")
            .field("binary", &self.binary)
            .field("pid", &self.pid())
            .field("usable", &self.usable)
            .finish()
    }
}

fn has_line_break(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

impl UciEngine {
    /// Starts `binary`, completes the `uci`/`uciok` handshake, sets `options` and waits for
    /// `readyok`; each wait is bounded by `init_timeout`.
    pub async fn start(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
    ) -> Result<Self, EngineError> {
        for (name, value) in options {
            if has_line_break(name) || has_line_break(value) {
                return Err(EngineError::BadInput(format!(
                    "option `{}` contains a line break",
                    name.escape_debug()
                )));
            }
        }
        let mut cmd = Command::new(binary);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        own_group(&mut cmd);
        let mut child = cmd.spawn().map_err(EngineError::Spawn)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(EngineError::Protocol("engine pipes unavailable".into()));
        };
        let mut engine = UciEngine {
            child: GroupGuard(child),
            stdin,
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::with_capacity(256),
            line_done: false,
            cmd: String::with_capacity(256),
            binary: binary.to_path_buf(),
            usable: false,
            announced: Vec::new(),
        };
        engine.cmd.push_str("uci\n");
        engine.send().await?;
        let mut announced = Vec::new();
        let answered = engine
            .wait_for(
                |l| {
                    announced.extend(parse_option_line(l));
                    l == "uciok"
                },
                Instant::now() + init_timeout,
            )
            .await?;
        engine.announced = announced;
        if !answered {
            engine.kill().await;
            return Err(EngineError::NoUciOk {
                limit: init_timeout,
            });
        }
        for (name, value) in options {
            engine
                .cmd
                .push_str(&format!("setoption name {name} value {value}\n"));
        }
        engine.cmd.push_str("isready\n");
        engine.send().await?;
        if !engine
            .wait_for(|l| l == "readyok", Instant::now() + init_timeout)
            .await?
        {
            engine.kill().await;
            return Err(EngineError::Protocol(format!(
                "no readyok within {init_timeout:?} after setting options"
            )));
        }
        engine.usable = true;
        Ok(engine)
    }

    /// Searches `fen` to `depth`: `ucinewgame`, `isready`, `position fen`, `go depth`, then
    /// reads until `bestmove`. After `timeout` the engine gets `stop` and a second to answer;
    /// it stays usable if it does, and is killed otherwise.
    pub async fn search(
        &mut self,
        fen: &str,
        depth: u32,
        timeout: Duration,
    ) -> Result<SearchOutcome, EngineError> {
        if has_line_break(fen) {
            return Err(EngineError::BadInput("FEN contains a line break".into()));
        }
        if !self.usable {
            return Err(EngineError::Protocol(
                "engine is not in a usable state".into(),
            ));
        }
        // Stays false if this future is dropped half-way: the process state is then unknown.
        self.usable = false;
        let started = Instant::now();
        let deadline = started + timeout;
        self.cmd.push_str("ucinewgame\nisready\nposition fen ");
        self.cmd.push_str(fen);
        self.cmd.push_str("\ngo depth ");
        self.cmd.push_str(&depth.to_string());
        self.cmd.push('\n');
        self.send().await?;

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
            match self.next_line(deadline).await {
                Ok(true) => {}
                Ok(false) => return Err(self.crashed().await),
                Err(ReadError::Timeout) => return Err(self.after_timeout(timeout).await),
                Err(e) => return Err(self.fail(e).await),
            }
            let Ok(text) = std::str::from_utf8(&self.line) else {
                out.garbage_lines += 1;
                self.check_garbage(out.garbage_lines).await?;
                continue;
            };
            let text = text.trim();
            let mut words = text.split_ascii_whitespace();
            match words.next() {
                Some("info") => parse_info(words, &mut out),
                Some("bestmove") => {
                    let Some(mv) = words.next() else {
                        self.kill().await;
                        return Err(EngineError::Protocol("bestmove without a move".into()));
                    };
                    out.bestmove = mv.to_string();
                    if words.next() == Some("ponder") {
                        out.ponder = words.next().map(str::to_string);
                    }
                    out.time = started.elapsed();
                    self.usable = true;
                    return Ok(out);
                }
                Some("readyok") => {}
                _ => {
                    out.garbage_lines += 1;
                    self.check_garbage(out.garbage_lines).await?;
                }
            }
        }
    }

    /// The options the engine announced before `uciok`, in its order.
    pub fn announced_options(&self) -> &[UciOption] {
        &self.announced
    }

    /// Can [`UciEngine::search`] be called again?
    pub fn is_usable(&self) -> bool {
        self.usable
    }

    /// Process id (until the process is reaped).
    pub fn pid(&self) -> Option<u32> {
        self.child.0.id()
    }

    /// The binary this engine runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// Asks the engine to exit (`quit`), killing it if it has not within a second.
    pub async fn quit(mut self) {
        self.cmd.push_str("quit\n");
        if self.send().await.is_ok()
            && tokio::time::timeout(GRACE, self.child.0.wait())
                .await
                .is_ok()
        {
            return;
        }
        self.kill().await;
    }

    /// Kills the engine's process group now and reaps it.
    pub async fn kill(&mut self) {
        self.usable = false;
        kill_group(&mut self.child.0);
        let _ = tokio::time::timeout(GRACE, self.child.0.wait()).await;
    }

    async fn send(&mut self) -> Result<(), EngineError> {
        let result = async {
            self.stdin.write_all(self.cmd.as_bytes()).await?;
            self.stdin.flush().await
        }
        .await;
        self.cmd.clear();
        match result {
            Ok(()) => Ok(()),
            // A closed pipe means the engine is gone: report how it ended.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(self.crashed().await),
            Err(e) => {
                self.kill().await;
                Err(EngineError::Io(e))
            }
        }
    }

    /// Reads lines until one (trimmed) satisfies `want`; `Ok(false)` at the deadline.
    async fn wait_for(
        &mut self,
        mut want: impl FnMut(&str) -> bool,
        deadline: Instant,
    ) -> Result<bool, EngineError> {
        let mut garbage = 0;
        loop {
            match self.next_line(deadline).await {
                Ok(true) => {}
                Ok(false) => return Err(self.crashed().await),
                Err(ReadError::Timeout) => return Ok(false),
                Err(e) => return Err(self.fail(e).await),
            }
            match std::str::from_utf8(&self.line) {
                Ok(t) if want(t.trim()) => return Ok(true),
                _ => {
                    // `id`/`option` lines land here too; they count toward the same limit,
                    // which no honest engine comes near.
                    garbage += 1;
                    self.check_garbage(garbage).await?;
                }
            }
        }
    }

    /// Reads the next line into `self.line`: `Ok(true)` for a line, `Ok(false)` at EOF.
    /// Cancel-safe: a partial line survives a timeout and is completed by the next call.
    async fn next_line(&mut self, deadline: Instant) -> Result<bool, ReadError> {
        if self.line_done {
            self.line.clear();
            self.line_done = false;
        }
        let room = MAX_LINE.saturating_sub(self.line.len()) as u64;
        let mut limited = (&mut self.stdout).take(room);
        let read = limited.read_until(b'\n', &mut self.line);
        let n = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Io(e)),
            Ok(Ok(n)) => n,
        };
        if self.line.last() == Some(&b'\n') {
            self.line_done = true;
            return Ok(true);
        }
        if self.line.len() >= MAX_LINE {
            return Err(ReadError::TooLong);
        }
        if n == 0 && self.line.is_empty() {
            return Ok(false);
        }
        // The output ended inside a line: hand it over; the next read reports EOF.
        self.line_done = true;
        Ok(true)
    }

    async fn check_garbage(&mut self, count: u32) -> Result<(), EngineError> {
        if count > MAX_GARBAGE {
            self.kill().await;
            return Err(EngineError::Protocol(format!(
                "more than {MAX_GARBAGE} unrecognised lines"
            )));
        }
        Ok(())
    }

    async fn fail(&mut self, e: ReadError) -> EngineError {
        self.kill().await;
        match e {
            ReadError::TooLong => {
                EngineError::Protocol(format!("output line longer than {MAX_LINE} bytes"))
            }
            ReadError::Io(e) => EngineError::Io(e),
            ReadError::Timeout => EngineError::Protocol("timeout".into()),
        }
    }

    /// The engine's output ended: collect its exit status (killing it if it lingers).
    async fn crashed(&mut self) -> EngineError {
        self.usable = false;
        let status = match tokio::time::timeout(GRACE, self.child.0.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("exit status unknown: {e}"),
            Err(_) => {
                self.kill().await;
                "closed its output but kept running; killed".to_string()
            }
        };
        EngineError::Crashed { status }
    }

    async fn after_timeout(&mut self, timeout: Duration) -> EngineError {
        self.cmd.push_str("stop\n");
        let stopped = self.send().await.is_ok()
            && matches!(
                self.wait_for(|l| l.starts_with("bestmove"), Instant::now() + GRACE)
                    .await,
                Ok(true)
            );
        if stopped {
            // It obeyed `stop`: the process is in a known state and can be reused.
            self.usable = true;
        } else {
            self.kill().await;
        }
        EngineError::Timeout { limit: timeout }
    }
}

/// Folds the words after `info` into `out`. Unknown keys are skipped; `pv` and `string` end
/// the line (what follows are moves or free text).
pub fn parse_info<'a>(mut words: impl Iterator<Item = &'a str>, out: &mut SearchOutcome) {
    while let Some(key) = words.next() {
        match key {
            "depth" => set(&mut out.depth, words.next()),
            "seldepth" => set(&mut out.seldepth, words.next()),
            "nodes" => set(&mut out.nodes, words.next()),
            "score" => match (words.next(), words.next().and_then(|v| v.parse().ok())) {
                (Some("cp"), Some(v)) => out.score = Some(Score::Cp(v)),
                (Some("mate"), Some(v)) => out.score = Some(Score::Mate(v)),
                _ => {}
            },
            "pv" => return,
            "string" => {
                if words.next() == Some("counters") {
                    out.counters = words
                        .filter_map(|kv| {
                            let (k, v) = kv.split_once('=')?;
                            Some((k.to_string(), v.parse().ok()?))
                        })
                        .collect();
                }
                return;
            }
            _ => {}
        }
    }
}

fn set<T: std::str::FromStr>(slot: &mut T, word: Option<&str>) {
    if let Some(v) = word.and_then(|w| w.parse().ok()) {
        *slot = v;
    }
}

/// Starts `binary`, searches one position and quits: the mode for engines whose
/// `ucinewgame` does not reset all state (`fresh_process_per_position`).
pub async fn one_shot(
    binary: &Path,
    options: &[(String, String)],
    init_timeout: Duration,
    fen: &str,
    depth: u32,
    timeout: Duration,
) -> Result<SearchOutcome, EngineError> {
    let mut engine = UciEngine::start(binary, options, init_timeout).await?;
    let result = engine.search(fen, depth, timeout).await;
    if engine.is_usable() {
        engine.quit().await;
    } else {
        engine.kill().await;
    }
    result
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

    fn info(line: &str, out: &mut SearchOutcome) {
        parse_info(line.split_ascii_whitespace(), out);
    }

    #[test]
    fn keeps_last_values() {
        let mut o = outcome();
        info(
            "depth 5 seldepth 9 score cp 30 nodes 1890 nps 0 time 0 pv b1c3 b8c6",
            &mut o,
        );
        info(
            "depth 6 seldepth 12 score mate -3 lowerbound nodes 6216 time 1 pv b1c3",
            &mut o,
        );
        assert_eq!((o.depth, o.seldepth, o.nodes), (6, 12, 6216));
        assert_eq!(o.score, Some(Score::Mate(-3)));
        // A currmove line without nodes keeps the earlier count.
        info("depth 7 currmove e2e4 currmovenumber 1", &mut o);
        assert_eq!((o.depth, o.nodes), (7, 6216));
    }

    #[test]
    fn pv_and_strings_end_the_line() {
        let mut o = outcome();
        info("nodes 5 pv nodes 9", &mut o);
        assert_eq!(o.nodes, 5);
        info("string nodes 77 hello", &mut o);
        assert_eq!(o.nodes, 5);
        info(
            "string counters depth=6 nodes=6216 bad=x novalue tt_hits=445",
            &mut o,
        );
        assert_eq!(o.counters.len(), 3);
        assert_eq!(o.counters["tt_hits"], 445);
    }

    #[test]
    fn tolerates_junk() {
        let mut o = outcome();
        info("depth x nodes -5 score cp score foo", &mut o);
        info("depth", &mut o);
        assert_eq!((o.depth, o.nodes, o.score), (0, 0, None));
    }
}
