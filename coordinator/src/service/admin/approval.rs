//! Sweeps held for approval (see `Submissions::hold_for`): an admin lets one run or rejects
//! it, saying why; both are audited.

use sweep_domain::bounds::{check_text, Lines};
use sweep_domain::wire::{ApprovalAck, SweepState};
use sweep_domain::FieldError;

use super::{Admin, AdminError};
use crate::service::auth::{Caller, Need};

/// Longest reason a rejection may give.
pub const MAX_REJECTION: usize = 1000;

impl Admin {
    /// Lets sweep `id`, held for approval, run.
    pub async fn approve(&self, caller: &Caller, id: i64) -> Result<ApprovalAck, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        let name = self.waiting(id).await?;
        if !self.shared.store.approve_sweep(id).await? {
            return Err(not_waiting(id));
        }
        self.shared
            .audit(caller, "approve", format!("sweep {id}"), name)
            .await?;
        tracing::info!(sweep_id = id, "sweep approved");
        Ok(ApprovalAck {
            id,
            state: SweepState::Queued,
        })
    }

    /// Rejects sweep `id`, held for approval, saying `why` to its submitter.
    pub async fn reject(
        &self,
        caller: &Caller,
        id: i64,
        why: &str,
    ) -> Result<ApprovalAck, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        let why = why.trim();
        check_text("why", why, MAX_REJECTION, Lines::One)?;
        if why.is_empty() {
            return Err(FieldError::new("why", "say why the sweep is rejected").into());
        }
        let name = self.waiting(id).await?;
        if !self.shared.store.reject_sweep(id, why).await? {
            return Err(not_waiting(id));
        }
        self.shared
            .audit(
                caller,
                "reject",
                format!("sweep {id}"),
                format!("{name}: {why}"),
            )
            .await?;
        tracing::info!(sweep_id = id, why, "sweep rejected");
        Ok(ApprovalAck {
            id,
            state: SweepState::Rejected,
        })
    }

    /// The name of sweep `id` when it waits for approval.
    async fn waiting(&self, id: i64) -> Result<String, AdminError> {
        let rec = self.shared.store.sweep(id).await?;
        if rec.summary.state != SweepState::PendingApproval {
            return Err(AdminError::Rejected(format!(
                "sweep {id} is {}, not waiting for approval",
                rec.summary.state.as_str()
            )));
        }
        Ok(rec.summary.name)
    }
}

/// The answer when the sweep stopped waiting between the look and the decision.
fn not_waiting(id: i64) -> AdminError {
    AdminError::Rejected(format!("sweep {id} is no longer waiting for approval"))
}
