//! Sweeps shaped like the experiments authors run: several knobs moving together in named
//! variants (a depth-banded sweep), several depths, and a node limit. Each runs end to end in
//! both modes (a coordinator on Postgres with a worker process, and `sweep run` on SQLite), and
//! every cell equals direct runs of the same builds.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::direct::direct_totals_by_limit;
use common::{cli, get_json, numbers_of, start_coordinator, start_worker, submit_and_wait, TestDb};
use sweep_domain::limit::Limit;

/// Checks every (build, limit, suite) cell of a JSON table against direct runs.
fn assert_cells_equal_direct(
    table: &Value,
    expected: &std::collections::BTreeMap<(String, Limit, String), (u64, u64)>,
) {
    let mut checked = 0;
    for lt in table["tables"].as_array().unwrap() {
        let limit: Limit = serde_json::from_value(lt["limit"].clone()).unwrap();
        for row in lt["rows"].as_array().unwrap() {
            assert_eq!(row["state"], "ok", "{row}");
            let build = row["build"].as_str().unwrap();
            for (suite, cell) in row["suites"].as_object().unwrap() {
                let (nodes, solved) = expected[&(build.to_string(), limit, suite.clone())];
                assert_eq!(
                    (cell["nodes"].as_u64(), cell["solved"].as_u64()),
                    (Some(nodes), Some(solved)),
                    "{build} {limit} {suite}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, expected.len(), "every direct cell is in the table");
}

/// Runs `config` with `sweep run` on a fresh SQLite file and returns its JSON table.
fn run_locally(config: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    common::run_json(config, dir.path(), &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_banded_variants_at_two_depths_match_direct_runs_in_both_modes() {
    let config = "configs/sweeps/depth-banded.toml";
    let expected = direct_totals_by_limit(config).await;
    let limits: std::collections::BTreeSet<Limit> = expected.keys().map(|k| k.1).collect();
    assert_eq!(limits.len(), 2);

    let local = run_locally(config);
    assert_eq!(local["knobs"].as_array().unwrap().len(), 2, "{local}");
    assert_cells_equal_direct(&local, &expected);
    // The two knobs really move the search.
    let rows = local["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_ne!(rows[0]["combined"]["nodes"], rows[2]["combined"]["nodes"]);
    assert_eq!(rows[2]["defines"]["NULLMOVE_MIN_DEPTH"], 4);

    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let caches = tempfile::tempdir().unwrap();
    let _worker = start_worker(&base, &caches.path().join("w1"), "w1", 2);
    let (id, _) = submit_and_wait(&base, config, Duration::from_secs(600), "done").await;
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    assert_eq!(
        numbers_of(&table),
        numbers_of(&local),
        "distributed and local runs print the same table"
    );

    let (code, md, _) = cli(&["table", &id.to_string(), "--coordinator", &base]);
    assert_eq!(code, 0);
    assert!(
        md.contains(
            "| build | NULLMOVE_MIN_DEPTH | NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS | nodes |"
        ),
        "{md}"
    );
    assert!(md.contains("### nodes delta by limit (combined)"), "{md}");
    // Positions of the second depth, by limit.
    let cmp = get_json(&format!(
        "{base}/api/v1/sweeps/{id}/positions?build=deep-band&limit=depth=6"
    ))
    .await;
    assert_eq!(cmp["limit"], serde_json::json!({"depth": 6}), "{cmp}");
    assert_eq!(cmp["rows"].as_array().unwrap().len(), 90);
    assert_eq!(cmp["total"], 90);
    // Pages of it: the same rows, in order, and a bad page size is a field error.
    let page = get_json(&format!(
        "{base}/api/v1/sweeps/{id}/positions?build=deep-band&limit=depth=6&offset=80&page_size=25"
    ))
    .await;
    assert_eq!(
        (page["total"].clone(), page["offset"].clone()),
        (90.into(), 80.into())
    );
    assert_eq!(
        page["rows"].as_array().unwrap()[..],
        cmp["rows"].as_array().unwrap()[80..]
    );
    let bad = common::get(&format!(
        "{base}/api/v1/sweeps/{id}/positions?build=deep-band&page_size=0"
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(bad.status(), 422);
    let body: serde_json::Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["field"], "page_size", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_limited_baseline_alone_matches_direct_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("nodes.toml");
    std::fs::write(
        &config,
        "name = \"minnow at 20000 nodes\"\nengine = \"minnow\"\nsuites = [\"ecm_hard_quick\"]\nnodes = 20000\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let expected = direct_totals_by_limit(config).await;
    assert!(expected.keys().all(|k| k.1 == Limit::Nodes(20_000)));
    let local = run_locally(config);
    assert_eq!(local["tables"][0]["rows"].as_array().unwrap().len(), 1);
    assert_cells_equal_direct(&local, &expected);
}
