//! Coordinate search over a grid end to end (issue 48): the coordinator measures only the
//! cells the search asks for, replays the search as each step's cells finish, and promotes its
//! choice and runner-up into the next stage. Through `sweep run` (one process, SQLite) and
//! through a coordinator on Postgres with two worker processes; each time the path is
//! checked against a search replayed here, independently, from the raw results in the
//! database, and the cells measured against the cells that replay needed.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use common::ranking::{ranking, run_local, run_on_two_workers, Stored, BASELINE};

/// minnow's null-move R and minimum depth, 4 x 3 cells; the baseline (R 3, minimum depth 2)
/// is the start. Stage 1 searches on the confident quick suite, stage 2 runs the choice and
/// the runner-up on the hard one.
const SEARCH: &str = r#"
name = "coordinate search: null-move R x minimum depth"
engine = "minnow"
chunk_size = 15

[grid]
NULLMOVE_R_BASE = [1, 2, 3, 4]
NULLMOVE_MIN_DEPTH = [1, 2, 3]

[search]
strategy = "coordinate"
max_solved_loss = 1

[[stages]]
suites = ["ecm_confident_quick"]
depth = 6

[[stages]]
suites = ["ecm_hard_quick"]
depth = 6
promote = 2
"#;

const KNOBS: [(&str, &[i64]); 2] = [
    ("NULLMOVE_MIN_DEPTH", &[1, 2, 3]),
    ("NULLMOVE_R_BASE", &[1, 2, 3, 4]),
];
const START: [i64; 2] = [2, 3];
const MAX_LOSS: i64 = 1;
const SUITE: &str = "ecm_confident_quick";

/// A cell's row name: its knobs in name order.
fn cell(at: &[i64; 2]) -> String {
    format!("{}={},{}={}", KNOBS[0].0, at[0], KNOBS[1].0, at[1])
}

/// The search as the issue states it, replayed from the stored results: (round, knob,
/// chosen) per step, the choice, and every cell it looked at. Panics when a cell it needs
/// has no results: the coordinator must have measured it.
fn replay(results: &[Stored]) -> (Vec<(u64, String, String)>, String, BTreeSet<String>) {
    let mut at = START;
    let (mut path, mut looked) = (Vec::new(), BTreeSet::new());
    for round in 1..=3u64 {
        let before = at;
        for (k, (knob, values)) in KNOBS.iter().enumerate() {
            let line: Vec<String> = values
                .iter()
                .map(|v| {
                    let mut c = at;
                    c[k] = *v;
                    cell(&c)
                })
                .collect();
            for c in &line {
                assert!(
                    results.iter().any(|r| &r.build == c && r.suite == SUITE),
                    "the search needs {c}, which was never measured"
                );
                looked.insert(c.clone());
            }
            let ranked = ranking(results, SUITE, MAX_LOSS, Some(&line));
            let current = cell(&at);
            let (best, ratio, delta) = ranked.first().cloned().expect("an eligible cell");
            let keep = ranked
                .iter()
                .find(|r| r.0 == current)
                .is_some_and(|r| (r.1 - ratio).abs() < 1e-12 && r.2 == delta);
            let chosen = if keep { current } else { best };
            at[k] = values
                .iter()
                .copied()
                .find(|v| {
                    let mut c = at;
                    c[k] = *v;
                    cell(&c) == chosen
                })
                .unwrap();
            path.push((round, knob.to_string(), chosen));
        }
        if at == before {
            break;
        }
    }
    (path, cell(&at), looked)
}

/// Checks a finished search's table against the results it was made from; returns its
/// choice.
fn assert_search_follows_the_results(table: &Value, results: &[Stored]) -> String {
    let search = &table["search"];
    assert_eq!(search["finished"], true, "{search}");
    let (path, chosen, looked) = replay(results);
    let got: Vec<(u64, String, String)> = search["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["round"].as_u64().unwrap(),
                s["knob"].as_str().unwrap().to_string(),
                s["chosen"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got, path, "{search}");
    assert_eq!(search["chosen"], chosen.as_str(), "{search}");
    // Measured: the baseline and exactly the cells the search looked at, each once.
    let mut per_build: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results.iter().filter(|r| r.suite == SUITE) {
        *per_build.entry(r.build.as_str()).or_default() += 1;
    }
    let mut want: BTreeSet<String> = looked.clone();
    want.insert(BASELINE.to_string());
    let measured: BTreeSet<String> = per_build.keys().map(|b| b.to_string()).collect();
    assert_eq!(measured, want);
    assert!(per_build.values().all(|n| *n == 90), "{per_build:?}");
    assert!(
        looked.len() < 12,
        "a search measures part of the grid: {looked:?}"
    );
    let planned: BTreeSet<String> = search["planned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(planned, looked, "{search}");
    // The first stage's table shows the measured cells alone.
    let rows: BTreeSet<String> = table["stages"][0]["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["build"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rows, want);
    // Stage 2: the baseline, the choice and the runner-up (the next best measured cell).
    let runner_up = ranking(results, SUITE, MAX_LOSS, None)
        .into_iter()
        .map(|r| r.0)
        .find(|c| *c != chosen)
        .expect("a runner-up");
    assert_eq!(search["runner_up"], runner_up.as_str(), "{search}");
    let promoted = &table["stages"][0]["promoted"];
    assert_eq!(promoted[0], chosen.as_str(), "{promoted}");
    assert_eq!(promoted[1], runner_up.as_str(), "{promoted}");
    let second: BTreeSet<&str> = results
        .iter()
        .filter(|r| r.suite == "ecm_hard_quick")
        .map(|r| r.build.as_str())
        .collect();
    assert_eq!(
        second,
        BTreeSet::from([BASELINE, chosen.as_str(), runner_up.as_str()])
    );
    assert!(search["engine_seconds"].as_f64().unwrap() > 0.0, "{search}");
    assert!(
        search["grid_engine_seconds"].as_f64().unwrap()
            > search["engine_seconds"].as_f64().unwrap(),
        "{search}"
    );
    chosen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinate_search_measures_only_the_cells_it_needs() {
    let run = run_local(SEARCH).await;
    let chosen = assert_search_follows_the_results(&run.table, &run.results);
    // The Markdown table leads with the search: its path and its choice.
    let md = run.read("table", &["--format", "md"]);
    let heading = "### Coordinate search over 12 cells (at most 3 rounds, solved loss at most 1)";
    assert!(md.contains(heading), "{md}");
    assert!(md.contains(&format!("Chosen: **{chosen}**")), "{md}");
    assert!(
        md.contains(
            "### Stage 1 of 2: ecm_confident_quick at depth 6; the cells the search measured"
        ),
        "{md}"
    );
    let status: Value = serde_json::from_str(&run.read("status", &["--json"])).unwrap();
    assert_eq!(status["state"], "done", "{status}");
    assert_eq!(
        status["positions_total"].as_u64(),
        Some(run.results.len() as u64),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinate_search_on_a_coordinator_with_two_workers_finds_the_same_path() {
    // Bad searches are refused with the field named, before anything is stored.
    let bad = [
        (
            SEARCH.replace("strategy = \"coordinate\"", "strategy = \"spsa\""),
            "search.strategy",
        ),
        (
            SEARCH.replace(
                "NULLMOVE_MIN_DEPTH = [1, 2, 3]",
                "NULLMOVE_MIN_DEPTH = [1, 3]",
            ),
            "grid.NULLMOVE_MIN_DEPTH",
        ),
        (
            SEARCH.replace("max_solved_loss = 1", "max_rounds = 0"),
            "search.max_rounds",
        ),
    ];
    let run = run_on_two_workers(SEARCH, &bad).await;
    assert_search_follows_the_results(&run.table, &run.results);
    assert_eq!(run.workers, 2);
}

/// A search among whose cells one fails a position for good (the fake engine crashes on it)
/// and one never builds: the failed position ends the search and the sweep, done with
/// errors, saying why; the cell that never built is never chosen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_whose_cell_fails_a_position_ends_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, values: &str| {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "name = \"{name}\"\nengine = \"flaky\"\nsuites = [\"fakes\"]\ndepth = 1\n\
                 chunk_size = 5\ncross_check = 0\n[grid]\nFAULT = {values}\n\
                 [search]\nstrategy = \"coordinate\"\n"
            ),
        )
        .unwrap();
        let db = dir.path().join(format!("{name}.db"));
        let (_, table, err) = common::run_json_in(
            config.to_str().unwrap(),
            &db,
            &dir.path().join("cache"),
            &common::flaky::FIXTURE_DIRS,
        );
        let id = table["sweep"]["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("{table} {err}"));
        let (_, out, err) = common::cli(&[
            "status",
            &id.to_string(),
            "--database",
            db.to_str().unwrap(),
            "--json",
        ]);
        let status: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
        (table, status)
    };
    let (table, status) = run("crashing", "[0, 1]");
    let search = &table["search"];
    let failed = search["failed"]
        .as_str()
        .unwrap_or_else(|| panic!("{search}"));
    assert!(
        failed.contains("`FAULT=1` has 1 position that failed for good"),
        "{failed}"
    );
    assert_eq!(search["finished"], true, "{search}");
    assert!(search["chosen"].is_null(), "{search}");
    assert_eq!(status["state"], "done_with_errors", "{status}");

    let (table, status) = run("unbuildable", "[0, 9]");
    let search = &table["search"];
    assert!(search["failed"].is_null(), "{search}");
    assert_eq!(search["chosen"], "FAULT=0", "{search}");
    assert_eq!(
        status["state"], "done_with_errors",
        "a build failed: {status}"
    );
}
