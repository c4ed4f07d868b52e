//! Fair shares at lease time (issue 51): the probe. A small sweep submitted while a big one
//! holds both workers gets one of them at its next lease call instead of waiting for the big
//! one to run dry, its cross-checks included; through `sweep coordinator` with two real one-core workers, on Postgres and
//! on SQLite. And who may ask for `priority = "high"`.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

use common::{
    cli, create_token, get_json, start_coordinator_with, start_two_workers, wait_final, TestDb,
};

/// The big sweep: four ceilings on the whole `ecm` suite at depth 9, a few minutes of two
/// workers; the test cancels it once the small one is done.
const BIG: &str = r#"
name = "big"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [10, 30, 100, 300]
suites = ["ecm"]
depth = 9
chunk_size = 10
cross_check = 0
"#;

/// The small sweep: the same builds (so no worker compiles for it) on the confident quick
/// suite at depth 6, measured anew every time, with 5 % of its positions measured again on the
/// other worker; a few seconds of two workers. Its state is `done` only once its cross-checks
/// are, so the probe times them too: they are dealt within its share, not after the big
/// sweep's work.
fn small(name: &str) -> String {
    format!(
        "name = \"{name}\"\nengine = \"minnow\"\nknob = \"NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS\"\n\
         values = [10, 30, 100, 300]\nsuites = [\"ecm_confident_quick\"]\ndepth = 6\n\
         chunk_size = 10\ncross_check = 0.05\nrecompute = true\n"
    )
}

/// Asserts sweep `d` (its details) ended `done` with every cross-check measured.
fn assert_done_and_checked(d: &Value) {
    assert_eq!(d["state"], "done", "{d}");
    let checks = &d["cross_checks"];
    // 5 % of 90 positions = 5 per build, five builds.
    assert_eq!(checks["planned"], 25, "{checks}");
    assert_eq!(checks["done"], 25, "{checks}");
}

/// Submits `text` to `base` (as the admin): its id.
fn submit_text(base: &str, dir: &std::path::Path, name: &str, text: &str) -> i64 {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    common::submit(base, file.to_str().unwrap())
}

/// Runs the probe against the coordinator on `db_url`: the small sweep alone, then the big
/// one and, once both workers hold its jobs, the small one again. Returns (small alone,
/// small beside the big one) in seconds.
async fn probe(db_url: &str) -> (f64, f64) {
    let (_coordinator, base) = start_coordinator_with(db_url, &[]);
    let _workers = start_two_workers(&base, &[]);
    let dir = tempfile::tempdir().unwrap();
    // Alone (the builds compiled here are the big sweep's too).
    let started = Instant::now();
    let alone = submit_text(&base, dir.path(), "small-alone", &small("small alone"));
    let d = wait_final(&base, alone, Duration::from_secs(300)).await;
    assert_done_and_checked(&d);
    let alone_s = started.elapsed().as_secs_f64();

    let big = submit_text(&base, dir.path(), "big", BIG);
    // Both workers on the big sweep: some of its positions done.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{big}")).await;
        if d["positions_done"].as_u64().unwrap_or(0) >= 20 {
            break;
        }
        assert!(Instant::now() < until, "the big sweep never started: {d}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let started = Instant::now();
    let beside = submit_text(&base, dir.path(), "small-beside", &small("small beside"));
    let d = wait_final(&base, beside, Duration::from_secs(600)).await;
    assert_done_and_checked(&d);
    let beside_s = started.elapsed().as_secs_f64();
    // The big one runs on: the small one did not wait for it to run dry.
    let b: Value = get_json(&format!("{base}/api/v1/sweeps/{big}")).await;
    assert_eq!(b["state"], "running", "{b}");
    let (code, _, err) = cli(&["cancel", &big.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    (alone_s, beside_s)
}

/// With one of two workers, the small sweep takes about twice its time alone; a few seconds
/// more for the worker to finish the big sweep's chunk it holds and ask again.
fn assert_fair(alone: f64, beside: f64) {
    eprintln!("small sweep: {alone:.1} s alone, {beside:.1} s beside the big one");
    assert!(
        beside <= 2.5 * alone + 5.0,
        "the small sweep took {beside:.1} s beside the big one, {alone:.1} s alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_sweep_is_not_starved_by_a_big_one_on_postgres() {
    let db = TestDb::new().await;
    let (alone, beside) = probe(&db.url).await;
    assert_fair(alone, beside);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_sweep_is_not_starved_by_a_big_one_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shares.db");
    let (alone, beside) = probe(db.to_str().unwrap()).await;
    assert_fair(alone, beside);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_is_for_admins_and_the_roles_the_operator_allows() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let text = small("urgent") + "priority = \"high\"\n";
    let file = dir.path().join("urgent.toml");
    std::fs::write(&file, &text).unwrap();
    let file = file.to_str().unwrap();
    let alice = create_token(&db.url, "submitter", "alice");
    {
        let (_coordinator, base) = start_coordinator_with(&db.url, &[]);
        let (code, _, err) = cli(&["submit", file, "--coordinator", &base, "--token", &alice]);
        assert_ne!(code, 0, "a submitter's high priority was taken");
        assert!(err.contains("priority `high` is for admins"), "{err}");
        // An admin may; an unknown priority is refused naming the field.
        let (code, _, err) = cli(&["submit", file, "--coordinator", &base]);
        assert_eq!(code, 0, "{err}");
        let resp = common::post_toml(
            &format!("{base}/api/v1/sweeps"),
            text.replace("\"high\"", "\"urgent\""),
        )
        .await;
        assert_eq!(resp.status(), 422);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], "priority", "{body}");
    }
    let (_coordinator, base) =
        start_coordinator_with(&db.url, &["--high-priority-for", "submitter"]);
    let (code, _, err) = cli(&["submit", file, "--coordinator", &base, "--token", &alice]);
    assert_eq!(code, 0, "{err}");
}
