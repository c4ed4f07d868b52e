//! Cross-checks end to end (issue 10 item 4), with a real coordinator on Postgres, two real
//! workers and real engine processes: a deterministic engine (minnow) never mismatches; a
//! fake engine whose node counts jitter, or whose state survives `ucinewgame`, is flagged on
//! the sweep, its table row and both workers; and a local run (`sweep run`, one worker)
//! checks too, on the same worker in a fresh process.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use common::flaky::{start_fixture_coordinator, BUILD_WITH_SH, FIXTURE_DIRS};
use common::{
    cli, get_json, repo, row, start_coordinator, start_two_workers, submit_and_wait, sweep_bin,
    TestDb,
};

/// Writes a sweep config to `dir`; returns its path.
fn config(dir: &Path, text: &str) -> PathBuf {
    let file = dir.join("sweep.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// A flaky sweep of `FAULT` values against the well-behaved baseline on the ten fake
/// positions, chunks of five (so a worker's engine process searches several positions).
fn flaky(values: &str) -> String {
    format!(
        "name = \"flaky checks\"\nengine = \"flaky\"\nknob = \"FAULT\"\nvalues = {values}\n\
         suites = [\"fakes\"]\ndepth = 1\nchunk_size = 5\n"
    )
}

/// Submits `file` and waits for the sweep's end; returns (id, detail).
async fn run(base: &str, file: &Path) -> (i64, Value) {
    submit_and_wait(
        base,
        file.to_str().unwrap(),
        Duration::from_secs(600),
        "done",
    )
    .await
}

/// The workers list, by name: (checks, mismatches).
async fn worker_checks(base: &str) -> Vec<(String, u64, u64)> {
    let list = get_json(&format!("{base}/api/v1/workers")).await;
    list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_string(),
                w["checks"].as_u64().unwrap(),
                w["mismatches"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A coordinator that knows only the fake `flaky` engine and the `fakes` suite, with two
/// workers; runs `values` and returns (detail, table, workers, `/metrics` text).
async fn flaky_sweep(values: &str) -> (Value, Value, Vec<(String, u64, u64)>, String) {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &[]);
    let dir = tempfile::tempdir().unwrap();
    let _workers = start_two_workers(&base, &BUILD_WITH_SH);
    let (id, detail) = run(&base, &config(dir.path(), &flaky(values))).await;
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let workers = worker_checks(&base).await;
    let metrics = common::get_text(&format!("{base}/metrics")).await;
    (detail, table, workers, metrics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minnow_checks_agree() {
    let db = TestDb::new().await;
    let (_c, base) = start_coordinator(&db.url, 30);
    let dir = tempfile::tempdir().unwrap();
    let _workers = start_two_workers(&base, &[]);
    let file = config(
        dir.path(),
        "name = \"minnow checks\"\nengine = \"minnow\"\n\
         knob = \"NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS\"\nvalues = [3000]\n\
         suites = [\"ecm_confident_quick\"]\ndepth = 5\nchunk_size = 10\ncross_check = 0.05\n",
    );
    let (id, detail) = run(&base, &file).await;
    let checks = &detail["cross_checks"];
    // 5 % of 90 positions = 5 per build, two builds.
    assert_eq!(checks["planned"], 10, "{checks}");
    assert_eq!(checks["done"], 10, "{checks}");
    assert_eq!(checks["mismatches"], 0, "{checks}");
    assert_eq!(checks["errors"], 0, "{checks}");
    assert!(checks["positions"].as_array().unwrap().is_empty());
    // The sweep's own numbers count the work only.
    assert_eq!(detail["positions_done"], 180, "{detail}");
    assert_eq!(detail["positions_total"], 180, "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    for build in [
        "head_reference",
        "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS=3000",
    ] {
        let r = row(&table, build);
        assert_eq!(
            (r["checks"].as_u64(), r["mismatches"].as_u64()),
            (Some(5), Some(0)),
            "{r}"
        );
    }
    let workers = worker_checks(&base).await;
    let involved: u64 = workers.iter().map(|w| w.1).sum();
    assert!(involved >= 10, "{workers:?}");
    assert!(workers.iter().all(|w| w.2 == 0), "{workers:?}");
    // `sweep status` says so.
    let (code, out, err) = cli(&["status", &id.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cross-checks: 10/10 done, 0 mismatches, 0 errors"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jittering_node_counts_are_flagged() {
    let (detail, table, workers, metrics) = flaky_sweep("[10]").await;
    let checks = &detail["cross_checks"];
    // At least 3 of 10 positions per build.
    assert_eq!(checks["planned"], 6, "{checks}");
    assert_eq!(checks["done"], 6, "{checks}");
    // The baseline is deterministic; every check of the jittering build disagrees (the chance
    // that two draws of 16 random bits agree is 1 in 65,536).
    assert_eq!(checks["mismatches"], 3, "{checks}");
    let positions = checks["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 3);
    for m in positions {
        assert_eq!(m["build"], "FAULT=10", "{m}");
        assert_ne!(m["original"]["nodes"], m["check"]["nodes"], "{m}");
        assert_eq!(m["original"]["bestmove"], m["check"]["bestmove"], "{m}");
        // Two live workers: a check never runs where its original did.
        assert_ne!(m["original"]["worker"], m["check"]["worker"], "{m}");
    }
    assert_eq!(row(&table, "head_reference")["mismatches"], 0);
    assert_eq!(row(&table, "FAULT=10")["mismatches"], 3);
    assert_eq!(row(&table, "FAULT=10")["checks"], 3);
    // A nondeterministic engine shows on every worker, not on one.
    assert_eq!(workers.len(), 2, "{workers:?}");
    assert!(workers.iter().all(|w| w.2 > 0), "{workers:?}");
    assert_eq!(
        workers.iter().map(|w| w.2).sum::<u64>(),
        2 * 3,
        "{workers:?}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l == "sweep_cross_check_mismatches 3"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_kept_across_ucinewgame_is_flagged() {
    // The flaky engine keeps no process per position (`fresh_process_per_position = false`),
    // so its work searches several positions per process, and the checks do not.
    let (detail, table, _, _) = flaky_sweep("[11]").await;
    let checks = &detail["cross_checks"];
    assert_eq!(checks["done"], 6, "{checks}");
    let flagged = row(&table, "FAULT=11")["mismatches"].as_u64().unwrap();
    assert!(flagged >= 1, "{table}");
    assert_eq!(row(&table, "head_reference")["mismatches"], 0);
    for m in checks["positions"].as_array().unwrap() {
        assert_eq!(m["build"], "FAULT=11", "{m}");
        // A fresh process searches once: the engine's first count.
        assert_eq!(m["check"]["nodes"], 100, "{m}");
        assert!(m["original"]["nodes"].as_u64().unwrap() > 100, "{m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_run_checks_on_its_one_worker() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let file = config(dir.path(), &flaky("[11]"));
    let out = Command::new(sweep_bin())
        .current_dir(repo())
        .args(["run", file.to_str().unwrap(), "--cores", "1", "--database"])
        .arg(&db)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .args(FIXTURE_DIRS)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("cross-checks: 6/6 done"), "{stderr}");
    assert!(stderr.contains("mismatch: FAULT=11 fakes"), "{stderr}");
    let table: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        row(&table, "FAULT=11")["mismatches"].as_u64().unwrap() >= 1,
        "{table}"
    );
    assert_eq!(row(&table, "head_reference")["mismatches"], 0);
    // One worker: it checked its own results, in fresh processes.
    let (code, status, err) = cli(&["status", "1", "--database", db.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let detail: Value = serde_json::from_str(&status).unwrap();
    for m in detail["cross_checks"]["positions"].as_array().unwrap() {
        assert_eq!(m["original"]["worker"], m["check"]["worker"], "{m}");
    }
}
