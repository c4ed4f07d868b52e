//! Use cases about access and administration: tokens, the audit log, build retries, and the
//! engine and suite catalog as callers may see it.

use sweep_domain::auth::{check_token_name, AuditEntry, RetryAck, Role, TokenInfo};
use sweep_domain::wire::{EngineInfo, SuiteInfo};
use sweep_domain::FieldError;

use super::auth::{hash_token, new_secret, Need};
use super::{Caller, Service, ServiceError};
use crate::store::NewAudit;

/// Most audit log entries one read returns.
pub const MAX_AUDIT_ENTRIES: u32 = 10_000;

impl Service {
    /// Writes an audit log entry for what `caller` just did.
    pub(super) async fn audit(
        &self,
        caller: &Caller,
        action: &str,
        target: String,
        detail: String,
    ) -> Result<(), ServiceError> {
        let (actor, role) = caller.actor();
        self.store
            .audit(&NewAudit {
                actor,
                role,
                action: action.to_string(),
                target,
                detail,
            })
            .await?;
        Ok(())
    }

    /// Creates a token; returns it with its secret, which is shown once and never stored.
    pub async fn create_token(
        &self,
        caller: &Caller,
        name: &str,
        role: Role,
    ) -> Result<(TokenInfo, String), ServiceError> {
        self.auth.require(caller, Need::Admin)?;
        self.auth.spend_write(caller)?;
        check_token_name(name).map_err(|e| FieldError::new("name", e))?;
        let secret = new_secret();
        let id = self
            .store
            .create_token(name, role, &hash_token(&secret))
            .await?;
        self.audit(
            caller,
            "token_create",
            format!("token {name}"),
            role.to_string(),
        )
        .await?;
        let info = self
            .store
            .tokens()
            .await?
            .into_iter()
            .find(|t| t.id == id)
            .ok_or_else(|| anyhow::anyhow!("token {id} vanished after its insert"))?;
        tracing::info!(token = name, %role, "token created");
        Ok((info, secret))
    }

    /// Every token (never their secrets), revoked ones included.
    pub async fn tokens(&self, caller: &Caller) -> Result<Vec<TokenInfo>, ServiceError> {
        self.auth.require(caller, Need::Admin)?;
        Ok(self.store.tokens().await?)
    }

    /// Revokes the live token named `name`; it is refused from then on (on other
    /// coordinators within [`super::TOKEN_TTL`]).
    pub async fn revoke_token(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<TokenInfo, ServiceError> {
        self.auth.require(caller, Need::Admin)?;
        self.auth.spend_write(caller)?;
        let info = self.store.revoke_token(name).await?;
        self.auth.forget_tokens();
        self.audit(
            caller,
            "token_revoke",
            format!("token {name}"),
            info.role.to_string(),
        )
        .await?;
        tracing::info!(token = name, "token revoked");
        Ok(info)
    }

    /// A token that lives only in this process (not stored): what a local run's in-process
    /// worker uses on loopback.
    pub fn local_token(&self, role: Role, name: &str) -> String {
        self.auth.ephemeral_token(role, name)
    }

    /// The newest audit log entries (at most `limit`, capped at [`MAX_AUDIT_ENTRIES`]).
    pub async fn audit_log(
        &self,
        caller: &Caller,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, ServiceError> {
        self.auth.require(caller, Need::Admin)?;
        Ok(self.store.audit_log(limit.min(MAX_AUDIT_ENTRIES)).await?)
    }

    /// Gives a build that failed to compile another chance (e.g. after a worker's compiler
    /// was fixed): its failures are forgotten and its jobs queued again.
    pub async fn retry_build(
        &self,
        caller: &Caller,
        id: i64,
        build: &str,
    ) -> Result<RetryAck, ServiceError> {
        self.auth.require(caller, Need::Admin)?;
        self.auth.spend_write(caller)?;
        let jobs = self.store.retry_build(id, build).await?;
        // The sweep is running again: its cached table (if it had finished) is stale.
        self.forget_table(id);
        self.audit(
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

    /// The engines sweeps may use.
    pub fn engines(&self, caller: &Caller) -> Result<Vec<EngineInfo>, ServiceError> {
        self.auth.require(caller, Need::Catalog)?;
        Ok(self.catalog().engines.values().map(|e| e.info()).collect())
    }

    /// The suites sweeps may use.
    pub fn suites(&self, caller: &Caller) -> Result<Vec<SuiteInfo>, ServiceError> {
        self.auth.require(caller, Need::Catalog)?;
        Ok(self
            .catalog()
            .suites
            .values()
            .map(|s| SuiteInfo {
                name: s.suite.name.clone(),
                sha256: s.suite.sha256.clone(),
                positions: s.suite.positions.len(),
            })
            .collect())
    }
}
