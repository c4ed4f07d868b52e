//! Deleting a sweep (`sweep delete`): everything of it, in one transaction, and nothing of
//! any other sweep. Results are append-only but for a sweep listed in `sweep_deletions`
//! (migration 0035), which this transaction lists first and unlists last. What other sweeps
//! share with it stays: source snapshots, suite versions, workers, the audit log (which says
//! it was deleted), results of other sweeps reused from it.

use super::backend::Backend;
use super::sql::{Tx, Value};
use super::StoreResult;

/// Deletes sweep `id` whole (cancelled first by the caller when it was running: leases still
/// held then find their jobs gone, which the worker protocol answers as lost leases). Returns
/// the results it had; `None` when there is no such sweep.
pub(crate) async fn delete_sweep<B: Backend>(db: &B, id: i64) -> StoreResult<Option<u64>> {
    let mut tx = db.begin().await?;
    let by = [Value::Int(id)];
    if tx
        .row("SELECT id FROM sweeps WHERE id = $1", &by)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    tx.execute("INSERT INTO sweep_deletions (sweep_id) VALUES ($1)", &by)
        .await?;
    let results = tx
        .execute("DELETE FROM results WHERE sweep_id = $1", &by)
        .await?;
    for sql in [
        "DELETE FROM result_sums WHERE sweep_id = $1",
        "DELETE FROM cross_checks WHERE sweep_id = $1",
        "DELETE FROM speed_runs WHERE sweep_id = $1",
        "DELETE FROM build_queue WHERE sweep_id = $1",
        "DELETE FROM requeued WHERE sweep_id = $1",
        "DELETE FROM position_failures
         WHERE build_id IN (SELECT b.id FROM builds b WHERE b.sweep_id = $1)",
        "DELETE FROM jobs WHERE sweep_id = $1",
        // Its builds, their failures and records, its stages and suites go with the row.
        "DELETE FROM sweeps WHERE id = $1",
        "DELETE FROM sweep_deletions WHERE sweep_id = $1",
    ] {
        tx.execute(sql, &by).await?;
    }
    tx.commit().await?;
    Ok(Some(results))
}
