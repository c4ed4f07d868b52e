mod common;
use std::time::Duration;
use sweep_worker::engine::uci::UciEngine;
#[tokio::test]
async fn bench() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    for hash in ["1", "16"] {
        let mut e = UciEngine::start(&bin, &[("Hash".into(), hash.into())], Duration::from_secs(5)).await.unwrap();
        let fen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";
        let t = std::time::Instant::now();
        for _ in 0..500 { e.search(fen, 1, Duration::from_secs(5)).await.unwrap(); }
        eprintln!("hash {hash}: {:?} per search", t.elapsed() / 500);
    }
}
