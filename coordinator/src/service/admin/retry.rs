//! A build that failed to compile given another chance (e.g. after a worker's compiler was
//! fixed).

use sweep_domain::auth::RetryAck;

use super::{Admin, AdminError};
use crate::service::auth::{Caller, Need};

impl Admin {
    /// Gives a build that failed to compile another chance: its failures are forgotten and
    /// its jobs queued again.
    pub async fn retry_build(
        &self,
        caller: &Caller,
        id: i64,
        build: &str,
    ) -> Result<RetryAck, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        let jobs = self.shared.store.retry_build(id, build).await?;
        // The sweep is running again: its cached table (if it had finished) is stale.
        self.tables.forget(id);
        self.shared
            .audit(
                caller,
                "retry_build",
                format!("sweep {id}"),
                build.to_string(),
            )
            .await?;
        tracing::info!(sweep_id = id, build, jobs, "build retried");
        Ok(RetryAck {
            id,
            build: build.to_string(),
            jobs,
        })
    }
}
