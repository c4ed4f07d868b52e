//! Expired leases, taken back by a claim (no reaper is needed; a coordinator's claims look
//! at most every [`super::EXPIRY_CHECKS_MS`] milliseconds): the jobs they still hold go
//! back to the queue, and the rows go, so any report naming them is a lost lease.

use chrono::{DateTime, Utc};

use super::queued::{jobs, put_back};
use super::statements as stmt;
use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::{JobRow, LeaseRow};
use crate::store::sql::{Tx, Value};
use crate::store::StoreResult;

/// Expired leases one claim takes back at most; the next claim takes the rest.
const PER_CLAIM: i64 = 256;

/// Takes back up to [`PER_CLAIM`] leases that expired before `now`, oldest first, inside a
/// claim's transaction: their held work jobs go to `requeued` (but a cancelled sweep's or a
/// failed build's, which are closed), their cross-checks back to `queued`, and the rows
/// are deleted. Leases another transaction holds (an upload to one right now) are skipped.
/// Returns whether there may be more: it took [`PER_CLAIM`].
pub(super) async fn take_back<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let sql = stmt::expired::<B>();
    let expired = tx
        .rows(&sql, &[Value::Time(now), Value::Int(PER_CLAIM)])
        .await?
        .iter()
        .map(LeaseRow::read)
        .collect::<StoreResult<Vec<_>>>()?;
    if expired.is_empty() {
        return Ok(false);
    }
    let more = expired.len() as i64 >= PER_CLAIM;
    let held: Vec<i64> = expired.iter().flat_map(LeaseRow::held).collect();
    let rows = jobs(db, tx, &held).await?;
    // A cancelled sweep's or a failed build's jobs are closed: not put back.
    let open: Vec<&JobRow> = held
        .iter()
        .filter_map(|id| rows.get(id))
        .filter(|j| !j.cancelled && !j.build_failed)
        .collect();
    put_back::<B>(tx, &open, now).await?;
    let ids: Vec<i64> = expired.iter().map(|l| l.id).collect();
    let sql = stmt::delete_leases::<B>();
    tx.execute(&sql, &[Value::Ints(&ids)]).await?;
    Ok(more)
}
