//! The store's error: what callers branch on (not found, a lost lease, an invalid request,
//! a full token, an unavailable database), and everything else as `Internal`.

use std::time::Duration;

/// Errors callers branch on; everything else is `Internal`.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such sweep, job or snapshot.
    #[error("{0} not found")]
    NotFound(String),
    /// The worker does not hold this job's lease (any more).
    #[error("job {job_id}: lease not held by worker {worker_id} at attempt {attempt}")]
    LeaseLost {
        /// Job.
        job_id: i64,
        /// Worker that reported.
        worker_id: i64,
        /// The lease (attempt) it named.
        attempt: i64,
    },
    /// The request is well-formed but contradicts the stored state (e.g. a result for a
    /// position outside the job).
    #[error("{0}")]
    Invalid(String),
    /// The registering token already holds this many live workers (see [`WorkerCap`](super::WorkerCap)).
    #[error("the token already holds {limit} live workers")]
    TooManyWorkers {
        /// Live workers a token may hold.
        limit: u32,
        /// A lease: the longest a place stays taken by a worker that went away.
        lease: Duration,
    },
    /// The database cannot be reached or timed out, or it rolled the transaction back to
    /// break a deadlock or a serialization conflict; the request can be retried.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed => {
                StoreError::Unavailable(e)
            }
            sqlx::Error::Database(ref db)
                if db
                    .code()
                    .is_some_and(|c| c.starts_with("57") || c.starts_with("08")) =>
            {
                // Class 57 (operator intervention: shutdown, statement timeout) and 08
                // (connection exception) are passing conditions.
                StoreError::Unavailable(e)
            }
            // Class 40: the transaction was rolled back (a deadlock's victim, a serialization
            // failure) and left nothing behind; the same call again may well succeed.
            sqlx::Error::Database(ref db) if rolled_back(db.as_ref()) => StoreError::Unavailable(e),
            other => StoreError::Internal(anyhow::Error::new(other)),
        }
    }
}

impl StoreError {
    /// Whether the database rolled the transaction back to break a deadlock or a
    /// serialization conflict (SQLSTATE class 40): nothing of it was kept, and running it
    /// again is expected to succeed once the other transaction is through.
    pub(crate) fn rolled_back(&self) -> bool {
        matches!(self, StoreError::Unavailable(sqlx::Error::Database(db)) if rolled_back(db.as_ref()))
    }
}

/// Whether the database error is of SQLSTATE class 40 (transaction rollback).
fn rolled_back(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.code().is_some_and(|c| c.starts_with("40"))
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;
