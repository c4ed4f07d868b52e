//! Path flags made absolute as they are parsed, against the directory `sweep` was started in.
//!
//! A path is used long after it was given and not only by this process: a build runs
//! `make -C {source}` from inside the cache, where a relative `--cache-dir` names nothing.
//! Made absolute once, at start, a path means the same wherever and whenever it is used.
//! Clap runs these parsers on defaults and environment values too.

use std::io;
use std::path::PathBuf;

use clap::builder::{PathBufValueParser, TypedValueParser};

/// Value parser of a path flag: the path made absolute against the current directory. It need
/// not exist; `..` and symlinks are kept (only `.` components and repeated `/` go).
pub fn absolute_path() -> impl TypedValueParser<Value = PathBuf> {
    PathBufValueParser::new().try_map(std::path::absolute)
}

/// Value parser of `--database`: a SQLite file path is made absolute; a URL (`postgres://...`,
/// `sqlite:...`) and SQLite's `:memory:` are kept as given.
pub fn database(value: &str) -> io::Result<String> {
    if value.contains("://") || value.starts_with("sqlite:") || value == ":memory:" {
        return Ok(value.to_string());
    }
    let path = std::path::absolute(value)?;
    // The value is a String: under a current directory whose name is not UTF-8 the path stays
    // as given, which still works for the process itself (it never changes directory).
    Ok(path
        .into_os_string()
        .into_string()
        .unwrap_or_else(|_| value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_paths_become_absolute_and_urls_stay() {
        let here = std::env::current_dir().unwrap();
        let db = database("./sweep.db").unwrap();
        assert_eq!(PathBuf::from(db), here.join("sweep.db"));
        assert_eq!(database("/data/sweep.db").unwrap(), "/data/sweep.db");
        for url in [
            "postgres://sweep:secret@db/sweep",
            "postgresql://db/sweep",
            "sqlite:./sweep.db",
            "sqlite://sweep.db?mode=rwc",
            ":memory:",
        ] {
            assert_eq!(database(url).unwrap(), url);
        }
    }

    #[test]
    fn path_flags_become_absolute() {
        let here = std::env::current_dir().unwrap();
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("dir")
                .long("dir")
                .value_parser(absolute_path()),
        );
        let dir = |arg: &str| {
            cmd.clone()
                .get_matches_from(["t", "--dir", arg])
                .get_one::<PathBuf>("dir")
                .cloned()
                .unwrap()
        };
        assert_eq!(dir("./cache"), here.join("cache"));
        assert_eq!(dir("../x"), here.join("../x"));
        assert_eq!(dir("/abs/dir"), PathBuf::from("/abs/dir"));
    }
}

/// One `--variant-source NAME=DIR`: the variant and its directory (made absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantDir {
    /// The variant's name, as in the config's `[[variants]]`.
    pub name: String,
    /// The directory its code is snapshotted from.
    pub dir: PathBuf,
}

/// Value parser of `--variant-source NAME=DIR`.
pub fn variant_dir(value: &str) -> Result<VariantDir, String> {
    let Some((name, dir)) = value.split_once('=') else {
        return Err(format!(
            "`{value}` is not NAME=DIR (a variant of the config's [[variants]] and the directory of its code)"
        ));
    };
    if name.is_empty() || dir.is_empty() {
        return Err(format!(
            "`{value}`: both NAME and DIR are needed (NAME=DIR)"
        ));
    }
    let dir = std::path::absolute(dir).map_err(|e| format!("{dir}: {e}"))?;
    Ok(VariantDir {
        name: name.to_string(),
        dir,
    })
}
