//! `--source DIR` and `--variant-source NAME=DIR` of `sweep submit` and `sweep run`: the
//! config they go with, the snapshots of the directories (made off the async runtime, with
//! the whole reason on failure), and where each is named in the config.

use std::path::Path;

use anyhow::{bail, Context};
use sweep_coordinator::snapshot::{snapshot_dir, Snapshot, SnapshotRules};
use sweep_domain::spec::{SourceConfig, SweepConfig};

use crate::cli::SourceArgs;

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

/// What a directory of `--source` / `--variant-source` stands for in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The sweep's source (`[source] sha256`).
    Sweep,
    /// The code of the `[[variants]]` entry of this name (its `sha256`).
    Variant(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Sweep => write!(f, "--source"),
            Target::Variant(name) => write!(f, "--variant-source {name}"),
        }
    }
}

/// The snapshot of each directory `sources` gives, by `rules`, with what it stands for.
pub async fn snapshots(
    sources: &SourceArgs,
    rules: &SnapshotRules,
) -> anyhow::Result<Vec<(Target, Snapshot)>> {
    let mut out = Vec::new();
    if let Some(dir) = &sources.dir {
        out.push((Target::Sweep, snapshot(dir, rules.clone()).await?));
    }
    for v in &sources.variants {
        let snap = snapshot(&v.dir, rules.clone())
            .await
            .with_context(|| format!("--variant-source {}", v.name))?;
        out.push((Target::Variant(v.name.clone()), snap));
    }
    Ok(out)
}

/// Names snapshot `sha256` in `config` (of `file`) where `target` says. A variant must be one
/// of the config's `[[variants]]` that does not name its code already.
pub fn name_in(
    file: &Path,
    config: &mut SweepConfig,
    target: &Target,
    sha256: String,
) -> anyhow::Result<()> {
    let name = match target {
        Target::Sweep => {
            config.source = Some(SourceConfig {
                sha256: Some(sha256),
                ..SourceConfig::default()
            });
            return Ok(());
        }
        Target::Variant(name) => name,
    };
    let names: Vec<String> = config.variants.iter().map(|v| v.name.clone()).collect();
    let Some(variant) = config.variants.iter_mut().find(|v| &v.name == name) else {
        bail!(
            "{}: --variant-source {name}: the config has no [[variants]] named `{name}`{}",
            file.display(),
            if names.is_empty() {
                String::new()
            } else {
                format!(" (it has {})", names.join(", "))
            }
        );
    };
    if variant.rev.is_some() || variant.sha256.is_some() {
        bail!(
            "{}: --variant-source {name}: that variant names its code already (`rev` or `sha256`); use one or the other",
            file.display()
        );
    }
    variant.sha256 = Some(sha256);
    Ok(())
}
