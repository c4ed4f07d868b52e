//! Reference numbers computed without any coordinator: each build made by the worker's build
//! cache and every position run through the engine driver.

use std::collections::BTreeMap;
use std::path::Path;

use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{parse_suite, Suite};
use sweep_domain::limit::Limit;
use sweep_domain::plan;
use sweep_domain::spec::SweepConfig;
use sweep_domain::wire::JobPosition;
use sweep_worker::build::BuildCache;
use sweep_worker::{run_positions_direct, EngineSettings};

use super::repo;

/// Parses `suites/NAME.epd`.
pub fn load_suite(name: &str) -> Suite {
    let text = std::fs::read_to_string(repo().join(format!("suites/{name}.epd"))).unwrap();
    parse_suite(name, &text).unwrap()
}

/// Every position of `suite` as a worker receives it in a lease.
pub fn job_positions(suite: &Suite) -> Vec<JobPosition> {
    suite
        .positions
        .iter()
        .enumerate()
        .map(|(i, p)| JobPosition::of(i as u32, p))
        .collect()
}

/// (nodes, solved) per (build, suite) of the single-limit sweep config at `config_path`.
pub async fn direct_totals(config_path: &str) -> BTreeMap<(String, String), (u64, u64)> {
    let by_limit = direct_totals_by_limit(config_path).await;
    let limits: std::collections::BTreeSet<Limit> = by_limit.keys().map(|k| k.1).collect();
    assert_eq!(limits.len(), 1, "{config_path} has several limits");
    by_limit
        .into_iter()
        .map(|((build, _, suite), v)| ((build, suite), v))
        .collect()
}

/// (nodes, solved) per (build, limit, suite) of the sweep config at `config_path`.
pub async fn direct_totals_by_limit(
    config_path: &str,
) -> BTreeMap<(String, Limit, String), (u64, u64)> {
    direct_totals_from(&repo().join(config_path), &repo().join("engines/minnow")).await
}

/// As [`direct_totals_by_limit`], for the config at `config_path` with minnow built from
/// `source` (e.g. a changed copy of engines/minnow).
pub async fn direct_totals_from(
    config_path: &std::path::Path,
    source: &std::path::Path,
) -> BTreeMap<(String, Limit, String), (u64, u64)> {
    let config = SweepConfig::from_toml(&std::fs::read_to_string(config_path).unwrap()).unwrap();
    let def = EngineDef::from_toml(
        &std::fs::read_to_string(repo().join("configs/engines/minnow.toml")).unwrap(),
    )
    .unwrap();
    let suites: Vec<Suite> = config.suites.iter().map(|s| load_suite(s)).collect();
    let sizes = suites
        .iter()
        .map(|s| (s.name.clone(), s.positions.len()))
        .collect();
    let engines = BTreeMap::from([(def.name.clone(), def.clone())]);
    // With the knobs the config declares (`[[knobs]]`), as the coordinator would.
    let (spec, def) = config.validate_with_engine(&engines, &sizes).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = BuildCache::new(cache_dir.path());
    let options: Vec<(String, String)> = def
        .options
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    let mut out = BTreeMap::new();
    for build in plan::builds(&spec) {
        let mut bspec = def.build_spec(&build.name, build.defines.clone(), "direct");
        bspec.options = options.clone();
        let binary = cache.get(source, &bspec).await.expect("direct build");
        for suite in &suites {
            for &limit in &spec.limits {
                let settings = EngineSettings::with_options(options.clone());
                out.insert(
                    (build.name.clone(), limit, suite.name.clone()),
                    suite_totals(&binary, settings, suite, limit).await,
                );
            }
        }
    }
    out
}

/// (nodes, solved) of `binary` run directly with `settings` over every position of `suite`
/// at `limit`; every position must run without an error.
pub async fn suite_totals(
    binary: &Path,
    settings: EngineSettings,
    suite: &Suite,
    limit: Limit,
) -> (u64, u64) {
    let results = run_positions_direct(binary, settings, &job_positions(suite), limit).await;
    assert!(
        results.iter().all(|r| r.error.is_none()),
        "direct run errors: {results:?}"
    );
    let nodes = results.iter().map(|r| r.nodes).sum();
    let solved = results
        .iter()
        .zip(&suite.positions)
        .filter(|(r, p)| p.is_solved(&r.bestmove))
        .count() as u64;
    (nodes, solved)
}
