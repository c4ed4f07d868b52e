//! The UCI driver against fake engines that crash, hang, mumble or cheat (see
//! `tests/fixtures/*.sh`): each failure must become the right error and the next position must
//! run on a fresh engine.

mod common;

use std::time::{Duration, Instant};
use sweep_domain::limit::Limit;

use common::fixture;
use sweep_domain::engine::Protocol;
use sweep_domain::wire::JobPosition;
use sweep_worker::engine::session::EngineSession;
use sweep_worker::engine::uci::UciEngine;
use sweep_worker::engine::{EngineError, EngineSettings};

const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
/// The fixtures misbehave on this position only.
const POISON: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";

fn settings(timeout_ms: u64) -> EngineSettings {
    EngineSettings {
        protocol: Protocol::Uci,
        options: vec![("Hash".into(), "16".into())],
        fresh_process_per_position: false,
        position_timeout: Duration::from_millis(timeout_ms),
        init_timeout: Duration::from_secs(2),
        report: None,
        confinement: Default::default(),
    }
}

/// `fens` as a job's positions, each solved by the fixtures' e2e4.
fn positions(fens: &[&str]) -> Vec<JobPosition> {
    common::positions(fens, "e2e4")
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
    assert_eq!(
        (ok.bestmove.as_str(), ok.nodes, ok.depth),
        ("e2e4", Some(42), 1)
    );
    let err = e
        .search(POISON, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap_err();
    common::assert_crashed_with_status_3(&err, e.is_usable());

    let mut session = EngineSession::new(&fixture("crash_on_go.sh"), settings(5000));
    common::assert_crash_restarts(&mut session, &positions(&[START, POISON, START])).await;
}

#[tokio::test]
async fn hang_is_killed_after_timeout() {
    let mut session = EngineSession::new(&fixture("hang.sh"), settings(300));
    common::assert_hang_killed(&mut session, &positions(&[POISON, START])).await;
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
    common::assert_stops_retrying_failed_starts(&mut session, &positions(&[START; 6])).await;
}

#[tokio::test]
async fn garbage_is_ignored_but_a_flood_is_an_error() {
    let mut e = engine("garbage.sh").await;
    let ok = e
        .search(START, Limit::Depth(3), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!((ok.bestmove.as_str(), ok.nodes), ("e2e4", Some(42)));
    assert_eq!(ok.garbage_lines, 3, "two junk lines and an empty one");
    let err = e
        .search(POISON, Limit::Depth(3), Duration::from_secs(10))
        .await
        .unwrap_err();
    common::assert_flood_is_an_error(&err, e.is_usable());
}

#[tokio::test]
async fn illegal_bestmove_is_an_error_result() {
    let mut session = EngineSession::new(&fixture("illegal.sh"), settings(5000));
    let ps = positions(&[POISON, START]);
    common::assert_illegal_move_is_an_error_result(&mut session, &ps[0], &ps[1]).await;
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
    let rs = common::run_all(&mut session, &positions(&[START, POISON, START])).await;
    assert!(rs[0].error.is_none() && rs[2].error.is_none());
    assert!(rs[1].error.as_deref().unwrap().contains("crashed"));
    assert_eq!(session.pid(), None, "nothing is kept between positions");
}
