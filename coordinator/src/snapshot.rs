//! Source snapshots: a deterministic, content-addressed tar.gz of an engine's source tree.
//!
//! The format, its rules and its bounds are the `sweep-archive` crate's, shared with the
//! worker: this module reads directories and `git archive` output into a [`Tree`] and has the
//! crate pack it. Determinism (entries sorted by path components, zeroed times and owners,
//! normalised modes) means the same tree always hashes the same, so unchanged sources share
//! one snapshot and one build cache entry on every worker. A tree is read from a directory
//! ([`snapshot_dir`], on the coordinator for a registered engine or in the CLI for `--source
//! DIR`) or from a `git archive` ([`repack`]). Uploaded archives are checked by
//! [`verify_archive`] before they are stored.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sweep_archive::Compression;
use sweep_domain::engine::SourceDef;
use sweep_domain::source::IgnoreRules;

pub use sweep_archive::{pack, read_files, ArchiveError, Node, Snapshot, Tree};

/// Largest upload body (a compressed snapshot) accepted; the files a snapshot holds may add
/// up to [`sweep_archive::MAX_FILE_BYTES`], the same number.
pub const MAX_SNAPSHOT_BYTES: usize = sweep_archive::MAX_COMPRESSED_BYTES;

/// Most entries (files and directories) in one snapshot.
pub const MAX_SNAPSHOT_ENTRIES: usize = sweep_archive::MAX_ENTRIES;

/// What a snapshot leaves out.
#[derive(Debug, Clone, Default)]
pub struct SnapshotRules {
    /// Names (files or directories, at any depth) left out, e.g. build outputs.
    pub exclude: Vec<String>,
    /// Keep names starting with `.` (left out unless set: `.git`, `.env`).
    pub include_dotfiles: bool,
    /// Honour the `.gitignore` at the tree's root (see [`IgnoreRules`] for what is
    /// supported). Set for a submitter's working copy (`--source DIR`).
    pub gitignore: bool,
}

impl SnapshotRules {
    /// The rules of an engine definition's `[source]`.
    pub fn of(source: &SourceDef, gitignore: bool) -> Self {
        Self {
            exclude: source.exclude.clone(),
            include_dotfiles: source.include_dotfiles,
            gitignore,
        }
    }

    /// Is an entry named `name` left out by name (dotfiles, `exclude`)?
    fn leaves_out(&self, name: &str) -> bool {
        (!self.include_dotfiles && name.starts_with('.')) || self.exclude.iter().any(|e| e == name)
    }
}

/// Archives `dir` by `rules`. Symlinks are followed when their target stays inside the tree
/// and refused, naming the link, when it does not (or when it is broken or makes a loop).
pub fn snapshot_dir(dir: &Path, rules: &SnapshotRules) -> anyhow::Result<Snapshot> {
    let root = dir
        .canonicalize()
        .with_context(|| format!("source directory {}", dir.display()))?;
    let ignore = if rules.gitignore {
        match std::fs::read_to_string(root.join(".gitignore")) {
            Ok(text) => IgnoreRules::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => IgnoreRules::default(),
            Err(e) => return Err(e).context(format!("reading {}/.gitignore", dir.display())),
        }
    } else {
        IgnoreRules::default()
    };
    let mut walk = Walk {
        root: &root,
        rules,
        ignore,
        tree: Tree::new(),
        total: 0,
        stack: vec![root.clone()],
    };
    walk.dir(&root, &[])?;
    Ok(pack(&walk.tree)?)
}

struct Walk<'a> {
    root: &'a Path,
    rules: &'a SnapshotRules,
    ignore: IgnoreRules,
    tree: Tree,
    total: u64,
    /// Canonical directories being walked (a symlink to one of them is a loop).
    stack: Vec<PathBuf>,
}

impl Walk<'_> {
    /// Adds the entries of directory `real` (at `rel` in the tree), in name order.
    fn dir(&mut self, real: &Path, rel: &[String]) -> anyhow::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(real)
            .with_context(|| format!("reading {}", real.display()))?
            .collect::<Result<_, _>>()
            .with_context(|| format!("reading {}", real.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                bail!(
                    "{}: a file name that is not UTF-8: {name:?}",
                    real.display()
                );
            };
            if self.rules.leaves_out(name) {
                continue;
            }
            let mut path = rel.to_vec();
            path.push(name.to_string());
            self.entry(real.join(name), path)?;
        }
        Ok(())
    }

    /// Adds the entry at `target` (at `path` in the tree), a symlink followed, unless the
    /// `.gitignore` leaves it out.
    fn entry(&mut self, target: PathBuf, path: Vec<String>) -> anyhow::Result<()> {
        let shown = path.join("/");
        let (target, meta) = self.followed(target, &shown)?;
        if self.rules.gitignore && self.ignore.ignores(&shown, meta.is_dir()) {
            return Ok(());
        }
        if self.tree.len() >= MAX_SNAPSHOT_ENTRIES {
            bail!("source has more than {MAX_SNAPSHOT_ENTRIES} files and directories");
        }
        if meta.is_dir() {
            self.subdir(&target, path, &shown)
        } else if meta.is_file() {
            self.file(&target, path, &shown, &meta)
        } else {
            bail!("{shown} is neither a regular file nor a directory");
        }
    }

    /// `target` and its metadata; a symlink resolved to what it points to, refused when that
    /// is outside the tree (or it cannot be followed).
    fn followed(
        &self,
        target: PathBuf,
        shown: &str,
    ) -> anyhow::Result<(PathBuf, std::fs::Metadata)> {
        let meta =
            std::fs::symlink_metadata(&target).with_context(|| format!("reading {shown}"))?;
        if !meta.file_type().is_symlink() {
            return Ok((target, meta));
        }
        let resolved = target
            .canonicalize()
            .map_err(|e| anyhow::anyhow!("{shown} is a symlink that cannot be followed: {e}"))?;
        if !resolved.starts_with(self.root) {
            bail!(
                "{shown} is a symlink to {}, outside the source tree; snapshots follow only symlinks that stay inside it",
                resolved.display()
            );
        }
        let meta = std::fs::metadata(&resolved).with_context(|| format!("reading {shown}"))?;
        Ok((resolved, meta))
    }

    /// Adds directory `target` and walks it, refusing a loop.
    fn subdir(&mut self, target: &Path, path: Vec<String>, shown: &str) -> anyhow::Result<()> {
        let canonical = target
            .canonicalize()
            .with_context(|| format!("reading {shown}"))?;
        if self.stack.contains(&canonical) {
            bail!("{shown} is a symlink to a directory that contains it (a loop)");
        }
        self.tree.insert(path.clone(), Node::Dir);
        self.stack.push(canonical);
        self.dir(target, &path)?;
        self.stack.pop();
        Ok(())
    }

    /// Adds regular file `target`, within the bound on the files' total size.
    fn file(
        &mut self,
        target: &Path,
        path: Vec<String>,
        shown: &str,
        meta: &std::fs::Metadata,
    ) -> anyhow::Result<()> {
        let data = std::fs::read(target).with_context(|| format!("reading {shown}"))?;
        self.total += data.len() as u64;
        if self.total > sweep_archive::MAX_FILE_BYTES {
            bail!(
                "source is larger than {} bytes",
                sweep_archive::MAX_FILE_BYTES
            );
        }
        use std::os::unix::fs::PermissionsExt;
        let exec = meta.permissions().mode() & 0o111 != 0;
        self.tree.insert(path, Node::File { data, exec });
        Ok(())
    }
}

/// Checks an uploaded snapshot against every rule and bound of the format (see
/// `sweep-archive`): a gzip'ed tar of regular files and directories with safe paths.
pub fn verify_archive(archive: &[u8]) -> Result<(), ArchiveError> {
    sweep_archive::verify(archive)
}

/// Re-packs a plain tar (from `git archive`) deterministically by `rules` (names only: a
/// commit holds no ignored files), so the same commit always gives the same sha256. It is
/// read under the same rules as an upload: a commit with a symlink is refused, naming it.
pub fn repack(tar_bytes: &[u8], rules: &SnapshotRules) -> anyhow::Result<Snapshot> {
    let read = sweep_archive::read_tree(tar_bytes, Compression::None)
        .context("reading the git archive")?;
    let mut tree = Tree::new();
    for (path, node) in read {
        if path.iter().any(|c| rules.leaves_out(c)) {
            continue;
        }
        // Every parent is a directory entry, as a walk of the checkout would make.
        for end in 1..path.len() {
            tree.entry(path[..end].to_vec()).or_insert(Node::Dir);
        }
        tree.insert(path, node);
    }
    pack(&tree).context("packing the git archive")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(exclude: &[&str]) -> SnapshotRules {
        SnapshotRules {
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn same_tree_same_hash_and_excludes_apply() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.c"), "int main(){}").unwrap();
        std::fs::write(dir.path().join("sub/b.h"), "#define X 1").unwrap();
        let one = snapshot_dir(dir.path(), &rules(&[])).unwrap();
        let two = snapshot_dir(dir.path(), &rules(&[])).unwrap();
        assert_eq!(one.sha256, two.sha256);
        std::fs::write(dir.path().join("minnow"), "binary").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".env"), "SECRET=1").unwrap();
        let three = snapshot_dir(dir.path(), &rules(&["minnow"])).unwrap();
        assert_eq!(one.sha256, three.sha256, "dotfiles are left out too");
        std::fs::write(dir.path().join("a.c"), "int main(){return 1;}").unwrap();
        assert_ne!(
            one.sha256,
            snapshot_dir(dir.path(), &rules(&["minnow"]))
                .unwrap()
                .sha256
        );
        verify_archive(&one.archive).unwrap();
    }

    #[test]
    fn gitignore_applies_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.c"), "x").unwrap();
        let clean = snapshot_dir(dir.path(), &rules(&[])).unwrap();
        std::fs::write(dir.path().join(".gitignore"), "*.o\nout/\n").unwrap();
        std::fs::write(dir.path().join("a.o"), "obj").unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/x"), "obj").unwrap();
        let honoured = SnapshotRules {
            gitignore: true,
            ..Default::default()
        };
        assert_eq!(
            snapshot_dir(dir.path(), &honoured).unwrap().sha256,
            clean.sha256
        );
        assert_ne!(
            snapshot_dir(dir.path(), &rules(&[])).unwrap().sha256,
            clean.sha256
        );
    }

    #[test]
    fn reads_back_the_files_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.c"), "int main(){}").unwrap();
        std::fs::write(dir.path().join("sub/b.h"), "#define X 1").unwrap();
        std::fs::write(dir.path().join("big.h"), "x".repeat(100)).unwrap();
        let snap = snapshot_dir(dir.path(), &SnapshotRules::default()).unwrap();
        let files = read_files(&snap.archive, |path, size| {
            path.ends_with(".h") && size < 100
        })
        .unwrap();
        assert_eq!(files, [("sub/b.h".to_string(), b"#define X 1".to_vec())]);
        assert!(read_files(b"not gzip", |_, _| true).is_err());
    }

    #[test]
    fn symlinks_inside_are_followed_outside_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.h"), "#define A 1").unwrap();
        std::os::unix::fs::symlink("src/a.h", dir.path().join("link.h")).unwrap();
        std::os::unix::fs::symlink("src", dir.path().join("lib")).unwrap();
        let snap = snapshot_dir(dir.path(), &rules(&[])).unwrap();
        let tree = sweep_archive::read_tree(&snap.archive, Compression::Gzip).unwrap();
        assert!(tree.contains_key(&vec!["link.h".to_string()]));
        assert!(tree.contains_key(&vec!["lib".to_string(), "a.h".to_string()]));

        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("src/evil")).unwrap();
        let err = format!("{:#}", snapshot_dir(dir.path(), &rules(&[])).unwrap_err());
        assert!(err.contains("lib/evil is a symlink"), "{err}");
        assert!(err.contains("outside the source tree"), "{err}");
        std::fs::remove_file(dir.path().join("src/evil")).unwrap();
        std::os::unix::fs::symlink("..", dir.path().join("src/up")).unwrap();
        let err = format!("{:#}", snapshot_dir(dir.path(), &rules(&[])).unwrap_err());
        assert!(err.contains("loop"), "{err}");
    }

    #[test]
    fn verify_refuses_dotdot_and_links_repack_is_deterministic() {
        let mut plain = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(1);
        h.set_mode(0o644);
        plain.append_data(&mut h, "d/f.c", &b"x"[..]).unwrap();
        let plain = plain.into_inner().unwrap();
        let one = repack(&plain, &rules(&[])).unwrap();
        assert_eq!(one.sha256, repack(&plain, &rules(&[])).unwrap().sha256);
        verify_archive(&one.archive).unwrap();

        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut evil = tar::Builder::new(gz);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_link_name("/etc/passwd").unwrap();
        evil.append_data(&mut h, "link", std::io::empty()).unwrap();
        let evil = evil.into_inner().unwrap().finish().unwrap();
        let err = format!("{:#}", verify_archive(&evil).unwrap_err());
        assert!(
            err.contains("entry 1 (path link): symbolic links are not allowed"),
            "{err}"
        );
        assert!(verify_archive(b"not gzip").is_err());
    }
}
