//! Builds that failed on some workers, judged again at every claim against the workers live
//! now: when the workers that had not tried a build died, the ones left all failed it and are
//! never leased its jobs, so without this the sweep would never finish. Also what failing a
//! build closes, shared with a build failure reported by a worker (`build_failures.rs`).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::statements::has_engine;
use super::Queue;
use crate::store::backend::Backend;
use crate::store::clock::before;
use crate::store::retry::{build_fails, failed_build_error, Tally};
use crate::store::sql::{Columns, Reads, Tx, Value};
use crate::store::work::{close_work, Scope};
use crate::store::workers::{live, tokens_of};
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
/// `build_id` (for a binary-only engine, those that have its binary), and their tokens.
pub(crate) async fn live_workers<T: Tx + ?Sized>(
    tx: &mut T,
    build_id: i64,
    since: DateTime<Utc>,
) -> StoreResult<Tally> {
    let sql = format!(
        "SELECT count(*) AS n, {} AS tokens FROM workers w
         JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
         WHERE {} AND {}",
        tokens_of("w"),
        live("w", "$2"),
        has_engine("ls", "w.id")
    );
    tally(tx, &sql, &[Value::Int(build_id), Value::Time(since)]).await
}

/// The workers that failed build `build_id` (or were refused it), and their tokens.
pub(crate) async fn failed_on<T: Tx + ?Sized>(tx: &mut T, build_id: i64) -> StoreResult<Tally> {
    let sql = format!(
        "SELECT count(*) AS n, {} AS tokens FROM build_failures bf
         JOIN workers w ON w.id = bf.worker_id
         WHERE bf.build_id = $1",
        tokens_of("w")
    );
    tally(tx, &sql, &[Value::Int(build_id)]).await
}

/// The one row of a query counting workers (`n`) and their tokens (`tokens`).
async fn tally<T: Tx + ?Sized>(tx: &mut T, sql: &str, values: &[Value<'_>]) -> StoreResult<Tally> {
    let Some(row) = tx.row(sql, values).await? else {
        return Ok(Tally::default());
    };
    Ok(Tally {
        workers: row.int("n")?,
        tokens: row.int("tokens")?,
    })
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// work waiting, against the workers live now (seen within the last `lease`), and fails those
/// the rule fails now: when the workers that had not tried a build died, the ones left all
/// failed it and are never leased its jobs, so without this the sweep would never finish.
pub(crate) async fn fail_stalled_builds<B: Backend>(
    db: &Queue<B>,
    lease: Duration,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    // One lock-free look, touching only builds with recorded failures and no build error (a
    // handful); only those the rule would fail now get a transaction, which checks again
    // under the build's lock.
    let since = before(now, lease);
    for (build_id, failed) in stalled_candidates(db).await? {
        let mut tx = db.backend.begin().await?;
        let live = live_workers(&mut tx, build_id, since).await?;
        if !build_fails(failed, max_attempts, live) {
            continue;
        }
        if let Some(error) = judge_locked::<B>(&mut tx, build_id, max_attempts, live).await? {
            close_build::<B>(&mut tx, build_id, &error).await?;
            tx.commit().await?;
        }
    }
    Ok(())
}

/// The builds without a build error that failed on some workers and still have work
/// waiting, with who failed them.
async fn stalled_candidates<B: Backend>(db: &Queue<B>) -> StoreResult<Vec<(i64, Tally)>> {
    let rows = db
        .backend
        .reader()
        .rows(
            &format!(
                "SELECT bf.build_id, count(*) AS n, {} AS tokens FROM build_failures bf
                 JOIN builds b ON b.id = bf.build_id
                 JOIN workers w ON w.id = bf.worker_id
                 WHERE b.build_error IS NULL
                   AND (EXISTS (SELECT 1 FROM build_queue bq WHERE bq.build_id = bf.build_id)
                        OR EXISTS (SELECT 1 FROM requeued rq WHERE rq.build_id = bf.build_id)
                        OR EXISTS (SELECT 1 FROM jobs j
                                   WHERE j.build_id = bf.build_id AND j.kind = 'check'
                                     AND j.state IN ('queued', 'leased')))
                 GROUP BY bf.build_id ORDER BY bf.build_id",
                tokens_of("w")
            ),
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let failed = Tally {
                workers: r.int("n")?,
                tokens: r.int("tokens")?,
            };
            Ok((r.int("build_id")?, failed))
        })
        .collect()
}

/// The build error of build `build_id` if it is still open and fails now with `live`, judged
/// under the lock `build_failed` takes: a failure recorded meanwhile is counted here, and a
/// build it failed meanwhile is left alone.
async fn judge_locked<B: Backend>(
    tx: &mut B::Tx,
    build_id: i64,
    max_attempts: u32,
    live: Tally,
) -> StoreResult<Option<String>> {
    let lock = format!(
        "SELECT b.build_error IS NULL AS open FROM builds b WHERE b.id = $1{}",
        B::lock_rows("b")
    );
    let Some(row) = tx.row(&lock, &[Value::Int(build_id)]).await? else {
        return Ok(None);
    };
    if !row.flag("open")? {
        return Ok(None);
    }
    let failed = failed_on(tx, build_id).await?;
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
    Ok(failed_build_error(failed, max_attempts, live, &last))
}
