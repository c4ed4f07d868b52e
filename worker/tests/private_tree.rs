//! Every variant is built in its own copy of the source: an engine whose Makefile leaves
//! object files in its tree still gets one distinct, correct binary per variant, and the
//! unpacked snapshot is never written to.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use sweep_domain::wire::BuildSpec;
use sweep_worker::build::{BuildCache, BuildError};
use sweep_worker::source::SourceStore;

/// A C program printing its `-DVALUE`, whose Makefile compiles `main.o` next to `main.c`.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/objects_in_tree"
);
const FILES: &[&str] = &["Makefile", "main.c"];

/// The fixture as the coordinator would serve it: a tar.gz and its sha256.
fn snapshot() -> (Vec<u8>, String) {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for name in FILES {
        tar.append_path_with_name(Path::new(FIXTURE).join(name), name)
            .unwrap();
    }
    let bytes = tar.into_inner().unwrap().finish().unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

/// The fixture's build spec with `defines`, using minnow's recipe (the usual template).
fn spec(sha: &str, defines: &[(&str, i64)]) -> BuildSpec {
    let mut s = common::minnow_spec(defines);
    s.engine = "objects-in-tree".into();
    s.source_sha256 = sha.into();
    s.binary = "value".into();
    s.build_timeout_secs = 60;
    s
}

/// Every file under `dir` with its contents, keyed by relative path.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_path_buf();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn run(binary: &Path) -> String {
    let out = Command::new(binary).output().unwrap();
    assert!(out.status.success(), "{binary:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The variant built by hand with the fixture's Makefile in a fresh copy of its own.
fn direct_build(defines: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    for name in FILES {
        fs::copy(Path::new(FIXTURE).join(name), dir.path().join(name)).unwrap();
    }
    let out = dir.path().join("value");
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(dir.path())
        .arg(format!("DEFINES={defines}"))
        .arg(format!("OUT={}", out.display()))
        .status()
        .unwrap();
    assert!(status.success());
    run(&out)
}

/// The names in the key directory of `s`: its binary once built, nothing else ever.
fn key_dir_entries(builds: &BuildCache, s: &BuildSpec) -> Vec<String> {
    let key_dir = builds.binary_path(s).parent().unwrap().to_path_buf();
    fs::read_dir(key_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// The fixture's snapshot unpacked by the worker's own source store under `cache`; returns
/// (its directory, its sha256).
async fn installed(cache: &std::path::Path) -> (std::path::PathBuf, String) {
    let (tgz, sha) = snapshot();
    let source = SourceStore::new(cache).install(&sha, tgz).await.unwrap();
    (source, sha)
}

#[tokio::test]
async fn variants_with_objects_in_tree_build_their_own_binaries() {
    let cache = tempfile::tempdir().unwrap();
    let (source, sha) = installed(cache.path()).await;
    let before = files(&source);
    assert_eq!(before.len(), FILES.len());

    let builds = BuildCache::new(cache.path());
    // The baseline (no define: the source's default 0), then two variants, one after the
    // other as a worker's slots reach them: in a shared tree the first build's main.o would be
    // "up to date" for every later one.
    let mut binaries = Vec::new();
    for value in [None, Some(7), Some(-3)] {
        let defines: Vec<(&str, i64)> = value.map(|v| ("VALUE", v)).into_iter().collect();
        let flags = value.map(|v| format!("-DVALUE={v}")).unwrap_or_default();
        let expected = value.unwrap_or(0).to_string();
        let s = spec(&sha, &defines);
        let bin = builds.get(&source, &s).await.unwrap();
        assert_eq!(bin, builds.binary_path(&s));
        assert_eq!(run(&bin), expected, "{defines:?}");
        assert_eq!(run(&bin), direct_build(&flags), "{defines:?}");
        // The private tree and its objects are gone; only the binary is kept.
        assert_eq!(key_dir_entries(&builds, &s), ["value", "value.sha256"]);
        binaries.push(fs::read(&bin).unwrap());
    }
    assert_ne!(binaries[0], binaries[1]);
    assert_ne!(binaries[1], binaries[2]);

    // The snapshot is exactly what was unpacked: no main.o, no binary, nothing changed.
    assert_eq!(files(&source), before);
}

#[tokio::test]
async fn concurrent_variants_in_one_snapshot_do_not_mix() {
    let cache = tempfile::tempdir().unwrap();
    let (source, sha) = installed(cache.path()).await;
    let builds = Arc::new(BuildCache::new(cache.path()));
    // Slots of one worker building different variants at the same time.
    let tasks: Vec<_> = (1..=4)
        .map(|v| {
            let (b, src, s) = (builds.clone(), source.clone(), spec(&sha, &[("VALUE", v)]));
            tokio::spawn(async move { (v, b.get(&src, &s).await) })
        })
        .collect();
    for t in tasks {
        let (v, bin) = t.await.unwrap();
        assert_eq!(run(&bin.unwrap()), v.to_string());
    }
    assert!(!source.join("main.o").exists());
}

#[tokio::test]
async fn failed_build_removes_its_private_tree() {
    let cache = tempfile::tempdir().unwrap();
    let (source, sha) = installed(cache.path()).await;
    let before = files(&source);
    let builds = BuildCache::new(cache.path());
    let s = spec(&sha, &[("BREAK_BUILD", 1)]);
    let err = builds.get(&source, &s).await.unwrap_err();
    assert!(matches!(err, BuildError::Failed { .. }), "{err}");
    assert!(err.output().contains("broken on purpose"), "{err:?}");
    assert!(key_dir_entries(&builds, &s).is_empty());
    assert_eq!(files(&source), before);
}
