//! The UCI driver against the real minnow engine, built through the build cache.

mod common;

use std::time::Duration;
use sweep_domain::limit::Limit;

use sweep_worker::engine::session::EngineSession;
use sweep_worker::engine::uci::{one_shot, UciEngine};
use sweep_worker::engine::{EngineSettings, INIT_TIMEOUT};
use sweep_worker::run_positions_direct;

fn options() -> Vec<(String, String)> {
    common::minnow_spec(&[]).options
}

#[tokio::test]
async fn same_position_twice_gives_identical_nodes() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    let fen = &common::wac(1)[0].fen;
    let mut e = UciEngine::start(&bin, &options(), INIT_TIMEOUT)
        .await
        .unwrap();
    let a = e
        .search(fen, Limit::Depth(5), Duration::from_secs(30))
        .await
        .unwrap();
    let b = e
        .search(fen, Limit::Depth(5), Duration::from_secs(30))
        .await
        .unwrap();
    assert!(a.nodes.is_some_and(|n| n > 0));
    // minnow stops early once it has found a mate, so the depth may fall short of 5.
    assert!((1..=5).contains(&a.depth));
    assert_eq!(
        (a.nodes, &a.bestmove, a.score),
        (b.nodes, &b.bestmove, b.score)
    );
    // minnow prints its counters; the driver keeps them.
    assert_eq!(a.counters.get("nodes").copied(), a.nodes);
    // A fresh process agrees: ucinewgame leaves nothing behind.
    let c = one_shot(
        &bin,
        &options(),
        INIT_TIMEOUT,
        fen,
        Limit::Depth(5),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert_eq!(c.nodes, a.nodes);
    e.quit().await;
}

#[tokio::test]
async fn one_process_serves_twenty_positions() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    let positions = common::wac(20);
    let mut session = EngineSession::new(&bin, EngineSettings::with_options(options()));
    let mut pids = std::collections::BTreeSet::new();
    let mut results = Vec::new();
    for p in &positions {
        results.push(session.run_position(p, Limit::Depth(4)).await);
        pids.insert(session.pid());
    }
    assert_eq!(pids.len(), 1, "one engine process for all positions");
    assert!(pids.iter().all(Option::is_some));
    for (r, p) in results.iter().zip(&positions) {
        assert_eq!(r.index, p.index);
        assert!(r.error.is_none(), "{}: {r:?}", p.id);
        assert!(r.nodes > 0 && (1..=4).contains(&r.depth) && !r.bestmove.is_empty());
        assert_eq!(r.solved, p.bm.contains(&r.bestmove));
    }
    assert!(
        results.iter().any(|r| r.solved),
        "minnow solves some WAC positions at depth 4"
    );
    session.close().await;
}

#[tokio::test]
async fn direct_run_matches_fresh_processes_and_variants_differ() {
    let cache = tempfile::tempdir().unwrap();
    let builds = sweep_worker::build::BuildCache::new(cache.path());
    let src = std::path::Path::new(common::MINNOW_SRC);
    let base = builds.get(src, &common::minnow_spec(&[])).await.unwrap();
    let variant = builds
        .get(src, &common::minnow_spec(&[("NULLMOVE_R_BASE", 1)]))
        .await
        .unwrap();
    assert_ne!(base, variant);

    let positions = common::wac(6);
    let reused = run_positions_direct(
        &base,
        EngineSettings::with_options(options()),
        &positions,
        Limit::Depth(5),
    )
    .await;
    let mut fresh_settings = EngineSettings::with_options(options());
    fresh_settings.fresh_process_per_position = true;
    let fresh = run_positions_direct(&base, fresh_settings, &positions, Limit::Depth(5)).await;
    let nodes =
        |rs: &[sweep_domain::wire::PositionResult]| rs.iter().map(|r| r.nodes).collect::<Vec<_>>();
    assert_eq!(nodes(&reused), nodes(&fresh));
    assert!(reused.iter().all(|r| r.error.is_none()));

    let other = run_positions_direct(
        &variant,
        EngineSettings::with_options(options()),
        &positions,
        Limit::Depth(5),
    )
    .await;
    assert!(other.iter().all(|r| r.error.is_none()));
    assert_ne!(
        nodes(&reused),
        nodes(&other),
        "a different null-move reduction searches differently"
    );
}
