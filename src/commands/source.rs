//! `--source DIR` of `sweep submit` and `sweep run`: the config it goes with, and the
//! snapshot of the directory (made off the async runtime, with the whole reason on failure).

use std::path::Path;

use anyhow::{bail, Context};
use sweep_coordinator::snapshot::{snapshot_dir, Snapshot, SnapshotRules};
use sweep_domain::spec::SweepConfig;

/// Parses the config `--source DIR` goes with; one with its own `[source]` is refused (the
/// two would contradict each other).
pub fn config_for_source(file: &Path, text: &str) -> anyhow::Result<SweepConfig> {
    let config = SweepConfig::from_toml(text).with_context(|| file.display().to_string())?;
    if config.source.is_some() {
        bail!(
            "{}: the config has a [source] table and --source DIR was given; use one or the other",
            file.display()
        );
    }
    Ok(config)
}

/// Snapshots `dir` by `rules`.
pub async fn snapshot(dir: &Path, rules: SnapshotRules) -> anyhow::Result<Snapshot> {
    let owned = dir.to_path_buf();
    tokio::task::spawn_blocking(move || snapshot_dir(&owned, &rules))
        .await
        .context("snapshot task")?
        .with_context(|| format!("--source {}", dir.display()))
}
