//! Engines that tell their node counts in their own words (issue 45), end to end: the fixture
//! engines of `tests/fixtures/report/` print thinking lines (xboard) or `info ... nodes` (UCI)
//! only for longer searches and lagging the search, and their true totals in a summary line
//! after the move. With `[report] nodes` the table equals those summary totals, read here by
//! an independent driver; without it, every search that printed no count is an error (never
//! 0 nodes) and the table and the sweep say so. Both stores: `sweep run` on SQLite and a
//! coordinator on Postgres with two worker processes.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sweep_domain::epd::parse_suite;

use common::{
    get_json, repo, run_json_in, start_coordinator_with_engines, start_two_workers, wait_final,
    TestDb,
};

const DEPTHS: [u32; 2] = [3, 5];
const XBOARD: &str = "tests/fixtures/report/xboard_summary.sh";
const XBOARD_NOPING: &str = "tests/fixtures/report/xboard_summary_noping.sh";
const UCI: &str = "tests/fixtures/report/uci_summary.sh";

/// The fakes suite's FENs, as Sweep sends them.
fn fens() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("tests/fixtures/suites/fakes.epd")).unwrap();
    parse_suite("fakes", &text)
        .unwrap()
        .positions
        .into_iter()
        .map(|p| p.fen)
        .collect()
}

/// The summary totals per depth, read from the fixture by a driver of its own: one process,
/// every position at every depth, the number of each `saw N nodes` / `summary: N nodes` line.
fn summary_totals(engine: &str, uci: bool) -> BTreeMap<u32, u64> {
    let mut child = Command::new(repo().join(engine))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::from(if uci { "uci\n" } else { "xboard\nprotover 2\n" });
    for depth in DEPTHS {
        for fen in fens() {
            if uci {
                input.push_str(&format!("position fen {fen}\ngo depth {depth}\n"));
            } else {
                input.push_str(&format!("new\nforce\nsetboard {fen}\nsd {depth}\ngo\n"));
            }
        }
    }
    input.push_str("quit\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let counts: Vec<u64> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.starts_with("Searched for") || l.starts_with("search summary:"))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let i = words.iter().position(|w| w.starts_with("nodes"))?;
            words[i - 1].parse().ok()
        })
        .collect();
    child.wait().unwrap();
    let n = fens().len();
    assert_eq!(counts.len(), n * DEPTHS.len(), "one summary per search");
    DEPTHS
        .iter()
        .enumerate()
        .map(|(i, d)| (*d, counts[i * n..(i + 1) * n].iter().sum()))
        .collect()
}

/// Writes engine definitions for the fixtures into `dir/engines`: `NAME` with its `[report]`
/// pattern and `NAME-plain` without; returns the directory.
fn engines(dir: &Path) -> PathBuf {
    let engines = dir.join("engines");
    std::fs::create_dir_all(&engines).unwrap();
    let defs = [
        ("xb", "xboard", XBOARD, r"saw (?P<nodes>\d+) nodes"),
        (
            "xb-noping",
            "xboard",
            XBOARD_NOPING,
            r"saw (?P<nodes>\d+) nodes",
        ),
        ("uci", "uci", UCI, r"summary: (?P<nodes>\d+) nodes"),
    ];
    for (name, protocol, binary, pattern) in defs {
        let base = format!(
            "protocol = \"{protocol}\"\nbinary = \"{}\"\nposition_timeout_secs = 20\n",
            repo().join(binary).display()
        );
        std::fs::write(
            engines.join(format!("{name}.toml")),
            format!("name = \"{name}\"\n{base}[report]\nnodes = '{pattern}'\n"),
        )
        .unwrap();
        std::fs::write(
            engines.join(format!("{name}-plain.toml")),
            format!("name = \"{name}-plain\"\n{base}"),
        )
        .unwrap();
    }
    engines
}

/// Writes `dir/NAME.toml`: the baseline of `engine` on the fakes suite at both depths.
fn config(dir: &Path, engine: &str) -> PathBuf {
    let file = dir.join(format!("{engine}.toml"));
    let depths: Vec<String> = DEPTHS.iter().map(u32::to_string).collect();
    std::fs::write(
        &file,
        format!(
            "name = \"{engine}\"\nengine = \"{engine}\"\nsuites = [\"fakes\"]\n\
             depths = [{}]\nchunk_size = 5\n",
            depths.join(", ")
        ),
    )
    .unwrap();
    file
}

/// `sweep run` of `engine` on SQLite in `dir`: (exit code, JSON table).
fn run_local(dir: &Path, engines: &Path, engine: &str) -> (i32, Value) {
    let file = config(dir, engine);
    let (code, table, _) = run_json_in(
        file.to_str().unwrap(),
        &dir.join(format!("{engine}.db")),
        &dir.join("cache"),
        &[
            "--engines-dir",
            engines.to_str().unwrap(),
            "--suites-dir",
            "tests/fixtures/suites",
        ],
    );
    (code, table)
}

/// The baseline's combined cell per depth.
fn cells(table: &Value) -> BTreeMap<u64, Value> {
    table["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["limit"]["depth"].as_u64().unwrap(),
                t["rows"][0]["combined"].clone(),
            )
        })
        .collect()
}

fn assert_equals_summaries(table: &Value, expected: &BTreeMap<u32, u64>) {
    let cells = cells(table);
    for (depth, nodes) in expected {
        let cell = &cells[&u64::from(*depth)];
        assert_eq!(
            cell["nodes"].as_u64(),
            Some(*nodes),
            "depth {depth}: {cell}"
        );
        assert_eq!(cell["errors"], 0, "depth {depth}: {cell}");
        assert_eq!(cell["done"], 10, "depth {depth}: {cell}");
    }
}

/// Without a pattern: the short searches printed no count, so each is an error, and the long
/// ones keep the count the engine's lines gave (the lagging one: the engine said no more).
fn assert_missing_counts_are_errors(table: &Value, expected: &BTreeMap<u32, u64>) {
    let cells = cells(table);
    let short = &cells[&3];
    assert_eq!(
        (short["errors"].as_u64(), short["nodes"].as_u64()),
        (Some(10), Some(0)),
        "every depth-3 search lacks a count: {short}"
    );
    let long = &cells[&5];
    assert_eq!(long["errors"], 0, "{long}");
    let lagging = long["nodes"].as_u64().unwrap();
    assert!(
        lagging > 0 && lagging < expected[&5],
        "the last line printed lags the summary: {lagging} vs {}",
        expected[&5]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_patterns_read_the_engines_own_totals_on_both_stores() {
    let xboard = summary_totals(XBOARD, false);
    let uci = summary_totals(UCI, true);
    assert_eq!(summary_totals(XBOARD_NOPING, false), xboard);
    let dir = tempfile::tempdir().unwrap();
    let engines = engines(dir.path());

    // Local mode, SQLite.
    for (engine, expected) in [("xb", &xboard), ("xb-noping", &xboard), ("uci", &uci)] {
        let (code, table) = run_local(dir.path(), &engines, engine);
        assert_eq!(code, 0, "{engine}: {table}");
        assert_equals_summaries(&table, expected);
    }
    for (engine, expected) in [("xb-plain", &xboard), ("uci-plain", &uci)] {
        let (code, table) = run_local(dir.path(), &engines, engine);
        assert_eq!(code, 3, "done with errors: {engine}");
        assert_missing_counts_are_errors(&table, expected);
    }

    // A coordinator on Postgres with two workers.
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator_with_engines(&db.url, &engines);
    let allow = format!(
        "{},{},{}",
        repo().join(XBOARD).display(),
        repo().join(XBOARD_NOPING).display(),
        repo().join(UCI).display()
    );
    let _workers = start_two_workers(&base, &["--allow-engine-binaries", &allow]);
    for (engine, expected, with_pattern) in [
        ("xb", &xboard, true),
        ("uci", &uci, true),
        ("xb-plain", &xboard, false),
        ("uci-plain", &uci, false),
    ] {
        let id = common::submit(&base, config(dir.path(), engine).to_str().unwrap());
        let detail = wait_final(&base, id, Duration::from_secs(120)).await;
        let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
        if with_pattern {
            assert_eq!(detail["state"], "done", "{detail}");
            assert_equals_summaries(&table, expected);
            continue;
        }
        assert_eq!(detail["state"], "done_with_errors", "{detail}");
        assert_missing_counts_are_errors(&table, expected);
        let why = if engine.starts_with("xb") {
            "no node count: the engine printed no thinking line for this search"
        } else {
            "no node count: the engine printed no `info ... nodes` for this search"
        };
        let errors = detail["errors"].as_array().unwrap();
        assert!(!errors.is_empty(), "{detail}");
        assert!(
            errors
                .iter()
                .all(|e| e["error"].as_str().unwrap().ends_with(why)),
            "{errors:?}"
        );
        // The Markdown table says how many searches gave no figure.
        let md = common::get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=md")).await;
        assert!(md.contains("| 10/10 (10 errors) |"), "{md}");
    }
}
