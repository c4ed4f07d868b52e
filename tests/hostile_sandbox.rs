//! Contributors' code contained (issue 46 items 1 and 2), with a real coordinator on Postgres
//! and real worker processes: a submitted source whose Makefile and the engine it writes try
//! to read the worker's token (from their environment, and from other processes' `/proc`
//! environments), to reach the coordinator over the network, and to leave files in the host's
//! `/tmp`, in the build cache and in their current directory. Each attempt is reported back
//! as a search counter (1 = it worked) or looked for on the host afterwards. Unsandboxed
//! (`--sandbox off`, which still clears the environment) the probes succeed, so they can
//! tell; in the default bubblewrap sandbox every one fails, and the table is the same.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{
    get_json, repo, row, start_coordinator_with, start_worker_with, submit_with, wait_exit,
    wait_final, TestDb,
};

/// The hostile source with its probe name and the port of the test's listener filled in.
fn hostile_source(dir: &Path, probe: &str, port: u16) -> PathBuf {
    let src = dir.join(format!("src-{probe}"));
    std::fs::create_dir_all(&src).unwrap();
    for file in ["Makefile", "engine.sh.in"] {
        let text = std::fs::read_to_string(repo().join("tests/fixtures/hostile_source").join(file))
            .unwrap()
            .replace("@PORT@", &port.to_string())
            .replace("@PROBE@", probe);
        std::fs::write(src.join(file), text).unwrap();
    }
    src
}

/// Every file under `dir` whose name contains `needle`.
fn files_named(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(files_named(&path, needle));
        } else if entry.file_name().to_string_lossy().contains(needle) {
            found.push(path);
        }
    }
    found
}

/// Runs the hostile source through one worker started with `extra`; returns the combined
/// counters of the sweep's baseline row, and whether the build left a file in the cache.
async fn run_hostile(
    base: &str,
    dir: &Path,
    probe: &str,
    port: u16,
    extra: &[&str],
) -> (Value, bool) {
    let cache = dir.join(format!("cache-{probe}"));
    let mut worker = start_worker_with(base, &cache, probe, 1, extra);
    let config = dir.join(format!("{probe}.toml"));
    std::fs::write(
        &config,
        format!(
            "name = \"{probe}\"\nengine = \"minnow\"\nsuites = [\"fakes\"]\ndepth = 1\n\
             chunk_size = 10\ncross_check = 0\n"
        ),
    )
    .unwrap();
    let src = hostile_source(dir, probe, port);
    let id = submit_with(
        base,
        config.to_str().unwrap(),
        &["--source", src.to_str().unwrap()],
    );
    let detail = wait_final(base, id, Duration::from_secs(120)).await;
    assert_eq!(detail["state"], "done", "{detail}");
    let table = get_json(&format!("{base}/api/v1/sweeps/{id}/table?format=json")).await;
    // A graceful stop: the engine's scratch directory goes with it.
    worker.signal(libc::SIGINT);
    wait_exit(
        &mut worker,
        Instant::now(),
        Duration::from_secs(30),
        "the worker",
    )
    .await;
    let wrote_cache = !files_named(&cache, &format!("{probe}-cache")).is_empty();
    let counters = row(&table, "head_reference")["combined"]["counters"].clone();
    assert_eq!(row(&table, "head_reference")["combined"]["nodes"], 70);
    (counters, wrote_cache)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_and_engines_of_a_hostile_source_are_contained() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.read(&mut [0u8; 1]);
        }
    });
    let db = TestDb::new().await;
    let (_coordinator, base) =
        start_coordinator_with(&db.url, &["--suites-dir", "tests/fixtures/suites"]);
    let dir = tempfile::tempdir().unwrap();
    let tag = std::process::id();

    // Unsandboxed: the environment is cleared, but the rest is open, and the probes see it.
    let open = format!("hostile-off-{tag}");
    let (c, wrote_cache) = run_hostile(&base, dir.path(), &open, port, &["--sandbox", "off"]).await;
    assert!(wrote_cache, "unsandboxed, a build can write into the cache");
    // Counters are sums over the ten positions: 0 means no search saw it work.
    assert_eq!(
        (&c["tok"], &c["rtok"]),
        (&Value::from(0), &Value::from(0)),
        "{c}"
    );
    for probe in ["procenv", "net", "rprocenv", "rnet"] {
        assert!(
            c[probe].as_u64() > Some(0),
            "{probe} works unsandboxed: {c}"
        );
    }
    for leftover in [format!("/tmp/{open}-build"), format!("/tmp/{open}-engine")] {
        assert!(Path::new(&leftover).exists(), "{leftover}");
        let _ = std::fs::remove_file(&leftover);
    }

    // Sandboxed (the default): nothing gets out.
    let boxed = format!("hostile-on-{tag}");
    let (c, wrote_cache) = run_hostile(&base, dir.path(), &boxed, port, &[]).await;
    assert!(!wrote_cache, "the build wrote into the cache");
    for probe in ["tok", "procenv", "net", "rtok", "rprocenv", "rnet"] {
        assert_eq!(c[probe], 0, "{probe}: {c}");
    }
    for leftover in [
        format!("/tmp/{boxed}-build"),
        format!("/tmp/{boxed}-engine"),
    ] {
        assert!(
            !Path::new(&leftover).exists(),
            "{leftover} escaped the sandbox"
        );
    }
    // Nothing in the worker's current directory, nor left in any scratch directory.
    assert!(files_named(&repo(), &format!("{boxed}-cwd")).is_empty());
    assert!(files_named(Path::new("/tmp"), &format!("{boxed}-cwd")).is_empty());
    assert!(files_named(&repo(), &format!("{open}-cwd")).is_empty());
    assert!(
        files_named(Path::new("/tmp"), &format!("{open}-cwd")).is_empty(),
        "the unsandboxed scratch is removed too"
    );

    // The build records say how each ran.
    let list = get_json(&format!("{base}/api/v1/sweeps")).await;
    let mut sandboxes = Vec::new();
    for s in list["sweeps"].as_array().unwrap() {
        let d = get_json(&format!("{base}/api/v1/sweeps/{}", s["id"])).await;
        for r in d["builds"][0]["records"].as_array().unwrap() {
            sandboxes.push(r["sandbox"].as_str().unwrap().to_string());
        }
    }
    sandboxes.sort();
    assert_eq!(sandboxes.len(), 2, "{sandboxes:?}");
    assert!(
        sandboxes[0].starts_with("bwrap ") && sandboxes[1] == "off",
        "{sandboxes:?}"
    );
}
