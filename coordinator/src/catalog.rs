//! The catalog: engine definitions and suites the coordinator loads at start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{parse_suite, Suite};

/// A registered engine and where its source is on this machine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The definition.
    pub def: EngineDef,
    /// Absolute source directory; `None` for a binary-only engine, whose binary only the
    /// workers need (it may well be missing on the coordinator's machine).
    pub source_dir: Option<PathBuf>,
}

/// A loaded suite and its stored id.
#[derive(Debug, Clone)]
pub struct CatalogSuite {
    /// Stored version id.
    pub id: i64,
    /// Parsed suite.
    pub suite: Suite,
}

/// What sweeps can refer to.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Engines by name.
    pub engines: BTreeMap<String, Engine>,
    /// Suites by name.
    pub suites: BTreeMap<String, CatalogSuite>,
}

impl Catalog {
    /// Engine definitions by name (for validation).
    pub fn engine_defs(&self) -> BTreeMap<String, EngineDef> {
        self.engines
            .iter()
            .map(|(k, v)| (k.clone(), v.def.clone()))
            .collect()
    }

    /// Suite sizes by name (for validation and planning).
    pub fn suite_sizes(&self) -> BTreeMap<String, usize> {
        self.suites
            .iter()
            .map(|(k, v)| (k.clone(), v.suite.positions.len()))
            .collect()
    }
}

/// Loads every `*.toml` in `dir` as an engine definition. A source path is resolved against
/// the definition file's directory, so definitions work from any working directory.
pub fn load_engines(dir: &Path) -> anyhow::Result<BTreeMap<String, Engine>> {
    let mut out = BTreeMap::new();
    for path in files_with_extension(dir, "toml")? {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let def =
            EngineDef::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let source_dir = match &def.source {
            Some(source) => Some(
                base.join(&source.path)
                    .canonicalize()
                    .with_context(|| format!("{}: source.path {}", path.display(), source.path))?,
            ),
            None => None,
        };
        if out.contains_key(&def.name) {
            bail!("{}: engine `{}` is defined twice", path.display(), def.name);
        }
        out.insert(def.name.clone(), Engine { def, source_dir });
    }
    Ok(out)
}

/// Parses every `*.epd` in `dir` (name = file stem). An illegal position or move is an error
/// naming the file, the line and the problem.
pub fn load_suites(dir: &Path) -> anyhow::Result<Vec<Suite>> {
    let mut out = Vec::new();
    for path in files_with_extension(dir, "epd")? {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .context("suite file name is not UTF-8")?
            .to_string();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let suite = parse_suite(&name, &text)
            .map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.problem))?;
        out.push(suite);
    }
    Ok(out)
}

fn files_with_extension(dir: &Path, ext: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(ext) && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_only_engines_load_without_their_binary_here() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("fish.toml"),
            "name = \"fish\"\nprotocol = \"uci\"\nbinary = \"/nonexistent/fish\"\n\
             [[knobs]]\nname = \"Hash\"\nkind = \"option\"\nmin = 1\nmax = 64\ndefault = 16\n",
        )
        .unwrap();
        let engines = load_engines(dir.path()).unwrap();
        assert!(engines["fish"].source_dir.is_none());
        assert!(engines["fish"].def.is_binary_only());

        // A define knob on it is refused at load, naming the file and the field.
        std::fs::write(
            dir.path().join("fish.toml"),
            "name = \"fish\"\nprotocol = \"uci\"\nbinary = \"/nonexistent/fish\"\n\
             [[knobs]]\nname = \"HASH\"\nmin = 1\nmax = 64\ndefault = 16\n",
        )
        .unwrap();
        let err = format!("{:#}", load_engines(dir.path()).unwrap_err());
        assert!(
            err.contains("fish.toml") && err.contains("knobs[0].kind"),
            "{err}"
        );
    }

    #[test]
    fn suite_errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("bad.epd"),
            "4k3/8/8/8/8/8/8/4K2R w K - bm Rh8+; id \"a\";\n4k3/8/8/8/8/8/8/4K2R w K - bm Qd4; id \"b\";\n",
        )
        .unwrap();
        let err = format!("{:#}", load_suites(dir.path()).unwrap_err());
        assert!(err.contains("bad.epd:2"), "{err}");
        assert!(err.contains("Qd4"), "{err}");
    }
}
