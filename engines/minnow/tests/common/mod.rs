//! Helpers shared by minnow's tests and its nps benchmark.

use minnow::Uci;

/// Runs `go perft DEPTH` from `position` (`startpos`, or `fen ...`); returns the node total
/// and every line the engine printed up to it.
pub fn perft_lines(u: &mut Uci, position: &str, depth: u32) -> (u64, Vec<String>) {
    u.send(&format!("position {position}")).unwrap();
    u.send(&format!("go perft {depth}")).unwrap();
    let lines = u.read_until("Nodes searched:").unwrap();
    let total = lines
        .last()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (total, lines)
}
