//! What a stored result and a stored cross-check share: the table a job's measurements go
//! to, and the columns both inserts bind first, in one order.

use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;
use sqlx::Sqlite;

use crate::store::batch::{Checked, Report};
use crate::store::job::JobRow;

/// Where a job's measurements are stored.
#[derive(Debug, Clone, Copy)]
pub(super) enum Measured {
    /// A work job: `results`.
    Results,
    /// A cross-check: `cross_checks`.
    CrossChecks,
}

/// The columns [`bind_measured`] binds, as `?1` to `?16`, for an insert's column list.
macro_rules! measured_columns {
    () => {
        "build_id, suite_id, position_index, depth, nodes_limit, sweep_id, job_id, attempt, \
         worker_id, position_id, nodes, bestmove, reached_depth, time_ms, error, created_at"
    };
}
pub(super) use measured_columns;

/// An insert into `results` or `cross_checks` with `?1` to `?16` bound, in the order of
/// [`measured_columns`] (`created_at` is `now`); each statement binds its own columns after
/// them.
pub(super) fn bind_measured<'q>(
    query: Query<'q, Sqlite, SqliteArguments<'q>>,
    job: &JobRow,
    report: &Report<'_>,
    c: &'q Checked,
    now: i64,
) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    query
        .bind(job.build_id)
        .bind(job.suite_id)
        .bind(c.index)
        .bind(job.depth)
        .bind(job.nodes_limit)
        .bind(job.sweep_id)
        .bind(report.job_id)
        .bind(report.attempt)
        .bind(report.worker_id)
        .bind(&c.position_id)
        .bind(c.nodes)
        .bind(&c.bestmove)
        .bind(c.reached_depth)
        .bind(c.time_ms)
        .bind(&c.error)
        .bind(now)
}
