//! `sweep suite derive` as a user runs it: a real local sweep on a temp SQLite file, subsets
//! derived from it (straight from the database and through a coordinator), checked against
//! the sweep's per-position results, and the derived file run as a suite right away.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use sweep_domain::epd::parse_suite;

use common::{cli, get_json, repo, start_coordinator_with};

const CONFIG: &str = "tests/fixtures/derive/sweep.toml";
const SUITES: &str = "tests/fixtures/derive/suites";
const SOURCE: &str = "tests/fixtures/derive/suites/derive_mini.epd";

/// One position's result in the sweep, as `GET .../positions` reports it.
#[derive(Debug, Clone)]
struct Outcome {
    id: String,
    nodes: u64,
    solved: bool,
}

/// Ids of the records of an EPD text, in file order.
fn ids_of(epd: &str) -> Vec<String> {
    parse_suite("derived", epd)
        .unwrap_or_else(|e| panic!("derived EPD does not parse: {e}\n{epd}"))
        .positions
        .into_iter()
        .map(|p| p.id)
        .collect()
}

/// Runs `sweep suite derive 1 --database DB ARGS...`; asserts success; returns stdout.
fn derive_local(db: &Path, args: &[&str]) -> String {
    let mut all = vec!["suite", "derive", "1", "--database", db.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = cli(&all);
    assert_eq!(code, 0, "sweep {all:?}: {stderr}");
    assert!(stderr.contains("sweep 1: selected"), "{stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derived_suite_matches_the_results_and_runs_as_a_suite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sweep.db");
    let db_arg = db.to_str().unwrap();

    // 1. A real sweep: twelve positions at depth 5, baseline and one variant.
    common::run_json(CONFIG, dir.path(), &["--suites-dir", SUITES]);

    // 2. Its per-position results, from a coordinator on the same file.
    let (coordinator, base) = start_coordinator_with(db_arg, &["--suites-dir", SUITES]);
    let report = get_json(&format!(
        "{base}/api/v1/sweeps/1/positions?build=head_reference"
    ))
    .await;
    let outcomes: Vec<Outcome> = report["rows"]
        .as_array()
        .expect("position rows")
        .iter()
        .map(|row| {
            let r = &row["build"];
            assert!(r["error"].is_null(), "{row}");
            Outcome {
                id: r["position_id"].as_str().unwrap().to_string(),
                nodes: r["nodes"].as_u64().unwrap(),
                solved: r["solved"].as_bool().unwrap(),
            }
        })
        .collect();
    let source_text = std::fs::read_to_string(repo().join(SOURCE)).unwrap();
    let source = parse_suite("derive_mini", &source_text).unwrap();
    let source_ids: Vec<String> = source.positions.iter().map(|p| p.id.clone()).collect();
    assert_eq!(
        outcomes.iter().map(|o| o.id.clone()).collect::<Vec<_>>(),
        source_ids,
        "one result per position, in suite order"
    );
    let ids_where = |keep: &dyn Fn(&Outcome) -> bool| -> Vec<String> {
        outcomes
            .iter()
            .filter(|o| keep(o))
            .map(|o| o.id.clone())
            .collect()
    };
    let solved = ids_where(&|o| o.solved);
    let unsolved = ids_where(&|o| !o.solved);
    assert!(
        solved.len() >= 2 && unsolved.len() >= 2,
        "the fixture needs both verdicts at depth 5: {outcomes:?}"
    );

    // 3. Derived straight from the database: exactly the solved positions, records whole.
    let solved_epd = derive_local(
        &db,
        &[
            "--build",
            "head_reference",
            "--suite",
            "derive_mini",
            "--solved",
        ],
    );
    assert_eq!(ids_of(&solved_epd), solved);
    for line in solved_epd.lines() {
        if line.starts_with('#') {
            continue;
        }
        // Every record is the source line unchanged; the one without an id gets its id.
        let in_source = source_text.lines().any(|s| {
            s == line
                || line
                    .strip_prefix(s)
                    .is_some_and(|rest| rest.starts_with(" id \"line "))
        });
        assert!(in_source, "not a source record: {line}");
    }
    for expected in [
        "# sweep: 1 \"derive fixture (depth 5)\"".to_string(),
        "# engine: minnow".into(),
        "# build: head_reference, no defines (the source's defaults)".into(),
        "# limit: depth 5".into(),
        format!("# suite: derive_mini (sha256 {})", source.sha256),
        "# rule: positions the build solved; all of them, in suite order".into(),
        "# command: sweep suite derive 1 --build head_reference --suite derive_mini --solved"
            .into(),
        format!(
            "# selected {n} of 12 positions ({n} matched the rule; skipped: 0 with an error, 0 without a result)",
            n = solved.len()
        ),
    ] {
        assert!(
            solved_epd.lines().any(|l| l == expected),
            "missing header `{expected}`:\n{solved_epd}"
        );
    }

    let first_two = derive_local(
        &db,
        &[
            "--build",
            "head_reference",
            "--suite",
            "derive_mini",
            "--unsolved",
            "--first",
            "2",
        ],
    );
    assert_eq!(ids_of(&first_two), unsolved[..2]);

    // A node window and a seeded random pick: reproducible, and the same through a coordinator.
    let mut nodes: Vec<u64> = outcomes.iter().map(|o| o.nodes).collect();
    nodes.sort_unstable();
    let (min, max) = (nodes[2].to_string(), nodes[9].to_string());
    let in_window = ids_where(&|o| o.nodes >= nodes[2] && o.nodes <= nodes[9]);
    let random_args = [
        "--build",
        "head_reference",
        "--suite",
        "derive_mini",
        "--any",
        "--min-nodes",
        &min,
        "--max-nodes",
        &max,
        "--random",
        "3",
        "--seed",
        "7",
    ];
    let random = derive_local(&db, &random_args);
    let picked = ids_of(&random);
    assert_eq!(picked.len(), 3);
    assert!(picked.iter().all(|id| in_window.contains(id)), "{picked:?}");
    let order: Vec<usize> = picked
        .iter()
        .map(|id| source_ids.iter().position(|s| s == id).unwrap())
        .collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "suite order: {picked:?}"
    );
    assert_eq!(
        derive_local(&db, &random_args),
        random,
        "same seed, same bytes"
    );
    let mut remote = vec!["suite", "derive", "1", "--coordinator", &base];
    remote.extend_from_slice(&random_args);
    let (code, remote_epd, stderr) = cli(&remote);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        remote_epd, random,
        "coordinator and database give the same file"
    );
    assert!(
        stderr.contains("sweep 1: selected 3 of 12 positions"),
        "{stderr}"
    );

    // 4. Refusals: non-zero exit and a message naming the problem, on both paths.
    let one_too_many = (solved.len() + 1).to_string();
    let in_db = ["--database", db_arg];
    let head_mini = ["--build", "head_reference", "--suite", "derive_mini"];
    let refusals: [(Vec<&str>, &str); 4] = [
        (
            [
                &in_db[..],
                &["--build", "nope", "--suite", "derive_mini", "--any"],
            ]
            .concat(),
            "build: no build `nope` in sweep 1",
        ),
        (
            [
                &["--coordinator", &base][..],
                &["--build", "head_reference", "--suite", "nope", "--any"],
            ]
            .concat(),
            "suite: no suite `nope` in sweep 1",
        ),
        (
            [
                &in_db[..],
                &head_mini,
                &["--solved", "--first", &one_too_many],
            ]
            .concat(),
            "only",
        ),
        (
            [
                &in_db[..],
                &head_mini,
                &["--any", "--min-nodes", "9", "--max-nodes", "8"],
            ]
            .concat(),
            "min_nodes: 9 is greater than max_nodes",
        ),
    ];
    for (args, message) in refusals {
        let mut argv = vec!["suite", "derive", "1"];
        argv.extend_from_slice(&args);
        let (code, _, stderr) = cli(&argv);
        assert_ne!(code, 0, "{args:?}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }

    // The HTTP route answers 4xx JSON naming the field.
    let derive_url = |query: &str| format!("{base}/api/v1/sweeps/1/derive?{query}");
    let ok = common::get(&derive_url(
        "build=head_reference&suite=derive_mini&filter=solved",
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(ok.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert_eq!(ok.text().await.unwrap(), solved_epd);
    for (query, field) in [
        ("build=nope&suite=derive_mini&filter=any", "build"),
        (
            "build=head_reference&suite=derive_mini&filter=any&first=0",
            "first",
        ),
        ("build=head_reference&suite=derive_mini", "filter"),
        (
            "build=head_reference&suite=derive_mini&filter=any&min_nodes=5&max_nodes=4",
            "min_nodes",
        ),
        (
            "build=head_reference&suite=derive_mini&filter=any&random=2",
            "seed",
        ),
    ] {
        let resp = common::get(&derive_url(query)).send().await.unwrap();
        assert_eq!(resp.status(), 422, "{query}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }
    let resp = common::get(&format!(
        "{base}/api/v1/sweeps/99/derive?build=head_reference&suite=derive_mini&filter=any"
    ))
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 404);

    // An unfinished sweep is refused unless partial; a queued one has nothing to give.
    // (--force: without it the config's earlier results would finish the sweep at once.)
    let (code, id, stderr) = cli(&["submit", CONFIG, "--force", "--coordinator", &base]);
    assert_eq!(code, 0, "{stderr}");
    let id = id.trim().to_string();
    let query = "build=head_reference&suite=derive_mini&filter=any";
    let body = get_json(&format!("{base}/api/v1/sweeps/{id}/derive?{query}")).await;
    assert_eq!(body["error"]["field"], "partial", "{body}");
    let body = get_json(&format!(
        "{base}/api/v1/sweeps/{id}/derive?{query}&partial=true"
    ))
    .await;
    assert_eq!(body["error"]["field"], "filter", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("12 no result"),
        "{body}"
    );
    let (code, _, stderr) = cli(&["cancel", &id, "--coordinator", &base]);
    assert_eq!(code, 0, "{stderr}");
    drop(coordinator);

    // 5. --out writes a new file and will not overwrite it without --force.
    let suites2 = dir.path().join("suites2");
    std::fs::create_dir(&suites2).unwrap();
    let out = suites2.join("derive_solved.epd");
    let out_args = [
        "suite",
        "derive",
        "1",
        "--database",
        db_arg,
        "--build",
        "head_reference",
        "--suite",
        "derive_mini",
        "--solved",
        "--out",
        out.to_str().unwrap(),
    ];
    let (code, stdout, stderr) = cli(&out_args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), solved_epd);
    std::fs::write(&out, "kept").unwrap();
    let (code, _, stderr) = cli(&out_args);
    assert_ne!(code, 0);
    assert!(
        stderr.contains("exists") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "kept");
    let mut forced = out_args.to_vec();
    forced.push("--force");
    let (code, _, stderr) = cli(&forced);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), solved_epd);

    // 6. The derived file is a suite right away: a sweep over it gives the same results.
    let config = dir.path().join("derived.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(repo().join(CONFIG))
            .unwrap()
            .replace("derive_mini", "derive_solved")
            .replace("derive fixture", "derived suite"),
    )
    .unwrap();
    let table = common::run_json(
        config.to_str().unwrap(),
        dir.path(),
        &["--suites-dir", suites2.to_str().unwrap()],
    );
    let cell = &table["tables"][0]["rows"][0]["suites"]["derive_solved"];
    assert_eq!(
        table["tables"][0]["rows"][0]["build"], "head_reference",
        "{table}"
    );
    let expected_nodes: u64 = outcomes.iter().filter(|o| o.solved).map(|o| o.nodes).sum();
    let counts: BTreeMap<&str, u64> = ["positions", "done", "solved", "errors", "nodes"]
        .into_iter()
        .map(|k| (k, cell[k].as_u64().unwrap_or(u64::MAX)))
        .collect();
    let n = solved.len() as u64;
    assert_eq!(
        counts,
        BTreeMap::from([
            ("positions", n),
            ("done", n),
            ("solved", n),
            ("errors", 0),
            ("nodes", expected_nodes),
        ]),
        "the same engine at the same depth solves them all again, with the same nodes"
    );
}
