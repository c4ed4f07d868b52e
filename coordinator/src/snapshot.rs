//! Source snapshots: a deterministic, content-addressed tar.gz of an engine's source tree.
//!
//! Determinism (entries sorted by path components, zeroed times and owners, normalised modes)
//! means the same tree always hashes the same, so unchanged sources share one snapshot and
//! one build cache entry on every worker. Every snapshot is made by [`pack`] from a [`Tree`],
//! whether the tree was read from a directory ([`snapshot_dir`], on the coordinator for a
//! registered engine or in the CLI for `--source DIR`) or from a `git archive`
//! ([`repack`]). Uploaded archives are checked by [`verify_archive`] before they are stored.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};
use sweep_domain::engine::SourceDef;
use sweep_domain::source::IgnoreRules;

/// Largest source tree (sum of file sizes, and of an upload's compressed body) accepted.
pub const MAX_SNAPSHOT_BYTES: usize = 64 * 1024 * 1024;

/// Most entries (files and directories) in one snapshot.
pub const MAX_SNAPSHOT_ENTRIES: usize = 100_000;

/// An archived source tree.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// sha256 of `archive`, hex.
    pub sha256: String,
    /// The gzip'ed tar.
    pub archive: Vec<u8>,
}

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

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A regular file: its bytes and whether it is executable.
    File {
        /// Contents.
        data: Vec<u8>,
        /// Any execute bit was set.
        exec: bool,
    },
}

/// A source tree by path components: the map's order (component by component) is the
/// archive's order, the same as a depth-first walk with sorted siblings.
pub type Tree = BTreeMap<Vec<String>, Node>;

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
    pack(&walk.tree)
}

struct Walk<'a> {
    root: &'a Path,
    rules: &'a SnapshotRules,
    ignore: IgnoreRules,
    tree: Tree,
    total: usize,
    /// Canonical directories being walked (a symlink to one of them is a loop).
    stack: Vec<PathBuf>,
}

impl Walk<'_> {
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
            let shown = path.join("/");
            let mut target = real.join(name);
            let mut meta =
                std::fs::symlink_metadata(&target).with_context(|| format!("reading {shown}"))?;
            if meta.file_type().is_symlink() {
                let resolved = target.canonicalize().map_err(|e| {
                    anyhow::anyhow!("{shown} is a symlink that cannot be followed: {e}")
                })?;
                if !resolved.starts_with(self.root) {
                    bail!(
                        "{shown} is a symlink to {}, outside the source tree; snapshots follow only symlinks that stay inside it",
                        resolved.display()
                    );
                }
                meta = std::fs::metadata(&resolved).with_context(|| format!("reading {shown}"))?;
                target = resolved;
            }
            if self.rules.gitignore && self.ignore.ignores(&shown, meta.is_dir()) {
                continue;
            }
            if self.tree.len() >= MAX_SNAPSHOT_ENTRIES {
                bail!("source has more than {MAX_SNAPSHOT_ENTRIES} files and directories");
            }
            if meta.is_dir() {
                let canonical = target
                    .canonicalize()
                    .with_context(|| format!("reading {shown}"))?;
                if self.stack.contains(&canonical) {
                    bail!("{shown} is a symlink to a directory that contains it (a loop)");
                }
                self.tree.insert(path.clone(), Node::Dir);
                self.stack.push(canonical);
                self.dir(&target, &path)?;
                self.stack.pop();
            } else if meta.is_file() {
                let data = std::fs::read(&target).with_context(|| format!("reading {shown}"))?;
                self.total += data.len();
                if self.total > MAX_SNAPSHOT_BYTES {
                    bail!("source is larger than {MAX_SNAPSHOT_BYTES} bytes");
                }
                use std::os::unix::fs::PermissionsExt;
                let exec = meta.permissions().mode() & 0o111 != 0;
                self.tree.insert(path, Node::File { data, exec });
            } else {
                bail!("{shown} is neither a regular file nor a directory");
            }
        }
        Ok(())
    }
}

/// The deterministic archive of `tree`.
pub fn pack(tree: &Tree) -> anyhow::Result<Snapshot> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, node) in tree {
        let path = path.join("/");
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        match node {
            Node::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder
                    .append_data(&mut header, &path, std::io::empty())
                    .with_context(|| format!("archiving {path}"))?;
            }
            Node::File { data, exec } => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(if *exec { 0o755 } else { 0o644 });
                header.set_size(data.len() as u64);
                builder
                    .append_data(&mut header, &path, data.as_slice())
                    .with_context(|| format!("archiving {path}"))?;
            }
        }
    }
    let archive = builder
        .into_inner()
        .context("finishing tar")?
        .finish()
        .context("finishing gzip")?;
    Ok(Snapshot {
        sha256: hex::encode(Sha256::digest(&archive)),
        archive,
    })
}

/// Reads a tar (`gzip`: gzip'ed) into a tree. Only regular files and directories with
/// relative paths free of `..` are accepted (plus, from `git archive`, its global pax
/// header, which is skipped); the sum of file sizes is bounded by [`MAX_SNAPSHOT_BYTES`].
fn read_tar(bytes: &[u8], gzip: bool) -> anyhow::Result<Tree> {
    let reader: Box<dyn Read + '_> = if gzip {
        Box::new(GzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    let mut archive = tar::Archive::new(reader);
    let mut tree = Tree::new();
    let mut total = 0usize;
    for entry in archive.entries().context("not a tar archive")? {
        let mut entry = entry.context("not a valid tar archive")?;
        let kind = entry.header().entry_type();
        if !gzip && kind == tar::EntryType::XGlobalHeader {
            continue;
        }
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8(raw).context("a path in the archive is not UTF-8")?;
        if shown.starts_with('/') {
            bail!("{shown}: absolute paths are not allowed");
        }
        let path: Vec<String> = shown
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect();
        if path.is_empty() || path.iter().any(|c| c == "..") {
            bail!("{shown}: paths must be relative and free of `..`");
        }
        if tree.len() >= MAX_SNAPSHOT_ENTRIES {
            bail!("more than {MAX_SNAPSHOT_ENTRIES} entries");
        }
        match kind {
            tar::EntryType::Directory => {
                tree.insert(path, Node::Dir);
            }
            tar::EntryType::Regular => {
                let mut data = Vec::new();
                let room = (MAX_SNAPSHOT_BYTES - total) as u64 + 1;
                entry
                    .by_ref()
                    .take(room)
                    .read_to_end(&mut data)
                    .with_context(|| format!("reading {shown}"))?;
                total += data.len();
                if total > MAX_SNAPSHOT_BYTES {
                    bail!("the files add up to more than {MAX_SNAPSHOT_BYTES} bytes");
                }
                let exec = entry.header().mode().unwrap_or(0o644) & 0o111 != 0;
                tree.insert(path, Node::File { data, exec });
            }
            other => {
                bail!("{shown}: only regular files and directories are allowed, not {other:?}")
            }
        }
    }
    Ok(tree)
}

/// Checks an uploaded snapshot: a valid gzip'ed tar of regular files and directories only,
/// with relative paths free of `..`, within the size bounds.
pub fn verify_archive(archive: &[u8]) -> anyhow::Result<()> {
    read_tar(archive, true).map(|_| ())
}

/// Re-packs a plain tar (from `git archive`) deterministically by `rules` (names only: a
/// commit holds no ignored files), so the same commit always gives the same sha256.
pub fn repack(tar_bytes: &[u8], rules: &SnapshotRules) -> anyhow::Result<Snapshot> {
    let mut tree = Tree::new();
    for (path, node) in read_tar(tar_bytes, false)? {
        if path.iter().any(|c| rules.leaves_out(c)) {
            continue;
        }
        // Every parent is a directory entry, as a walk of the checkout would make.
        for end in 1..path.len() {
            tree.entry(path[..end].to_vec()).or_insert(Node::Dir);
        }
        tree.insert(path, node);
    }
    pack(&tree)
}

/// The regular files of a snapshot archive that `wants` (given each file's path and size)
/// asks for, as (path, contents), in archive order. Files it does not want are skipped
/// without being kept; an archive whose files add up to more than [`MAX_SNAPSHOT_BYTES`] is
/// refused, as [`snapshot_dir`] refuses such a tree.
pub fn read_files(
    archive: &[u8],
    wants: impl Fn(&str, u64) -> bool,
) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut out = Vec::new();
    let mut total = 0u64;
    for entry in tar.entries().context("reading the source archive")? {
        let mut entry = entry.context("reading the source archive")?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let size = entry.size();
        total += size;
        if total > MAX_SNAPSHOT_BYTES as u64 {
            bail!("source archive holds more than {MAX_SNAPSHOT_BYTES} bytes");
        }
        let path = entry.path().context("a file name in the source archive")?;
        let Some(path) = path.to_str().map(str::to_string) else {
            bail!("non-UTF-8 file name {:?} in the source archive", path);
        };
        if !wants(&path, size) {
            continue;
        }
        let mut data = Vec::with_capacity(size as usize);
        std::io::Read::read_to_end(&mut entry, &mut data)
            .with_context(|| format!("reading {path} from the source archive"))?;
        out.push((path, data));
    }
    Ok(out)
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
        let tree = read_tar(&snap.archive, true).unwrap();
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

        let mut evil = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_link_name("/etc/passwd").unwrap();
        evil.append_data(&mut h, "link", std::io::empty()).unwrap();
        let evil = evil.into_inner().unwrap().finish().unwrap();
        let err = format!("{:#}", verify_archive(&evil).unwrap_err());
        assert!(err.contains("link: only regular files"), "{err}");
        assert!(verify_archive(b"not gzip").is_err());
    }
}
