//! Importing a sweep from an export file (see [`crate::transfer`]): checked whole, its
//! snapshots and suites stored, then written as a new sweep of the caller's, ended as it
//! ended where it was measured. Its results are this store's from then on: reused by later
//! sweeps of the same builds as measured ones are.

use anyhow::Context;
use sha2::{Digest, Sha256};
use sweep_domain::wire::Submitted;
use sweep_domain::FieldError;

use super::{Submissions, SubmitError};
use crate::service::auth::{Caller, Need};
use crate::snapshot;
use crate::transfer::{self, SweepExport};

impl Submissions {
    /// Writes the sweep the export `file` holds as a new sweep submitted by the caller
    /// (submitters and admins); `label` says where the file came from. A file that cannot be
    /// verified (not an export, another version, damaged), or whose sweep cannot be written
    /// here (stages or a search, a snapshot neither in the file nor stored, rows that do not
    /// fit its spec), is refused naming `file`.
    pub async fn import_sweep(
        &self,
        caller: &Caller,
        file: Vec<u8>,
        label: &str,
    ) -> Result<Submitted, SubmitError> {
        self.shared.auth.require(caller, Need::Submit)?;
        self.shared.auth.spend_write(caller)?;
        let bytes = file.len();
        let export = tokio::task::spawn_blocking(move || transfer::decode(&file))
            .await
            .context("decode task")?
            .map_err(|e| FieldError::new("file", e.to_string()))?;
        check_shape(&export)?;
        self.store_snapshots(caller, &export).await?;
        let mut suite_ids = Vec::new();
        for suite in &export.suites {
            suite_ids.push(self.shared.store.put_suite(suite).await?);
        }
        let jobs_of = export.results.len() as u64;
        let id = self
            .shared
            .store
            .import_sweep(&export, suite_ids, caller.owner(), label)
            .await?;
        self.shared
            .audit(
                caller,
                "sweep_import",
                format!("sweep {id}"),
                format!(
                    "sweep {} of {label}, {bytes} bytes, {jobs_of} results",
                    export.original.sweep_id
                ),
            )
            .await?;
        tracing::info!(
            sweep_id = id,
            original = export.original.sweep_id,
            label,
            "sweep imported"
        );
        Ok(Submitted {
            id,
            jobs: 0,
            existing: false,
            reused: 0,
            pending_approval: None,
        })
    }

    /// Stores the snapshots the file carries (each checked: its sha256, a valid archive), the
    /// caller recorded as their uploader; every snapshot the sweep builds must then be stored.
    async fn store_snapshots(
        &self,
        caller: &Caller,
        export: &SweepExport,
    ) -> Result<(), SubmitError> {
        let store = &self.shared.store;
        for (sha, hex_archive) in &export.snapshots {
            let archive = hex::decode(hex_archive)
                .map_err(|_| refused(format!("snapshot {sha} is not hex")))?;
            if hex::encode(Sha256::digest(&archive)) != *sha {
                return Err(refused(format!("snapshot {sha} does not hash to its name")));
            }
            let archive = tokio::task::spawn_blocking(move || {
                snapshot::verify_archive(&archive).map(|()| archive)
            })
            .await
            .context("verify task")?
            .map_err(|e| {
                refused(format!(
                    "snapshot {sha} is not a valid source snapshot: {e:#}"
                ))
            })?;
            store.put_snapshot(sha, &archive).await?;
            if let Some(owner) = caller.owner() {
                store.add_snapshot_uploader(sha, owner.token_id).await?;
            }
        }
        let builds_from = export.source_sha256.iter().chain(
            export
                .spec
                .variants
                .iter()
                .filter_map(|v| v.source.as_ref().map(|s| &s.sha256)),
        );
        for sha in builds_from {
            if !store.has_snapshot(sha).await? {
                return Err(refused(format!(
                    "sweep builds snapshot {sha}, which is neither in the file nor in this store"
                )));
            }
        }
        Ok(())
    }
}

/// A sweep this version can write from a file: no stages or search (their later steps are
/// added by the coordinator as they run, not planned at submission), the engine the spec
/// names, its suites in the file, each row's position one of its suite's.
fn check_shape(export: &SweepExport) -> Result<(), SubmitError> {
    let spec = &export.spec;
    if !spec.stages.is_empty() || spec.search.is_some() {
        return Err(refused(
            "sweep has stages or a search: importing those is not supported yet".into(),
        ));
    }
    if spec.engine != export.engine_def.name {
        return Err(refused(format!(
            "spec runs engine `{}` but its definition is `{}`",
            spec.engine, export.engine_def.name
        )));
    }
    let names: Vec<&str> = export.suites.iter().map(|s| s.name.as_str()).collect();
    if spec
        .all_suites()
        .iter()
        .map(String::as_str)
        .ne(names.iter().copied())
    {
        return Err(refused(format!(
            "suites are {names:?}, not the spec's {:?}",
            spec.all_suites()
        )));
    }
    for r in export.results.iter().chain(&export.cross_checks) {
        let suite = export.suites.iter().find(|s| s.name == r.suite);
        let position = suite.and_then(|s| s.positions.get(usize::try_from(r.index).ok()?));
        if position.is_none_or(|p| p.id != r.position_id) {
            return Err(refused(format!(
                "row of {} position {} ({}) is not that suite's position",
                r.suite, r.index, r.position_id
            )));
        }
    }
    Ok(())
}

/// The file's refusal, naming the field.
fn refused(why: String) -> SubmitError {
    FieldError::new("file", format!("the export's {why}")).into()
}
