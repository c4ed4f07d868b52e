//! Orchestration cost per position: how long the driver's round trip (`ucinewgame`,
//! `isready`, `position`, `go depth 1`, reading to `bestmove`) takes when the engine itself
//! does almost nothing. Target (issue: distributed sweeps): well under 1 ms per position, since
//! strong engines answer a depth-8 search in about 4 ms.
//!
//! Run with `cargo bench -p sweep-worker --bench orchestration`; prints figures, asserts nothing.

// The integration tests' helpers (minnow's build spec and build), shared rather than copied.
#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};
use sweep_domain::limit::Limit;

use sweep_domain::wire::JobPosition;
use sweep_worker::engine::session::EngineSession;
use sweep_worker::sandbox::{Sandbox, SandboxMode};
use sweep_worker::EngineSettings;

/// The mean time of `n` depth-1 searches of `pos` (after one that starts the process).
async fn round_trips(
    bin: &std::path::Path,
    settings: EngineSettings,
    pos: &JobPosition,
    n: u32,
) -> Duration {
    let mut session = EngineSession::new(bin, settings);
    session.run_position(pos, Limit::Depth(1)).await;
    let t = Instant::now();
    for _ in 0..n {
        let r = session.run_position(pos, Limit::Depth(1)).await;
        assert!(r.error.is_none(), "{r:?}");
    }
    let per = t.elapsed() / n;
    session.close().await;
    per
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let cache = tempfile::tempdir().expect("tempdir");
        let bin = common::build_minnow(cache.path()).await;
        let pos = JobPosition {
            index: 0,
            id: "start".into(),
            fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1".into(),
            bm: vec![],
            am: vec![],
        };
        // The same round trips unsandboxed and in the bubblewrap sandbox (where bwrap works):
        // the sandbox costs a process start, never a position of a reused process.
        let mut sandboxes = vec![("unsandboxed", Sandbox::Off)];
        match Sandbox::resolve(SandboxMode::On, &[]) {
            Ok(b) => sandboxes.push(("bwrap", b)),
            Err(e) => println!("no sandbox figures: {e}"),
        }
        for (name, sandbox) in sandboxes {
            // Hash=1 keeps minnow's own ucinewgame (clearing its table) out of the figure.
            for (hash, label) in [("1", "Hash=1 MB"), ("16", "Hash=16 MB")] {
                let mut settings = EngineSettings::with_options(vec![("Hash".into(), hash.into())]);
                settings.confinement.sandbox = sandbox.clone();
                let per = round_trips(&bin, settings, &pos, 2000).await;
                println!(
                    "depth-1 round trip, reused process, {label}, {name}: {:>7.1} us/position",
                    per.as_secs_f64() * 1e6
                );
            }
            let mut fresh = EngineSettings::with_options(vec![("Hash".into(), "1".into())]);
            fresh.fresh_process_per_position = true;
            fresh.confinement.sandbox = sandbox.clone();
            let per = round_trips(&bin, fresh, &pos, 200).await;
            println!(
                "depth-1 round trip, fresh process per position, Hash=1 MB, {name}: {:>7.1} us/position",
                per.as_secs_f64() * 1e6
            );
        }
    });
}
