//! What a transaction changes in lease rows: jobs no longer held (their bits set) and
//! renewals, gathered per row and written at the end, so each row is written once however
//! many of its jobs changed. A row that no longer holds anything is deleted.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::LeaseRow;
use crate::store::sql::{Tx, Value};
use crate::store::StoreResult;

/// One row's change.
struct Change {
    /// The row as read.
    read: LeaseRow,
    /// Its new bits.
    closed: i64,
    /// Its new expiry.
    expires_at: DateTime<Utc>,
}

/// Changes to lease rows, by id.
#[derive(Default)]
pub(crate) struct LeaseWrites(BTreeMap<i64, Change>);

impl LeaseWrites {
    fn change(&mut self, lease: &LeaseRow) -> &mut Change {
        self.0.entry(lease.id).or_insert_with(|| Change {
            read: lease.clone(),
            closed: lease.closed,
            expires_at: lease.expires_at,
        })
    }

    /// `job` is no longer held by `lease`.
    pub fn close(&mut self, lease: &LeaseRow, job: i64) {
        if let Some(bit) = lease.bit(job) {
            self.change(lease).closed |= bit;
        }
    }

    /// `lease` lasts until `until` (never shortened).
    pub fn renew(&mut self, lease: &LeaseRow, until: DateTime<Utc>) {
        let c = self.change(lease);
        c.expires_at = c.expires_at.max(until);
    }

    /// Writes the changes: rows holding nothing any more are deleted, the others updated
    /// where they changed.
    pub async fn apply<B: Backend>(self, db: &Queue<B>, tx: &mut B::Tx) -> StoreResult<()> {
        let mut gone = Vec::new();
        let mut set = Vec::new();
        for (id, c) in self.0 {
            if c.closed == c.read.all_closed() {
                gone.push(id);
            } else if c.closed != c.read.closed || c.expires_at != c.read.expires_at {
                set.push((id, c.closed, c.expires_at));
            }
        }
        if !gone.is_empty() {
            let sql = super::statements::delete_leases::<B>();
            tx.execute(&sql, &[Value::Ints(&gone)]).await?;
        }
        db.backend.set_leases(tx, &set).await
    }
}

/// Marks `jobs` no longer held by `lease`, inside `tx`.
pub(crate) async fn close_jobs<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    lease: &LeaseRow,
    jobs: &[i64],
) -> StoreResult<()> {
    let mut writes = LeaseWrites::default();
    for &job in jobs {
        writes.close(lease, job);
    }
    writes.apply(db, tx).await
}
