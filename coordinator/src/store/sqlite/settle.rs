//! After a report's measurements are stored (in `results` by `reports`, in `cross_checks`
//! by `checks`): the job's new state and its renewed lease.

use std::time::Duration;

use sqlx::SqliteConnection;

use super::measured::Measured;
use super::{expiry, Db};
use crate::store::batch::Report;
use crate::store::job::JobRow;
use crate::store::StoreResult;

/// Sets a reported job's state (see [`JobRow::state_after`], counting the positions it has
/// in the table it is `measured` in) and renews its lease; a cancelled sweep's job is left
/// as it is.
pub(super) async fn settle(
    conn: &mut SqliteConnection,
    job: &JobRow,
    report: &Report<'_>,
    measured: Measured,
    now: i64,
    lease: Duration,
) -> StoreResult<()> {
    let has = if report.finished && !job.cancelled {
        let table = match measured {
            Measured::Results => "results",
            Measured::CrossChecks => "cross_checks",
        };
        let range = job.range();
        sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table}
             WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3
               AND position_index >= ?4 AND position_index < ?5"
        ))
        .bind(job.build_id)
        .bind(job.suite_id)
        .bind(job.depth)
        .bind(range.start)
        .bind(range.end)
        .fetch_one(&mut *conn)
        .await
        .db()?
    } else {
        0
    };
    let Some(state) = job.state_after(report.finished, has) else {
        return Ok(());
    };
    sqlx::query("UPDATE jobs SET state = ?2, lease_expires_at = ?3, updated_at = ?4 WHERE id = ?1")
        .bind(report.job_id)
        .bind(state)
        .bind(expiry(now, lease))
        .bind(now)
        .execute(&mut *conn)
        .await
        .db()?;
    Ok(())
}
