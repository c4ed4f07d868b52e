//! Source snapshots: a deterministic, content-addressed tar.gz of an engine's source directory.
//!
//! Determinism (sorted entries, zeroed times and owners, normalised modes) means the same
//! source always hashes the same, so unchanged sources share one snapshot and one build cache
//! entry on every worker.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context};
use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};

/// Largest source tree the coordinator will archive.
pub const MAX_SNAPSHOT_BYTES: usize = 64 * 1024 * 1024;

/// An archived source tree.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// sha256 of `archive`, hex.
    pub sha256: String,
    /// The gzip'ed tar.
    pub archive: Vec<u8>,
}

/// Archives `dir`, leaving out entries whose file name is in `exclude`. Symlinks are refused:
/// they could point outside the tree, and a worker would refuse them anyway.
pub fn snapshot_dir(dir: &Path, exclude: &[String]) -> anyhow::Result<Snapshot> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let mut total = 0usize;
    add_dir(&mut builder, dir, Path::new(""), exclude, &mut total)
        .with_context(|| format!("archiving {}", dir.display()))?;
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

fn add_dir<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    rel: &Path,
    exclude: &[String],
    total: &mut usize,
) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(rel))
        .with_context(|| format!("reading {}", root.join(rel).display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let Some(name_str) = name.to_str() else {
            bail!("non-UTF-8 file name {:?}", name);
        };
        if exclude.iter().any(|e| e == name_str) {
            continue;
        }
        let path = rel.join(&name);
        let meta = std::fs::symlink_metadata(root.join(&path))?;
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if meta.file_type().is_symlink() {
            bail!(
                "{} is a symlink; snapshots hold only files and directories",
                path.display()
            );
        } else if meta.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder.append_data(&mut header, &path, std::io::empty())?;
            add_dir(builder, root, &path, exclude, total)?;
        } else if meta.is_file() {
            let data = std::fs::read(root.join(&path))?;
            *total += data.len();
            if *total > MAX_SNAPSHOT_BYTES {
                bail!("source is larger than {MAX_SNAPSHOT_BYTES} bytes");
            }
            use std::os::unix::fs::PermissionsExt;
            let exec = meta.permissions().mode() & 0o111 != 0;
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(if exec { 0o755 } else { 0o644 });
            header.set_size(data.len() as u64);
            builder.append_data(&mut header, &path, data.as_slice())?;
        }
    }
    Ok(())
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

    #[test]
    fn same_tree_same_hash_and_excludes_apply() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.c"), "int main(){}").unwrap();
        std::fs::write(dir.path().join("sub/b.h"), "#define X 1").unwrap();
        let one = snapshot_dir(dir.path(), &[]).unwrap();
        let two = snapshot_dir(dir.path(), &[]).unwrap();
        assert_eq!(one.sha256, two.sha256);
        std::fs::write(dir.path().join("minnow"), "binary").unwrap();
        let three = snapshot_dir(dir.path(), &["minnow".into()]).unwrap();
        assert_eq!(one.sha256, three.sha256);
        std::fs::write(dir.path().join("a.c"), "int main(){return 1;}").unwrap();
        assert_ne!(
            one.sha256,
            snapshot_dir(dir.path(), &["minnow".into()]).unwrap().sha256
        );
    }

    #[test]
    fn reads_back_the_files_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("a.c"), "int main(){}").unwrap();
        std::fs::write(dir.path().join("sub/b.h"), "#define X 1").unwrap();
        std::fs::write(dir.path().join("big.h"), "x".repeat(100)).unwrap();
        let snap = snapshot_dir(dir.path(), &[]).unwrap();
        let files = read_files(&snap.archive, |path, size| {
            path.ends_with(".h") && size < 100
        })
        .unwrap();
        assert_eq!(files, [("sub/b.h".to_string(), b"#define X 1".to_vec())]);
        assert!(read_files(b"not gzip", |_, _| true).is_err());
    }

    #[test]
    fn refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("evil")).unwrap();
        let err = snapshot_dir(dir.path(), &[]).unwrap_err();
        assert!(format!("{err:#}").contains("symlink"));
    }
}
