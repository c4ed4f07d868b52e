//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sweep_domain::engine::Protocol;
use sweep_domain::epd::parse_suite;
use sweep_domain::wire::{BuildSpec, JobPosition};
use sweep_worker::build::BuildCache;

/// The minnow engine's source directory in this repository.
pub const MINNOW_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../engines/minnow");

/// A build spec for minnow with `defines`, as the coordinator would send it.
pub fn minnow_spec(defines: &[(&str, i64)]) -> BuildSpec {
    BuildSpec {
        name: "test".into(),
        engine: "minnow".into(),
        source_sha256: "local-checkout".into(),
        defines: defines
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        build_command: [
            "make",
            "-s",
            "-C",
            "{source}",
            "DEFINES={defines}",
            "OUT={out}",
        ]
        .map(String::from)
        .to_vec(),
        build_timeout_secs: 120,
        binary: "minnow".into(),
        binary_path: None,
        protocol: Protocol::Uci,
        options: vec![("Hash".into(), "16".into()), ("Threads".into(), "1".into())],
        checked_options: vec![],
        fresh_process_per_position: false,
        position_timeout_secs: 60,
        init_timeout_secs: 10,
    }
}

/// Builds minnow (default defines) into a cache under `cache`.
pub async fn build_minnow(cache: &Path) -> PathBuf {
    BuildCache::new(cache)
        .get(Path::new(MINNOW_SRC), &minnow_spec(&[]))
        .await
        .expect("minnow builds")
}

/// The first `n` positions of the WAC suite shipped with the repository.
pub fn wac(n: usize) -> Vec<JobPosition> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../suites/wac.epd");
    let text = std::fs::read_to_string(path).expect("suites/wac.epd");
    let suite = parse_suite("wac", &text).expect("wac parses");
    suite
        .positions
        .into_iter()
        .take(n)
        .enumerate()
        .map(|(i, p)| JobPosition::of(i as u32, &p))
        .collect()
}
