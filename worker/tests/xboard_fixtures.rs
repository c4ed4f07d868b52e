//! The xboard driver against fake engines (see `tests/fixtures/xboard_*.sh`): thinking output,
//! castling notation, crashes, hangs, garbage, illegal moves and broken handshakes must come
//! out exactly as they do for UCI engines, through the same session code.

mod common;

use std::time::{Duration, Instant};
use sweep_domain::limit::Limit;

use common::{fixture, positions};
use sweep_domain::engine::Protocol;
use sweep_worker::engine::session::EngineSession;
use sweep_worker::engine::xboard::XboardEngine;
use sweep_worker::engine::{EngineError, EngineSettings, Score};

const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
const CASTLE_W: &str = "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1";
const CASTLE_B: &str = "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1";
/// The fake engine crashes after 1.e4, hangs after 1.d4, floods after 1.c4, answers an
/// illegal move after 1.Nf3, thinks until `?` after 1.b3 and moves without a thinking line
/// after 1.g3.
const CRASH: &str = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1";
const HANG: &str = "rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1";
const FLOOD: &str = "rnbqkbnr/pppppppp/8/8/2P5/8/PP1PPPPP/RNBQKBNR b KQkq - 0 1";
const ILLEGAL: &str = "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1";
const MOVE_NOW: &str = "rnbqkbnr/pppppppp/8/8/8/1P6/P1PPPPPP/RNBQKBNR b KQkq - 0 1";
const SILENT: &str = "rnbqkbnr/pppppppp/8/8/8/6P1/PPPPPP1P/RNBQKBNR b KQkq - 0 1";

fn options() -> Vec<(String, String)> {
    vec![
        ("Hash".into(), "16".into()),
        ("Style".into(), "wild".into()),
    ]
}

fn settings(timeout_ms: u64) -> EngineSettings {
    let mut s = EngineSettings::with_options(options());
    s.protocol = Protocol::Xboard;
    s.position_timeout = Duration::from_millis(timeout_ms);
    s.init_timeout = Duration::from_secs(3);
    s
}

async fn engine() -> XboardEngine {
    XboardEngine::start(
        &fixture("xboard_fake.sh"),
        &options(),
        Duration::from_secs(3),
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn search_reads_thinking_output_and_move() {
    let mut e = engine().await;
    let f = e.features();
    assert!(f.setboard && f.ping && f.done, "{f:?}");
    assert_eq!(f.name.as_deref(), Some("fake xb"));
    assert_eq!(f.options, vec!["Hash", "Style"]);
    let o = e.search(START, 3, Duration::from_secs(5)).await.unwrap();
    assert_eq!(o.bestmove, "d2d4");
    assert_eq!(
        (o.depth, o.nodes, o.score),
        (3, Some(4242), Some(Score::Cp(-20)))
    );
    assert_eq!(
        o.garbage_lines, 2,
        "two junk lines; `#` and `tellics` lines are protocol chatter"
    );
    assert!(e.is_usable());

    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), settings(5000));
    let r = session
        .run_position(&positions(&[START], "d2d4")[0], Limit::Depth(3))
        .await;
    assert!(r.error.is_none() && r.solved, "{r:?}");
    assert_eq!((r.nodes, r.depth, r.score_cp), (4242, 3, Some(-20)));
    session.close().await;
}

#[tokio::test]
async fn castling_comes_out_as_the_kings_move_and_stale_output_is_skipped() {
    let mut e = engine().await;
    let w = e.search(CASTLE_W, 2, Duration::from_secs(5)).await.unwrap();
    assert_eq!(w.bestmove, "e1g1", "`move O-O` with white to move");
    // The engine printed a thinking line after its move; `ping`/`pong` keeps it out of the
    // next search, which reports no thinking of its own: that is no node count, not 0
    // nodes (nor the stale line's 777777), and the engine stays usable.
    let next = e
        .search(SILENT, 2, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(
        next.to_string(),
        "no node count: the engine printed no thinking line for this search"
    );
    assert!(e.is_usable());
    let b = e.search(CASTLE_B, 2, Duration::from_secs(5)).await.unwrap();
    assert_eq!(b.bestmove, "e8c8", "`move O-O-O` with black to move");

    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), settings(5000));
    let r = session
        .run_position(&positions(&[CASTLE_W], "e1g1")[0], Limit::Depth(2))
        .await;
    assert!(r.error.is_none() && r.solved, "{r:?}");
    session.close().await;
}

#[tokio::test]
async fn crash_is_reported_with_status_and_engine_restarts() {
    let mut e = engine().await;
    let err = e
        .search(CRASH, 3, Duration::from_secs(5))
        .await
        .unwrap_err();
    common::assert_crashed_with_status_3(&err, e.is_usable());

    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), settings(5000));
    common::assert_crash_restarts(&mut session, &positions(&[START, CRASH, START], "d2d4")).await;
    session.close().await;
}

#[tokio::test]
async fn hang_is_killed_after_timeout() {
    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), settings(300));
    // The grace after the 300 ms limit follows `?`, xboard's stop.
    common::assert_hang_killed(&mut session, &positions(&[HANG, START], "d2d4")).await;
    session.close().await;
}

#[tokio::test]
async fn engine_that_moves_on_question_mark_is_kept() {
    let mut e = engine().await;
    let pid = e.pid();
    let err = e
        .search(MOVE_NOW, 3, Duration::from_millis(200))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Timeout { .. }), "{err}");
    assert!(e.is_usable(), "it answered `?` with a move");
    let ok = e.search(START, 3, Duration::from_secs(5)).await.unwrap();
    assert_eq!((ok.bestmove.as_str(), ok.nodes), ("d2d4", Some(4242)));
    assert_eq!(e.pid(), pid);
}

#[tokio::test]
async fn garbage_flood_is_an_error() {
    let mut e = engine().await;
    let err = e
        .search(FLOOD, 3, Duration::from_secs(10))
        .await
        .unwrap_err();
    common::assert_flood_is_an_error(&err, e.is_usable());
}

#[tokio::test]
async fn illegal_move_is_an_error_result() {
    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), settings(5000));
    let bad = &positions(&[ILLEGAL], "e2e4")[0];
    let good = &positions(&[START], "d2d4")[0];
    common::assert_illegal_move_is_an_error_result(&mut session, bad, good).await;
    session.close().await;
}

#[tokio::test]
async fn protocol_one_engine_gets_edit_mode() {
    let bin = fixture("xboard_protover1.sh");
    let t = Instant::now();
    let mut e = XboardEngine::start(&bin, &[], Duration::from_secs(5))
        .await
        .unwrap();
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_secs(4),
        "silence means protocol 1 after about 2 s, waited {waited:?}"
    );
    assert!(!e.features().done && !e.features().setboard);
    let white = e.search(START, 2, Duration::from_secs(5)).await.unwrap();
    assert_eq!((white.bestmove.as_str(), white.nodes), ("e2e4", Some(32)));
    let black = e.search(CRASH, 2, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        (black.bestmove.as_str(), black.nodes),
        ("e7e5", Some(32)),
        "black to move: a white move before `edit`, then all 32 pieces"
    );
    e.quit().await;

    let err = XboardEngine::start(&bin, &options(), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::BadInput(_)), "{err}");
    assert_eq!(
        err.to_string(),
        "bad input: option `Hash` was not announced by the engine (announced: none)"
    );
}

#[tokio::test]
async fn slow_engine_with_options_is_not_taken_for_protocol_one() {
    // Options can only be set on a protocol-2 engine, so its silence is waited out.
    let bin = fixture("xboard_slow_start.sh");
    let mut e = XboardEngine::start(&bin, &options(), Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        e.features().done && e.features().setboard,
        "{:?}",
        e.features()
    );
    let white = e.search(START, 2, Duration::from_secs(5)).await.unwrap();
    assert_eq!(white.bestmove, "d2d4");
    e.quit().await;

    // Without options the two-second rule stands: the same engine is taken for protocol 1.
    let e = XboardEngine::start(&bin, &[], Duration::from_secs(10))
        .await
        .unwrap();
    assert!(!e.features().done, "{:?}", e.features());
    e.quit().await;
}

#[tokio::test]
async fn unannounced_option_is_refused_by_name() {
    let err = XboardEngine::start(
        &fixture("xboard_fake.sh"),
        &[("Threads".into(), "2".into())],
        Duration::from_secs(3),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("`Threads`") && msg.contains("announced: Hash, Style"),
        "{msg}"
    );
}

#[tokio::test]
async fn missing_feature_done_times_out_and_stops_retrying() {
    let t = Instant::now();
    let err = XboardEngine::start(
        &fixture("xboard_no_done.sh"),
        &[],
        Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert_eq!(err.to_string(), "no `feature done=1` within 300ms");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    let err = XboardEngine::start(
        &fixture("xboard_no_pong.sh"),
        &[],
        Duration::from_millis(300),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, EngineError::Protocol(m) if m.contains("no `pong 1` within 300ms")),
        "{err}"
    );

    let mut s = settings(1000);
    s.options.clear();
    s.init_timeout = Duration::from_millis(200);
    let mut session = EngineSession::new(&fixture("xboard_no_done.sh"), s);
    common::assert_stops_retrying_failed_starts(&mut session, &positions(&[START; 6], "d2d4"))
        .await;
}

#[tokio::test]
async fn fresh_process_per_position() {
    let mut s = settings(5000);
    s.fresh_process_per_position = true;
    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), s);
    let rs = common::run_all(&mut session, &positions(&[START, CRASH, CASTLE_W], "d2d4")).await;
    assert!(rs[0].error.is_none() && rs[0].solved, "{:?}", rs[0]);
    assert!(rs[1].error.as_deref().unwrap().contains("crashed"));
    assert_eq!(rs[2].bestmove, "e1g1");
    assert_eq!(session.pid(), None, "nothing is kept between positions");
}

#[tokio::test]
async fn a_leased_xboard_build_runs_on_the_xboard_driver() {
    // What the coordinator sends for an engine defined with `protocol = "xboard"`.
    let mut spec = common::minnow_spec(&[]);
    spec.protocol = Protocol::Xboard;
    spec.options = options();
    let s = EngineSettings::from_build(&spec).unwrap();
    assert_eq!(s.protocol, Protocol::Xboard);
    let mut session = EngineSession::new(&fixture("xboard_fake.sh"), s);
    let r = session
        .run_position(&positions(&[START], "d2d4")[0], Limit::Depth(3))
        .await;
    assert!(r.error.is_none() && r.solved, "{r:?}");
    assert_eq!(r.nodes, 4242);
    session.close().await;
}
