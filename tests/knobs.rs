//! Knobs declared with the sweep (`[[knobs]]`): an in-process coordinator whose engines
//! directory registers a copy of the bundled engine with a new `#ifndef NEW_KNOB` define the
//! definition does not list. Declaring it is accepted (and stored with the sweep's engine
//! definition); a name the source does not define is refused naming the knob and the files
//! searched; and real worker processes sweep the declared knob.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use common::sweeps::declare_knob;
use common::{coordinator_config, repo, start_two_workers, wait_final, InProcess, TestDb};

/// What the copy adds to minnow.h: `NEW_KNOB` becomes the null-move base reduction, so its
/// values change node counts (3, its default, is the bundled engine's own).
const NEW_DEFINE: &str =
    "#ifndef NEW_KNOB\n#define NEW_KNOB 3\n#endif\n#define NULLMOVE_R_BASE NEW_KNOB\n";

/// A coordinator on a fresh database, and the directory of its engines (removed after it
/// stops).
struct Server {
    coord: InProcess<TestDb>,
    engines: tempfile::TempDir,
}

/// Copies the bundled engine's source files (those its definition snapshots) to `dir`, with
/// `NEW_KNOB` defined in minnow.h.
fn engine_copy(dir: &Path) -> PathBuf {
    let src = dir.join("minnow-src");
    std::fs::create_dir_all(&src).unwrap();
    for entry in std::fs::read_dir(repo().join("engines/minnow")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.ends_with(".c") || name.ends_with(".h") || name == "Makefile" {
            std::fs::copy(&path, src.join(&name)).unwrap();
        }
    }
    let header = std::fs::read_to_string(src.join("minnow.h")).unwrap();
    let anchor = "#ifndef NULLMOVE_R_BASE\n";
    assert!(header.contains(anchor));
    let header = header.replacen(anchor, &format!("{NEW_DEFINE}{anchor}"), 1);
    std::fs::write(src.join("minnow.h"), header).unwrap();
    src
}

/// A coordinator whose engines are the copy (as `minnow`) and the bundled binary-only
/// Stockfish definition.
async fn server() -> Server {
    let db = TestDb::new().await;
    let engines = tempfile::tempdir().unwrap();
    let src = engine_copy(engines.path());
    let def = std::fs::read_to_string(repo().join("configs/engines/minnow.toml")).unwrap();
    let def = def.replace(
        "path = \"../../engines/minnow\"",
        &format!("path = \"{}\"", src.display()),
    );
    assert!(def.contains(&src.display().to_string()));
    std::fs::write(engines.path().join("minnow.toml"), def).unwrap();
    std::fs::copy(
        repo().join("configs/engines/stockfish.toml"),
        engines.path().join("stockfish.toml"),
    )
    .unwrap();

    let mut config = coordinator_config(&db.url);
    config.engines_dir = engines.path().to_path_buf();
    Server {
        coord: InProcess::start_with_tokens(config, db).await,
        engines,
    }
}

/// A sweep of `NEW_KNOB`, without its declaration.
const UNDECLARED: &str = r#"
name = "declared knob"
engine = "minnow"
knob = "NEW_KNOB"
values = [1, 3]
suites = ["bk"]
depth = 4
chunk_size = 8
"#;

/// [`UNDECLARED`] with its declaration (the test engine's source defines `NEW_KNOB`).
fn declared() -> String {
    format!("{UNDECLARED}\n{}", declare_knob("NEW_KNOB"))
}

async fn submit(base: &str, config: &str) -> (StatusCode, Value) {
    let resp = common::post_toml(&format!("{base}/api/v1/sweeps"), config.to_string()).await;
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_declared_knob_must_be_in_the_source() {
    let s = server().await;

    // Defined behind `#ifndef NEW_KNOB`: accepted, and the sweep stores the engine
    // definition with it.
    let (status, v) = submit(&s.coord.base, &declared()).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let mut conn = s.coord.db.connect().await;
    let def: Value = sqlx::query_scalar("SELECT engine_def FROM sweeps WHERE id = $1")
        .bind(v["id"].as_i64().unwrap())
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let knobs: Vec<&str> = def["knobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert!(knobs.contains(&"NEW_KNOB"), "{def}");
    assert!(knobs.contains(&"NULLMOVE_R_BASE"), "{def}");
    assert_eq!(
        def["knobs"][knobs.len() - 1]["max"],
        6,
        "the declared range: {def}"
    );

    // A name no source file defines: refused naming the knob and the files searched.
    let unknown = declared().replace("NEW_KNOB", "NOT_IN_SOURCE");
    let (status, v) = submit(&s.coord.base, &unknown).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "knobs[0].name", "{v}");
    let msg = message(&v);
    eprintln!("refused: {msg}");
    assert!(msg.contains("`NOT_IN_SOURCE`"), "{msg}");
    assert!(msg.contains("#ifndef NOT_IN_SOURCE"), "{msg}");
    // Every .c and .h file of the copy (its Makefile is no source file).
    assert!(msg.contains("files searched ("), "{msg}");
    assert!(msg.contains("board.c"), "{msg}");
    let searched = std::fs::read_dir(s.engines.path().join("minnow-src"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_str().unwrap();
            name.ends_with(".c") || name.ends_with(".h")
        })
        .count();
    assert!(
        msg.contains(&format!("the {searched} files searched")),
        "{msg}"
    );
    // Nothing was stored for the refused submission.
    let sweeps: i64 = sqlx::query_scalar("SELECT count(*) FROM sweeps")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(sweeps, 1);

    // A second declared knob that is missing is named by its own index.
    let second = format!(
        "{}\n[[knobs]]\nname = \"ALSO_MISSING\"\nmin = 0\nmax = 1\ndefault = 0\n",
        declared()
    );
    let (status, v) = submit(&s.coord.base, &second).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "knobs[1].name", "{v}");

    // A knob the engine already declares cannot be declared again.
    let again = declared()
        .replace("NEW_KNOB", "NULLMOVE_R_BASE")
        .replace("[1, 3]", "[2]");
    let (status, v) = submit(&s.coord.base, &again).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "knobs[0].name", "{v}");
    assert!(message(&v).contains("already declares"), "{v}");

    // Without the declaration the knob is unknown, and the error says how to declare it.
    let undeclared = declared().split("[[knobs]]").next().unwrap().to_string();
    let (status, v) = submit(&s.coord.base, &undeclared).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "knob", "{v}");
    assert!(message(&v).contains("[[knobs]]"), "{v}");

    // A binary-only engine has no source to define anything.
    let binary = declared()
        .replace("engine = \"minnow\"", "engine = \"stockfish\"")
        .replace("knob = \"NEW_KNOB\"", "knob = \"Hash\"")
        .replace("[1, 3]", "[16]");
    let (status, v) = submit(&s.coord.base, &binary).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["error"]["field"], "knobs", "{v}");
    assert!(message(&v).contains("binary-only"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_sweep_a_declared_knob() {
    let s = server().await;
    let _workers = start_two_workers(&s.coord.base, &[]);

    let (status, v) = submit(&s.coord.base, &declared()).await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    let id = v["id"].as_i64().unwrap();
    let detail = wait_final(&s.coord.base, id, Duration::from_secs(600)).await;
    assert_eq!(detail["state"], "done", "{detail}");

    let table = common::get_json(&format!(
        "{}/api/v1/sweeps/{id}/table?format=json",
        s.coord.base
    ))
    .await;
    let rows = table["tables"][0]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["build"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["head_reference", "NEW_KNOB=1", "NEW_KNOB=3"],
        "{table}"
    );
    let nodes = |i: usize| rows[i]["combined"]["nodes"].as_u64().unwrap();
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["combined"]["errors"], 0, "{row}");
        assert!(nodes(i) > 0, "{row}");
    }
    // 3 is the source's default: the same search as the baseline, node for node; a
    // smaller reduction searches more, so the define really reached the build.
    assert_eq!(nodes(2), nodes(0), "{table}");
    assert!(nodes(1) > nodes(0), "{table}");
}
