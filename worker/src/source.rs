//! Engine source snapshots: download by sha256, verify, unpack, cache on disk.
//!
//! Unpacking is `sweep-archive`'s, under the same rules and bounds the coordinator checked
//! the upload against (a worker does not trust that it did: the bytes are checked again).
//!
//! A snapshot lands in `cache_dir/sources/<sha256>/` only complete: it is unpacked into a
//! temporary sibling directory and renamed into place, so a worker killed mid-way never leaves
//! a half-unpacked tree that a later run would trust.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use sweep_archive::UnpackError;
use sweep_client::{with_retry, ClientError};
use tokio_util::sync::CancellationToken;

use crate::client::CoordinatorClient;

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
    /// The archive breaks a rule or bound of the snapshot format, or writing it failed.
    #[error("unpacking the source snapshot: {0}")]
    Unpack(#[from] UnpackError),
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
    let result = sweep_archive::unpack(bytes, &tmp)
        .map_err(SourceError::from)
        .and_then(|()| {
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

    /// Installs `tgz` into a fresh cache: the error, and whether anything was left behind.
    async fn install_fails(tgz: Vec<u8>) -> (SourceError, bool) {
        let cache = tempfile::tempdir().unwrap();
        let store = SourceStore::new(cache.path());
        let hash = sha(&tgz);
        let err = store.install(&hash, tgz).await.unwrap_err();
        let left = fs::read_dir(cache.path().join("sources")).unwrap().count();
        (err, left > 0 || store.path_for(&hash).exists())
    }

    #[tokio::test]
    async fn unpacks_files_and_dirs() {
        let tgz = tarball(&[
            ("./src/", tar::EntryType::Directory, b"", ""),
            ("src/a.c", tar::EntryType::Regular, b"int a;", ""),
            ("Makefile", tar::EntryType::Regular, b"all:", ""),
        ]);
        let cache = tempfile::tempdir().unwrap();
        let dir = SourceStore::new(cache.path())
            .install(&sha(&tgz), tgz)
            .await
            .unwrap();
        assert_eq!(fs::read(dir.join("src/a.c")).unwrap(), b"int a;");
        assert_eq!(fs::read(dir.join("Makefile")).unwrap(), b"all:");
    }

    /// The worker holds a download to the coordinator's rules (`sweep-archive`), including
    /// those it did not have before: contiguous files (once written as regular ones) and
    /// bounds on GNU long names.
    #[tokio::test]
    async fn refuses_what_the_coordinator_refuses() {
        let cases: &[(&str, tar::EntryType, &str, &str)] = &[
            ("../evil", tar::EntryType::Regular, "", "`..`"),
            ("/tmp/evil", tar::EntryType::Regular, "", "absolute"),
            ("link", tar::EntryType::Symlink, "/etc/passwd", "symbolic"),
            ("hard", tar::EntryType::Link, "/etc/passwd", "hard"),
            ("fifo", tar::EntryType::Fifo, "", "fifo"),
            ("big", tar::EntryType::Continuous, "", "contiguous"),
        ];
        for (path, kind, link, why) in cases {
            let tgz = tarball(&[
                ("ok.c", tar::EntryType::Regular, b"x", ""),
                (path, *kind, b"", link),
            ]);
            let (err, left) = install_fails(tgz).await;
            let text = err.to_string();
            assert!(
                text.starts_with(&format!(
                    "unpacking the source snapshot: entry 2 (path {path}):"
                )) && text.contains(why),
                "{path}: {text}"
            );
            assert!(!left, "{path}");
        }
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(2 << 30);
        h.set_cksum();
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, h.as_bytes()).unwrap();
        std::io::Write::write_all(&mut gz, &[b'a'; 4096]).unwrap();
        let (err, left) = install_fails(gz.finish().unwrap()).await;
        assert!(
            err.to_string()
                .contains("GNU long name of 2147483648 bytes"),
            "{err}"
        );
        assert!(!left);
        let (err, _) = install_fails(b"not gzip at all".to_vec()).await;
        assert!(matches!(err, SourceError::Unpack(_)), "{err}");
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
