//! The rows the shared store code and the backends hand each other ([`super::backend`]): a
//! new sweep's jobs as inserted, and the earlier results a new sweep copies. Apart from the
//! modules that make them (`sweeps`, `reuse`), so the backend interface does not depend on
//! the logic written over it.

use std::collections::BTreeMap;

use sweep_domain::limit::Limit;

use super::sql::Columns;
use super::{StoreError, StoreResult};

/// The kind of a job: a chunk of positions to measure, or a cross-check of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    /// Measures a chunk of positions into `results`.
    Work,
    /// Measures one position again into `cross_checks`.
    Check,
    /// Times a variant against the baseline into `speed_runs` (`[speed]`).
    Speed,
}

impl JobKind {
    /// The value of `jobs.kind`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobKind::Work => "work",
            JobKind::Check => "check",
            JobKind::Speed => "speed",
        }
    }
}

/// One job of a new sweep, as inserted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewJob {
    /// Build.
    pub build_id: i64,
    /// Suite version.
    pub suite_id: i64,
    /// First position.
    pub first: i32,
    /// Positions (1 for a check).
    pub count: i32,
    /// Depth (0 for a node limit).
    pub depth: i32,
    /// Node limit (0 for a depth limit).
    pub nodes_limit: i64,
}

impl NewJob {
    /// A job of `build_id` over `count` positions of `suite_id` from `first`, at `limit`.
    pub(crate) fn new(build_id: i64, suite_id: i64, first: u32, count: u32, limit: &Limit) -> Self {
        let (depth, nodes_limit) = limit.key();
        NewJob {
            build_id,
            suite_id,
            first: first as i32,
            count: count as i32,
            depth,
            nodes_limit,
        }
    }
}

/// An earlier, measured (not itself copied) and valid result of a build with one of the new
/// sweep's fingerprints.
#[derive(Debug, Clone)]
pub(crate) struct Prior {
    /// Fingerprint of its build.
    pub fingerprint: String,
    /// Its build (its row is found again by its primary key when copied).
    pub build_id: i64,
    /// Its suite version.
    pub suite_id: i64,
    /// Its position's index in that suite.
    pub index: i32,
    /// Its depth (0 for a node limit).
    pub depth: i32,
    /// Its node limit (0 for a depth limit).
    pub nodes_limit: i64,
    /// The sweep that measured it.
    pub sweep_id: i64,
    /// Its best move, judged again against the new suite's position.
    pub bestmove: String,
}

impl Prior {
    /// From a row of either backend's candidates query (columns `fingerprint`, `build_id`,
    /// `suite_id`, `position_index`, `depth`, `nodes_limit`, `sweep_id`, `bestmove`).
    pub(crate) fn of(r: &impl Columns) -> StoreResult<Self> {
        Ok(Prior {
            fingerprint: r.text("fingerprint")?,
            build_id: r.int("build_id")?,
            suite_id: r.int("suite_id")?,
            index: int32(r, "position_index")?,
            depth: int32(r, "depth")?,
            nodes_limit: r.int("nodes_limit")?,
            sweep_id: r.int("sweep_id")?,
            bestmove: r.text("bestmove")?,
        })
    }
}

/// A result to copy into the new sweep: the new row's key and verdict, and the prior row
/// it copies (by primary key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopyRow {
    /// The new sweep's job that covers the position.
    pub job_id: i64,
    /// The new sweep's build.
    pub build_id: i64,
    /// The new sweep's suite version.
    pub suite_id: i64,
    /// The position's index in that suite.
    pub index: i32,
    /// Its EPD id in that suite.
    pub position_id: String,
    /// The coordinator's verdict on the copied best move for this suite's position.
    pub solved: bool,
    /// Depth of both rows (0 for a node limit).
    pub depth: i32,
    /// The copied row's build.
    pub from_build: i64,
    /// The copied row's suite version.
    pub from_suite: i64,
    /// The copied row's position index.
    pub from_index: i32,
}

/// A 32-bit integer column.
pub(crate) fn int32(r: &impl Columns, col: &str) -> StoreResult<i32> {
    let v = r.int(col)?;
    i32::try_from(v).map_err(|_| StoreError::Internal(anyhow::anyhow!("stored {col} {v}")))
}

/// A 128-bit sum as the `u64` the wire carries: past `u64::MAX` it saturates, never wraps.
pub(crate) fn saturating_u64(sum: u128) -> u64 {
    u64::try_from(sum).unwrap_or(u64::MAX)
}

/// A result's stored counters (a JSON object of name -> count, or NULL) as a map. Both
/// backends store what [`super::batch`] wrote, so anything else is a damaged row.
pub(crate) fn counters_of(json: Option<String>) -> StoreResult<BTreeMap<String, u64>> {
    match json {
        None => Ok(BTreeMap::new()),
        Some(text) => serde_json::from_str(&text)
            .map_err(|e| StoreError::Internal(anyhow::anyhow!("stored counters `{text}`: {e}"))),
    }
}
