//! Sources of sweeps: uploads (`HEAD`/`PUT /api/v1/sources/{sha256}`) and resolving a sweep
//! config's source (registered directory, uploaded snapshot or git commit) into a stored
//! snapshot with its provenance.

use std::path::PathBuf;

use anyhow::Context;
use sha2::{Digest, Sha256};
use sweep_domain::source::{is_sha256, redact_git_url, SourceKind, SourceOrigin};
use sweep_domain::spec::{SweepConfig, SweepSpec};
use sweep_domain::FieldError;

use super::{Submissions, SubmitError};
use crate::catalog::Engine;
use crate::git::GitError;
use crate::service::auth::{Caller, Need};
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

impl Submissions {
    /// Whether a snapshot with this sha256 is stored and the caller may read it (for `HEAD
    /// /api/v1/sources/{sha256}`; see `Auth::may_read_source`): to anyone else it is not
    /// there.
    pub async fn has_source(&self, caller: &Caller, sha256: &str) -> Result<bool, SubmitError> {
        self.shared.auth.require(caller, Need::Source)?;
        if !is_sha256(sha256) || !self.may_read_source(caller, sha256).await? {
            return Ok(false);
        }
        Ok(self.shared.store.has_snapshot(sha256).await?)
    }

    /// Stores an uploaded snapshot (submitters and admins): `archive` must hash to `sha256`
    /// and be a gzip'ed tar of regular files and directories with relative paths free of
    /// `..`, at most [`MAX_SNAPSHOT_BYTES`].
    pub async fn put_source(
        &self,
        caller: &Caller,
        sha256: &str,
        archive: Vec<u8>,
    ) -> Result<Uploaded, SubmitError> {
        self.shared.auth.require(caller, Need::Submit)?;
        self.shared.auth.spend_write(caller)?;
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
        if self.shared.store.has_snapshot(sha256).await? {
            // It sent the very bytes, so it learns nothing by being let read them.
            self.keep_uploader(caller, sha256).await?;
            return Ok(Uploaded::Present);
        }
        let archive = tokio::task::spawn_blocking(move || {
            snapshot::verify_archive(&archive).map(|()| archive)
        })
        .await
        .context("verify task")?
        .map_err(|e| FieldError::new("body", format!("not a valid source snapshot: {e:#}")))?;
        self.shared.store.put_snapshot(sha256, &archive).await?;
        self.keep_uploader(caller, sha256).await?;
        self.shared.metrics.source_uploads.inc();
        self.shared
            .audit(
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
    ) -> Result<Option<ResolvedSource>, SubmitError> {
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

    /// Resolves the code of its own of each variant of `spec` that has some (see
    /// [`sweep_domain::spec::Variant::source`]): a `rev` of the sweep's git repository
    /// fetched, archived and stored now, an uploaded snapshot checked to be there for the
    /// caller. Fills in each one's sha256 and provenance; returns the snapshots, for the
    /// declared-knob check. Errors name the variant's field (`variants[i].rev`).
    pub(super) async fn resolve_variant_sources(
        &self,
        caller: &Caller,
        spec: &mut SweepSpec,
        engine: &Engine,
    ) -> Result<Vec<ResolvedSource>, SubmitError> {
        let Some(source_def) = &engine.def.source else {
            return Ok(Vec::new());
        };
        let mut resolved = Vec::new();
        for (i, variant) in spec.variants.iter_mut().enumerate() {
            let Some(asked) = &mut variant.source else {
                continue;
            };
            let origin = &asked.origin;
            let got = match (&origin.git_url, &origin.git_rev) {
                (Some(url), Some(rev)) => {
                    let rules = SnapshotRules::of(source_def, false);
                    self.git_source(url.clone(), rev.clone(), rules).await
                }
                _ => self.uploaded_source(caller, &asked.sha256).await,
            }
            .map_err(|e| for_variant(e, i))?;
            asked.sha256 = got.sha256.clone();
            asked.origin = got.origin.clone();
            resolved.push(got);
        }
        Ok(resolved)
    }

    /// The engine's registered directory, archived now and stored.
    async fn registered_source(
        &self,
        dir: PathBuf,
        rules: SnapshotRules,
    ) -> Result<ResolvedSource, SubmitError> {
        let snap = tokio::task::spawn_blocking(move || snapshot_dir(&dir, &rules))
            .await
            .context("snapshot task")?
            // Kept as a cause: the reason (e.g. which symlink) must reach the user.
            .context("archiving the engine source")?;
        self.shared
            .store
            .put_snapshot(&snap.sha256, &snap.archive)
            .await?;
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
    ) -> Result<ResolvedSource, SubmitError> {
        let missing = || {
            FieldError::new(
                "source.sha256",
                format!("no source {sha} was uploaded: PUT it to /api/v1/sources/{sha} first (sweep submit --source DIR does)"),
            )
        };
        // A snapshot the caller may not read is not there for it: naming its hash (seen on
        // someone's sweep) must not make it readable.
        if !self.may_read_source(caller, sha).await? {
            return Err(missing().into());
        }
        let archive = self.shared.store.snapshot(sha).await?.ok_or_else(missing)?;
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
    /// stored; a URL the allow-list refuses, a fetch or a rev that fails is the config's
    /// field (`source.git`, `source.rev`), in Sweep's words (git's go to the log).
    async fn git_source(
        &self,
        url: String,
        rev: String,
        rules: SnapshotRules,
    ) -> Result<ResolvedSource, SubmitError> {
        let resolved = self.git.resolve(&url, &rev).await.map_err(git_error)?;
        let commit = resolved.commit;
        let snap = tokio::task::spawn_blocking(move || snapshot::repack(&resolved.tar, &rules))
            .await
            .context("repack task")?
            // Sweep's own words on what the commit holds (a symlink, too many files).
            .map_err(|e| {
                FieldError::new(
                    "source.git",
                    format!("the commit cannot be a source snapshot: {e:#}"),
                )
            })?;
        self.shared
            .store
            .put_snapshot(&snap.sha256, &snap.archive)
            .await?;
        let shown = redact_git_url(&url);
        tracing::info!(url = %shown, %rev, %commit, sha256 = %snap.sha256, "git source resolved");
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

    /// Whether `caller` may read snapshot `sha256` (see `Auth::may_read_source`).
    async fn may_read_source(&self, caller: &Caller, sha256: &str) -> Result<bool, SubmitError> {
        let store = self.shared.store.as_ref();
        Ok(self
            .shared
            .auth
            .may_read_source(store, caller, sha256)
            .await?)
    }

    /// Keeps that the caller's token uploaded snapshot `sha256`, so it may read it back.
    async fn keep_uploader(&self, caller: &Caller, sha256: &str) -> Result<(), SubmitError> {
        if let Caller::Token(p) = caller {
            let store = &self.shared.store;
            store.add_snapshot_uploader(sha256, p.token_id).await?;
        }
        Ok(())
    }
}

/// A failure resolving variant `i`'s own source, its field named as the variant's
/// (`source.rev` is `variants[i].rev`, `source.sha256` is `variants[i].sha256`).
fn for_variant(e: SubmitError, i: usize) -> SubmitError {
    match e {
        SubmitError::Invalid(mut f) => {
            let key = match f.field.as_str() {
                "source.sha256" => "sha256",
                _ => "rev",
            };
            f.field = format!("variants[{i}].{key}");
            SubmitError::Invalid(f)
        }
        other => other,
    }
}

/// A git source's failure as the submitter is told it.
fn git_error(e: GitError) -> SubmitError {
    match e {
        GitError::UnknownRev { .. } => FieldError::new("source.rev", e.to_string()).into(),
        GitError::Busy => SubmitError::GitBusy,
        GitError::Other(e) => e.context("git source").into(),
        GitError::Refused(_)
        | GitError::Fetch { .. }
        | GitError::TimedOut { .. }
        | GitError::TooLarge { .. } => FieldError::new("source.git", e.to_string()).into(),
    }
}
