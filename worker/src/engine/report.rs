//! An engine's count in its own words: the `[report]` patterns read over every line of a
//! search, including what the engine prints after its move, and the rule that a search
//! without a node count is an error (both protocols).
//!
//! After the move the driver sends a synchronising command when the protocol has one (UCI
//! `isready`, xboard `ping N`) and reads until its answer: an engine prints its summary right
//! after the move, before it reads the next command, so once the answer is in, every line of
//! the search has been read. Without an answer (no `ping`, or an engine that summarises from
//! another thread) the wait ends at the first `nodes` match after the move or at the
//! pattern's `wait_ms`.

use sweep_domain::engine::ReportPatterns;
use tokio::time::Instant;

use super::outcome::{EngineError, SearchOutcome};
use super::pipe::{EngineProcess, ReadError};

/// What a search has read through the patterns so far.
#[derive(Debug, Default)]
pub(crate) struct PatternReading {
    /// The last `nodes` match.
    nodes: Option<u64>,
    /// A `nodes` match that was not a count (the search is then an error).
    bad: Option<String>,
    /// Did `nodes` match a line printed after the move?
    after_move: bool,
}

impl PatternReading {
    /// Folds `line` through `patterns` into `out` (counters) and the reading (nodes); `true`
    /// when a pattern wanted the line.
    pub(crate) fn line(
        &mut self,
        patterns: &ReportPatterns,
        line: &str,
        out: &mut SearchOutcome,
        moved: bool,
    ) -> bool {
        let counted = patterns.counters_in(line, &mut out.counters);
        match patterns.nodes_in(line) {
            Some(Ok(n)) => {
                self.nodes = Some(n);
                self.after_move |= moved;
                true
            }
            Some(Err(why)) => {
                self.bad = Some(why);
                true
            }
            None => counted,
        }
    }
}

/// How the driver can tell that the engine has printed everything for a search: the command
/// to send after the move and the line that answers it.
pub(crate) struct SyncCommand<'a> {
    /// The command, with its line break.
    pub command: &'a str,
    /// The answer.
    pub answer: &'a str,
}

/// Reads what the engine prints after its move for the `[report]` patterns: until the
/// synchronising answer is in and `nodes` has matched (or there is no `nodes` pattern), a
/// `nodes` match after the move when there is no answer to wait for, or the patterns'
/// `wait_ms`. The engine stays usable: whatever it prints later is skipped by the next
/// search's own synchronisation. `true` when the synchronising command was sent and its
/// answer is still to come (UCI keeps count of those).
pub(crate) async fn after_move(
    p: &mut EngineProcess,
    patterns: Option<&ReportPatterns>,
    sync: Option<SyncCommand<'_>>,
    reading: &mut PatternReading,
    out: &mut SearchOutcome,
) -> Result<bool, EngineError> {
    let Some(patterns) = patterns else {
        return Ok(false);
    };
    let answer = match &sync {
        Some(s) => {
            p.cmd.push_str(s.command);
            p.send().await?;
            Some(s.answer)
        }
        None => None,
    };
    let deadline = Instant::now() + patterns.wait();
    let mut answered = false;
    loop {
        let enough_nodes = !patterns.has_nodes() || reading.nodes.is_some();
        if answered && enough_nodes {
            break;
        }
        if answer.is_none() && (reading.after_move || !patterns.has_nodes()) {
            break;
        }
        match p.next_line(deadline).await {
            Ok(true) => {}
            // The engine exited after its move: what it printed is all there is.
            Ok(false) => {
                p.usable = false;
                break;
            }
            Err(ReadError::Timeout) => break,
            Err(e) => return Err(p.fail(e).await),
        }
        let Ok(text) = std::str::from_utf8(p.line()) else {
            continue;
        };
        let text = text.trim();
        if Some(text) == answer {
            answered = true;
            continue;
        }
        reading.line(patterns, text, out, true);
    }
    Ok(answer.is_some() && !answered)
}

/// The finished outcome: the `nodes` pattern's count when the engine has one (it replaces the
/// protocol's count), else the protocol's; a search without either is
/// [`EngineError::NoNodeCount`] saying what was missing (`missing`, the protocol's words),
/// never a count of 0.
pub(crate) fn finish(
    mut out: SearchOutcome,
    patterns: Option<&ReportPatterns>,
    reading: PatternReading,
    missing: &str,
) -> Result<SearchOutcome, EngineError> {
    if let Some(why) = reading.bad {
        return Err(EngineError::NoNodeCount(why));
    }
    match patterns {
        Some(p) if p.has_nodes() => {
            if reading.nodes.is_none() {
                let pattern = p.def().nodes.as_deref().unwrap_or_default();
                return Err(EngineError::NoNodeCount(format!(
                    "the report pattern `{pattern}` matched no line of the search or within {} ms after the move",
                    p.def().wait_ms
                )));
            }
            out.nodes = reading.nodes;
        }
        _ if out.nodes.is_none() => return Err(EngineError::NoNodeCount(missing.to_string())),
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sweep_domain::engine::ReportDef;

    fn patterns() -> ReportPatterns {
        ReportPatterns::compile(&ReportDef {
            nodes: Some(r"saw (?P<nodes>\d+) nodes".into()),
            counters: [("cuts".to_string(), r"cuts (?P<value>\d+)".to_string())].into(),
            wait_ms: 500,
        })
        .unwrap()
    }

    #[test]
    fn a_missing_count_is_an_error_never_zero() {
        let out = SearchOutcome::default();
        let e = finish(
            out.clone(),
            None,
            PatternReading::default(),
            "no thinking line",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "no node count: no thinking line");
        let p = patterns();
        let e = finish(out.clone(), Some(&p), PatternReading::default(), "x").unwrap_err();
        assert!(e.to_string().contains("matched no line"), "{e}");
        // A reported 0 stays 0.
        let zero = SearchOutcome {
            nodes: Some(0),
            ..Default::default()
        };
        assert_eq!(
            finish(zero, None, PatternReading::default(), "x")
                .unwrap()
                .nodes,
            Some(0)
        );
    }

    #[test]
    fn the_pattern_replaces_the_protocol_count() {
        let p = patterns();
        let mut out = SearchOutcome {
            nodes: Some(100),
            ..Default::default()
        };
        let mut r = PatternReading::default();
        assert!(r.line(&p, "saw 250 nodes, cuts 7", &mut out, false));
        assert!(!r.line(&p, " 5 10 0 999 e2e4", &mut out, false));
        assert!(r.line(&p, "Searched for 0.1 s, saw 300 nodes", &mut out, true));
        assert!(r.after_move);
        let done = finish(out, Some(&p), r, "x").unwrap();
        assert_eq!(done.nodes, Some(300));
        assert_eq!(done.counters["cuts"], 7);
    }
}
