//! Sources of sweeps: uploads (`HEAD`/`PUT /api/v1/sources/{sha256}`) and resolving a sweep
//! config's source (registered directory, uploaded snapshot or git commit) into a stored
//! snapshot with its provenance.

use std::path::PathBuf;

use anyhow::Context;
use sha2::{Digest, Sha256};
use sweep_domain::source::{is_sha256, SourceKind, SourceOrigin};
use sweep_domain::spec::SweepConfig;
use sweep_domain::FieldError;

use super::auth::Need;
use super::{Caller, Service, ServiceError};
use crate::catalog::Engine;
use crate::git::{self, GitError};
use crate::snapshot::{self, snapshot_dir, SnapshotRules, MAX_SNAPSHOT_BYTES};

/// A sweep's source, resolved and stored: what submission validates and plans against.
#[derive(Debug, Clone)]
pub struct ResolvedSource {
    /// sha256 of the snapshot (stored under it).
    pub sha256: String,
    /// The snapshot (a deterministic tar.gz).
    pub archive: Vec<u8>,
    /// How it came to be.
    pub origin: SourceOrigin,
}

/// What an upload did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uploaded {
    /// The snapshot is new.
    Stored,
    /// A snapshot with that sha256 was already stored; nothing changed.
    Present,
}

impl Service {
    /// Whether a snapshot with this sha256 is stored (for `HEAD /api/v1/sources/{sha256}`).
    pub async fn has_source(&self, caller: &Caller, sha256: &str) -> Result<bool, ServiceError> {
        self.auth.require(caller, Need::Source)?;
        if !is_sha256(sha256) {
            return Ok(false);
        }
        Ok(self.store.has_snapshot(sha256).await?)
    }

    /// Stores an uploaded snapshot (submitters and admins): `archive` must hash to `sha256`
    /// and be a gzip'ed tar of regular files and directories with relative paths free of
    /// `..`, at most [`MAX_SNAPSHOT_BYTES`].
    pub async fn put_source(
        &self,
        caller: &Caller,
        sha256: &str,
        archive: Vec<u8>,
    ) -> Result<Uploaded, ServiceError> {
        self.auth.require(caller, Need::Submit)?;
        self.auth.spend_write(caller)?;
        if !is_sha256(sha256) {
            return Err(FieldError::new("sha256", "must be 64 lowercase hex digits").into());
        }
        if archive.len() > MAX_SNAPSHOT_BYTES {
            return Err(
                FieldError::new("body", format!("larger than {MAX_SNAPSHOT_BYTES} bytes")).into(),
            );
        }
        let actual = hex::encode(Sha256::digest(&archive));
        if actual != sha256 {
            return Err(FieldError::new(
                "sha256",
                format!("the body's sha256 is {actual}, not {sha256}"),
            )
            .into());
        }
        if self.store.has_snapshot(sha256).await? {
            return Ok(Uploaded::Present);
        }
        let archive = tokio::task::spawn_blocking(move || {
            snapshot::verify_archive(&archive).map(|()| archive)
        })
        .await
        .context("verify task")?
        .map_err(|e| FieldError::new("body", format!("not a valid source snapshot: {e:#}")))?;
        self.store.put_snapshot(sha256, &archive).await?;
        self.metrics.source_uploads.inc();
        self.audit(
            caller,
            "source_upload",
            format!("source {sha256}"),
            format!("{} bytes", archive.len()),
        )
        .await?;
        tracing::info!(sha256, bytes = archive.len(), "source uploaded");
        Ok(Uploaded::Stored)
    }

    /// The source a submission runs on, stored: the config's `[source]` (an uploaded
    /// snapshot, or a git commit resolved now) or else the engine's registered directory.
    /// `None` for a binary-only engine without `[source]`.
    pub(super) async fn resolve_source(
        &self,
        caller: &Caller,
        config: &SweepConfig,
        engine: &Engine,
    ) -> Result<Option<ResolvedSource>, ServiceError> {
        let Some(source_def) = &engine.def.source else {
            if config.source.is_some() {
                return Err(FieldError::new(
                    "source",
                    format!(
                        "engine `{}` is binary-only: it has no source to replace",
                        engine.def.name
                    ),
                )
                .into());
            }
            return Ok(None);
        };
        let rules = SnapshotRules::of(source_def, false);
        let Some(asked) = &config.source else {
            let Some(dir) = engine.source_dir.clone() else {
                return Ok(None);
            };
            return Ok(Some(self.registered_source(dir, rules).await?));
        };
        asked.check()?;
        if let Some(sha) = &asked.sha256 {
            return Ok(Some(self.uploaded_source(caller, sha).await?));
        }
        let url = asked.git.clone().unwrap_or_default();
        let rev = asked.rev.clone().unwrap_or_else(|| "HEAD".to_string());
        Ok(Some(self.git_source(url, rev, rules).await?))
    }

    /// The engine's registered directory, archived now and stored.
    async fn registered_source(
        &self,
        dir: PathBuf,
        rules: SnapshotRules,
    ) -> Result<ResolvedSource, ServiceError> {
        let snap = tokio::task::spawn_blocking(move || snapshot_dir(&dir, &rules))
            .await
            .context("snapshot task")?
            // Kept as a cause: the reason (e.g. which symlink) must reach the user.
            .context("archiving the engine source")?;
        self.store.put_snapshot(&snap.sha256, &snap.archive).await?;
        Ok(ResolvedSource {
            sha256: snap.sha256,
            archive: snap.archive,
            origin: SourceOrigin::default(),
        })
    }

    /// A snapshot the caller uploaded before (`[source] sha256`).
    async fn uploaded_source(
        &self,
        caller: &Caller,
        sha: &str,
    ) -> Result<ResolvedSource, ServiceError> {
        let archive = self.store.snapshot(sha).await?.ok_or_else(|| {
            FieldError::new(
                "source.sha256",
                format!("no source {sha} was uploaded: PUT it to /api/v1/sources/{sha} first (sweep submit --source DIR does)"),
            )
        })?;
        Ok(ResolvedSource {
            sha256: sha.to_string(),
            archive,
            origin: SourceOrigin {
                kind: SourceKind::Uploaded,
                uploader: caller.owner().map(|o| o.name),
                ..SourceOrigin::default()
            },
        })
    }

    /// Commit `rev` of the git repository at `url`, fetched into the cache, archived and
    /// stored; a fetch or a rev that fails is the config's field (`source.git`, `source.rev`).
    async fn git_source(
        &self,
        url: String,
        rev: String,
        rules: SnapshotRules,
    ) -> Result<ResolvedSource, ServiceError> {
        let cache = self.git_cache.clone();
        // One git operation at a time: fetches into one cache must not race.
        let _git = self.git_lock.lock().await;
        let (url2, rev2) = (url.clone(), rev.clone());
        let resolved = tokio::task::spawn_blocking(move || {
            let r = git::resolve(&cache, &url2, &rev2)?;
            let snap = snapshot::repack(&r.tar, &rules).map_err(GitError::Other)?;
            Ok::<_, GitError>((r.commit, snap))
        })
        .await
        .context("git task")?;
        let (commit, snap) = match resolved {
            Ok(r) => r,
            Err(e @ GitError::Fetch { .. }) => {
                return Err(FieldError::new("source.git", e.to_string()).into())
            }
            Err(e @ GitError::UnknownRev { .. }) => {
                return Err(FieldError::new("source.rev", e.to_string()).into())
            }
            Err(GitError::Other(e)) => {
                return Err(e.context(format!("git source {url} at {rev}")).into())
            }
        };
        self.store.put_snapshot(&snap.sha256, &snap.archive).await?;
        tracing::info!(%url, %rev, %commit, sha256 = %snap.sha256, "git source resolved");
        Ok(ResolvedSource {
            sha256: snap.sha256,
            archive: snap.archive,
            origin: SourceOrigin {
                kind: SourceKind::Git,
                git_url: Some(url),
                git_rev: Some(rev),
                git_commit: Some(commit),
                ..SourceOrigin::default()
            },
        })
    }
}
