//! Binary-only engines end to end: a prebuilt minnow registered without source, swept over
//! its UCI `Hash` option by a real coordinator (Postgres) and a real worker process; the table
//! must equal direct runs of the same binary with the same `setoption`s, and a value the
//! engine refuses must fail its variant like a broken build, naming the option.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sweep_domain::epd::parse_suite;
use sweep_domain::limit::Limit;
use sweep_worker::EngineSettings;

use common::direct::suite_totals;
use common::{
    get_json, numbers_of, repo, row, start_coordinator_with_engines, start_worker_with, wait_final,
    TestDb,
};

const SUITE: &str = "fakes";
const DEPTH: u32 = 5;

/// Builds minnow into `dir` and writes the fixture definition pointing at it into
/// `dir/engines`; returns the binary.
fn prebuilt_minnow(dir: &Path) -> PathBuf {
    let binary = dir.join("bin").join("minnow");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo().join("engines/minnow"))
        .arg(format!("OUT={}", binary.display()))
        .output()
        .expect("running make");
    assert!(
        out.status.success(),
        "make failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let template =
        std::fs::read_to_string(repo().join("tests/fixtures/binary/minnow-bin.toml.in")).unwrap();
    let engines = dir.join("engines");
    std::fs::create_dir_all(&engines).unwrap();
    std::fs::write(
        engines.join("minnow-bin.toml"),
        template.replace("@BINARY@", binary.to_str().unwrap()),
    )
    .unwrap();
    binary
}

fn submit(base: &str, dir: &Path, name: &str, values: &str) -> i64 {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nengine = \"minnow-bin\"\nknob = \"Hash\"\nvalues = {values}\n\
             suites = [\"{SUITE}\"]\ndepth = {DEPTH}\nchunk_size = 5\n"
        ),
    )
    .unwrap();
    common::submit(base, file.to_str().unwrap())
}

/// Node total and solved count of `binary` over the suite with `options`, run directly.
async fn direct(binary: &Path, options: &[(&str, &str)]) -> (u64, u64) {
    let path = repo().join(format!("tests/fixtures/suites/{SUITE}.epd"));
    let suite = parse_suite(SUITE, &std::fs::read_to_string(path).unwrap()).unwrap();
    let options = options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let settings = EngineSettings::with_options(options);
    suite_totals(binary, settings, &suite, Limit::Depth(DEPTH)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_only_minnow_swept_over_hash_matches_direct_runs() {
    let dir = tempfile::tempdir().unwrap();
    let binary = prebuilt_minnow(dir.path());
    let db = TestDb::new().await;
    let engines = dir.path().join("engines");
    let (_coordinator, base) = start_coordinator_with_engines(&db.url, &engines);
    let listed = get_json(&format!("{base}/api/v1/engines")).await;
    let engine = &listed["engines"][0];
    assert_eq!(engine["kind"], "binary", "{listed}");
    assert_eq!(engine["binary"], binary.to_str().unwrap(), "{listed}");
    assert_eq!(engine["knobs"][0]["kind"], "option", "{listed}");

    // A binary-only engine runs only where its binary is allowed.
    let _worker = start_worker_with(
        &base,
        &dir.path().join("cache"),
        "w1",
        1,
        &["--allow-engine-binaries", binary.to_str().unwrap()],
    );

    // Hash values the engine accepts: the table equals direct runs with the same options.
    let id = submit(&base, dir.path(), "hash", "[1, 1024]");
    let detail = wait_final(&base, id, Duration::from_secs(120)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    assert_eq!(detail["source_sha256"], "", "no snapshot: {detail}");
    {
        let mut conn = db.connect().await;
        let (sha, snapshots): (Option<String>, i64) = sqlx::query_as(
            "SELECT source_sha256, (SELECT count(*) FROM source_snapshots) FROM sweeps WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!((sha, snapshots), (None, 0));
    }
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let expected = [
        ("head_reference", direct(&binary, &[("Threads", "1")]).await),
        (
            "Hash=1",
            direct(&binary, &[("Threads", "1"), ("Hash", "1")]).await,
        ),
        (
            "Hash=1024",
            direct(&binary, &[("Threads", "1"), ("Hash", "1024")]).await,
        ),
    ];
    for (build, (nodes, solved)) in expected {
        let cell = &row(&table, build)["suites"][SUITE];
        assert_eq!(cell["nodes"].as_u64(), Some(nodes), "{build}: {cell}");
        assert_eq!(cell["solved"].as_u64(), Some(solved), "{build}: {cell}");
        assert_eq!(cell["errors"].as_u64(), Some(0), "{build}: {cell}");
        assert_eq!(cell["done"], cell["positions"], "{build}: {cell}");
    }
    // The option really reaches the engine: the hash size changes the search.
    assert_ne!(expected[1].1 .0, expected[2].1 .0, "{table}");

    // A value the knob allows but the engine refuses fails its variant once, as a build.
    let id = submit(&base, dir.path(), "refused", "[64, 2048]");
    let detail = wait_final(&base, id, Duration::from_secs(120)).await;
    let builds = detail["builds"].as_array().unwrap();
    let refused = builds.iter().find(|b| b["name"] == "Hash=2048").unwrap();
    let error = refused["build_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("`Hash`") && error.contains("`2048`"),
        "{detail}"
    );
    assert!(error.contains("min 1 max 1024"), "{detail}");
    let accepted = builds.iter().find(|b| b["name"] == "Hash=64").unwrap();
    assert!(accepted["build_error"].is_null(), "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let cell = &row(&table, "Hash=64")["suites"][SUITE];
    assert_eq!(cell["done"], cell["positions"], "{table}");
    let refused_cell = &row(&table, "Hash=2048")["suites"][SUITE];
    assert_eq!(
        refused_cell["done"].as_u64(),
        Some(0),
        "no position ran on the refused variant: {table}"
    );
    assert_eq!(row(&table, "Hash=2048")["state"], "build_failed", "{table}");
    assert_eq!(detail["state"], "done_with_errors", "{detail}");

    // Local mode: `sweep run` on SQLite gives the same table as the distributed run.
    let config = dir.path().join("hash.toml");
    let local_dir = tempfile::tempdir().unwrap();
    let local = common::run_json(
        config.to_str().unwrap(),
        local_dir.path(),
        &[
            "--engines-dir",
            engines.to_str().unwrap(),
            "--suites-dir",
            "tests/fixtures/suites",
        ],
    );
    let first = get_json(&format!("{base}/api/v1/sweeps/1/table?format=json")).await;
    assert_eq!(
        numbers_of(&local),
        numbers_of(&first),
        "local and distributed tables agree"
    );
}
