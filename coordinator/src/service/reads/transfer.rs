//! Exporting a sweep (see [`crate::transfer`]): the file of an ended sweep, with the
//! snapshots the caller may read.

use anyhow::Context;

use super::tables::is_finished;
use super::{ReadError, Reads};
use crate::service::auth::{Caller, Need};
use crate::transfer;
use sweep_domain::FieldError;

impl Reads {
    /// The export file of sweep `id` (anyone who may read it): its spec, engine definition,
    /// suites, builds, results, cross-checks, build records and speed runs, and the
    /// snapshots it builds that the caller may read (the others are named as left out: the
    /// store it goes to must hold them). A sweep that has not ended is refused, naming `id`:
    /// its results could still change.
    pub async fn export_sweep(&self, caller: &Caller, id: i64) -> Result<Vec<u8>, ReadError> {
        self.shared.auth.require(caller, Need::Read)?;
        let _turn = self.turn().await?;
        let store = &self.shared.store;
        let rec = store.sweep(id).await?;
        if !is_finished(rec.summary.state) {
            return Err(FieldError::new(
                "id",
                format!(
                    "sweep {id} is {}: export it once it has ended (or cancel it)",
                    rec.summary.state.as_str()
                ),
            )
            .into());
        }
        let mut export = store.export_sweep(id).await?;
        for name in export.spec.all_suites() {
            export.suites.push(store.sweep_suite(id, &name).await?);
        }
        for sha in store.sweep_snapshots(id).await? {
            let readable = self
                .shared
                .auth
                .may_read_source(&**store, caller, &sha)
                .await?;
            match store.snapshot(&sha).await? {
                Some(archive) if readable => export.snapshots.push((sha, hex::encode(archive))),
                _ => export.original.snapshots_left_out.push(sha),
            }
        }
        let file = tokio::task::spawn_blocking(move || transfer::encode(&export))
            .await
            .context("encode task")??;
        Ok(file)
    }
}
