//! Deleting a sweep: its submitter's or an admin's, audited, cancelled first when it runs.

use sweep_domain::wire::DeleteAck;

use super::sweeps::check_may_change;
use super::{Submissions, SubmitError};
use crate::service::auth::{Caller, Need};

impl Submissions {
    /// Deletes sweep `id` whole (submitters: their own; admins and local callers: any): a
    /// queued or running sweep is cancelled first, so its workers stop at their next call.
    /// Audited with its name and what it held; its finished table is forgotten.
    pub async fn delete(&self, caller: &Caller, id: i64) -> Result<DeleteAck, SubmitError> {
        let principal = self.shared.auth.require(caller, Need::Submit)?;
        self.shared.auth.spend_write(caller)?;
        let store = &self.shared.store;
        let rec = store.sweep(id).await?;
        if let Some(p) = principal {
            check_may_change(p, &rec, "delete")?;
        }
        let cancelled = !rec.summary.state.is_final();
        if cancelled {
            store.cancel_sweep(id).await?;
        }
        let results = store
            .delete_sweep(id)
            .await?
            .ok_or_else(|| SubmitError::NotFound(format!("sweep {id}")))?;
        self.tables.forget(id);
        let what = format!(
            "{} ({} of {} positions, {results} results{})",
            rec.summary.name,
            rec.summary.positions_done,
            rec.summary.positions_total,
            if cancelled { ", cancelled first" } else { "" }
        );
        self.shared
            .audit(caller, "delete", format!("sweep {id}"), what)
            .await?;
        tracing::info!(sweep_id = id, results, cancelled, "sweep deleted");
        Ok(DeleteAck {
            id,
            cancelled,
            results,
        })
    }
}
