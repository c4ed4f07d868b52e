//! Sweeps through the `sweep` CLI and the API: submitting and waiting, running locally, and
//! reading and comparing their tables.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{cli, get_json};

/// A small sweep the API tests submit: one value of minnow's skip ceiling, at depth 1 on the
/// bk suite in one chunk.
pub const SMALL_SWEEP: &str = r#"
name = "small sweep"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [300]
suites = ["bk"]
depth = 1
chunk_size = 24
"#;

/// A sweep of a contributor's own source (the tests add its `[source]`): one value of
/// minnow's null-move minimum depth, at depth 5 on the hard ECM suite in one chunk.
pub const OWN_SOURCE_SWEEP: &str = r#"
name = "own change"
engine = "minnow"
knob = "NULLMOVE_MIN_DEPTH"
values = [3]
suites = ["ecm_hard_quick"]
depth = 5
chunk_size = 30
"#;

/// [`SMALL_SWEEP`] as the JSON body of a submission.
pub fn small_sweep_json() -> Value {
    serde_json::to_value(toml::from_str::<toml::Value>(SMALL_SWEEP).unwrap()).unwrap()
}

/// A `[[knobs]]` declaration of `name` (1 to 6, default 3): a knob the sweep's engine source
/// defines but the registered engine definition does not list.
pub fn declare_knob(name: &str) -> String {
    format!("[[knobs]]\nname = \"{name}\"\nmin = 1\nmax = 6\ndefault = 3\n")
}

/// Asserts the sweep's table has, for every build and suite, exactly the direct-run numbers.
pub fn assert_table_matches(
    table: &Value,
    expected: &std::collections::BTreeMap<(String, String), (u64, u64)>,
) {
    let rows = table["tables"][0]["rows"].as_array().expect("table rows");
    let builds: std::collections::BTreeSet<&String> = expected.keys().map(|(b, _)| b).collect();
    assert_eq!(rows.len(), builds.len(), "{table}");
    for ((build, suite), (nodes, solved)) in expected {
        let row = rows
            .iter()
            .find(|r| r["build"] == build.as_str())
            .unwrap_or_else(|| panic!("no row {build}"));
        let cell = &row["suites"][suite.as_str()];
        assert_eq!(
            cell["nodes"].as_u64(),
            Some(*nodes),
            "{build} {suite}: {cell}"
        );
        assert_eq!(
            cell["solved"].as_u64(),
            Some(*solved),
            "{build} {suite}: {cell}"
        );
        assert_eq!(cell["errors"].as_u64(), Some(0), "{build} {suite}: {cell}");
        assert_eq!(cell["done"], cell["positions"], "{build} {suite}: {cell}");
    }
}

/// Runs `config` with `sweep run` on two cores, its SQLite file and cache in `dir`, with
/// `extra` arguments; returns the JSON table it prints.
pub fn run_json(config: &str, dir: &Path, extra: &[&str]) -> Value {
    let (code, table, err) = run_json_in(config, &dir.join("sweep.db"), &dir.join("cache"), extra);
    assert_eq!(code, 0, "sweep run {config} failed: {err}");
    table
}

/// Runs `config` with `sweep run` on two cores, on the SQLite file `db` with its cache in
/// `cache` and `extra` arguments, whatever the sweep's end: (exit code, the JSON table it
/// prints, its stderr).
pub fn run_json_in(config: &str, db: &Path, cache: &Path, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec![
        "run",
        config,
        "--format",
        "json",
        "--cores",
        "2",
        "--database",
        db.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = cli(&args);
    let table = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("sweep run {config} printed no JSON table ({e}): {out} {err}"));
    (code, table, err)
}

/// The row of `build` in a JSON table (its first limit).
pub fn row<'a>(table: &'a Value, build: &str) -> &'a Value {
    table["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["build"] == build)
        .unwrap_or_else(|| panic!("no row {build}: {table}"))
}

/// Submits `config` with `sweep submit` to the coordinator at `base`; returns the sweep id.
pub fn submit(base: &str, config: &str) -> i64 {
    submit_with(base, config, &[])
}

/// [`submit`] with more flags (e.g. `--force`).
pub fn submit_with(base: &str, config: &str, flags: &[&str]) -> i64 {
    let mut args = vec!["submit", config, "--coordinator", base];
    args.extend_from_slice(flags);
    let (code, stdout, stderr) = cli(&args);
    assert_eq!(code, 0, "submit failed: {stderr}");
    stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("submit printed {stdout:?}"))
}

/// [`submit`], then [`wait_final`] within `timeout`: the sweep must end in `state`. Returns
/// its id and final detail.
pub async fn submit_and_wait(
    base: &str,
    config: &str,
    timeout: Duration,
    state: &str,
) -> (i64, Value) {
    let id = submit(base, config);
    let detail = wait_final(base, id, timeout).await;
    assert_eq!(detail["state"], state, "{detail}");
    (id, detail)
}

/// Polls a sweep until its state is final, or panics after `timeout`.
pub async fn wait_final(base: &str, id: i64, timeout: Duration) -> Value {
    let start = Instant::now();
    loop {
        let d = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
        let state = d["state"].as_str().unwrap_or("").to_string();
        if ["done", "done_with_errors", "failed", "cancelled"].contains(&state.as_str()) {
            return d;
        }
        assert!(
            start.elapsed() < timeout,
            "sweep {id} still {state} after {timeout:?}: {d}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A JSON table without `sweep` (its id, submission date and Sweep's version): what two
/// sweeps of one config must agree on.
pub fn numbers_of(table: &serde_json::Value) -> serde_json::Value {
    let mut table = table.clone();
    if let Some(o) = table.as_object_mut() {
        o.remove("sweep");
    }
    table
}
