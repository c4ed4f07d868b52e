//! Tokens: created (the secret shown once, only its hash stored), listed, revoked (at once on
//! this coordinator, within `TOKEN_TTL` on the others), and the tokens a local run makes for
//! its in-process worker, which live only in this process.

use sweep_domain::auth::{check_token_name, Role, TokenInfo};
use sweep_domain::FieldError;

use super::{Admin, AdminError};
use crate::service::auth::{hash_token, new_secret, Caller, Need};

impl Admin {
    /// Creates a token; returns it with its secret, which is shown once and never stored.
    pub async fn create_token(
        &self,
        caller: &Caller,
        name: &str,
        role: Role,
    ) -> Result<(TokenInfo, String), AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        check_token_name(name).map_err(|e| FieldError::new("name", e))?;
        let secret = new_secret();
        let id = self
            .shared
            .store
            .create_token(name, role, &hash_token(&secret))
            .await?;
        self.shared
            .audit(
                caller,
                "token_create",
                format!("token {name}"),
                role.to_string(),
            )
            .await?;
        let info = self
            .shared
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
    pub async fn tokens(&self, caller: &Caller) -> Result<Vec<TokenInfo>, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        Ok(self.shared.store.tokens().await?)
    }

    /// Revokes the live token named `name`; it is refused from then on (on other
    /// coordinators within [`crate::service::TOKEN_TTL`]).
    pub async fn revoke_token(&self, caller: &Caller, name: &str) -> Result<TokenInfo, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        self.shared.auth.spend_write(caller)?;
        let info = self.shared.store.revoke_token(name).await?;
        self.shared.auth.forget_tokens();
        self.shared
            .audit(
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
        self.shared.auth.ephemeral_token(role, name)
    }
}
