//! Submissions: what submitters send in. Sweeps submitted (the source resolved, the config
//! validated and planned, stored once) and cancelled (`sweeps.rs`); sources uploaded and
//! resolved from a config's `[source]` (`sources.rs`: a registered directory, an upload or a
//! git commit); engines added or replaced at runtime (`engines.rs`); the knobs a sweep
//! declares, found in its source (`knobs.rs`).
//!
//! Apart from the other parts because these are the writes that take time and outside
//! resources: they spend the token's write budget, archive directories, run git (bounded by
//! its own pool, whose refusal is [`SubmitError::GitBusy`]) and swap the live catalog. Each is
//! audited. [`SubmitError`] names what can go wrong in them.

use std::sync::Arc;

use sweep_domain::auth::Role;
use sweep_domain::FieldError;

use super::auth::{Denied, RateLimited};
use super::failure::{unexpected, Unavailable};
use super::reads::TableCache;
use super::shared::{LiveCatalog, Shared};
use crate::git::{GitPool, GitSettings};
use crate::store::StoreError;

mod deletion;
mod engines;
mod estimate;
mod knobs;
mod sources;
mod sweeps;
mod transfer;

pub use engines::EngineAdded;
pub use knobs::check_declared_knobs;
pub use sources::{ResolvedSource, Uploaded};

/// Why a submission (of a sweep, a source or an engine) or a cancel did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// A field of the request is invalid.
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The caller may not submit (or cancel this sweep, or add engines).
    #[error(transparent)]
    Denied(#[from] Denied),
    /// The token made too many writes.
    #[error(transparent)]
    RateLimited(#[from] RateLimited),
    /// No such sweep.
    #[error("{0} not found")]
    NotFound(String),
    /// The request is well-formed but contradicts the stored state.
    #[error("{0}")]
    Rejected(String),
    /// Every turn of git work is taken (see [`crate::git::GitPool`]): the caller should
    /// retry shortly; one slow fetch never queues submissions without bound.
    #[error("too many git sources being fetched at once; retry later")]
    GitBusy,
    /// The database did not answer.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<StoreError> for SubmitError {
    /// Submissions meet a sweep not found (a cancel), a sweep the store cannot write as
    /// planned, and an unavailable database; leases and worker caps are not theirs.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => SubmitError::NotFound(what),
            StoreError::Invalid(why) => SubmitError::Rejected(why),
            StoreError::Unavailable(e) => SubmitError::Unavailable(Unavailable::new(e)),
            other => SubmitError::Internal(unexpected(other)),
        }
    }
}

/// The submission use cases.
#[derive(Clone)]
pub struct Submissions {
    shared: Shared,
    /// Engines and suites: a submission validates against one snapshot; an engine added
    /// replaces it whole.
    catalog: Arc<LiveCatalog>,
    /// Held while an engine is stored and swapped in, so concurrent adds land in the catalog
    /// in the order they reached the database.
    engine_writes: Arc<tokio::sync::Mutex<()>>,
    /// Where git sources are fetched and resolved, within bounds (see [`crate::git`]).
    git: Arc<GitPool>,
    /// A submitter's sweep estimated over this many engine-hours waits for approval.
    approve_over_engine_hours: Option<f64>,
    /// Roles besides admin that may submit `priority = "high"` sweeps.
    high_priority_for: Vec<Role>,
    /// The finished tables the reads keep: a deleted sweep's is dropped.
    tables: Arc<TableCache>,
}

impl Submissions {
    /// Submissions over `shared` and `catalog`, running git for git sources by `git`.
    pub(crate) fn new(
        shared: Shared,
        catalog: Arc<LiveCatalog>,
        git: GitSettings,
        approve_over_engine_hours: Option<f64>,
        high_priority_for: Vec<Role>,
        tables: Arc<TableCache>,
    ) -> Self {
        Self {
            tables,
            shared,
            catalog,
            engine_writes: Arc::default(),
            git: Arc::new(GitPool::new(git)),
            approve_over_engine_hours,
            high_priority_for,
        }
    }
}
