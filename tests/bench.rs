//! Bench signatures (issue 45): each worker runs the engine's own bench once per binary and
//! reports its node total with the build's record. The table's rows carry it, a variant
//! whose bench equals the baseline's is marked as probably searching alike, and a worker
//! whose bench disagrees with another's for the same binary is named and refused the build,
//! so its jobs are measured by the other worker. Real coordinator (Postgres), real worker
//! processes, the bundled minnow and Debian's Stockfish.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use sweep_domain::engine::{BenchPattern, EngineDef};
use sweep_worker::bench::run_bench;
use sweep_worker::sandbox::{Confinement, Sandbox, SandboxMode};

use common::{
    get_json, get_text, repo, row, start_coordinator_with, start_coordinator_with_engines,
    start_two_workers, tokens_for, wait_final, worker_command, Proc, TestDb,
};

/// minnow built with `defines` into `dir`, benched from the command line (`minnow bench`),
/// independently of Sweep: its `Nodes searched: N`.
fn direct_minnow_bench(dir: &Path, defines: &str) -> u64 {
    let binary = dir.join(format!("minnow{}", defines.replace([' ', '='], "_")));
    let built = Command::new("make")
        .args(["-s", "-C"])
        .arg(repo().join("engines/minnow"))
        .arg(format!("DEFINES={defines}"))
        .arg(format!("OUT={}", binary.display()))
        .status()
        .unwrap();
    assert!(built.success());
    let out = Command::new(&binary).arg("bench").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Nodes searched: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total in {text}"))
}

fn bench_of<'a>(table: &'a Value, build: &str) -> &'a Value {
    &row(table, build)["bench"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minnow_benches_mark_variants_that_search_alike() {
    let dir = tempfile::tempdir().unwrap();
    let default = direct_minnow_bench(dir.path(), "");
    let r1 = direct_minnow_bench(dir.path(), "-DNULLMOVE_R_BASE=1");
    assert_ne!(default, r1, "a bigger reduction searches differently");

    let db = TestDb::new().await;
    let (_coordinator, base) =
        start_coordinator_with(&db.url, &["--suites-dir", "tests/fixtures/suites"]);
    let _workers = start_two_workers(&base, &[]);
    let config = dir.path().join("r.toml");
    // R = 3 is minnow's default: the same search as the baseline's, whatever the binary.
    std::fs::write(
        &config,
        "name = \"r\"\nengine = \"minnow\"\nknob = \"NULLMOVE_R_BASE\"\nvalues = [1, 3]\n\
         suites = [\"fakes\"]\ndepth = 3\nchunk_size = 5\n",
    )
    .unwrap();
    let id = common::submit(&base, config.to_str().unwrap());
    let detail = wait_final(&base, id, Duration::from_secs(300)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;

    let base_bench = bench_of(&table, "head_reference");
    assert_eq!(base_bench["nodes"].as_u64(), Some(default), "{table}");
    assert_eq!(base_bench["same_as_baseline"], false);
    let same = bench_of(&table, "NULLMOVE_R_BASE=3");
    assert_eq!(
        (same["nodes"].as_u64(), &same["same_as_baseline"]),
        (Some(default), &Value::Bool(true)),
        "{table}"
    );
    let other = bench_of(&table, "NULLMOVE_R_BASE=1");
    assert_eq!(
        (other["nodes"].as_u64(), &other["same_as_baseline"]),
        (Some(r1), &Value::Bool(false)),
        "{table}"
    );
    for r in table["tables"][0]["rows"].as_array().unwrap() {
        assert!(r["bench"].get("mismatches").is_none(), "{r}");
    }
    // Every worker that built a variant reported its bench with the record.
    for b in detail["builds"].as_array().unwrap() {
        let records = b["records"].as_array().unwrap();
        assert!(!records.is_empty(), "{b}");
        assert!(records.iter().all(|r| r["bench_nodes"].is_u64()), "{b}");
    }
    let md = get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=md")).await;
    assert!(
        md.contains(
            "| NULLMOVE_R_BASE=3 | {} | same bench as the baseline: probably no functional change |"
                .replace("{}", &sweep_domain::table::render::thousands(default))
                .as_str()
        ),
        "{md}"
    );
}

/// An unsandboxed worker of the salted fixture engine, whose bench depends on its `name`.
fn salted_worker(base: &str, cache: &Path, name: &str) -> Proc {
    let engine = repo().join("tests/fixtures/report/bench_salted.sh");
    let token = tokens_for(base).map(|t| t.worker).unwrap_or_default();
    let child = worker_command(base, cache, 1)
        .env("SWEEP_TOKEN", token)
        .args([
            "--name",
            name,
            "--sandbox",
            "off",
            "--allow-engine-binaries",
        ])
        .arg(&engine)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_bench_disagrees_is_named_and_its_jobs_go_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let engines = dir.path().join("engines");
    std::fs::create_dir_all(&engines).unwrap();
    let engine = repo().join("tests/fixtures/report/bench_salted.sh");
    std::fs::write(
        engines.join("salted.toml"),
        format!(
            "name = \"salted\"\nprotocol = \"uci\"\nbinary = \"{}\"\n\
             bench = {{ command = \"bench\", nodes = 'Nodes searched: (?P<nodes>\\d+)' }}\n",
            engine.display()
        ),
    )
    .unwrap();
    let db = TestDb::new().await;
    let (_coordinator, base) = start_coordinator_with_engines(&db.url, &engines);
    let _w1 = salted_worker(&base, &dir.path().join("w1"), "w1");
    let _w2 = salted_worker(&base, &dir.path().join("w2"), "w2");
    let config = dir.path().join("salted.toml");
    std::fs::write(
        &config,
        "name = \"salted\"\nengine = \"salted\"\nsuites = [\"fakes\"]\ndepth = 1\n\
         chunk_size = 1\ncross_check = 0\n",
    )
    .unwrap();
    let id = common::submit(&base, config.to_str().unwrap());
    let detail = wait_final(&base, id, Duration::from_secs(120)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    let bench = bench_of(&table, "head_reference");
    let mismatches = bench["mismatches"].as_array().expect("a mismatch");
    assert_eq!(mismatches.len(), 1, "{bench}");
    let why = mismatches[0].as_str().unwrap();
    // Whichever worker recorded first is the reference; the other is named and refused.
    let (trusted, refused, nodes) = if bench["nodes"] == 1000 {
        ("w1", "w2", 1007)
    } else {
        ("w2", "w1", 1000)
    };
    assert!(
        why.contains(&format!("worker {refused} benched {nodes} nodes"))
            && why.contains(&format!("worker {trusted} benched")),
        "{why}"
    );
    assert_eq!(row(&table, "head_reference")["combined"]["done"], 10);
    // Every result was measured by the trusted worker.
    let mut conn = db.connect().await;
    let measured_by: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT w.name FROM results r JOIN workers w ON w.id = r.worker_id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(measured_by, vec![trusted.to_string()]);
    let md = get_text(&format!("{base}/api/v1/sweeps/{id}/table?format=md")).await;
    assert!(
        md.contains("Warning: bench mismatch on head_reference"),
        "{md}"
    );
}

#[tokio::test]
async fn debian_stockfish_bench_is_read_from_its_own_output() {
    if !common::installed("/usr/games/stockfish", "stockfish") {
        return;
    }
    let text = std::fs::read_to_string(repo().join("configs/engines/stockfish.toml")).unwrap();
    let def = EngineDef::from_toml(&text).unwrap();
    let pattern = BenchPattern::compile(def.bench.as_ref().expect("a bench")).unwrap();
    let binary = Path::new(&def.binary);
    // As a worker runs it: in the sandbox, where bubblewrap works here.
    let confinement = Confinement {
        sandbox: Sandbox::resolve(SandboxMode::Auto, &[]).unwrap(),
        binary_dir: true,
    };
    let first = run_bench(binary, &pattern, &confinement).await.unwrap();
    assert_eq!(
        run_bench(binary, &pattern, &confinement).await.unwrap(),
        first
    );
    // Independently: Stockfish prints its total on stderr.
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"bench\nquit\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let direct: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("Nodes searched"))
        .and_then(|rest| rest.trim_start_matches([' ', ':']).trim().parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(first, direct);
}
