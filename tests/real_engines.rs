//! Debian's UCI engines beside the bundled one, each run by `sweep run` with the definition
//! Sweep ships (`configs/engines/`), every position cross-checked in a fresh process. They
//! differ the way users' engines do, and Sweep must say so honestly:
//! - Glaurung is repeatable only with one thread and a fresh process per position (it ignores
//!   `ucinewgame`): with its definition the table equals direct runs and no check disagrees;
//!   with either setting left out, the checks flag it.
//! - Toga II is not repeatable at all: its checks disagree, and the table says its numbers
//!   are not reproducible.
//!
//! `.ci/run` installs both (`apt-get install glaurung toga2`); without them a test says what
//! to install and passes without running, as the other real-engine tests do.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sweep_domain::engine::EngineDef;
use sweep_domain::limit::Limit;
use sweep_worker::EngineSettings;

use common::direct::{load_suite, suite_totals};
use common::{installed, repo, row, sweep_bin};

const GLAURUNG: &str = "/usr/games/glaurung";
const TOGA2: &str = "/usr/games/toga2";

/// What one `sweep run` printed: exit code, the JSON table, stderr.
struct Run {
    code: Option<i32>,
    table: Value,
    stderr: String,
}

/// Runs the sweep `config` (TOML text) on a fresh SQLite file with the engine definitions
/// in `engines` (a directory).
fn sweep_run(dir: &Path, engines: &Path, config: &str) -> Run {
    let file = dir.join("sweep.toml");
    std::fs::write(&file, config).unwrap();
    let out = Command::new(sweep_bin())
        .current_dir(repo())
        .arg("run")
        .arg(&file)
        .args(["--cores", "2", "--format", "json", "--engines-dir"])
        .arg(engines)
        .arg("--database")
        .arg(dir.join("sweep.db"))
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let table = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    Run {
        code: out.status.code(),
        table,
        stderr,
    }
}

/// A directory holding the shipped definition `name`.toml changed by `edit`.
fn engines_with(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let engines = dir.join("engines");
    std::fs::create_dir_all(&engines).unwrap();
    let shipped =
        std::fs::read_to_string(repo().join(format!("configs/engines/{name}.toml"))).unwrap();
    std::fs::write(engines.join(format!("{name}.toml")), edit(shipped)).unwrap();
    engines
}

/// The "cross-checks: N/N done, M mismatches, E errors" line's (done, mismatches, errors).
fn checks(run: &Run) -> (u64, u64, u64) {
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("cross-checks: "))
        .unwrap_or_else(|| panic!("no cross-check line: {}", run.stderr));
    let words: Vec<&str> = line.split([' ', '/', ',']).collect();
    let n = |i: usize| words[i].parse::<u64>().unwrap_or_else(|_| panic!("{line}"));
    // cross-checks: D / P done, M mismatches, E errors
    (n(1), n(5), n(8))
}

/// Glaurung's baseline over Bratko-Kopec at depth 7, every position checked.
const GLAURUNG_SWEEP: &str = "name = \"glaurung\"\nengine = \"glaurung\"\nsuites = [\"bk\"]\n\
                              depth = 7\nchunk_size = 8\ncross_check = 1.0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glaurung_with_its_definition_is_repeatable_and_equals_direct_runs() {
    if !installed(GLAURUNG, "glaurung") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let engines = engines_with(dir.path(), "glaurung", |d| d);
    let run = sweep_run(dir.path(), &engines, GLAURUNG_SWEEP);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(checks(&run), (24, 0, 0), "{}", run.stderr);
    let base = row(&run.table, "head_reference");
    assert_eq!(base["mismatches"], 0, "{base}");

    // The same positions searched directly, each in a process of its own with the
    // definition's options, give the same totals.
    let def =
        EngineDef::from_toml(&std::fs::read_to_string(engines.join("glaurung.toml")).unwrap())
            .unwrap();
    let mut settings = EngineSettings::with_options(
        def.options
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
    );
    settings.fresh_process_per_position = true;
    settings.position_timeout = Duration::from_secs(def.position_timeout_secs);
    let (nodes, solved) = suite_totals(
        Path::new(GLAURUNG),
        settings,
        &load_suite("bk"),
        Limit::Depth(7),
    )
    .await;
    let cell = &base["combined"];
    assert_eq!(
        (cell["nodes"].as_u64(), cell["solved"].as_u64()),
        (Some(nodes), Some(solved)),
        "{cell}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glaurung_without_one_thread_or_a_fresh_process_is_flagged() {
    if !installed(GLAURUNG, "glaurung") {
        return;
    }
    // Its default of two threads: counts differ from run to run.
    let threads = tempfile::tempdir().unwrap();
    let engines = engines_with(threads.path(), "glaurung", |d| {
        d.replace("\nThreads = 1\n", "\nThreads = 2\n")
    });
    let run = sweep_run(threads.path(), &engines, GLAURUNG_SWEEP);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (done, mismatches, _) = checks(&run);
    assert_eq!(done, 24);
    assert!(mismatches > 0, "two threads went unnoticed: {}", run.stderr);

    // One thread, but one process for several positions: what it kept from the positions
    // before changes the counts.
    let reused = tempfile::tempdir().unwrap();
    let engines = engines_with(reused.path(), "glaurung", |d| {
        d.replace(
            "\nfresh_process_per_position = true\n",
            "\nfresh_process_per_position = false\n",
        )
    });
    let run = sweep_run(reused.path(), &engines, GLAURUNG_SWEEP);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (done, mismatches, _) = checks(&run);
    assert_eq!(done, 24);
    assert!(
        mismatches > 0,
        "state kept across positions went unnoticed: {}",
        run.stderr
    );
    assert!(
        row(&run.table, "head_reference")["mismatches"].as_u64() > Some(0),
        "{}",
        run.table
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toga2_is_not_repeatable_and_the_table_says_so() {
    if !installed(TOGA2, "toga2") {
        return;
    }
    // The shipped sweep (every position of three builds checked): Toga's counts jitter in
    // about a quarter of them, so some of 72 checks disagree.
    let dir = tempfile::tempdir().unwrap();
    let engines = engines_with(dir.path(), "toga2", |d| d);
    let config =
        std::fs::read_to_string(repo().join("configs/sweeps/toga2-nullmove.toml")).unwrap();
    let run = sweep_run(dir.path(), &engines, &config);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (done, mismatches, errors) = checks(&run);
    assert_eq!((done, errors), (72, 0), "{}", run.stderr);
    assert!(
        mismatches > 0,
        "Toga's jitter went unnoticed: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("mismatch: "),
        "each mismatch is listed: {}",
        run.stderr
    );
    // The Markdown table warns under the numbers.
    let (code, md, err) = common::cli(&[
        "table",
        "1",
        "--database",
        dir.path().join("sweep.db").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(md.contains("its numbers are not reproducible"), "{md}");
}
