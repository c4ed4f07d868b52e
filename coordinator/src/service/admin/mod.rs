//! Administration: tokens created, listed and revoked, and the in-process tokens of a local
//! run (`tokens.rs`); builds that failed given another chance (`retry.rs`); the audit log
//! read back (here).
//!
//! Apart from the other parts because these are an admin's (or a local command's, on the
//! database itself) only: they change who may call at all, and act on sweeps and tokens
//! whoever made them. [`AdminError`] names what can go wrong in them.

use std::sync::Arc;

use sweep_domain::auth::AuditEntry;
use sweep_domain::FieldError;

use super::auth::{Caller, Denied, Need, RateLimited};
use super::failure::{unexpected, Unavailable};
use super::reads::TableCache;
use super::shared::Shared;
use crate::store::StoreError;

mod approval;
mod retry;
mod tokens;

/// Most audit log entries one read returns.
pub const MAX_AUDIT_ENTRIES: u32 = 10_000;

/// Why an administration use case did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The caller is no admin.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The token made too many writes.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// No such token, sweep or build.
    #[error("{0} not found")]
    NotFound(String),
    /// The request is well-formed but contradicts the stored state (a live token has that
    /// name, the build has not failed, the sweep was cancelled).
    #[error("{0}")]
    Rejected(String),
    /// The database did not answer.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<StoreError> for AdminError {
    /// Administration meets a token, sweep or build not found, a request the stored state
    /// refuses, and an unavailable database; leases and worker caps are not its.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => AdminError::NotFound(what),
            StoreError::Invalid(why) => AdminError::Rejected(why),
            StoreError::Unavailable(e) => AdminError::Unavailable(Unavailable::new(e)),
            other => AdminError::Internal(unexpected(other)),
        }
    }
}

/// The administration use cases.
#[derive(Clone)]
pub struct Admin {
    shared: Shared,
    /// Finished sweeps' tables, one of which a retried build makes stale.
    tables: Arc<TableCache>,
}

impl Admin {
    /// Administration over `shared`, dropping from `tables` what a retry makes stale.
    pub(crate) fn new(shared: Shared, tables: Arc<TableCache>) -> Self {
        Self { shared, tables }
    }

    /// The newest audit log entries (at most `limit`, capped at [`MAX_AUDIT_ENTRIES`]).
    pub async fn audit_log(
        &self,
        caller: &Caller,
        limit: u32,
    ) -> Result<Vec<AuditEntry>, AdminError> {
        self.shared.auth.require(caller, Need::Admin)?;
        let limit = limit.min(MAX_AUDIT_ENTRIES);
        Ok(self.shared.store.audit_log(limit).await?)
    }
}
