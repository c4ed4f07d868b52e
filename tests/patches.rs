//! Patches against head_reference (issue 49, item 1): a variant built from other code than
//! the baseline. `sweep compare` on two commits of a git repository the test makes (a local
//! run, real builds and engines), and `sweep submit --variant-source` to a coordinator on
//! Postgres with real workers. Each row's numbers are checked against a direct run of the
//! code it names, so a row built from the wrong snapshot cannot pass.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use common::direct::direct_totals_from;
use common::sweeps::row;
use common::{
    cli, copy_minnow, get_json, start_coordinator, start_two_workers, wait_final, TestDb,
};

/// The comparison's config: the bundled engine on a quick suite, the baseline alone.
const SWEEP: &str = r#"
name = "null move patch"
engine = "minnow"
suites = ["ecm_hard_quick"]
depth = 5
chunk_size = 30
"#;

/// The patch: minnow reducing null moves less (R base 2 instead of 3), which changes its
/// searches.
fn reduce_null_moves_less(dir: &Path) {
    let file = dir.join("minnow.h");
    let text = std::fs::read_to_string(&file).unwrap();
    let (from, to) = ("#define NULLMOVE_R_BASE 3", "#define NULLMOVE_R_BASE 2");
    assert!(text.contains(from), "{} has no {from:?}", file.display());
    std::fs::write(&file, text.replace(from, to)).unwrap();
}

/// Runs git in `repo` with `args`: its stdout, trimmed.
fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A git repository of minnow in `dir`: `main` at the bundled source, and a branch `patch`
/// one commit on, reducing null moves less. Returns the repository and the two commits.
fn patched_repo(dir: &Path) -> (PathBuf, String, String) {
    let repo = dir.join("minnow-repo");
    copy_minnow(&repo);
    git(&repo, &["init", "--quiet", "--initial-branch=main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "base"]);
    let main = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["checkout", "--quiet", "-b", "patch"]);
    reduce_null_moves_less(&repo);
    git(
        &repo,
        &["commit", "--quiet", "-am", "reduce null moves less"],
    );
    let patch = git(&repo, &["rev-parse", "HEAD"]);
    git(&repo, &["checkout", "--quiet", "main"]);
    (repo, main, patch)
}

/// (nodes, solved) of the whole suite of a table's row `build` (its JSON).
fn combined(table: &Value, build: &str) -> (u64, u64) {
    let row = row(table, build);
    let c = &row["combined"];
    (c["nodes"].as_u64().unwrap(), c["solved"].as_u64().unwrap())
}

/// (nodes, solved) of a direct run of `config` built from `source`, over its one suite.
async fn direct(config: &Path, source: &Path) -> (u64, u64) {
    let totals = direct_totals_from(config, source).await;
    assert_eq!(totals.len(), 1, "{totals:?}");
    *totals.values().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_on_a_branch_is_compared_with_its_base_in_one_command() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, main, patch) = patched_repo(tmp.path());
    let config = tmp.path().join("compare.toml");
    let text = format!("{SWEEP}\n[source]\ngit = \"{}\"\n", repo.display());
    std::fs::write(&config, &text).unwrap();
    let db = tmp.path().join("sweep.db");
    let cache = tmp.path().join("cache");
    let (db, cache) = (db.to_str().unwrap(), cache.to_str().unwrap());
    let (code, out, err) = cli(&[
        "compare",
        "--base",
        "main",
        "--test",
        "patch",
        config.to_str().unwrap(),
        "--database",
        db,
        "--cache-dir",
        cache,
        "--cores",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    // Fit for a pull request: both commits named, the paired statistics before the tables.
    let sources = format!(
        "Rows differ in source: base on commit {}, test on commit {}.",
        &main[..12],
        &patch[..12]
    );
    assert!(out.contains(&sources), "{out}");
    let stats = out
        .find("### paired statistics vs base")
        .expect("paired statistics");
    let table = out.find("| base |").expect("the base row");
    assert!(stats < table, "the statistics come first:\n{out}");
    assert!(out.contains("| test | combined |"), "{out}");

    let (code, json, err) = cli(&["table", "1", "--database", db, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let table: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        row(&table, "base")["source"],
        format!("commit {}", &main[..12])
    );
    assert_eq!(
        row(&table, "test")["source"],
        format!("commit {}", &patch[..12])
    );
    // Each row is its commit's code: the numbers of a direct run of each.
    let patched = tmp.path().join("patched");
    copy_minnow(&patched);
    reduce_null_moves_less(&patched);
    let bundled = common::repo().join("engines/minnow");
    let base_direct = direct(&config, &bundled).await;
    let test_direct = direct(&config, &patched).await;
    assert_ne!(base_direct.0, test_direct.0, "the patch changes the search");
    assert_eq!(combined(&table, "base"), base_direct);
    assert_eq!(combined(&table, "test"), test_direct);

    // Comparing a commit with itself measures the same numbers twice, from the cache of
    // results: nothing to see, and said so by a ratio of 1.
    let (code, out, err) = cli(&[
        "compare",
        "--base",
        "main",
        "--test",
        "main",
        config.to_str().unwrap(),
        "--database",
        db,
        "--cache-dir",
        cache,
    ]);
    assert_eq!(code, 0, "{err}");
    // The base measured once is taken by every comparison against it, the test too (the
    // same code): every result reused, no engine run.
    let line = err
        .lines()
        .find(|l| l.contains("results reused from earlier sweeps"))
        .unwrap_or_else(|| panic!("no reuse note: {err}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words[1], words[0]), ("of", words[2]), "{line}");
    assert!(!out.contains("Rows differ in source"), "{out}");
    assert!(out.contains("| test | combined |"), "{out}");
    assert!(out.contains("1.000 [1.000, 1.000]"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_variant_builds_the_directory_given_for_it_on_a_coordinator() {
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator(&db.url, 30);
    let _workers = start_two_workers(&base, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let mine = tmp.path().join("mine");
    copy_minnow(&mine);
    let patched = tmp.path().join("patched");
    copy_minnow(&patched);
    reduce_null_moves_less(&patched);
    let config = tmp.path().join("variant.toml");
    std::fs::write(
        &config,
        format!("{SWEEP}\n[[variants]]\nname = \"patched\"\n"),
    )
    .unwrap();
    let config_arg = config.to_str().unwrap();
    let variant_source = format!("patched={}", patched.display());

    // A variant the config does not have is named, before anything is uploaded.
    let wrong = format!("nope={}", patched.display());
    let (code, _, err) = cli(&[
        "submit",
        config_arg,
        "--variant-source",
        &wrong,
        "--coordinator",
        &base,
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no [[variants]] named `nope` (it has patched)"),
        "{err}"
    );

    let (code, out, err) = cli(&[
        "submit",
        config_arg,
        "--source",
        mine.to_str().unwrap(),
        "--variant-source",
        &variant_source,
        "--coordinator",
        &base,
    ]);
    assert_eq!(code, 0, "{err}");
    let id: i64 = out.trim().parse().unwrap();
    let detail = wait_final(&base, id, Duration::from_secs(300)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table")).await;
    let (baseline, variant) = (row(&table, "head_reference"), row(&table, "patched"));
    let label = |r: &Value| r["source"].as_str().unwrap().to_string();
    assert!(label(baseline).starts_with("snapshot "), "{table}");
    assert!(label(variant).starts_with("snapshot "), "{table}");
    assert_ne!(label(baseline), label(variant));
    // Direct runs of the baseline alone, built from each directory.
    let alone = tmp.path().join("alone.toml");
    std::fs::write(&alone, SWEEP).unwrap();
    assert_eq!(
        combined(&table, "head_reference"),
        direct(&alone, &mine).await
    );
    assert_eq!(combined(&table, "patched"), direct(&alone, &patched).await);
    let md = common::get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=md")).await;
    assert!(
        md.contains("Rows differ in source: head_reference on snapshot"),
        "{md}"
    );
    let csv = common::get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=csv")).await;
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",source"), "{csv}");
    let patched_line = lines.find(|l| l.starts_with("patched,")).unwrap();
    assert!(
        patched_line.ends_with(&format!(",{}", label(variant))),
        "{csv}"
    );
}
