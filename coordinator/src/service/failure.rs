//! The failures every part of the service meets alike, whatever it does: the database being
//! unavailable ([`Unavailable`]), and a store error its use case cannot meet by the store's
//! contract ([`unexpected`]). Each part sorts the store's other errors into its own error
//! type; this module is apart from `shared.rs` because `auth.rs` fails the same way and
//! `shared.rs` holds the authorization state, so neither imports the other back.

use crate::store::StoreError;

/// The database cannot be reached or timed out, or it rolled the transaction back to break a
/// deadlock or a serialization conflict: the call may be retried. Its cause (the database's
/// own words: hosts, users, paths) is for the log, never for the caller.
#[derive(Debug, thiserror::Error)]
#[error("database unavailable: {cause}")]
pub struct Unavailable {
    #[source]
    cause: Box<dyn std::error::Error + Send + Sync>,
}

impl Unavailable {
    /// The database's error that made the call fail.
    pub fn cause(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.cause.as_ref()
    }

    pub(crate) fn new(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            cause: Box::new(cause),
        }
    }
}

/// A store failure a use case cannot meet by the store's contract (say, a lost lease on a
/// read): a bug, kept whole as the cause of an internal error.
pub(crate) fn unexpected(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::Internal(e) => e,
        other => anyhow::Error::new(other),
    }
}
