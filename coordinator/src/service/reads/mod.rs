//! Reads: what callers look at and nothing changes: sweep lists and details (`sweeps.rs`,
//! with the workers page and the engine and suite catalog), delta tables and per-position
//! comparisons (`tables.rs`, with the cache of finished sweeps' tables and the task that
//! makes them as sweeps finish), derived suites (`derive.rs`), `/metrics` and the health
//! check (`monitor.rs`).
//!
//! Apart from the other parts because reads are bounded as a whole: a read that uses the
//! database takes one of a few turns ([`DEFAULT_MAX_READS`], half the Postgres pool) and is
//! refused as [`ReadError::Busy`] after [`READ_WAIT`] without one, so however many reads
//! arrive the worker protocol always finds a connection. Reads never write, so they are never
//! rate-limited and never lose a lease: [`ReadError`] names what is left.

use std::sync::Arc;
use std::time::Duration;

use sweep_domain::FieldError;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::auth::Denied;
use super::failure::{unexpected, Unavailable};
use super::shared::{LiveCatalog, Shared};
use super::Options;
use crate::store::StoreError;

mod derive;
mod monitor;
mod sweeps;
mod tables;
mod transfer;

pub(crate) use tables::{Extras, TableCache};

/// Read use cases (list, detail, table, positions, derive) in progress at once by default:
/// half of the Postgres pool's 16 connections, so however many reads arrive, the worker
/// protocol (leases, heartbeats, uploads) always finds a connection.
pub const DEFAULT_MAX_READS: usize = 8;

/// How long a read over the bound waits for a turn before it is answered 503 with
/// `Retry-After`.
pub const READ_WAIT: Duration = Duration::from_secs(2);

/// Rows of a positions page when the caller names no page size, and the most it may name.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// See [`DEFAULT_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 5000;

/// The workers page lists workers seen this recently: a day keeps yesterday's machines in
/// view without every registration ever made.
pub const WORKERS_SEEN_WITHIN: Duration = Duration::from_secs(24 * 3600);

/// Workers listed when the caller names no limit, and the most it may name.
pub const DEFAULT_WORKERS_LISTED: u32 = 200;
/// See [`DEFAULT_WORKERS_LISTED`].
pub const MAX_WORKERS_LISTED: u32 = 1000;

/// Why a read did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A field of the request is invalid (a limit or build the sweep does not have, say).
    #[error(transparent)]
    Invalid(#[from] FieldError),
    /// The caller may not read this.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// No such sweep (or suite of it).
    #[error("{0} not found")]
    NotFound(String),
    /// Too many reads at once: the caller should retry shortly (the worker protocol keeps
    /// its share of the database meanwhile).
    #[error("too many reads at once; retry later")]
    Busy,
    /// The database did not answer.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// Anything else, with its cause chain.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<StoreError> for ReadError {
    /// Reads meet only a sweep or suite not found and an unavailable database; the store's
    /// other refusals (a lost lease, a full token, an invalid write) are bugs here.
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ReadError::NotFound(what),
            StoreError::Unavailable(e) => ReadError::Unavailable(Unavailable::new(e)),
            other => ReadError::Internal(unexpected(other)),
        }
    }
}

/// The read use cases.
#[derive(Clone)]
pub struct Reads {
    shared: Shared,
    /// The engines and suites listed.
    catalog: Arc<LiveCatalog>,
    /// A lease: workers seen within one count as live on `/metrics`.
    lease: Duration,
    /// Turns for reads that use the database (see [`Options::max_reads`]).
    turns: Arc<Semaphore>,
    /// Tables of finished sweeps, which can no longer change.
    tables: Arc<TableCache>,
}

impl Reads {
    /// Reads over `shared`, listing `catalog`, with `options`' bound on reads at once.
    pub(crate) fn new(shared: Shared, catalog: Arc<LiveCatalog>, options: &Options) -> Self {
        Self {
            shared,
            catalog,
            lease: options.leases.lease,
            turns: Arc::new(Semaphore::new(options.max_reads.max(1))),
            tables: Arc::default(),
        }
    }

    /// The cache of finished sweeps' tables, for a use case that makes one stale (a build
    /// retried: its sweep runs again).
    pub(crate) fn tables(&self) -> Arc<TableCache> {
        self.tables.clone()
    }

    /// A turn for one read use case, held while it uses the database.
    async fn turn(&self) -> Result<SemaphorePermit<'_>, ReadError> {
        match tokio::time::timeout(READ_WAIT, self.turns.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Timed out, or (never: it is not closed) the semaphore was closed.
            _ => Err(ReadError::Busy),
        }
    }
}
