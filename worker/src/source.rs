//! Engine source snapshots: download by sha256, verify, unpack safely, cache on disk.
//!
//! A snapshot lands in `cache_dir/sources/<sha256>/` only complete: it is unpacked into a
//! temporary sibling directory and renamed into place, so a worker killed mid-way never leaves
//! a half-unpacked tree that a later run would trust.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::client::{with_retry, ClientError, CoordinatorClient};

/// Most bytes an archive may unpack to, against decompression bombs.
const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// Most entries an archive may hold.
const MAX_ENTRIES: usize = 100_000;

/// Why a source snapshot could not be made available.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The hash is not 64 lowercase hex digits (it names a directory, so it is checked).
    #[error("invalid source sha256 `{0}`")]
    BadHash(String),
    /// The download failed for a reason retrying did not fix.
    #[error("downloading source failed: {0}")]
    Download(#[from] ClientError),
    /// The bytes received do not hash to the requested value.
    #[error("source snapshot hash mismatch: expected {expected}, got {actual}")]
    HashMismatch {
        /// Requested hash.
        expected: String,
        /// Hash of the bytes received.
        actual: String,
    },
    /// An entry that could write outside the target or is not a plain file or directory.
    #[error("unsafe archive entry `{path}`: {reason}")]
    UnsafeEntry {
        /// Path as stored in the archive.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The archive is not a readable gzip'ed tar, or exceeds the size limits.
    #[error("bad source archive: {0}")]
    Archive(String),
    /// A local file system operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> SourceError {
    let context = context.into();
    move |source| SourceError::Io { context, source }
}

/// Is `s` a sha256 in lowercase hex?
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks that `bytes` hash to `expected`.
pub fn verify_sha256(bytes: &[u8], expected: &str) -> Result<(), SourceError> {
    let actual = hex::encode(Sha256::digest(bytes));
    if actual != expected {
        return Err(SourceError::HashMismatch {
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Unpacks a gzip'ed tar into `dest` (which must exist), accepting only regular files and
/// directories with relative paths free of `..`. On error, whatever was written is left inside
/// `dest` only; the caller discards it.
pub fn unpack_tar_gz(bytes: &[u8], dest: &Path) -> Result<(), SourceError> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let entries = archive
        .entries()
        .map_err(|e| SourceError::Archive(e.to_string()))?;
    let mut total: u64 = 0;
    for (n, entry) in entries.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(SourceError::Archive(format!(
                "more than {MAX_ENTRIES} entries"
            )));
        }
        let mut entry = entry.map_err(|e| SourceError::Archive(e.to_string()))?;
        let raw = entry
            .path()
            .map_err(|e| SourceError::Archive(e.to_string()))?
            .into_owned();
        let shown = raw.display().to_string();
        let unsafe_entry = |reason: &str| SourceError::UnsafeEntry {
            path: shown.clone(),
            reason: reason.to_string(),
        };
        let kind = entry.header().entry_type();
        // Pax headers carry metadata for the next entry (the tar crate applies them); skip.
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let rel = relative_path(&raw).map_err(unsafe_entry)?;
        let target = dest.join(&rel);
        match kind {
            tar::EntryType::Directory => {
                fs::create_dir_all(&target).map_err(io_err(format!("creating {shown}")))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if rel.as_os_str().is_empty() {
                    return Err(unsafe_entry("file without a name"));
                }
                total = total.saturating_add(entry.size());
                if total > MAX_UNPACKED_BYTES {
                    return Err(SourceError::Archive(format!(
                        "unpacks to more than {MAX_UNPACKED_BYTES} bytes"
                    )));
                }
                write_file(&mut entry, &target, &shown)?;
            }
            tar::EntryType::Symlink => return Err(unsafe_entry("symbolic links are not allowed")),
            tar::EntryType::Link => return Err(unsafe_entry("hard links are not allowed")),
            other => {
                return Err(unsafe_entry(&format!(
                    "entry type {other:?} is not a regular file or directory"
                )))
            }
        }
    }
    Ok(())
}

/// `raw` as a path inside the destination: relative, without `..`; `Err` says why not.
fn relative_path(raw: &Path) -> Result<PathBuf, &'static str> {
    let mut rel = PathBuf::new();
    for c in raw.components() {
        match c {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("contains `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("absolute path"),
        }
    }
    Ok(rel)
}

/// Writes the regular file `entry` (`shown` in messages) to `target`, creating its
/// directory.
fn write_file<R: io::Read>(
    entry: &mut tar::Entry<'_, R>,
    target: &Path,
    shown: &str,
) -> Result<(), SourceError> {
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(io_err(format!("creating dir of {shown}")))?;
    }
    let mut file = fs::File::create(target).map_err(io_err(format!("creating {shown}")))?;
    let size = entry.size();
    io::copy(&mut entry.by_ref().take(size), &mut file)
        .map_err(io_err(format!("writing {shown}")))?;
    // Keep the executable bit (scripts in the source) but never setuid/setgid, and keep the
    // owner able to delete the cache.
    let mode = entry.header().mode().unwrap_or(0o644) & 0o755 | 0o600;
    fs::set_permissions(target, fs::Permissions::from_mode(mode))
        .map_err(io_err(format!("chmod {shown}")))
}

/// The on-disk cache of unpacked snapshots, `cache_dir/sources/<sha256>/`.
#[derive(Debug)]
pub struct SourceStore {
    root: PathBuf,
    // Slots of one worker asking for the same snapshot wait for one download.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl SourceStore {
    /// A store under `cache_dir/sources`.
    pub fn new(cache_dir: &Path) -> Self {
        SourceStore {
            root: cache_dir.join("sources"),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// Where the snapshot `sha256` is (or will be) unpacked.
    pub fn path_for(&self, sha256: &str) -> PathBuf {
        self.root.join(sha256)
    }

    /// The unpacked snapshot `sha256`, downloading it first if it is not cached. Transient
    /// download failures are retried until `cancel` fires.
    pub async fn ensure(
        &self,
        client: &CoordinatorClient,
        sha256: &str,
        cancel: &CancellationToken,
    ) -> Result<PathBuf, SourceError> {
        if !is_sha256_hex(sha256) {
            return Err(SourceError::BadHash(sha256.to_string()));
        }
        let dir = self.path_for(sha256);
        if dir.is_dir() {
            return Ok(dir);
        }
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
            locks.entry(sha256.to_string()).or_default().clone()
        };
        let _guard = lock.lock().await;
        if dir.is_dir() {
            return Ok(dir);
        }
        let bytes = with_retry("source download", cancel, || client.fetch_source(sha256)).await?;
        tracing::info!(sha256, bytes = bytes.len(), "downloaded source snapshot");
        self.install(sha256, bytes).await
    }

    /// Verifies `bytes` against `sha256` and unpacks them into the cache.
    pub async fn install(&self, sha256: &str, bytes: Vec<u8>) -> Result<PathBuf, SourceError> {
        if !is_sha256_hex(sha256) {
            return Err(SourceError::BadHash(sha256.to_string()));
        }
        let root = self.root.clone();
        let sha = sha256.to_string();
        tokio::task::spawn_blocking(move || install_blocking(&root, &sha, &bytes))
            .await
            .map_err(|e| SourceError::Io {
                context: "unpacking task".to_string(),
                source: io::Error::other(e.to_string()),
            })?
    }
}

fn install_blocking(root: &Path, sha256: &str, bytes: &[u8]) -> Result<PathBuf, SourceError> {
    verify_sha256(bytes, sha256)?;
    fs::create_dir_all(root).map_err(io_err(format!("creating {}", root.display())))?;
    let final_dir = root.join(sha256);
    let tmp = root.join(format!(
        ".tmp-{sha256}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    fs::create_dir(&tmp).map_err(io_err(format!("creating {}", tmp.display())))?;
    let result = unpack_tar_gz(bytes, &tmp).and_then(|()| {
        match fs::rename(&tmp, &final_dir) {
            Ok(()) => Ok(()),
            // Another worker process sharing the cache finished first: theirs is identical.
            Err(_) if final_dir.is_dir() => Ok(()),
            Err(e) => Err(SourceError::Io {
                context: format!("renaming into {}", final_dir.display()),
                source: e,
            }),
        }
    });
    if tmp.exists() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result.map(|()| final_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;

    /// Builds a tar.gz by hand, bypassing the tar crate's own path checks so that hostile
    /// archives can be crafted.
    fn tarball(entries: &[(&str, tar::EntryType, &[u8], &str)]) -> Vec<u8> {
        let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for (path, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            // Write the raw name so `..` and absolute paths survive.
            let name = &mut h.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o755);
            if !link.is_empty() {
                h.set_link_name(link).unwrap();
            }
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn unpacks_files_and_dirs() {
        let tgz = tarball(&[
            ("./src/", tar::EntryType::Directory, b"", ""),
            ("src/a.c", tar::EntryType::Regular, b"int a;", ""),
            ("Makefile", tar::EntryType::Regular, b"all:", ""),
        ]);
        let dir = tempfile::tempdir().unwrap();
        unpack_tar_gz(&tgz, dir.path()).unwrap();
        assert_eq!(fs::read(dir.path().join("src/a.c")).unwrap(), b"int a;");
        assert_eq!(fs::read(dir.path().join("Makefile")).unwrap(), b"all:");
    }

    #[test]
    fn rejects_hostile_entries() {
        let cases: &[(&str, tar::EntryType, &str, &str)] = &[
            ("../evil", tar::EntryType::Regular, "", ".."),
            ("a/../../evil", tar::EntryType::Regular, "", ".."),
            ("/tmp/evil", tar::EntryType::Regular, "", "absolute"),
            ("link", tar::EntryType::Symlink, "/etc/passwd", "symbolic"),
            ("hard", tar::EntryType::Link, "/etc/passwd", "hard"),
            ("dev", tar::EntryType::Char, "", "not a regular"),
            ("fifo", tar::EntryType::Fifo, "", "not a regular"),
        ];
        for (path, kind, link, why) in cases {
            let tgz = tarball(&[
                ("ok.c", tar::EntryType::Regular, b"x", ""),
                (path, *kind, b"", link),
            ]);
            let outer = tempfile::tempdir().unwrap();
            let dest = outer.path().join("d");
            fs::create_dir(&dest).unwrap();
            let err = unpack_tar_gz(&tgz, &dest).unwrap_err();
            assert!(
                matches!(&err, SourceError::UnsafeEntry { reason, .. } if reason.contains(why)),
                "{path}: {err}"
            );
            // Nothing escaped the destination.
            assert!(!outer.path().join("evil").exists());
            let names: Vec<_> = fs::read_dir(outer.path()).unwrap().collect();
            assert_eq!(names.len(), 1, "{path}");
        }
    }

    #[test]
    fn rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            unpack_tar_gz(b"not gzip at all", dir.path()),
            Err(SourceError::Archive(_))
        ));
    }

    #[tokio::test]
    async fn install_verifies_hash_and_is_atomic() {
        let cache = tempfile::tempdir().unwrap();
        let store = SourceStore::new(cache.path());
        let tgz = tarball(&[("m.c", tar::EntryType::Regular, b"int main;", "")]);
        let good = sha(&tgz);

        let wrong = sha(b"other");
        let err = store.install(&wrong, tgz.clone()).await.unwrap_err();
        assert!(matches!(err, SourceError::HashMismatch { .. }), "{err}");
        assert!(!store.path_for(&wrong).exists());

        let hostile = tarball(&[
            ("m.c", tar::EntryType::Regular, b"x", ""),
            ("../x", tar::EntryType::Regular, b"x", ""),
        ]);
        let hsha = sha(&hostile);
        assert!(store.install(&hsha, hostile).await.is_err());
        assert!(!store.path_for(&hsha).exists());
        // No temporary directory is left behind either.
        let left: Vec<_> = fs::read_dir(cache.path().join("sources"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");

        let dir = store.install(&good, tgz.clone()).await.unwrap();
        assert_eq!(fs::read(dir.join("m.c")).unwrap(), b"int main;");
        // Installing again (e.g. a second process) keeps the first copy.
        assert_eq!(store.install(&good, tgz).await.unwrap(), dir);

        assert!(matches!(
            store.install("../../etc", Vec::new()).await,
            Err(SourceError::BadHash(_))
        ));
    }
}
