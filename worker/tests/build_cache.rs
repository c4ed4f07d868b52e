//! The build cache: one build per key, remembered failures, timeouts, a clean environment.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sweep_domain::wire::BuildSpec;
use sweep_worker::allow::BuildPrograms;
use sweep_worker::build::{BuildCache, BuildError};

/// A cache whose builds may run `sh` (the recipes below are shell scripts) and `make`.
fn cache_at(dir: &Path) -> BuildCache {
    BuildCache::new(dir).with_programs(BuildPrograms::new(["sh".into(), "make".into()]))
}

/// A build recipe that runs `script` with `sh -c` ($0 is the output path). Only for tests: the
/// real templates are validated argv without a shell, and a worker allows no `sh` by default.
fn spec(script: &str, timeout: u64) -> BuildSpec {
    let mut s = common::minnow_spec(&[]);
    s.build_command = vec!["sh".into(), "-c".into(), script.into(), "{out}".into()];
    s.build_timeout_secs = timeout;
    s.binary = "engine".into();
    s
}

fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[tokio::test]
async fn concurrent_requests_share_one_build() {
    let cache = tempfile::tempdir().unwrap();
    let counter = cache.path().join("count");
    let script = format!(
        "echo run >> {}; sleep 0.3; printf '#!/bin/sh\\n' > \"$0\"; chmod +x \"$0\"",
        counter.display()
    );
    let s = spec(&script, 10);
    let builds = Arc::new(cache_at(cache.path()));
    let source = tempfile::tempdir().unwrap();
    let src = source.path().to_path_buf();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (b, s, src) = (builds.clone(), s.clone(), src.clone());
            tokio::spawn(async move { b.get(&src, &s).await })
        })
        .collect();
    let mut paths = Vec::new();
    for t in tasks {
        paths.push(t.await.unwrap().unwrap());
    }
    assert!(paths.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(paths[0], builds.binary_path(&s));
    assert!(paths[0].is_file());
    assert_eq!(count_lines(&counter), 1, "built exactly once");
    // Only the binary and its recorded hash remain in its key directory: no temporaries.
    let mut entries: Vec<String> = std::fs::read_dir(paths[0].parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["engine", "engine.sha256"]);

    // A new cache over the same directory (a restarted worker) finds the finished binary.
    let again = cache_at(cache.path()).get(&src, &s).await.unwrap();
    assert_eq!(again, paths[0]);
    assert_eq!(count_lines(&counter), 1);

    // The cache trusts nothing it did not hash: a binary changed after it was built (by
    // another process sharing the directory) is built again, not run.
    std::fs::write(&paths[0], "#!/bin/sh\necho tampered\n").unwrap();
    let rebuilt = cache_at(cache.path()).get(&src, &s).await.unwrap();
    assert_eq!(rebuilt, paths[0]);
    assert_eq!(count_lines(&counter), 2, "built again");
    assert_eq!(std::fs::read_to_string(&rebuilt).unwrap(), "#!/bin/sh\n");
    // So is one without a recorded hash (a cache written before hashes were kept).
    std::fs::remove_file(paths[0].with_extension("sha256")).unwrap();
    cache_at(cache.path()).get(&src, &s).await.unwrap();
    assert_eq!(count_lines(&counter), 3);
}

#[tokio::test]
async fn failures_are_remembered_with_output() {
    let cache = tempfile::tempdir().unwrap();
    let counter = cache.path().join("count");
    let script = format!(
        "echo run >> {}; echo 'minnow.c:1: error: expected ;' >&2; exit 2",
        counter.display()
    );
    let s = spec(&script, 10);
    let builds = cache_at(cache.path());
    let src = tempfile::tempdir().unwrap();
    let first = builds.get(src.path(), &s).await.unwrap_err();
    let second = builds.get(src.path(), &s).await.unwrap_err();
    assert_eq!(first, second);
    assert!(matches!(&first, BuildError::Failed { status, .. } if status.contains('2')));
    assert!(first.output().contains("error: expected ;"), "{first:?}");
    assert!(first.report().contains("error: expected ;"));
    assert_eq!(count_lines(&counter), 1, "a failing key is not rebuilt");
    assert!(!builds.binary_path(&s).exists());

    let silent = spec("true", 10);
    let err = builds.get(src.path(), &silent).await.unwrap_err();
    assert!(matches!(err, BuildError::NoBinary { .. }), "{err}");
}

#[tokio::test]
async fn slow_build_is_killed_with_its_children() {
    let cache = tempfile::tempdir().unwrap();
    let marker = cache.path().join("late");
    // The child shell outlives a naive kill of its parent; the group kill must take it too.
    let script = format!(
        "echo starting; (sleep 2; touch {}) & sleep 30",
        marker.display()
    );
    let builds = cache_at(cache.path());
    let src = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let err = builds.get(src.path(), &spec(&script, 1)).await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(
        matches!(&err, BuildError::TimedOut { secs: 1, .. }),
        "{err}"
    );
    assert!(err.output().contains("starting"));
    // The killed build's temporary directory, private source copy included, is gone.
    let s = spec(&script, 1);
    let key_dir = builds.binary_path(&s).parent().unwrap().to_path_buf();
    assert_eq!(std::fs::read_dir(key_dir).unwrap().count(), 0);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!marker.exists(), "the build's background child was killed");
}

#[tokio::test]
async fn environment_is_cleared_and_defines_rendered() {
    let cache = tempfile::tempdir().unwrap();
    let mut s = spec("env > \"$0\"; echo \"$1\" >> \"$0\"", 10);
    s.build_command.push("{defines}".into());
    s.defines.insert("NULLMOVE_R_BASE".into(), 2);
    let builds = cache_at(cache.path());
    let src = tempfile::tempdir().unwrap();
    let bin = builds.get(src.path(), &s).await.unwrap();
    let text = std::fs::read_to_string(bin).unwrap();
    assert!(text.contains("PATH="), "{text}");
    assert!(!text.contains("CARGO_MANIFEST_DIR"), "{text}");
    assert!(text.contains("-DNULLMOVE_R_BASE=2"), "{text}");

    let mut bad = s.clone();
    bad.defines.insert("X; rm -rf /".into(), 1);
    assert!(matches!(
        builds.get(src.path(), &bad).await,
        Err(BuildError::Invalid(_))
    ));
    let mut bad = s;
    bad.binary = "../escape".into();
    assert!(matches!(
        builds.get(src.path(), &bad).await,
        Err(BuildError::Invalid(_))
    ));
}

#[tokio::test]
async fn real_minnow_builds_into_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let bin = common::build_minnow(cache.path()).await;
    assert!(bin.starts_with(cache.path().join("builds")));
    assert_eq!(bin.file_name().unwrap(), "minnow");
    // Nothing was written into the source tree besides what was there.
    assert!(!Path::new(common::MINNOW_SRC).join("minnow.tmp").exists());
}

#[tokio::test]
async fn source_holding_the_cache_is_refused() {
    // Copying it into the build's private tree would copy the copy without end.
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let builds = cache_at(&cache);
    let err = builds
        .get(dir.path(), &spec("touch \"$0\"", 10))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BuildError::Invalid(m) if m.contains("contains the build cache")),
        "{err}"
    );
}
