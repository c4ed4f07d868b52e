//! End to end with real processes: a coordinator on port 0 with a fresh Postgres database, two
//! worker processes with one core each, the demo sweep submitted through the CLI.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::direct::{direct_totals, load_suite};
use common::{
    cli, engines_alive, get_json, numbers_of, start_coordinator, start_two_workers, start_worker,
    wait_final, TestDb,
};

fn pct(n: u64, base: u64) -> f64 {
    ((n as f64 - base as f64) * 100.0 / base as f64 * 100.0).round() / 100.0
}

async fn submit_and_wait_with(base: &str, file: &str, flags: &[&str]) -> i64 {
    let id = common::submit_with(base, file, flags);
    let detail = wait_final(base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    id
}

async fn assert_one_result_per_position(db: &TestDb, sweep: i64, expected: i64) {
    let mut conn = db.connect().await;
    let (rows, distinct): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT (build_id, suite_id, position_index))
         FROM results WHERE sweep_id = $1",
    )
    .bind(sweep)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(rows, expected, "results of sweep {sweep}");
    assert_eq!(distinct, expected, "one result per position");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_sweep_through_two_worker_processes_matches_direct_runs() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let _workers = start_two_workers(&base, &[]);

    let first = submit_and_wait_with(&base, "configs/sweeps/demo.toml", &[]).await;
    let expected = direct_totals("configs/sweeps/demo.toml").await;
    let positions: u64 = ["ecm_confident_quick", "ecm_hard_quick"]
        .iter()
        .map(|s| load_suite(s).positions.len() as u64)
        .sum();
    assert_one_result_per_position(&db, first, 3 * positions as i64).await;
    {
        let mut conn = db.connect().await;
        let workers: i64 =
            sqlx::query_scalar("SELECT count(DISTINCT worker_id) FROM results WHERE sweep_id = $1")
                .bind(first)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(workers, 2, "both worker processes took part");
    }

    let table = get_json(&format!("{base}/api/v1/sweeps/{first}/table?format=json")).await;
    assert_eq!(table["baseline"], "head_reference");
    let rows = table["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["build"], "head_reference");
    for row in rows {
        let build = row["build"].as_str().unwrap();
        let (mut n_all, mut s_all, mut bn_all, mut bs_all) = (0, 0, 0, 0);
        for suite in ["ecm_confident_quick", "ecm_hard_quick"] {
            let cell = &row["suites"][suite];
            let (nodes, solved) = expected[&(build.to_string(), suite.to_string())];
            let (bn, bs) = expected[&("head_reference".to_string(), suite.to_string())];
            assert_eq!(cell["nodes"].as_u64(), Some(nodes), "{build} {suite} nodes");
            assert_eq!(
                cell["solved"].as_u64(),
                Some(solved),
                "{build} {suite} solved"
            );
            assert_eq!(cell["positions"].as_u64(), Some(90));
            if build == "head_reference" {
                assert!(cell["nodes_delta_pct"].is_null());
            } else {
                assert_eq!(
                    cell["nodes_delta_pct"].as_f64(),
                    Some(pct(nodes, bn)),
                    "{build} {suite} delta"
                );
                assert_eq!(
                    cell["solved_delta"].as_i64(),
                    Some(solved as i64 - bs as i64)
                );
            }
            n_all += nodes;
            s_all += solved;
            bn_all += bn;
            bs_all += bs;
        }
        assert_eq!(row["combined"]["nodes"].as_u64(), Some(n_all));
        assert_eq!(row["combined"]["solved"].as_u64(), Some(s_all));
        if build != "head_reference" {
            assert_eq!(
                row["combined"]["nodes_delta_pct"].as_f64(),
                Some(pct(n_all, bn_all))
            );
            assert_eq!(
                row["combined"]["solved_delta"].as_i64(),
                Some(s_all as i64 - bs_all as i64)
            );
        }
    }
    // The knob really changes the search (otherwise the sweep proves nothing).
    assert_ne!(rows[0]["combined"]["nodes"], rows[2]["combined"]["nodes"]);

    // Provenance: every worker that ran a build's jobs (work or cross-checks: with build
    // affinity a worker may build a variant only to check another's positions) said how it
    // got the binary, and the two workers, building the same source with the same command,
    // got the same binary.
    let detail = get_json(&format!("{base}/api/v1/sweeps/{first}")).await;
    let mut shas = std::collections::BTreeSet::new();
    for b in detail["builds"].as_array().unwrap() {
        let name = b["name"].as_str().unwrap();
        let records = b["records"].as_array().unwrap();
        let ran: i64 = {
            let mut conn = db.connect().await;
            sqlx::query_scalar(
                "SELECT count(DISTINCT w) FROM (
                     SELECT r.worker_id AS w FROM results r JOIN builds b ON b.id = r.build_id
                     WHERE r.sweep_id = $1 AND b.name = $2
                     UNION
                     SELECT c.worker_id FROM cross_checks c JOIN builds b ON b.id = c.build_id
                     WHERE c.sweep_id = $1 AND b.name = $2) ran",
            )
            .bind(first)
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .unwrap()
        };
        assert_eq!(b["records_total"].as_i64(), Some(ran), "{name}: {b}");
        assert_eq!(records.len() as i64, ran, "{name}: {b}");
        for r in records {
            assert!(!r["host"].as_str().unwrap().is_empty(), "{r}");
            assert!(["w1", "w2"].contains(&r["worker"].as_str().unwrap()), "{r}");
            assert!(r["compiler"].as_str().is_some_and(|c| !c.is_empty()), "{r}");
            assert_eq!(r["argv"][0], "make", "{r}");
            assert_eq!(
                r["binary_sha256"], records[0]["binary_sha256"],
                "{name}: one binary"
            );
        }
        let argv = records[0]["argv"].to_string();
        for (knob, value) in b["defines"].as_object().unwrap() {
            assert!(
                argv.contains(&format!("-D{knob}={value}")),
                "{name}: {argv}"
            );
        }
        shas.insert(records[0]["binary_sha256"].as_str().unwrap().to_string());
    }
    assert_eq!(shas.len(), 3, "each build its own binary: {detail}");

    // Markdown and CSV come from the same numbers.
    let (code, md, _) = cli(&[
        "table",
        &first.to_string(),
        "--coordinator",
        &base,
        "--format",
        "md",
    ]);
    assert_eq!(code, 0);
    let base_nodes =
        sweep_domain::table::render::thousands(rows[0]["combined"]["nodes"].as_u64().unwrap());
    assert!(
        md.contains(&format!("| head_reference (default) | {base_nodes} | -- |")),
        "{md}"
    );

    // Per-position comparison lists gained and lost positions consistently with the table.
    let build = rows[2]["build"].as_str().unwrap();
    let cmp = get_json(&format!(
        "{base}/api/v1/sweeps/{first}/positions?build={build}"
    ))
    .await;
    let delta = rows[2]["combined"]["solved_delta"].as_i64().unwrap();
    let gained = cmp["gained"].as_array().unwrap().len() as i64;
    let lost = cmp["lost"].as_array().unwrap().len() as i64;
    assert_eq!(gained - lost, delta, "{cmp}");
    assert_eq!(cmp["rows"].as_array().unwrap().len() as u64, positions);

    // `sweep run` on the embedded SQLite store prints exactly the same table.
    let local = tempfile::tempdir().unwrap();
    let local_table = common::run_json("configs/sweeps/demo.toml", local.path(), &[]);
    assert_eq!(numbers_of(&local_table), numbers_of(&table));

    // The same sweep measured again (--force) gives identical numbers.
    let second = submit_and_wait_with(&base, "configs/sweeps/demo.toml", &["--force"]).await;
    assert_one_result_per_position(&db, second, 3 * positions as i64).await;
    let again = get_json(&format!("{base}/api/v1/sweeps/{second}/table?format=json")).await;
    assert_eq!(numbers_of(&again), numbers_of(&table));

    // Without --force nothing is measured: every result is reused, the numbers are the same,
    // and `submit --wait` says so and prints the table at once.
    let (code, reused_json, stderr) = cli(&[
        "submit",
        "configs/sweeps/demo.toml",
        "--coordinator",
        &base,
        "--wait",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} results reused from earlier sweeps",
            3 * positions
        )),
        "{stderr}"
    );
    let mut reused: Value = serde_json::from_str(&reused_json).unwrap();
    for row in reused["tables"][0]["rows"].as_array_mut().unwrap() {
        // Built and benched nothing, but its numbers came from benched binaries.
        assert!(row["bench"]["nodes"].is_u64(), "{row}");
        assert_eq!(row["combined"]["reused"], row["combined"]["done"], "{row}");
        for cell in row["suites"].as_object_mut().unwrap().values_mut() {
            assert_eq!(cell["reused"], cell["done"]);
            cell["reused"] = 0.into();
        }
        row["combined"]["reused"] = 0.into();
    }
    assert_eq!(
        numbers_of(&reused),
        numbers_of(&table),
        "the same table, reuse counts aside"
    );

    let (code, status, _) = cli(&["status", &first.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0);
    assert!(status.contains(": done"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_loses_its_job_and_nothing_is_duplicated() {
    let db = TestDb::new().await;
    // Short leases so the frozen worker's job comes back quickly.
    let (_coordinator, base) = start_coordinator(&db.url, 3);
    let caches = tempfile::tempdir().unwrap();
    let frozen = start_worker(&base, &caches.path().join("w1"), "frozen", 1);
    let id = common::submit(&base, "configs/sweeps/demo.toml");
    // Freeze the first worker while it holds a job (after its first results arrive).
    let start = std::time::Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        if d["positions_done"].as_u64().unwrap_or(0) > 0 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no progress: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    frozen.signal(libc::SIGSTOP);
    let frozen_id: i64 = {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        d["active_workers"][0]["id"]
            .as_i64()
            .expect("the frozen worker holds a job")
    };
    // The jobs it holds now, as the lease rows say.
    let frozen_jobs: Vec<i64> = {
        let mut conn = db.connect().await;
        sqlx::query_scalar("SELECT unnest(jobs) FROM leases WHERE worker_id = $1")
            .bind(frozen_id)
            .fetch_all(&mut conn)
            .await
            .unwrap()
    };
    assert!(!frozen_jobs.is_empty(), "the frozen worker holds a lease");
    let _rescuer = start_worker(&base, &caches.path().join("w2"), "rescuer", 1);
    let detail = wait_final(&base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    // Thaw the frozen worker: whatever it still uploads must be refused, not duplicated.
    frozen.signal(libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_one_result_per_position(&db, id, 3 * 180).await;
    let mut conn = db.connect().await;
    let (rescued, reattempts): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE worker_id <> $2),
                count(*) FILTER (WHERE worker_id <> $2 AND job_id = ANY($3))
         FROM results WHERE sweep_id = $1",
    )
    .bind(id)
    .bind(frozen_id)
    .bind(&frozen_jobs)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(rescued > 0);
    assert!(
        reattempts >= 1,
        "the frozen worker's job was leased again (and measured by the rescuer)"
    );
    let table: Value = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_eq!(table["tables"][0]["rows"][0]["combined"]["done"], 180);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_engines_within_seconds() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let caches = tempfile::tempdir().unwrap();
    let cache = caches.path().join("w1");
    let _w1 = start_worker(&base, &cache, "w1", 2);
    // A long sweep (depth 10), cancelled as soon as it runs.
    let (code, stdout, _) = cli(&[
        "submit",
        "configs/sweeps/nullmove-skip-ceiling.toml",
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0);
    let id = stdout.trim().to_string();
    let start = std::time::Instant::now();
    while engines_alive(&cache) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no engine started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, out, err) = cli(&["cancel", &id, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cancelled"));
    let cancelled_at = std::time::Instant::now();
    while engines_alive(&cache) > 0 {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(10),
            "engines still running {:?} after cancel",
            cancelled_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let detail = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(detail["state"], "cancelled");
    let (code, status, _) = cli(&["status", &id, "--coordinator", &base]);
    assert_eq!(code, 0);
    assert!(status.contains("cancelled"), "{status}");
}
