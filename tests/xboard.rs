//! An xboard engine end to end: Debian's Fairy-Max, a binary-only xboard engine, measured by a
//! baseline-only sweep at two depths in both modes (a coordinator on Postgres with a worker
//! process, and `sweep run` on SQLite); every cell equals direct runs through the driver.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sweep_domain::engine::{EngineDef, Protocol};
use sweep_domain::limit::Limit;
use sweep_worker::EngineSettings;

use common::direct::{load_suite, suite_totals};
use common::{
    cli, get_json, numbers_of, repo, start_coordinator, start_worker, submit_and_wait, TestDb,
};

const CONFIG: &str = "configs/sweeps/fairymax.toml";

/// (nodes, solved) per limit of Fairy-Max over the config's suite, run directly.
async fn direct() -> BTreeMap<Limit, (u64, u64)> {
    let def = EngineDef::from_toml(
        &std::fs::read_to_string(repo().join("configs/engines/fairymax.toml")).unwrap(),
    )
    .unwrap();
    let suite = load_suite("ecm_confident_quick");
    let mut out = BTreeMap::new();
    for limit in [Limit::Depth(4), Limit::Depth(5)] {
        let mut settings = EngineSettings::with_options(vec![]);
        settings.protocol = Protocol::Xboard;
        settings.position_timeout = Duration::from_secs(def.position_timeout_secs);
        let totals = suite_totals(Path::new(&def.binary), settings, &suite, limit).await;
        out.insert(limit, totals);
    }
    out
}

fn assert_equals_direct(table: &Value, expected: &BTreeMap<Limit, (u64, u64)>) {
    let tables = table["tables"].as_array().unwrap();
    assert_eq!(tables.len(), 2, "{table}");
    for lt in tables {
        let limit: Limit = serde_json::from_value(lt["limit"].clone()).unwrap();
        let rows = lt["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "the baseline alone: {table}");
        assert_eq!(rows[0]["state"], "ok");
        let cell = &rows[0]["combined"];
        let (nodes, solved) = expected[&limit];
        assert_eq!(
            (cell["nodes"].as_u64(), cell["solved"].as_u64()),
            (Some(nodes), Some(solved)),
            "{limit}: {cell}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fairymax_sweeps_match_direct_runs_in_both_modes() {
    if !common::installed("/usr/games/fairymax", "fairymax") {
        return;
    }
    let expected = direct().await;
    assert!(expected.values().all(|(n, _)| *n > 0));

    let dir = tempfile::tempdir().unwrap();
    let local = common::run_json(CONFIG, dir.path(), &[]);
    assert_equals_direct(&local, &expected);

    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let _worker = start_worker(&base, &dir.path().join("w1"), "w1", 2);
    let (id, _) = submit_and_wait(&base, CONFIG, Duration::from_secs(300), "done").await;
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_eq!(
        numbers_of(&table),
        numbers_of(&local),
        "distributed and local runs print the same table"
    );

    // A node limit is refused for an xboard engine, naming the field.
    let bad = dir.path().join("nodes.toml");
    std::fs::write(
        &bad,
        "name = \"x\"\nengine = \"fairymax\"\nsuites = [\"ecm_confident_quick\"]\nnodes = 1000\n",
    )
    .unwrap();
    let (code, _, stderr) = cli(&["submit", bad.to_str().unwrap(), "--coordinator", &base]);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("nodes") && stderr.contains("xboard"),
        "{stderr}"
    );
}
