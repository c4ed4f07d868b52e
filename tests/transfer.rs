//! Sweeps that move between stores (issue 50, items 2 and 5): a sweep run on a laptop's
//! SQLite file is exported with `--database`, imported into a team's Postgres through its
//! coordinator, exported back through the coordinator and imported into a fresh SQLite file
//! and straight into another Postgres database, and every copy's table equals the original's
//! (cross-checks, bench and speed rows included). The imported results are reused by a later
//! sweep of the same builds; copies are deleted (issue 50, item 3) both ways, the later sweep
//! intact; a file that cannot be verified, a sweep still running and a reader's import or
//! delete are refused with the reason.

mod common;

use std::path::Path;

use serde_json::Value;

use common::sweeps::run_json;
use common::{cli, create_token, get_json, post, start_coordinator, TestDb};

/// Two builds over a quick suite, with cross-checks and speed jobs.
const CONFIG: &str = r#"
name = "moving sweep"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [3000]
suites = ["ecm_confident_quick"]
depth = 4
chunk_size = 30
cross_check = 0.05

[speed]
positions = { count = 4 }
repeats = 2
"#;

/// The table of a sweep without what names the copy (its id).
fn comparable(mut table: Value) -> Value {
    table["sweep"]["id"] = Value::Null;
    table
}

/// `sweep export ID` with `source` arguments into `out`.
fn export(id: &str, source: &[&str], out: &Path) {
    let mut args = vec!["export", id, "--output", out.to_str().unwrap()];
    args.extend_from_slice(source);
    let (code, _, err) = cli(&args);
    assert_eq!(code, 0, "sweep export {source:?}: {err}");
}

/// `sweep import FILE` with `source` arguments; returns the new sweep's id.
fn import(file: &Path, source: &[&str]) -> String {
    let mut args = vec!["import", file.to_str().unwrap()];
    args.extend_from_slice(source);
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "sweep import {source:?}: {err}");
    out.trim().rsplit(' ').next().unwrap().to_string()
}

/// `sweep table ID --format json` with `source` arguments.
fn table(id: &str, source: &[&str]) -> Value {
    let mut args = vec!["table", id, "--format", "json"];
    args.extend_from_slice(source);
    let (code, out, err) = cli(&args);
    assert_eq!(code, 0, "sweep table {source:?}: {err}");
    comparable(serde_json::from_str(&out).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_laptop_sweep_moves_to_a_team_postgres_and_back_with_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("moving.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let original = comparable(run_json(config.to_str().unwrap(), dir.path(), &[]));
    let row = &original["tables"][0]["rows"][1];
    assert!(
        row["speed"]["repeats"] == 2 && row["checks"].as_u64() > Some(0),
        "{row}"
    );
    let laptop = dir.path().join("sweep.db");
    let laptop = ["--database", laptop.to_str().unwrap()];

    // Laptop -> team: exported from the file, imported through the coordinator.
    let file = dir.path().join("moving.sweep.gz");
    export("1", &laptop, &file);
    let team_db = TestDb::new().await;
    let (_c, base) = start_coordinator(&team_db.url, 30);
    let team = ["--coordinator", base.as_str()];
    let id = import(&file, &team);
    assert_eq!(table(&id, &team), original);
    let detail = get_json(&format!("{base}/api/v1/sweeps/{id}")).await;
    assert_eq!(detail["state"], "done", "{detail}");
    // Where it came from is kept and shown.
    let from = &detail["imported_from"];
    assert_eq!(
        (from["sweep_id"].as_i64(), from["from"].as_str()),
        (Some(1), Some("an upload")),
        "{detail}"
    );

    // Team -> a fresh file, exported through the coordinator; and straight into another
    // Postgres database.
    let back = dir.path().join("back.sweep.gz");
    export(&id, &team, &back);
    let fresh = dir.path().join("fresh.db");
    let fresh = ["--database", fresh.to_str().unwrap()];
    let fresh_copy = import(&back, &fresh);
    assert_eq!(table(&fresh_copy, &fresh), original);
    let (code, out, err) = cli(&["status", &fresh_copy, fresh[0], fresh[1]]);
    assert_eq!(code, 0, "{err}");
    let said = format!("imported: sweep {id} of {}", back.display());
    assert!(out.contains(&said), "{out}");
    let other_db = TestDb::new().await;
    let other = ["--database", other_db.url.as_str()];
    let copy = import(&back, &other);
    assert_eq!(table(&copy, &other), original);

    // The imported results are the team's now: a sweep of the same builds takes them all.
    let again = CONFIG.replace("[speed]\npositions = { count = 4 }\nrepeats = 2\n", "");
    let answer = common::post_toml(&format!("{base}/api/v1/sweeps"), again).await;
    let submitted: Value = answer.json().await.unwrap();
    assert_eq!(submitted["reused"], 180, "{submitted}");
    let later = submitted["id"].to_string();

    // Letting go: the imported sweep deleted through the coordinator and the other copy on
    // the database directly; the later sweep keeps its own rows, and results stay
    // append-only for every sweep not being deleted.
    let (code, out, err) = cli(&["delete", &id, "--coordinator", &base]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("deleted sweep {id}: 180 results")),
        "{out}"
    );
    for path in ["", "/table"] {
        let url = format!("{base}/api/v1/sweeps/{id}{path}");
        let gone = common::get(&url).send().await.unwrap();
        assert_eq!(gone.status(), 404, "{url}");
    }
    let (code, out, err) = cli(&["delete", &fresh_copy, "--database", fresh[1]]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("180 results"), "{out}");
    let (code, _, err) = cli(&["delete", &copy, "--database", other_db.url.as_str()]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&["table", &copy, "--database", other_db.url.as_str()]);
    assert!(code != 0 && err.contains("not found"), "{err}");
    let kept = get_json(&format!("{base}/api/v1/sweeps/{later}/table")).await;
    assert_eq!(
        kept["tables"][0]["rows"][1]["combined"]["done"], 90,
        "{kept}"
    );
    let pool = sqlx::PgPool::connect(&team_db.url).await.unwrap();
    let refused = sqlx::query("DELETE FROM results").execute(&pool).await;
    assert!(
        refused.unwrap_err().to_string().contains("append-only"),
        "a delete of a sweep's results outside its deletion is refused"
    );
    let audit = get_json(&format!("{base}/api/v1/audit")).await;
    assert!(
        audit.to_string().contains(&format!("sweep {id}")),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_cannot_be_verified_and_sweeps_still_running_are_refused() {
    let db = TestDb::new().await;
    let (_c, base) = start_coordinator(&db.url, 30);
    let dir = tempfile::tempdir().unwrap();
    // Not an export at all, through the API and on a database directly.
    let junk = dir.path().join("junk.sweep.gz");
    std::fs::write(&junk, b"not gzip").unwrap();
    let answer = post(&format!("{base}/api/v1/sweeps/import"))
        .body(std::fs::read(&junk).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 422);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["field"], "file", "{body}");
    let db_file = dir.path().join("x.db");
    let (code, _, err) = cli(&[
        "import",
        junk.to_str().unwrap(),
        "--database",
        db_file.to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("not a sweep export"), "{err}");

    // A sweep still queued (no worker runs it) cannot be exported yet.
    let id = common::sweeps::submit(&base, "configs/sweeps/demo.toml");
    let (code, _, err) = cli(&["export", &id.to_string(), "--coordinator", &base]);
    assert_ne!(code, 0);
    assert!(err.contains("export it once it has ended"), "{err}");

    // A reader may export (none here has ended) but not import.
    let reader = create_token(&db.url, "reader", "moving-reader");
    let answer = reqwest::Client::new()
        .post(format!("{base}/api/v1/sweeps/import"))
        .bearer_auth(&reader)
        .body(b"x".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
    // Nor delete.
    let answer = reqwest::Client::new()
        .delete(format!("{base}/api/v1/sweeps/{id}"))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_sweeps_past_their_keep_are_archived_then_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("small.toml");
    std::fs::write(
        &config,
        "name = \"kept briefly\"\nengine = \"minnow\"\nsuites = [\"ecm_confident_quick\"]\ndepth = 3\n",
    )
    .unwrap();
    let original = comparable(run_json(config.to_str().unwrap(), dir.path(), &[]));
    let file = dir.path().join("small.sweep.gz");
    export(
        "1",
        &["--database", dir.path().join("sweep.db").to_str().unwrap()],
        &file,
    );

    // A coordinator keeping ended sweeps about 2.6 s; the imported sweep has ended at once.
    let db = TestDb::new().await;
    let archive = dir.path().join("archive");
    let archive_arg = archive.to_str().unwrap();
    let (_c, base) = common::start_coordinator_with(
        &db.url,
        &[
            "--keep-finished-days",
            "0.00003",
            "--archive-dir",
            archive_arg,
        ],
    );
    let id = import(&file, &["--coordinator", base.as_str()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let status = common::get(&format!("{base}/api/v1/sweeps/{id}"))
            .send()
            .await
            .unwrap();
        if status.status() == 404 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "sweep {id} still kept after 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // Its archive holds it whole: imported again, the same table.
    let archived = archive.join(format!("sweep-{id}.sweep.gz"));
    let restored = dir.path().join("restored.db");
    let restored = ["--database", restored.to_str().unwrap()];
    let copy = import(&archived, &restored);
    assert_eq!(table(&copy, &restored), original);
    let audit = get_json(&format!("{base}/api/v1/audit")).await;
    assert!(audit.to_string().contains("delete"), "{audit}");
}
