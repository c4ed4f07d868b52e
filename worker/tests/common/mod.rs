//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sweep_domain::engine::Protocol;
use sweep_domain::epd::parse_suite;
use sweep_domain::limit::Limit;
use sweep_domain::wire::{BuildSpec, JobPosition, PositionResult};
use sweep_worker::build::BuildCache;
use sweep_worker::engine::session::EngineSession;
use sweep_worker::engine::EngineError;

/// The minnow engine's source directory in this repository.
pub const MINNOW_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../engines/minnow");

/// A build spec for minnow with `defines`, as the coordinator would send it.
pub fn minnow_spec(defines: &[(&str, i64)]) -> BuildSpec {
    BuildSpec {
        name: "test".into(),
        engine: "minnow".into(),
        source_sha256: "local-checkout".into(),
        defines: defines
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        build_command: [
            "make",
            "-s",
            "-C",
            "{source}",
            "DEFINES={defines}",
            "OUT={out}",
        ]
        .map(String::from)
        .to_vec(),
        build_timeout_secs: 120,
        binary: "minnow".into(),
        binary_path: None,
        protocol: Protocol::Uci,
        options: vec![("Hash".into(), "16".into()), ("Threads".into(), "1".into())],
        checked_options: vec![],
        fresh_process_per_position: false,
        position_timeout_secs: 60,
        init_timeout_secs: 10,
        report: None,
        bench: None,
    }
}

/// Builds minnow (default defines) into a cache under `cache`.
pub async fn build_minnow(cache: &Path) -> PathBuf {
    BuildCache::new(cache)
        .get(Path::new(MINNOW_SRC), &minnow_spec(&[]))
        .await
        .expect("minnow builds")
}

/// The first `n` positions of the WAC suite shipped with the repository.
pub fn wac(n: usize) -> Vec<JobPosition> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../suites/wac.epd");
    let text = std::fs::read_to_string(path).expect("suites/wac.epd");
    let suite = parse_suite("wac", &text).expect("wac parses");
    suite
        .positions
        .into_iter()
        .take(n)
        .enumerate()
        .map(|(i, p)| JobPosition::of(i as u32, &p))
        .collect()
}

/// A fake engine of `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(name)
}

/// `fens` as the positions of a job (indexed in order), each with the best move `bm`.
pub fn positions(fens: &[&str], bm: &str) -> Vec<JobPosition> {
    fens.iter()
        .enumerate()
        .map(|(i, fen)| JobPosition {
            index: i as u32,
            id: format!("p{i}"),
            fen: fen.to_string(),
            bm: vec![bm.into()],
            am: vec![],
        })
        .collect()
}

/// Runs every position of `ps` in turn at depth 3.
pub async fn run_all(session: &mut EngineSession, ps: &[JobPosition]) -> Vec<PositionResult> {
    let mut results = Vec::new();
    for p in ps {
        results.push(session.run_position(p, Limit::Depth(3)).await);
    }
    results
}

/// `ps` holds a good position, one the engine crashes on, and a good one: the crash is an
/// error result of that position alone, and a new process serves the next one.
pub async fn assert_crash_restarts(session: &mut EngineSession, ps: &[JobPosition]) {
    let first = session.run_position(&ps[0], Limit::Depth(3)).await;
    let pid = session.pid();
    let crashed = session.run_position(&ps[1], Limit::Depth(3)).await;
    let after = session.run_position(&ps[2], Limit::Depth(3)).await;
    assert!(first.error.is_none() && first.solved, "{first:?}");
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

/// `ps` holds a position the engine hangs on and a good one; `session` has a 300 ms position
/// timeout. The hang is killed soon after it (1 s of grace after the stop request) and the
/// next position runs on a new process.
pub async fn assert_hang_killed(session: &mut EngineSession, ps: &[JobPosition]) {
    let t = Instant::now();
    let hung = session.run_position(&ps[0], Limit::Depth(3)).await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(
        hung.error.as_deref(),
        Some("timeout: no bestmove within 300ms")
    );
    let next = session.run_position(&ps[1], Limit::Depth(3)).await;
    assert!(next.error.is_none() && next.solved, "{next:?}");
}

/// `session`'s engine never finishes its handshake: six positions (`ps`) all fail, the last
/// after three failed starts, and only those three starts wait for the handshake.
pub async fn assert_stops_retrying_failed_starts(session: &mut EngineSession, ps: &[JobPosition]) {
    assert_eq!(ps.len(), 6);
    let t = Instant::now();
    let results = run_all(session, ps).await;
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

/// `bad` is a position the engine answers with the illegal move e2e4, `good` one it solves:
/// the illegal move is an error result that never solves, and the same process serves the
/// next position.
pub async fn assert_illegal_move_is_an_error_result(
    session: &mut EngineSession,
    bad: &JobPosition,
    good: &JobPosition,
) {
    let bad = session.run_position(bad, Limit::Depth(3)).await;
    assert_eq!(bad.error.as_deref(), Some("illegal bestmove e2e4"));
    assert!(
        !bad.solved,
        "an illegal move never solves, even if listed in bm"
    );
    let pid = session.pid();
    let good = session.run_position(good, Limit::Depth(3)).await;
    assert!(good.error.is_none() && good.solved, "{good:?}");
    assert_eq!(
        session.pid(),
        pid,
        "a wrong answer is not a reason to restart"
    );
}

/// `err` is what a search answered with a flood of unrecognised lines gives, and `usable`
/// whether the engine is usable after it: a protocol error, and an engine not to use again.
pub fn assert_flood_is_an_error(err: &EngineError, usable: bool) {
    assert!(
        matches!(err, EngineError::Protocol(m) if m.contains("unrecognised")),
        "{err}"
    );
    assert!(!usable);
}

/// `err` is what a search gave when the fixture engine exited with status 3, and `usable`
/// whether the engine is usable after it: a crash naming the status, and an engine not to
/// use again.
pub fn assert_crashed_with_status_3(err: &EngineError, usable: bool) {
    assert!(
        matches!(err, EngineError::Crashed { status } if status.contains('3')),
        "{err}"
    );
    assert!(!usable);
}
