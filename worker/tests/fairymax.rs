//! A real xboard engine, Debian's Fairy-Max (`/usr/games/fairymax`, installed by `.ci/run`),
//! through the same session code the worker uses. Fairy-Max announces `setboard=0`, so every
//! position here goes through edit mode, black to move included.

mod common;

use std::path::Path;
use std::time::Duration;
use sweep_domain::limit::Limit;

use sweep_domain::engine::Protocol;
use sweep_domain::epd::is_legal_uci;
use sweep_domain::wire::{JobPosition, PositionResult};
use sweep_worker::engine::xboard::XboardEngine;
use sweep_worker::engine::EngineSettings;
use sweep_worker::run_positions_direct;

const FAIRYMAX: &str = "/usr/games/fairymax";
const DEPTH: u32 = 5;

fn fairymax() -> Option<&'static Path> {
    let path = Path::new(FAIRYMAX);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipping: {FAIRYMAX} is not installed (`.ci/run` installs it)");
        None
    }
}

fn settings() -> EngineSettings {
    // `Resign` is one of the options Fairy-Max announces; 0 keeps it from resigning.
    let mut s = EngineSettings::with_options(vec![("Resign".into(), "0".into())]);
    s.protocol = Protocol::Xboard;
    s.position_timeout = Duration::from_secs(60);
    s
}

/// Ten WAC positions (three with black to move) and a quiet one after 1.e4 e5 2.Nf3.
fn positions() -> Vec<JobPosition> {
    let mut ps = common::wac(10);
    ps.push(JobPosition {
        index: 10,
        id: "after 2.Nf3".into(),
        fen: "rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2".into(),
        bm: vec![],
        am: vec![],
    });
    ps
}

fn summary(rs: &[PositionResult]) -> Vec<(u32, String, u64, u32)> {
    rs.iter()
        .map(|r| (r.index, r.bestmove.clone(), r.nodes, r.depth))
        .collect()
}

#[tokio::test]
async fn fairymax_announces_edit_mode_and_plays_legal_moves() {
    let Some(bin) = fairymax() else { return };
    let mut e = XboardEngine::start(
        bin,
        &[("Resign".into(), "0".into())],
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let f = e.features().clone();
    assert!(f.done && f.ping && !f.setboard, "{f:?}");
    assert!(f.options.iter().any(|o| o == "Resign Threshold"), "{f:?}");
    // Left to its default clock, Fairy-Max ends this search at depth 6 (it will not start an
    // iteration its time budget cannot cover); the driver's `st` leaves depth the only limit.
    let start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
    let o = e.search(start, 7, Duration::from_secs(60)).await.unwrap();
    assert_eq!(o.depth, 7, "{o:?}");
    assert!(is_legal_uci(start, &o.bestmove), "{o:?}");
    e.quit().await;

    let ps = positions();
    assert!(ps.iter().filter(|p| p.fen.contains(" b ")).count() >= 3);
    let rs = run_positions_direct(bin, settings(), &ps, Limit::Depth(DEPTH)).await;
    for (p, r) in ps.iter().zip(&rs) {
        assert!(r.error.is_none(), "{}: {r:?}", p.id);
        assert!(is_legal_uci(&p.fen, &r.bestmove), "{}: {r:?}", p.id);
        assert!(r.nodes > 0 && r.depth >= 1, "{}: {r:?}", p.id);
    }
    // A legal move in a black-to-move position is a black move: the a2a3-then-edit setup
    // really handed the move to black.
    let black: Vec<_> = rs
        .iter()
        .filter(|r| ps[r.index as usize].fen.contains(" b "))
        .collect();
    assert!(black.len() >= 3 && black.iter().all(|r| r.error.is_none()));
    eprintln!("fairymax depth {DEPTH}: {:?}", summary(&rs));
}

#[tokio::test]
async fn fairymax_node_counts_are_deterministic() {
    let Some(bin) = fairymax() else { return };
    let ps = positions();
    let first = run_positions_direct(bin, settings(), &ps, Limit::Depth(DEPTH)).await;
    let second = run_positions_direct(bin, settings(), &ps, Limit::Depth(DEPTH)).await;
    assert!(first.iter().all(|r| r.error.is_none()), "{first:?}");
    assert_eq!(summary(&first), summary(&second));

    // A fresh process per position gives the same numbers as one reused process: `new`
    // leaves nothing behind that changes the next search.
    let mut fresh = settings();
    fresh.fresh_process_per_position = true;
    let third = run_positions_direct(bin, fresh, &ps, Limit::Depth(DEPTH)).await;
    assert_eq!(summary(&first), summary(&third));
}
