//! The UCI driver: one engine process, spoken to line by line.
//!
//! Per-position overhead matters (suites have thousands of shallow searches), so the driver
//! never sleeps: commands of a step go out in one write, and replies are read line-buffered into
//! one reused buffer. Every wait has a deadline, and every failure that leaves the process in an
//! unknown state kills it, so the caller only has to check [`Driver::is_usable`]. The
//! process plumbing is shared with the xboard driver (`pipe.rs`, `driver.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sweep_domain::bounds::{counter_name_ok, MAX_COUNTERS};
use sweep_domain::engine::Protocol;
use sweep_domain::limit::Limit;
use tokio::time::Instant;

use super::driver::Driver;
use super::outcome::{EngineError, Score, SearchOutcome};
use super::pipe::has_line_break;
use super::report::{after_move, finish, PatternReading, SyncCommand};
use super::EngineSettings;
use crate::sandbox::Confinement;

pub mod options;

pub use options::{check_options, parse_option_line, UciOption, UciOptionType};

/// A running UCI engine.
pub type UciEngine = Driver<Uci>;

/// What a UCI engine told the driver at startup.
#[derive(Debug, Default)]
pub struct Uci {
    /// The options it announced before `uciok`, in its order.
    announced: Vec<UciOption>,
    /// `readyok`s not yet read of `isready`s sent after earlier searches' `bestmove`: the next
    /// search skips them before its own.
    owed_readyoks: u32,
}

impl Driver<Uci> {
    /// Starts `binary`, completes the `uci`/`uciok` handshake, sets `options` and waits for
    /// `readyok`; each wait is bounded by `init_timeout`.
    pub async fn start(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
    ) -> Result<Self, EngineError> {
        Self::start_confined(binary, options, init_timeout, &Confinement::default()).await
    }

    /// [`Driver::<Uci>::start`] with the engine run as `confinement` says (its sandbox).
    pub async fn start_confined(
        binary: &Path,
        options: &[(String, String)],
        init_timeout: Duration,
        confinement: &Confinement,
    ) -> Result<Self, EngineError> {
        let refuse = |name: &str, value: &str| {
            (has_line_break(name) || has_line_break(value))
                .then(|| format!("option `{}` contains a line break", name.escape_debug()))
        };
        let mut engine =
            Driver::<Uci>::launch(binary, options, refuse, "uci\n", confinement).await?;
        let mut announced = Vec::new();
        let answered = engine
            .p
            .wait_for(
                |l| {
                    announced.extend(parse_option_line(l));
                    l == "uciok"
                },
                Instant::now() + init_timeout,
            )
            .await?;
        engine.protocol.announced = announced;
        if !answered {
            engine.p.kill().await;
            return Err(EngineError::NoUciOk {
                limit: init_timeout,
            });
        }
        for (name, value) in options {
            engine
                .p
                .cmd
                .push_str(&format!("setoption name {name} value {value}\n"));
        }
        engine.p.cmd.push_str("isready\n");
        engine.p.send().await?;
        if !engine
            .p
            .wait_for(|l| l == "readyok", Instant::now() + init_timeout)
            .await?
        {
            engine.p.kill().await;
            return Err(EngineError::Protocol(format!(
                "no readyok within {init_timeout:?} after setting options"
            )));
        }
        engine.p.usable = true;
        Ok(engine)
    }

    /// Searches `fen` to `limit`: `ucinewgame`, `isready`, `position fen`, `go`, then reads
    /// until `bestmove`. Output before this search's `readyok` is left over from an earlier
    /// search and is not read as this one's. With `[report]` patterns the driver reads on
    /// after `bestmove` (see [`super::report`]). After `timeout` the engine gets `stop` and a
    /// second to answer; it stays usable if it does, and is killed otherwise. A search without
    /// a node count is [`EngineError::NoNodeCount`].
    pub async fn search(
        &mut self,
        fen: &str,
        limit: Limit,
        timeout: Duration,
    ) -> Result<SearchOutcome, EngineError> {
        if has_line_break(fen) {
            return Err(EngineError::BadInput("FEN contains a line break".into()));
        }
        let started = self.p.begin_search()?;
        let deadline = started + timeout;
        self.p.cmd.push_str("ucinewgame\nisready\nposition fen ");
        self.p.cmd.push_str(fen);
        self.p.cmd.push_str("\ngo ");
        self.p.cmd.push_str(&limit.uci_go());
        self.p.cmd.push('\n');
        self.p.send().await?;

        // This search's `readyok` is the last of those still owed.
        let mut readyoks = self.protocol.owed_readyoks + 1;
        let mut out = SearchOutcome::default();
        let mut reading = PatternReading::default();
        loop {
            let line = self
                .p
                .search_line(
                    deadline,
                    ("stop\n", "bestmove"),
                    timeout,
                    &mut out.garbage_lines,
                )
                .await?;
            let Some(text) = line else { continue };
            if readyoks > 0 {
                if text == "readyok" {
                    readyoks -= 1;
                    self.protocol.owed_readyoks = readyoks;
                } else {
                    // Left over from an earlier search; counted, so a flood still ends.
                    self.p.garbage_line(&mut out.garbage_lines).await?;
                }
                continue;
            }
            let wanted = match &self.report {
                Some(p) => reading.line(p, text, &mut out, false),
                None => false,
            };
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
                    self.p.usable = true;
                    return self.after_bestmove(out, reading).await;
                }
                Some("readyok") => {}
                _ if wanted => {}
                _ => self.p.garbage_line(&mut out.garbage_lines).await?,
            }
        }
    }

    /// Reads on after `bestmove` for the `[report]` patterns (an `isready` marks the end of
    /// what the engine printed for the search) and finishes the outcome.
    async fn after_bestmove(
        &mut self,
        mut out: SearchOutcome,
        mut reading: PatternReading,
    ) -> Result<SearchOutcome, EngineError> {
        let sync = SyncCommand {
            command: "isready\n",
            answer: "readyok",
        };
        let patterns = self.report.as_ref();
        let owed = after_move(&mut self.p, patterns, Some(sync), &mut reading, &mut out).await?;
        if owed {
            // Its `readyok` comes later: the next search skips it with its own.
            self.protocol.owed_readyoks += 1;
        }
        finish(
            out,
            patterns,
            reading,
            "the engine printed no `info ... nodes` for this search",
        )
    }

    /// The options the engine announced before `uciok`, in its order.
    pub fn announced_options(&self) -> &[UciOption] {
        &self.protocol.announced
    }
}

/// Folds the words after `info` into `out`. Unknown keys are skipped; `pv` and `string` end
/// the line (what follows are moves or free text).
pub fn parse_info<'a>(mut words: impl Iterator<Item = &'a str>, out: &mut SearchOutcome) {
    while let Some(key) = words.next() {
        match key {
            "depth" => set(&mut out.depth, words.next()),
            "seldepth" => set(&mut out.seldepth, words.next()),
            "nodes" => {
                if let Some(n) = words.next().and_then(|w| w.parse().ok()) {
                    out.nodes = Some(n);
                }
            }
            "score" => match (words.next(), words.next().and_then(|v| v.parse().ok())) {
                (Some("cp"), Some(v)) => out.score = Some(Score::Cp(v)),
                (Some("mate"), Some(v)) => out.score = Some(Score::Mate(v)),
                _ => {}
            },
            "pv" => return,
            "string" => {
                if words.next() == Some("counters") {
                    out.counters = parse_counters(words);
                }
                return;
            }
            _ => {}
        }
    }
}

/// The `k=v` pairs of a counters line that a result may carry: names of safe characters,
/// values that fit the database, at most [`MAX_COUNTERS`] of them (the first ones). Anything
/// else the engine printed is dropped here, so one odd word never costs a position its result.
pub fn parse_counters<'a>(words: impl Iterator<Item = &'a str>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for kv in words {
        if out.len() == MAX_COUNTERS {
            break;
        }
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        if counter_name_ok(k) && i64::try_from(v).is_ok() {
            out.insert(k.to_string(), v);
        }
    }
    out
}

fn set<T: std::str::FromStr>(slot: &mut T, word: Option<&str>) {
    if let Some(v) = word.and_then(|w| w.parse().ok()) {
        *slot = v;
    }
}

/// Starts `binary`, searches one position and quits: the mode for engines whose
/// `ucinewgame` does not reset all state (`fresh_process_per_position`); see
/// [`super::one_shot`].
pub async fn one_shot(
    binary: &Path,
    options: &[(String, String)],
    init_timeout: Duration,
    fen: &str,
    limit: Limit,
    timeout: Duration,
) -> Result<SearchOutcome, EngineError> {
    let settings = EngineSettings {
        protocol: Protocol::Uci,
        options: options.to_vec(),
        fresh_process_per_position: true,
        position_timeout: timeout,
        init_timeout,
        report: None,
        confinement: Default::default(),
    };
    super::one_shot(binary, &settings, fen, limit).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(line: &str, out: &mut SearchOutcome) {
        parse_info(line.split_ascii_whitespace(), out);
    }

    #[test]
    fn keeps_last_values() {
        let mut o = SearchOutcome::default();
        info(
            "depth 5 seldepth 9 score cp 30 nodes 1890 nps 0 time 0 pv b1c3 b8c6",
            &mut o,
        );
        info(
            "depth 6 seldepth 12 score mate -3 lowerbound nodes 6216 time 1 pv b1c3",
            &mut o,
        );
        assert_eq!((o.depth, o.seldepth, o.nodes), (6, 12, Some(6216)));
        assert_eq!(o.score, Some(Score::Mate(-3)));
        // A currmove line without nodes keeps the earlier count.
        info("depth 7 currmove e2e4 currmovenumber 1", &mut o);
        assert_eq!((o.depth, o.nodes), (7, Some(6216)));
    }

    #[test]
    fn pv_and_strings_end_the_line() {
        let mut o = SearchOutcome::default();
        info("nodes 5 pv nodes 9", &mut o);
        assert_eq!(o.nodes, Some(5));
        info("string nodes 77 hello", &mut o);
        assert_eq!(o.nodes, Some(5));
        info(
            "string counters depth=6 nodes=6216 bad=x novalue tt_hits=445",
            &mut o,
        );
        assert_eq!(o.counters.len(), 3);
        assert_eq!(o.counters["tt_hits"], 445);
    }

    #[test]
    fn counters_keep_only_what_a_result_may_carry() {
        let mut o = SearchOutcome::default();
        info(
            "string counters ok=1 neg=-3 huge=18446744073709551615 b\u{7}ad=2 a.b-c_d=9",
            &mut o,
        );
        assert_eq!(
            o.counters,
            BTreeMap::from([("a.b-c_d".to_string(), 9), ("ok".to_string(), 1)])
        );
        let many: Vec<String> = (0..100).map(|i| format!("c{i:03}={i}")).collect();
        let c = parse_counters(many.iter().map(String::as_str));
        assert_eq!(c.len(), MAX_COUNTERS);
        assert_eq!(c["c000"], 0);
    }

    #[test]
    fn tolerates_junk() {
        let mut o = SearchOutcome::default();
        info("depth x nodes -5 score cp score foo", &mut o);
        info("depth", &mut o);
        // A count that is no number is no count: not 0.
        assert_eq!((o.depth, o.nodes, o.score), (0, None, None));
    }
}
