//! `sweep submit --dry-run` (issue 51): what a sweep would make and cost, from a real
//! coordinator on Postgres with a real worker; nothing is submitted, the counts are a
//! submission's own (reuse included), and the engine-seconds are priced at the searches the
//! database holds (checked here against them, independently).

mod common;

use std::time::Duration;

use serde_json::Value;

use common::sweeps::SMALL_SWEEP;
use common::{cli, get_json, start_coordinator, start_worker, wait_final, TestDb};

fn dry_run(base: &str, config: &std::path::Path, json: bool) -> (i32, String, String) {
    let mut args = vec![
        "submit",
        config.to_str().unwrap(),
        "--dry-run",
        "--coordinator",
        base,
    ];
    if json {
        args.push("--json");
    }
    cli(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_counts_and_prices_a_sweep_without_submitting_it() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.toml");
    std::fs::write(&small, SMALL_SWEEP).unwrap();

    // Before anything ran: the counts, and no price (nothing to price it at).
    let (code, out, err) = dry_run(&base, &small, true);
    assert_eq!(code, 0, "{err}");
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (e["builds"].as_u64(), e["positions"].as_u64()),
        (Some(2), Some(48)),
        "{e}"
    );
    assert_eq!(
        (e["reused"].as_u64(), e["to_search"].as_u64()),
        (Some(0), Some(48)),
        "{e}"
    );
    assert_eq!(e["engine_seconds"], Value::Null, "{e}");
    assert_eq!(e["unmeasured"][0], "bk at depth 1", "{e}");
    let list = get_json(&format!("{base}/api/v1/sweeps")).await;
    assert_eq!(
        list["sweeps"].as_array().unwrap().len(),
        0,
        "nothing submitted: {list}"
    );

    // Measure it, then ask about a sweep with one more value.
    let _worker = start_worker(&base, &dir.path().join("cache"), "w1", 1);
    let id = common::submit(&base, small.to_str().unwrap());
    let d = wait_final(&base, id, Duration::from_secs(300)).await;
    assert_eq!(d["state"], "done", "{d}");
    let more = dir.path().join("more.toml");
    std::fs::write(
        &more,
        SMALL_SWEEP.replace("values = [300]", "values = [300, 3000]"),
    )
    .unwrap();
    let (code, out, err) = dry_run(&base, &more, true);
    assert_eq!(code, 0, "{err}");
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (e["builds"].as_u64(), e["positions"].as_u64()),
        (Some(3), Some(72)),
        "{e}"
    );
    assert_eq!(
        e["reused"].as_u64(),
        Some(48),
        "the two measured builds: {e}"
    );
    assert_eq!(e["to_search"].as_u64(), Some(24), "{e}");
    // Priced at the mean of the searches stored.
    let mut conn = db.connect().await;
    let (ms, n): (i64, i64) = sqlx::query_as(
        "SELECT CAST(sum(time_ms) AS BIGINT), count(*) FROM results WHERE sweep_id = $1",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let mean = ms as f64 / n as f64;
    let cell = &e["cells"][0];
    assert_eq!(cell["measured"].as_i64(), Some(n), "{cell}");
    assert!(
        (cell["mean_ms"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{cell}"
    );
    let seconds = e["engine_seconds"].as_f64().expect("priced");
    assert!((seconds - 24.0 * mean / 1000.0).abs() < 1e-9, "{e}");

    // The words, and still the one sweep.
    let (code, out, _) = dry_run(&base, &more, false);
    assert_eq!(code, 0);
    assert!(
        out.contains("would make 3 jobs: 3 builds, 72 searches"),
        "{out}"
    );
    assert!(out.contains("48 results of earlier sweeps"), "{out}");
    assert!(out.contains("estimate: "), "{out}");
    let list = get_json(&format!("{base}/api/v1/sweeps")).await;
    assert_eq!(list["sweeps"].as_array().unwrap().len(), 1, "{list}");

    // A bad config is refused naming the field, as a submission is.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, SMALL_SWEEP.replace("depth = 1", "depth = 99")).unwrap();
    let (code, _, err) = dry_run(&base, &bad, false);
    assert_ne!(code, 0);
    assert!(err.contains("depth"), "{err}");
}

/// `sweep run --dry-run` does the same on a local database: counts, reuse, a price from the
/// runs it holds, and nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_dry_run_reads_the_runs_database() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.toml");
    std::fs::write(&small, SMALL_SWEEP).unwrap();
    let small = small.to_str().unwrap();
    let db = dir.path().join("sweep.db");
    let db_arg = db.to_str().unwrap();
    let dry = || cli(&["run", small, "--dry-run", "--database", db_arg]);

    let (code, out, err) = dry();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("48 searches"), "{out}");
    assert!(
        out.contains("estimate: none: no earlier measurement of minnow on bk at depth 1"),
        "{out}"
    );
    common::run_json(small, dir.path(), &[]);
    let (code, out, err) = dry();
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("48 results of earlier sweeps"), "{out}");
    assert!(out.contains("bk at depth 1: nothing to search"), "{out}");
    assert!(out.contains("estimate: 0 engine-seconds"), "{out}");
    let (code, out, err) = cli(&["list", "--database", db_arg]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "one sweep, the run's: {out}");
}
