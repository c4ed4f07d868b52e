//! The fault matrix with real processes: each test breaks something in the middle of the demo
//! sweep and ends by checking that every position has exactly one result and that the table
//! equals a fault-free run (the same builds run directly through the engine driver).

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::OnceCell;

use common::direct::direct_totals;
use common::flaky::{flaky_config, start_fixture_coordinator, start_fixture_worker, BUILD_WITH_SH};
use common::{
    assert_table_matches, free_port, get_json, start_coordinator, start_coordinator_on,
    start_two_workers, start_worker, wait_final, Proc, TestDb,
};
use sweep_testkit::PrivatePg;

const DEMO: &str = "configs/sweeps/demo.toml";
const DEMO_RESULTS: i64 = 3 * 180;

static REFERENCE: OnceCell<BTreeMap<(String, String), (u64, u64)>> = OnceCell::const_new();

async fn reference() -> &'static BTreeMap<(String, String), (u64, u64)> {
    REFERENCE.get_or_init(|| direct_totals(DEMO)).await
}

/// Waits until the sweep has at least `n` results.
async fn wait_progress(base: &str, id: i64, n: u64) {
    let start = Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        if d["positions_done"].as_u64().unwrap_or(0) >= n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "no progress: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn count_results(db_url: &str, id: i64) -> (i64, i64) {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(db_url)
        .await
        .unwrap();
    sqlx::query_as(
        "SELECT count(*), count(DISTINCT (build_id, suite_id, position_index)) FROM results WHERE sweep_id = $1",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

async fn finish_and_check(base: &str, db_url: &str, id: i64) {
    let detail = wait_final(base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    assert_eq!(
        count_results(db_url, id).await,
        (DEMO_RESULTS, DEMO_RESULTS)
    );
    let table: Value = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_table_matches(&table, reference().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_chunk() {
    let db = TestDb::new().await;
    let (_c, base) = start_coordinator(&db.url, 3);
    let caches = tempfile::tempdir().unwrap();
    let victim = start_worker(&base, &caches.path().join("victim"), "victim", 1);
    let id = common::submit(&base, DEMO);
    wait_progress(&base, id, 5).await;
    // kill -9: no goodbye, no flush. Its lease must expire and the chunk go to someone else.
    victim.signal(libc::SIGKILL);
    let before = get_json(&format!("{base}/api/v1/sweeps/{id}")).await["positions_done"]
        .as_u64()
        .unwrap();
    assert!(before < DEMO_RESULTS as u64);
    let _rescuer = start_worker(&base, &caches.path().join("rescuer"), "rescuer", 1);
    finish_and_check(&base, &db.url, id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_restarted_mid_sweep() {
    let db = TestDb::new().await;
    let listen = format!("127.0.0.1:{}", free_port());
    let (coordinator, base) = start_coordinator_on(&db.url, 30, &listen);
    let _workers = start_two_workers(&base, &[]);
    let id = common::submit(&base, DEMO);
    wait_progress(&base, id, 20).await;
    drop(coordinator); // SIGKILL: the harshest restart
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (_coordinator, base2) = start_coordinator_on(&db.url, 30, &listen);
    assert_eq!(base, base2);
    finish_and_check(&base, &db.url, id).await;
}

/// The bad day the README's backup commands are for: a `pg_dump` taken mid-sweep (as a
/// nightly one would be, while workers write) is restored into a fresh database with
/// `pg_restore`, and a new coordinator on it, with new workers, finishes the sweep exactly:
/// what was stored before the dump is kept, what came after is measured again, and no
/// position has two results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_mid_sweep_restores_and_finishes_exactly() {
    let original = TestDb::new().await;
    let dump = tempfile::tempdir().unwrap();
    let file = dump.path().join("sweep.dump");
    let id = {
        let (_coordinator, base) = start_coordinator(&original.url, 5);
        let _workers = start_two_workers(&base, &[]);
        let id = common::submit(&base, DEMO);
        wait_progress(&base, id, 20).await;
        run(Command::new("pg_dump")
            .args(["--format=custom", "--file"])
            .arg(&file)
            .arg(&original.url));
        id
        // The coordinator and its workers are killed here: the machine is gone.
    };
    let restored = TestDb::new().await;
    run(Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname", &restored.url])
        .arg(&file));
    let (kept, distinct) = count_results(&restored.url, id).await;
    assert_eq!(kept, distinct);
    assert!(
        (20..DEMO_RESULTS).contains(&kept),
        "the dump holds the sweep half done: {kept} results"
    );
    // Leases of the dead workers expire (5 s) and their jobs go to the new ones.
    let (_coordinator, base) = start_coordinator(&restored.url, 5);
    let _workers = start_two_workers(&base, &[]);
    finish_and_check(&base, &restored.url, id).await;
}

/// Several coordinators behind one address (`deploy/haproxy/haproxy.cfg`, run by a real
/// HAProxy with only its addresses changed): workers and the CLI talk to the balancer, one
/// coordinator is killed mid-sweep, and the sweep ends exact through the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_behind_a_balancer_killed_mid_sweep_loses_nothing() {
    let db = TestDb::new().await;
    let (first, first_base) = start_coordinator(&db.url, 5);
    let (_second, second_base) = start_coordinator(&db.url, 5);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = balancer_config(port, &[&first_base, &second_base]);
    let file = dir.path().join("haproxy.cfg");
    std::fs::write(&file, config).unwrap();
    let balancer = Proc(
        // Debian puts it in /usr/sbin, which a user's PATH may lack.
        Command::new(if std::path::Path::new("/usr/sbin/haproxy").exists() {
            "/usr/sbin/haproxy"
        } else {
            "haproxy"
        })
        .arg("-db")
        .arg("-f")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("haproxy (apt-get install haproxy)"),
    );
    let base = format!("http://127.0.0.1:{port}");
    common::register_tokens(&base, common::tokens_for(&first_base).unwrap());
    // Up once HAProxy has seen both coordinators healthy (`rise 2` checks, a second apart).
    let started = Instant::now();
    while !matches!(reqwest::get(format!("{base}/healthz")).await, Ok(r) if r.status().is_success())
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the balancer never served"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _workers = start_two_workers(&base, &[]);
    let id = common::submit(&base, DEMO);
    wait_progress(&base, id, 20).await;
    drop(first); // SIGKILL, mid-sweep
    finish_and_check(&base, &db.url, id).await;
    drop(balancer);
}

/// The shipped HAProxy configuration, listening on 127.0.0.1:`port` in front of `servers`.
fn balancer_config(port: u16, servers: &[&str]) -> String {
    let shipped =
        std::fs::read_to_string(common::repo().join("deploy/haproxy/haproxy.cfg")).unwrap();
    let mut out = Vec::new();
    for line in shipped.lines() {
        if line.trim_start().starts_with("server ") {
            continue;
        }
        out.push(line.replace("bind :8080", &format!("bind 127.0.0.1:{port}")));
    }
    for (n, base) in servers.iter().enumerate() {
        let addr = base.trim_start_matches("http://");
        out.push(format!("    server coordinator{} {addr}", n + 1));
    }
    let config = out.join("\n") + "\n";
    assert!(
        config.contains(&format!("bind 127.0.0.1:{port}")),
        "{config}"
    );
    config
}

/// Runs `cmd` to success, or panics with its output.
fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .expect("pg_dump and pg_restore (apt-get install postgresql-client)");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_for_ten_seconds() {
    let pg = PrivatePg::start();
    let (_c, base) = start_coordinator(&pg.url(), 30);
    let _workers = start_two_workers(&base, &[]);
    let id = common::submit(&base, DEMO);
    wait_progress(&base, id, 20).await;
    pg.stop();
    let outage = Instant::now();
    // Meanwhile the coordinator answers 503, without the database's own error text.
    let resp = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let health: Value = resp.json().await.unwrap();
    assert_eq!(health["status"], "unavailable");
    assert_eq!(health["database"], "unavailable", "{health}");
    let resp = common::get(&format!("{base}/api/v1/sweeps/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable");
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(outage.elapsed())).await;
    pg.resume();
    finish_and_check(&base, &pg.url(), id).await;
}

/// A one-core worker for the fixture engine, whose recipe runs `sh build.sh` (a program a
/// worker runs only when told it may).
fn submit_flaky(base: &str, values: &str) -> i64 {
    let dir = tempfile::tempdir().unwrap();
    let file = flaky_config(dir.path(), values, 5, "");
    common::submit(base, file.to_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_engines_fail_one_position_after_three_attempts() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "10"]);
    let _workers = start_two_workers(&base, &BUILD_WITH_SH);
    let id = submit_flaky(&base, "[1, 2, 3, 4, 5]");
    let detail = wait_final(&base, id, Duration::from_secs(300)).await;
    // Every position has a result, but some are errors: the table has gaps, and says so.
    assert_eq!(detail["state"], "done_with_errors", "{detail}");
    assert_eq!(
        count_results(&db.url, id).await,
        (60, 60),
        "one result per position, none dropped"
    );

    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let row = |build: &str| -> Value {
        table["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["build"] == build)
            .unwrap()["combined"]
            .clone()
    };
    let base_row = row("head_reference");
    assert_eq!(
        (base_row["done"].as_u64(), base_row["errors"].as_u64()),
        (Some(10), Some(0)),
        "{table}"
    );
    assert_eq!(base_row["solved"], 5);
    for fault in 1..=4 {
        let r = row(&format!("FAULT={fault}"));
        assert_eq!(
            (r["done"].as_u64(), r["errors"].as_u64()),
            (Some(10), Some(1)),
            "FAULT={fault}: {r}"
        );
    }
    assert_eq!(row("FAULT=5")["errors"], 10);

    // Each failure says why, and names the attempts.
    let errors = detail["errors"].as_array().unwrap();
    let reason = |build: &str| -> String {
        errors
            .iter()
            .filter(|e| e["build"] == build)
            .map(|e| format!("{} {}", e["position"], e["error"]))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (fault, words) in [
        (1, "crashed"),
        (2, "timeout"),
        (3, "unrecognised lines"),
        (4, "illegal bestmove a1a8"),
        (5, "no uciok"),
    ] {
        let r = reason(&format!("FAULT={fault}"));
        assert!(r.contains(words), "FAULT={fault}: {r}");
        assert!(r.contains("3 times"), "FAULT={fault}: {r}");
        if fault < 5 {
            assert!(
                r.contains("fake.08") && !r.contains("fake.07"),
                "only the poison position: {r}"
            );
        }
    }

    // The poison position was tried three times, by both workers.
    let mut conn = db.connect().await;
    let (tries, workers): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT pf.worker_id) FROM position_failures pf JOIN builds b ON b.id = pf.build_id
         WHERE b.sweep_id = $1 AND b.name = 'FAULT=1'",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(tries, 3);
    assert_eq!(
        workers, 2,
        "a failing position moves to another worker when there is one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_build_fails_its_variant_only() {
    let db = TestDb::new().await;
    let (_c, base) = start_fixture_coordinator(&db.url, &["--lease-secs", "10"]);
    let caches = tempfile::tempdir().unwrap();
    // FAULT=8 fails to build on this worker only; FAULT=9 fails everywhere.
    let _broken = start_fixture_worker(&base, &caches.path().join("nobuild"), "broken-toolchain");
    let _fine = start_fixture_worker(&base, &caches.path().join("fine"), "fine");
    let id = submit_flaky(&base, "[8, 9, 1]");
    let detail = wait_final(&base, id, Duration::from_secs(300)).await;
    assert_eq!(
        detail["state"], "done_with_errors",
        "the baseline built, so the sweep completes, with a failed variant: {detail}"
    );
    let builds = detail["builds"].as_array().unwrap();
    let build = |name: &str| builds.iter().find(|b| b["name"] == name).unwrap().clone();
    assert!(build("head_reference")["build_error"].is_null());
    assert!(
        build("FAULT=8")["build_error"].is_null(),
        "fails on one worker, builds on the other"
    );
    let err = build("FAULT=9")["build_error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(err.contains("FAULT=9 never compiles"), "{err}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let done = |name: &str| {
        table["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["build"] == name)
            .unwrap()["combined"]["done"]
            .clone()
    };
    assert_eq!(done("FAULT=8"), 10);
    assert_eq!(done("FAULT=9"), 0);
    assert_eq!(done("FAULT=1"), 10, "other variants go on");
    // No worker rebuilt a failing build in a loop: at most one failure per worker.
    let mut conn = db.connect().await;
    let per_worker: Vec<(i64,)> = sqlx::query_as(
        "SELECT count(*) FROM build_failures bf JOIN builds b ON b.id = bf.build_id
         WHERE b.sweep_id = $1 GROUP BY bf.build_id, bf.worker_id",
    )
    .bind(id)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(per_worker.iter().all(|(n,)| *n == 1), "{per_worker:?}");
}
