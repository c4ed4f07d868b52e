//! Which ended sweeps the operator's webhooks have been told of, written once for both
//! backends: `sweeps.notified_at` is NULL until a coordinator takes on announcing the sweep,
//! and setting it is the claim, so several coordinators on one database announce each sweep
//! once (see `migrations/postgres/0027_sweep_notified.sql`).

use sweep_domain::wire::SweepSummary;

use super::backend::Backend;
use super::reads::{summary_of, SUMMARY_SQL};
use super::sql::{Columns, Reads, Tx, Value};
use super::StoreResult;

/// See [`super::Store::sweeps_to_announce`]: one statement, whatever the number of sweeps.
pub(crate) async fn to_announce(db: &impl Reads, limit: u32) -> StoreResult<Vec<SweepSummary>> {
    let sql = format!("{SUMMARY_SQL} WHERE s.notified_at IS NULL ORDER BY s.id LIMIT $1");
    db.rows(&sql, &[Value::Int(i64::from(limit))])
        .await?
        .iter()
        .map(summary_of)
        .collect()
}

/// See [`super::Store::claim_announcement`].
pub(crate) async fn claim<B: Backend>(db: &B, id: i64) -> StoreResult<bool> {
    let now = db.clock().now();
    let mut tx = db.begin().await?;
    let claimed = tx
        .row(
            "UPDATE sweeps SET notified_at = $2 WHERE id = $1 AND notified_at IS NULL
             RETURNING id",
            &[Value::Int(id), Value::Time(now)],
        )
        .await?
        .is_some();
    tx.commit().await?;
    Ok(claimed)
}

/// See [`super::Store::sweeps_ended_before`]: a sweep's announcement is when it was seen to
/// have ended (within a few seconds of it).
pub(crate) async fn ended_before(
    db: &impl Reads,
    cutoff: chrono::DateTime<chrono::Utc>,
    limit: u32,
) -> StoreResult<Vec<i64>> {
    db.rows(
        "SELECT id FROM sweeps WHERE notified_at IS NOT NULL AND notified_at < $1
         ORDER BY id LIMIT $2",
        &[Value::Time(cutoff), Value::Int(i64::from(limit))],
    )
    .await?
    .iter()
    .map(|r| r.int("id"))
    .collect()
}
