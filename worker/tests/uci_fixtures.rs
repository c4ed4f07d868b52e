//! The UCI driver against fake engines that crash, hang, mumble or cheat (see
//! `tests/fixtures/*.sh`): each failure must become the right error and the next position must
//! run on a fresh engine.

use std::path::PathBuf;
use std::time::{Duration, Instant};
use sweep_domain::limit::Limit;

use sweep_domain::engine::Protocol;
use sweep_domain::wire::JobPosition;
use sweep_worker::engine::session::EngineSession;
use sweep_worker::engine::uci::UciEngine;
use sweep_worker::engine::{EngineError, EngineSettings};

const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
/// The fixtures misbehave on this position only.
const POISON: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(name)
}

fn settings(timeout_ms: u64) -> EngineSettings {
    EngineSettings {
        protocol: Protocol::Uci,
        options: vec![("Hash".into(), "16".into())],
        fresh_process_per_position: false,
        position_timeout: Duration::from_millis(timeout_ms),
        init_timeout: Duration::from_secs(2),
    }
}

fn positions(fens: &[&str]) -> Vec<JobPosition> {
    fens.iter()
        .enumerate()
        .map(|(i, fen)| JobPosition {
            index: i as u32,
            id: format!("p{i}"),
            fen: fen.to_string(),
            bm: vec!["e2e4".into()],
            am: vec![],
        })
        .collect()
}

async fn engine(name: &str) -> UciEngine {
    UciEngine::start(&fixture(name), &[], Duration::from_secs(2))
        .await
        .unwrap()
}

#[tokio::test]
async fn crash_is_reported_with_status_and_engine_restarts() {
    let mut e = engine("crash_on_go.sh").await;
    let ok = e
        .search(START, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((ok.bestmove.as_str(), ok.nodes, ok.depth), ("e2e4", 42, 1));
    let err = e
        .search(POISON, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Crashed { status } if status.contains('3')),
        "{err}"
    );
    assert!(!e.is_usable());

    let mut session = EngineSession::new(&fixture("crash_on_go.sh"), settings(5000));
    let ps = positions(&[START, POISON, START]);
    let first = session.run_position(&ps[0], Limit::Depth(3)).await;
    let pid = session.pid();
    let crashed = session.run_position(&ps[1], Limit::Depth(3)).await;
    let after = session.run_position(&ps[2], Limit::Depth(3)).await;
    assert!(first.error.is_none() && first.solved);
    assert!(
        crashed.error.as_deref().unwrap().contains("crashed"),
        "{crashed:?}"
    );
    assert_eq!((crashed.index, crashed.nodes), (1, 0));
    assert!(after.error.is_none() && after.solved, "{after:?}");
    assert_ne!(
        session.pid(),
        pid,
        "a new process serves the position after the crash"
    );
}

#[tokio::test]
async fn hang_is_killed_after_timeout() {
    let mut session = EngineSession::new(&fixture("hang.sh"), settings(300));
    let ps = positions(&[POISON, START]);
    let t = Instant::now();
    let hung = session.run_position(&ps[0], Limit::Depth(3)).await;
    // 300 ms limit + 1 s grace after `stop`, then the kill.
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        hung.error.as_deref(),
        Some("timeout: no bestmove within 300ms")
    );
    let next = session.run_position(&ps[1], Limit::Depth(3)).await;
    assert!(next.error.is_none(), "{next:?}");
}

#[tokio::test]
async fn engine_that_obeys_stop_is_kept() {
    let mut e = engine("slow_until_stop.sh").await;
    let pid = e.pid();
    let err = e
        .search(POISON, Limit::Depth(3), Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(e.is_usable());
    let ok = e
        .search(START, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(ok.bestmove, "e2e4");
    assert_eq!(e.pid(), pid);
}

#[tokio::test]
async fn missing_uciok_times_out_and_stops_retrying() {
    let t = Instant::now();
    let err = UciEngine::start(&fixture("no_uciok.sh"), &[], Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "no uciok within 300ms");
    assert!(matches!(err, EngineError::NoUciOk { .. }));
    assert!(t.elapsed() < Duration::from_secs(2));

    let mut s = settings(1000);
    s.init_timeout = Duration::from_millis(200);
    let mut session = EngineSession::new(&fixture("no_uciok.sh"), s);
    let ps = positions(&[START; 6]);
    let t = Instant::now();
    let mut results = Vec::new();
    for p in &ps {
        results.push(session.run_position(p, Limit::Depth(3)).await);
    }
    assert!(results.iter().all(|r| r.error.is_some()));
    assert!(results[5]
        .error
        .as_deref()
        .unwrap()
        .contains("failed to start 3 times"));
    // Three handshakes timed out, the rest failed at once.
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn garbage_is_ignored_but_a_flood_is_an_error() {
    let mut e = engine("garbage.sh").await;
    let ok = e
        .search(START, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((ok.bestmove.as_str(), ok.nodes), ("e2e4", 42));
    assert_eq!(ok.garbage_lines, 3, "two junk lines and an empty one");
    let err = e
        .search(POISON, Limit::Depth(3), Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::Protocol(m) if m.contains("unrecognised")),
        "{err}"
    );
    assert!(!e.is_usable());
}

#[tokio::test]
async fn illegal_bestmove_is_an_error_result() {
    let mut session = EngineSession::new(&fixture("illegal.sh"), settings(5000));
    let ps = positions(&[POISON, START]);
    let bad = session.run_position(&ps[0], Limit::Depth(3)).await;
    assert_eq!(bad.error.as_deref(), Some("illegal bestmove e2e4"));
    assert!(
        !bad.solved,
        "an illegal move never solves, even if listed in bm"
    );
    let pid = session.pid();
    let good = session.run_position(&ps[1], Limit::Depth(3)).await;
    assert!(good.error.is_none() && good.solved);
    assert_eq!(
        session.pid(),
        pid,
        "a wrong answer is not a reason to restart"
    );
}

#[tokio::test]
async fn missing_binary_and_bad_input() {
    let err = UciEngine::start(&fixture("does-not-exist"), &[], Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Spawn(_)), "{err}");
    let err = UciEngine::start(
        &fixture("crash_on_go.sh"),
        &[("Hash".into(), "1\nquit".into())],
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, EngineError::BadInput(_)), "{err}");
    let mut e = engine("crash_on_go.sh").await;
    let err = e
        .search(
            "8/8/8/8/8/8/8/8 w - - 0 1\ngo infinite",
            Limit::Depth(3),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::BadInput(_)), "{err}");
    assert!(e.is_usable(), "rejected input never reached the engine");
}

#[tokio::test]
async fn fresh_process_per_position() {
    let mut s = settings(5000);
    s.fresh_process_per_position = true;
    let mut session = EngineSession::new(&fixture("crash_on_go.sh"), s);
    let ps = positions(&[START, POISON, START]);
    let mut rs = Vec::new();
    for p in &ps {
        rs.push(session.run_position(p, Limit::Depth(3)).await);
    }
    assert!(rs[0].error.is_none() && rs[2].error.is_none());
    assert!(rs[1].error.as_deref().unwrap().contains("crashed"));
    assert_eq!(session.pid(), None, "nothing is kept between positions");
}
