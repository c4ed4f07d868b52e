//! `sweep compare --base REV --test REV CONFIG`: a patch against its base, the question of a
//! pull request. Both are revisions of the config's `[source] git` repository; the config
//! gives the engine, suites and limits. It runs as `sweep run` does (in this process, on the
//! embedded database, reusing what earlier runs measured of either commit) and prints
//! Markdown fit for pasting into the pull request: the paired statistics first, then the
//! tables, each row naming its commit.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use sweep_domain::spec::{SweepConfig, VariantConfig};

use crate::cli::CompareArgs;

/// The baseline row's name.
const BASE: &str = "base";
/// The test row's name.
const TEST: &str = "test";

/// Runs the comparison and prints its table (see the module doc).
pub async fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let CompareArgs {
        base,
        test,
        mut run,
    } = args;
    if run.resume.is_some() {
        bail!("sweep compare starts a comparison; --resume is for `sweep run`");
    }
    if run.sources.any() {
        bail!("sweep compare takes both revisions from the config's [source] git; --source and --variant-source are for `sweep run`");
    }
    let Some(path) = run.config.clone() else {
        bail!("give the sweep config to compare with (it names the engine, suites, limits and [source] git)");
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let config = SweepConfig::from_toml(&text).with_context(|| path.display().to_string())?;
    let config = comparison(&path, config, &base, &test)?;
    // The repository is the one the user's own config names, run on the user's own machine:
    // allowed here as `sweep run --git-allow` would allow it.
    let url = config
        .source
        .as_ref()
        .and_then(|s| s.git.clone())
        .unwrap_or_default();
    run.git.git_allow.push(allow_entry(&url)?);
    if run.format == "md" {
        run.format = "review".to_string();
    }
    super::run::run_with(run, Some((path, config))).await
}

/// `config` (of `file`) made into the comparison: the baseline at `base`, one variant at
/// `test`. A config that sweeps knobs is refused: the comparison is of the two commits.
fn comparison(
    file: &Path,
    mut config: SweepConfig,
    base: &str,
    test: &str,
) -> anyhow::Result<SweepConfig> {
    let given = [
        ("knob", config.knob.is_some()),
        ("values", config.values.is_some()),
        ("grid", !config.grid.is_empty()),
        ("variants", !config.variants.is_empty()),
        ("search", config.search.is_some()),
    ];
    if let Some((key, _)) = given.iter().find(|(_, set)| *set) {
        bail!(
            "{}: `{key}`: sweep compare runs the base against the test alone; give a config without variants (its engine, suites and limits are used)",
            file.display()
        );
    }
    let Some(source) = config.source.as_mut().filter(|s| s.git.is_some()) else {
        bail!(
            "{}: sweep compare needs `[source] git = \"...\"`, the repository both revisions are of",
            file.display()
        );
    };
    source.rev = Some(base.to_string());
    config.baseline.name = BASE.to_string();
    config.variants = vec![VariantConfig {
        name: TEST.to_string(),
        defines: Default::default(),
        rev: Some(test.to_string()),
        sha256: None,
    }];
    config.name = format!("{}: {base} vs {test}", config.name);
    Ok(config)
}

/// The allow-list entry of the repository `url` alone (a local path as a `file://` URL).
fn allow_entry(url: &str) -> anyhow::Result<sweep_coordinator::git::AllowEntry> {
    let text = if url.starts_with('/') {
        format!("file://{url}")
    } else {
        url.to_string()
    };
    text.parse()
        .map_err(|e| anyhow::anyhow!("[source] git `{url}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> SweepConfig {
        SweepConfig::from_toml(&format!(
            "name = \"n\"\nengine = \"minnow\"\nsuites = [\"ecm\"]\ndepth = 5\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn the_base_is_the_baseline_and_the_test_its_one_variant() {
        let c = config("[source]\ngit = \"/srv/minnow\"\n");
        let c = comparison(Path::new("c.toml"), c, "main", "patch").unwrap();
        assert_eq!(c.source.unwrap().rev.as_deref(), Some("main"));
        assert_eq!(c.baseline.name, "base");
        assert_eq!(c.variants.len(), 1);
        assert_eq!(c.variants[0].rev.as_deref(), Some("patch"));
        assert_eq!(c.name, "n: main vs patch");
    }

    #[test]
    fn a_config_without_git_or_with_variants_is_refused_naming_why() {
        let e = comparison(Path::new("c.toml"), config(""), "a", "b").unwrap_err();
        assert!(e.to_string().contains("[source] git"), "{e}");
        let c = config("knob = \"K\"\nvalues = [1]\n[source]\ngit = \"/srv/m\"\n");
        let e = comparison(Path::new("c.toml"), c, "a", "b").unwrap_err();
        assert!(e.to_string().contains("`knob`"), "{e}");
    }
}
