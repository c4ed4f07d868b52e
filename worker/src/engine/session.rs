//! An engine session: runs positions of one build on one engine slot and turns every outcome,
//! including crashes and hangs, into a [`PositionResult`]. A position is never dropped: a
//! failure becomes an error result and the engine is restarted for the next one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sweep_domain::epd::is_legal_uci;
use sweep_domain::limit::Limit;
use sweep_domain::wire::{JobPosition, PositionResult};

use super::{one_shot, Engine, EngineError, EngineSettings, Score, SearchOutcome};

/// After this many failed starts in a row, positions fail at once with the last start error
/// instead of waiting for yet another handshake timeout each.
const MAX_START_FAILURES: u32 = 3;

/// Is `bestmove` a solution of `pos`: in `bm` (when there is one) and not in `am`?
pub fn is_solved(pos: &JobPosition, bestmove: &str) -> bool {
    sweep_domain::epd::solves(&pos.bm, &pos.am, bestmove)
}

/// Engines for one binary with fixed settings; keeps one live process between positions
/// (and between jobs of the same build) unless the settings ask for a fresh one each time.
#[derive(Debug)]
pub struct EngineSession {
    binary: PathBuf,
    settings: EngineSettings,
    engine: Option<Engine>,
    start_failures: u32,
    last_start_error: String,
}

impl EngineSession {
    /// A session for `binary`; no process is started until the first position.
    pub fn new(binary: &Path, settings: EngineSettings) -> Self {
        EngineSession {
            binary: binary.to_path_buf(),
            settings,
            engine: None,
            start_failures: 0,
            last_start_error: String::new(),
        }
    }

    /// Does this session run `binary` with `settings` (so it can serve another job)?
    pub fn serves(&self, binary: &Path, settings: &EngineSettings) -> bool {
        self.binary == binary && &self.settings == settings
    }

    /// Process id of the live engine, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.engine.as_ref().and_then(Engine::pid)
    }

    /// Searches `pos` to `limit` and reports the outcome; never fails, errors go into
    /// [`PositionResult::error`].
    pub async fn run_position(&mut self, pos: &JobPosition, limit: Limit) -> PositionResult {
        let started = Instant::now();
        let outcome = self.search(&pos.fen, limit).await;
        to_result(pos, outcome, started)
    }

    async fn search(&mut self, fen: &str, limit: Limit) -> Result<SearchOutcome, EngineError> {
        let s = &self.settings;
        if self.start_failures >= MAX_START_FAILURES {
            return Err(EngineError::Protocol(format!(
                "engine failed to start {} times: {}",
                self.start_failures, self.last_start_error
            )));
        }
        if s.fresh_process_per_position {
            let r = one_shot(&self.binary, s, fen, limit).await;
            return self.note_start(r);
        }
        let engine = match self.engine.take() {
            Some(e) if e.is_usable() => e,
            stale => {
                if let Some(mut e) = stale {
                    e.kill().await;
                }
                let started = Engine::start(&self.binary, s).await;
                self.note_start(started)?
            }
        };
        let engine = self.engine.insert(engine);
        let result = engine
            .search(fen, limit, self.settings.position_timeout)
            .await;
        if !engine.is_usable() {
            // Crashed or killed: the next position starts a new process.
            if let Some(mut e) = self.engine.take() {
                e.kill().await;
            }
        }
        result
    }

    fn note_start<T>(&mut self, r: Result<T, EngineError>) -> Result<T, EngineError> {
        match &r {
            Err(
                e @ (EngineError::Spawn(_)
                | EngineError::NoUciOk { .. }
                | EngineError::NoFeatureDone { .. }
                | EngineError::BadInput(_)),
            ) => {
                self.start_failures += 1;
                self.last_start_error = e.to_string();
            }
            _ => self.start_failures = 0,
        }
        r
    }

    /// Kills the live engine at once (cancellation, lease lost, shutdown).
    pub async fn kill(&mut self) {
        if let Some(mut e) = self.engine.take() {
            e.kill().await;
        }
    }

    /// Lets the live engine exit politely (`quit`), killing it if it does not.
    pub async fn close(&mut self) {
        if let Some(e) = self.engine.take() {
            e.quit().await;
        }
    }
}

/// The result of searching `pos`: the outcome's figures, or the error that makes it none (a
/// failed search, no node count, an illegal move). The one rule a position is judged by,
/// whether a job reports it or a speed job's run times it.
pub(crate) fn to_result(
    pos: &JobPosition,
    outcome: Result<SearchOutcome, EngineError>,
    started: Instant,
) -> PositionResult {
    let counted = outcome.and_then(|o| match o.nodes {
        Some(nodes) => Ok((o, nodes)),
        // The drivers never return such an outcome; a count nobody reported is never 0.
        None => Err(EngineError::NoNodeCount(
            "the engine reported no node count".into(),
        )),
    });
    match counted {
        Ok((o, nodes)) => {
            let (score_cp, score_mate) = match o.score {
                Some(Score::Cp(v)) => (Some(v), None),
                Some(Score::Mate(v)) => (None, Some(v)),
                None => (None, None),
            };
            let legal = is_legal_uci(&pos.fen, &o.bestmove);
            PositionResult {
                index: pos.index,
                nodes,
                solved: legal && is_solved(pos, &o.bestmove),
                error: (!legal).then(|| format!("illegal bestmove {}", o.bestmove)),
                bestmove: o.bestmove,
                score_cp,
                score_mate,
                depth: o.depth,
                time_ms: o.time.as_millis() as u64,
                counters: o.counters,
            }
        }
        Err(e) => PositionResult {
            index: pos.index,
            nodes: 0,
            bestmove: String::new(),
            solved: false,
            score_cp: None,
            score_mate: None,
            depth: 0,
            time_ms: started.elapsed().as_millis() as u64,
            error: Some(e.to_string()),
            counters: Default::default(),
        },
    }
}

/// Runs `positions` to `limit` on `binary` directly, without a coordinator: the same session
/// code the worker uses, so its numbers must match what a worker uploads.
pub async fn run_positions_direct(
    binary: &Path,
    settings: EngineSettings,
    positions: &[JobPosition],
    limit: Limit,
) -> Vec<PositionResult> {
    let mut session = EngineSession::new(binary, settings);
    let mut out = Vec::with_capacity(positions.len());
    for pos in positions {
        out.push(session.run_position(pos, limit).await);
    }
    session.close().await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pos(bm: &[&str], am: &[&str]) -> JobPosition {
        JobPosition {
            index: 7,
            id: "t".into(),
            fen: "4k3/8/8/8/8/8/8/4K2R w K - 0 1".into(),
            bm: bm.iter().map(|s| s.to_string()).collect(),
            am: am.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn ok(bestmove: &str) -> Result<SearchOutcome, EngineError> {
        Ok(SearchOutcome {
            bestmove: bestmove.into(),
            ponder: None,
            depth: 4,
            seldepth: 6,
            nodes: Some(1234),
            score: Some(Score::Mate(2)),
            counters: Default::default(),
            time: Duration::from_millis(3),
            garbage_lines: 0,
        })
    }

    #[test]
    fn solved_rule() {
        assert!(is_solved(&pos(&["e1g1"], &[]), "e1g1"));
        assert!(!is_solved(&pos(&["e1g1"], &[]), "h1h8"));
        assert!(is_solved(&pos(&[], &["h1h2"]), "h1h8"));
        assert!(!is_solved(&pos(&[], &["h1h2"]), "h1h2"));
    }

    #[test]
    fn results_from_outcomes() {
        let r = to_result(&pos(&["e1g1"], &[]), ok("e1g1"), Instant::now());
        assert_eq!((r.index, r.nodes, r.depth), (7, 1234, 4));
        assert!(r.solved && r.error.is_none());
        assert_eq!((r.score_cp, r.score_mate, r.time_ms), (None, Some(2), 3));

        let r = to_result(&pos(&[], &[]), ok("e1e3"), Instant::now());
        assert_eq!(r.error.as_deref(), Some("illegal bestmove e1e3"));
        assert!(!r.solved);

        let r = to_result(
            &pos(&[], &[]),
            Err(EngineError::Timeout {
                limit: Duration::from_secs(5),
            }),
            Instant::now(),
        );
        assert_eq!(r.error.as_deref(), Some("timeout: no bestmove within 5s"));
        assert_eq!((r.nodes, r.bestmove.as_str()), (0, ""));

        // An outcome without a count is an error result, not a result of 0 nodes.
        let mut uncounted = ok("e1g1").unwrap();
        uncounted.nodes = None;
        let r = to_result(&pos(&["e1g1"], &[]), Ok(uncounted), Instant::now());
        assert!(r.error.unwrap().starts_with("no node count"));
        assert!(!r.solved);
    }
}
