//! Approval over a budget (issue 51 item 3): a coordinator started with
//! `--approve-over-engine-hours` holds a submitter's sweep whose estimate is over the limit
//! (or that cannot be estimated) until an admin approves or rejects it. Real coordinator on
//! Postgres, a real worker, the CLI for every step.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::sweeps::SMALL_SWEEP;
use common::{
    cli, create_token, get_json, start_coordinator_with, start_worker, wait_final, TestDb,
};

/// Sweep `id`'s detail.
async fn detail(base: &str, id: i64) -> Value {
    get_json(&format!("{base}/api/v1/sweeps/{id}")).await
}

/// Results sweep `id` measured itself (not those reuse copied from earlier sweeps).
async fn results_of(db: &TestDb, id: i64) -> i64 {
    let mut conn = db.connect().await;
    sqlx::query_scalar(
        "SELECT count(*) FROM results WHERE sweep_id = $1 AND origin_sweep_id IS NULL",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeps_over_the_budget_wait_for_an_admin() {
    let db = TestDb::new().await;
    // A budget no sweep fits in (a millisecond of engine time).
    let (_coordinator, base) =
        start_coordinator_with(&db.url, &["--approve-over-engine-hours", "0.0000003"]);
    let alice = create_token(&db.url, "submitter", "alice");
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.toml");
    std::fs::write(&small, SMALL_SWEEP).unwrap();
    let small = small.to_str().unwrap();
    let _worker = start_worker(&base, &dir.path().join("cache"), "w1", 1);

    // Nothing measured yet: no estimate, so it waits, and says why.
    let (code, out, err) = cli(&["submit", small, "--coordinator", &base, "--token", &alice]);
    assert_eq!(code, 0, "{err}");
    let first: i64 = out.trim().parse().unwrap();
    assert!(
        err.contains("waits for an admin's approval: no estimate"),
        "{err}"
    );
    let d = detail(&base, first).await;
    assert_eq!(d["state"], "pending_approval", "{d}");
    assert!(
        d["approval_note"]
            .as_str()
            .unwrap()
            .contains("bk at depth 1"),
        "{d}"
    );
    // The worker is idle meanwhile: nothing of it is handed out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(results_of(&db, first).await, 0);
    assert_eq!(detail(&base, first).await["state"], "pending_approval");

    // Only an admin decides.
    let (code, _, err) = cli(&[
        "approve",
        &first.to_string(),
        "--coordinator",
        &base,
        "--token",
        &alice,
    ]);
    assert_ne!(code, 0, "a submitter approved: {err}");
    let (code, out, err) = cli(&["approve", &first.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("sweep {first}: queued"));
    let d = wait_final(&base, first, Duration::from_secs(300)).await;
    assert_eq!(d["state"], "done", "{d}");
    // Approving twice is refused, naming the state.
    let (code, _, err) = cli(&["approve", &first.to_string(), "--coordinator", &base]);
    assert_ne!(code, 0);
    assert!(err.contains("not waiting for approval"), "{err}");

    // Now there is an estimate, over the budget: held with its figure, then rejected.
    let more = dir.path().join("more.toml");
    std::fs::write(
        &more,
        SMALL_SWEEP.replace("values = [300]", "values = [300, 3000]"),
    )
    .unwrap();
    let (code, out, err) = cli(&[
        "submit",
        more.to_str().unwrap(),
        "--coordinator",
        &base,
        "--token",
        &alice,
    ]);
    assert_eq!(code, 0, "{err}");
    let second: i64 = out.trim().parse().unwrap();
    assert!(err.contains("estimated 0.00"), "{err}");
    assert!(err.contains("engine-hours, over the 0.0000003"), "{err}");
    let (code, _, _) = cli(&[
        "reject",
        &second.to_string(),
        "--why",
        "",
        "--coordinator",
        &base,
    ]);
    assert_ne!(code, 0, "a rejection says why");
    let (code, out, err) = cli(&[
        "reject",
        &second.to_string(),
        "--why",
        "use the quick suites first",
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("sweep {second}: rejected"));
    let d = detail(&base, second).await;
    assert_eq!(d["state"], "rejected", "{d}");
    assert_eq!(d["approval_note"], "use the quick suites first", "{d}");
    assert_eq!(results_of(&db, second).await, 0);

    // An admin's own sweep runs at once.
    let (code, out, err) = cli(&["submit", more.to_str().unwrap(), "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    let third: i64 = out.trim().parse().unwrap();
    assert!(!err.contains("approval"), "{err}");
    let d = wait_final(&base, third, Duration::from_secs(300)).await;
    assert_eq!(d["state"], "done", "{d}");

    // Both decisions are in the audit log.
    let (code, out, err) = cli(&["audit", "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("approve") && out.contains(&format!("sweep {first}")),
        "{out}"
    );
    assert!(
        out.contains("reject") && out.contains("use the quick suites first"),
        "{out}"
    );
}
