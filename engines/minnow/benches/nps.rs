//! `cargo bench -p minnow`: nodes per second of the minnow C engine (one
//! core, default build, Hash 16) on the start position and a middlegame.
// The tests' helpers, shared rather than copied.
#[path = "../tests/common/mod.rs"]
mod common;

use minnow::{build, Uci};
use std::time::{Duration, Instant};

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = build(&[], &dir.path().join("minnow")).expect("build minnow");
    let cases = [
        ("startpos", "startpos", 15),
        (
            "middlegame",
            "fen r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP1B1PPP/R2QKB1R w KQ - 0 8",
            13,
        ),
        (
            "kiwipete",
            "fen r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
            12,
        ),
    ];
    let mut u = Uci::spawn(&exe, Duration::from_secs(300)).expect("spawn");
    u.handshake().expect("uci");
    println!(
        "{:<12} {:>6} {:>12} {:>9} {:>12}",
        "position", "depth", "nodes", "secs", "nps"
    );
    for (name, p, depth) in cases {
        let t = Instant::now();
        let r = u
            .search_new(p, &format!("go depth {depth}"))
            .expect("search");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{:<12} {:>6} {:>12} {:>9.2} {:>12.0}",
            name,
            depth,
            r.nodes(),
            secs,
            r.nodes() as f64 / secs
        );
    }
    let t = Instant::now();
    let (nodes, _) = common::perft_lines(&mut u, "startpos", 6);
    let n = nodes as f64;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{:<12} {:>6} {:>12} {:>9.2} {:>12.0}",
        "perft",
        6,
        n as u64,
        secs,
        n / secs
    );
    u.quit().ok();
}
