//! The catalog: engine definitions and suites. Suites are loaded at start. Engines come from
//! the engines directory's files and from the database (definitions added over the API,
//! `sweep engine add`); a definition of either origin goes through the one parser here, so
//! both are validated alike, and the service swaps in a new catalog when an engine is added.
//!
//! A bad file in the engines directory (or a stray `.toml` that is no engine definition) is
//! skipped with a warning naming the file and the reason, so one broken file never keeps the
//! coordinator from serving the good ones.
//!
//! When the database and a file define the same name, **the database wins**: a stored
//! definition was added by an admin over the API after the file was there (or to change the
//! engine without a restart), and if the file won, that update would silently vanish at the
//! next restart. The choice is logged per engine at every start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{parse_suite, Suite};
use sweep_domain::wire::{EngineInfo, EngineOrigin};
use sweep_domain::FieldError;

use crate::store::StoredEngine;

/// A registered engine and where its source is on this machine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The definition.
    pub def: EngineDef,
    /// Absolute source directory; `None` for a binary-only engine, whose binary only the
    /// workers need (it may well be missing on the coordinator's machine).
    pub source_dir: Option<PathBuf>,
    /// Where the definition came from.
    pub origin: EngineOrigin,
}

impl Engine {
    /// Parses and validates a definition, whatever its origin. A relative `source.path` is
    /// resolved against `base` (a definition file's directory); without a base (a definition
    /// sent over the API) it must be absolute. The source directory must exist here, since
    /// every submission snapshots it.
    pub fn parse(
        text: &str,
        base: Option<&Path>,
        origin: EngineOrigin,
    ) -> Result<Self, FieldError> {
        let def = EngineDef::from_toml(text)?;
        let source_dir = source_dir(&def, base)?;
        Ok(Self {
            def,
            source_dir,
            origin,
        })
    }

    /// What the engine list shows of it.
    pub fn info(&self) -> EngineInfo {
        EngineInfo {
            origin: Some(self.origin.clone()),
            ..EngineInfo::of(&self.def)
        }
    }
}

/// The absolute, existing source directory of a source engine.
fn source_dir(def: &EngineDef, base: Option<&Path>) -> Result<Option<PathBuf>, FieldError> {
    let Some(source) = &def.source else {
        return Ok(None);
    };
    let path = Path::new(&source.path);
    let joined = match base {
        Some(base) => base.join(path),
        None if path.is_absolute() => path.to_path_buf(),
        None => {
            return Err(FieldError::new(
                "source.path",
                "must be an absolute path on the coordinator's machine for an engine added \
                 over the API (there is no definition file to resolve it against)",
            ))
        }
    };
    let dir = joined.canonicalize().map_err(|e| {
        FieldError::new(
            "source.path",
            format!("{} on the coordinator: {e}", joined.display()),
        )
    })?;
    if !dir.is_dir() {
        return Err(FieldError::new(
            "source.path",
            format!("{} on the coordinator is not a directory", dir.display()),
        ));
    }
    Ok(Some(dir))
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

/// A file of the engines directory that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFile {
    /// The file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: String,
}

/// What the engines directory held.
#[derive(Debug, Clone, Default)]
pub struct EngineFiles {
    /// Engines by name.
    pub engines: BTreeMap<String, Engine>,
    /// Files that were not loaded (each also logged as a warning).
    pub skipped: Vec<SkippedFile>,
}

/// Loads every `*.toml` in `dir` as an engine definition. A source path is resolved against
/// the definition file's directory, so definitions work from any working directory. A file
/// that cannot be read or is no valid definition, or defines a name an earlier file (in name
/// order) took, is skipped with a warning; only an unreadable directory is an error.
pub fn load_engines(dir: &Path) -> anyhow::Result<EngineFiles> {
    let mut out = EngineFiles::default();
    for path in files_with_extension(dir, "toml")? {
        match load_engine_file(&path) {
            Ok(engine) if out.engines.contains_key(&engine.def.name) => {
                out.skipped.push(SkippedFile {
                    reason: format!(
                        "engine `{}` is already defined by an earlier file",
                        engine.def.name
                    ),
                    path,
                });
            }
            Ok(engine) => {
                out.engines.insert(engine.def.name.clone(), engine);
            }
            Err(reason) => out.skipped.push(SkippedFile { path, reason }),
        }
    }
    for skipped in &out.skipped {
        tracing::warn!(
            file = %skipped.path.display(),
            reason = %skipped.reason,
            "engine definition file skipped"
        );
    }
    Ok(out)
}

fn load_engine_file(path: &Path) -> Result<Engine, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("reading it: {e}"))?;
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = path.parent().unwrap_or(Path::new("."));
    Engine::parse(&text, Some(base), EngineOrigin::File { file }).map_err(|e| e.to_string())
}

/// Adds the definitions stored in the database to the directory's engines. A stored definition
/// wins over a file of the same name (see the module doc); one that no longer validates (e.g.
/// its source directory is gone) is skipped with a warning, leaving the file's, if any. Logs
/// where every engine came from.
pub fn merge_stored(engines: &mut BTreeMap<String, Engine>, stored: &[StoredEngine]) {
    for row in stored {
        let origin = EngineOrigin::Database {
            updated_at: row.updated_at,
            updated_by: row.updated_by.clone(),
        };
        let engine = match Engine::parse(&row.definition, None, origin) {
            Ok(engine) if engine.def.name == row.name => engine,
            Ok(engine) => {
                tracing::warn!(engine = %row.name, defined = %engine.def.name, "stored engine definition skipped: it defines another name");
                continue;
            }
            Err(e) => {
                tracing::warn!(engine = %row.name, reason = %e, "stored engine definition skipped");
                continue;
            }
        };
        if let Some(Engine {
            origin: EngineOrigin::File { file },
            ..
        }) = engines.get(&row.name)
        {
            tracing::warn!(
                engine = %row.name,
                file = %file,
                updated_by = %row.updated_by,
                updated_at = %row.updated_at,
                "engine: the database's definition wins over the file's"
            );
        }
        engines.insert(row.name.clone(), engine);
    }
    for (name, engine) in engines.iter() {
        match &engine.origin {
            EngineOrigin::File { file } => {
                tracing::info!(engine = %name, from = "file", %file, "engine loaded")
            }
            EngineOrigin::Database {
                updated_at,
                updated_by,
            } => {
                tracing::info!(engine = %name, from = "database", %updated_by, %updated_at, "engine loaded")
            }
        }
    }
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
        let engines = load_engines(dir.path()).unwrap().engines;
        assert!(engines["fish"].source_dir.is_none());
        assert!(engines["fish"].def.is_binary_only());

        // A define knob on it: the file is skipped, naming the file and the field.
        std::fs::write(
            dir.path().join("fish.toml"),
            "name = \"fish\"\nprotocol = \"uci\"\nbinary = \"/nonexistent/fish\"\n\
             [[knobs]]\nname = \"HASH\"\nmin = 1\nmax = 64\ndefault = 16\n",
        )
        .unwrap();
        let loaded = load_engines(dir.path()).unwrap();
        assert!(loaded.engines.is_empty());
        let skipped = &loaded.skipped[0];
        assert!(skipped.path.ends_with("fish.toml"), "{skipped:?}");
        assert!(skipped.reason.contains("knobs[0].kind"), "{skipped:?}");
    }

    const FISH: &str = "name = \"fish\"\nprotocol = \"uci\"\nbinary = \"/nonexistent/fish\"\n";

    fn source_engine(name: &str, path: &str) -> String {
        format!(
            "name = \"{name}\"\nprotocol = \"uci\"\nbinary = \"e\"\n[source]\npath = \"{path}\"\n\
             [build]\ncommand = [\"make\", \"OUT={{out}}\"]\n"
        )
    }

    #[test]
    fn bad_and_stray_files_are_skipped_and_the_good_ones_load() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write("a_broken.toml", "name = \"broken\"\nprotocol = [unclosed\n");
        write("b_fish.toml", FISH);
        write("c_same_name.toml", FISH);
        write(
            "d_sweep.toml",
            "name = \"a sweep\"\nengine = \"fish\"\nknob = \"Hash\"\nvalues = [1]\n",
        );
        write("e_no_source.toml", &source_engine("gone", "does/not/exist"));
        let loaded = load_engines(dir.path()).unwrap();
        assert_eq!(loaded.engines.keys().collect::<Vec<_>>(), ["fish"]);
        let reasons: Vec<(String, String)> = loaded
            .skipped
            .iter()
            .map(|s| {
                let file = s.path.file_name().unwrap().to_string_lossy().into_owned();
                (file, s.reason.clone())
            })
            .collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert_eq!(reasons[0].0, "a_broken.toml");
        assert_eq!(reasons[1].0, "c_same_name.toml");
        assert!(reasons[1].1.contains("already defined"), "{reasons:?}");
        assert_eq!(reasons[2].0, "d_sweep.toml");
        assert!(reasons[2].1.contains("engine"), "{reasons:?}");
        assert_eq!(reasons[3].0, "e_no_source.toml");
        assert!(reasons[3].1.starts_with("source.path"), "{reasons:?}");
    }

    #[test]
    fn definitions_sent_over_the_api_need_an_absolute_existing_source() {
        let origin = || EngineOrigin::File { file: "x".into() };
        let e = Engine::parse(&source_engine("e", "engines/minnow"), None, origin()).unwrap_err();
        assert_eq!(e.field, "source.path", "{e}");
        assert!(e.problem.contains("absolute"), "{e}");
        let e = Engine::parse(&source_engine("e", "/nonexistent/src"), None, origin()).unwrap_err();
        assert_eq!(e.field, "source.path", "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e =
            Engine::parse(&source_engine("e", file.to_str().unwrap()), None, origin()).unwrap_err();
        assert!(e.problem.contains("not a directory"), "{e}");
        let path = dir.path().to_str().unwrap();
        let engine = Engine::parse(&source_engine("e", path), None, origin()).unwrap();
        assert_eq!(
            engine.source_dir.unwrap(),
            dir.path().canonicalize().unwrap()
        );
    }

    #[test]
    fn a_stored_definition_wins_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fish.toml"), FISH).unwrap();
        let mut engines = load_engines(dir.path()).unwrap().engines;
        let stored = |name: &str, definition: String| StoredEngine {
            name: name.into(),
            definition,
            updated_at: chrono::Utc::now(),
            updated_by: "root".into(),
        };
        let rows = [
            stored("fish", FISH.replace("/nonexistent/fish", "/opt/fish")),
            stored("shark", FISH.replace("fish", "shark")),
            // No longer valid: skipped, nothing else changes.
            stored("eel", source_engine("eel", "/nonexistent/eel")),
        ];
        merge_stored(&mut engines, &rows);
        assert_eq!(engines.keys().collect::<Vec<_>>(), ["fish", "shark"]);
        assert_eq!(engines["fish"].def.binary, "/opt/fish");
        assert!(matches!(
            &engines["fish"].origin,
            EngineOrigin::Database { updated_by, .. } if updated_by == "root"
        ));
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
