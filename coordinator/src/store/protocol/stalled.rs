//! Builds that failed on some workers, judged again at every claim against the workers live
//! now: when the workers that had not tried a build died, the ones left all failed it and are
//! never leased its jobs, so without this the sweep would never finish. Also what failing a
//! build closes, shared with a build failure reported by a worker (`store/build_failures.rs`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::queue::{close_work, Scope};
use super::statements::has_engine;
use crate::store::backend::Backend;
use crate::store::clock::before;
use crate::store::retry::{build_fails, failed_build_error};
use crate::store::sql::{count, Columns, Reads, Tx, Value};
use crate::store::workers::live;
use crate::store::StoreResult;

/// Gives build `build_id` its build error and closes its open work: the fresh jobs of its
/// cursor, its jobs waiting to be handed out again, and its open cross-checks. Jobs still
/// held by a lease are no longer held (the lease check refuses a failed build's jobs).
pub(crate) async fn close_build<B: Backend>(
    tx: &mut B::Tx,
    build_id: i64,
    error: &str,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE builds SET build_error = $2 WHERE id = $1",
        &[Value::Int(build_id), Value::Text(error)],
    )
    .await?;
    close_work::<B>(tx, Scope::Build(build_id), "failed").await
}

/// Workers seen since `since`, and not stopped since (a `release`), that could take build
/// `build_id`: for a binary-only engine, those that have its binary.
pub(crate) async fn live_workers<T: Tx + ?Sized>(
    tx: &mut T,
    build_id: i64,
    since: DateTime<Utc>,
) -> StoreResult<i64> {
    let sql = format!(
        "SELECT count(*) AS n FROM workers w
         JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
         WHERE {} AND {}",
        live("w", "$2"),
        has_engine("ls", "w.id")
    );
    count(tx, &sql, &[Value::Int(build_id), Value::Time(since)]).await
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// work waiting, against the workers live now (seen within the last `lease`), and fails those
/// the rule fails now: when the workers that had not tried a build died, the ones left all
/// failed it and are never leased its jobs, so without this the sweep would never finish.
pub(crate) async fn fail_stalled_builds<B: Backend>(
    db: &B,
    lease: Duration,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    // One lock-free look, touching only builds with recorded failures and no build error (a
    // handful); only those the rule would fail now get a transaction, which checks again
    // under the build's lock.
    let since = before(now, lease);
    let candidates = db
        .reader()
        .rows(
            "SELECT bf.build_id, count(*) AS failed FROM build_failures bf
             JOIN builds b ON b.id = bf.build_id
             WHERE b.build_error IS NULL
               AND (EXISTS (SELECT 1 FROM build_queue bq WHERE bq.build_id = bf.build_id)
                    OR EXISTS (SELECT 1 FROM requeued rq WHERE rq.build_id = bf.build_id)
                    OR EXISTS (SELECT 1 FROM jobs j
                               WHERE j.build_id = bf.build_id AND j.kind = 'check'
                                 AND j.state IN ('queued', 'leased')))
             GROUP BY bf.build_id ORDER BY bf.build_id",
            &[],
        )
        .await?;
    for c in candidates {
        let build_id = c.int("build_id")?;
        let mut tx = db.begin().await?;
        let live = live_workers(&mut tx, build_id, since).await?;
        if !build_fails(c.int("failed")?, max_attempts, live) {
            continue;
        }
        // The lock build_failed takes: a failure recorded meanwhile is counted here, and a
        // build it failed meanwhile is left alone.
        let lock = format!(
            "SELECT b.build_error IS NULL AS open,
                    (SELECT count(*) FROM build_failures f WHERE f.build_id = b.id) AS failed
             FROM builds b WHERE b.id = $1{}",
            B::lock_rows("b")
        );
        let Some(row) = tx.row(&lock, &[Value::Int(build_id)]).await? else {
            continue;
        };
        if !row.flag("open")? {
            continue;
        }
        let last = tx
            .row(
                &format!(
                    "SELECT output FROM build_failures WHERE build_id = $1 {} LIMIT 1",
                    B::NEWEST_FAILURE_FIRST
                ),
                &[Value::Int(build_id)],
            )
            .await?
            .map(|r| r.text("output"))
            .transpose()?
            .unwrap_or_default();
        if let Some(error) = failed_build_error(row.int("failed")?, max_attempts, live, &last) {
            close_build::<B>(&mut tx, build_id, &error).await?;
            tx.commit().await?;
        }
    }
    Ok(())
}
