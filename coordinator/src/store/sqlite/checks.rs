//! Cross-checks on SQLite: the statements mirror the Postgres ones (`postgres/checks.rs`).
//! Planning them at submission is shared (`store/sweeps.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{SqliteConnection, SqlitePool};
use sweep_domain::wire::BatchAck;

use super::measured::{bind_measured, measured_columns, Measured};
use super::settle::settle;
use super::{expiry, Db};
use crate::store::batch::{Checked, Report};
use crate::store::job::JobRow;
use crate::store::StoreResult;

/// Leases up to `max` cross-checks to `worker_id` inside the lease's write transaction (see
/// `statements::LEASE_CHECKS` on Postgres: only once the original exists, not to its worker
/// unless no other live worker could take it); closes those whose original is an error.
/// Returns the (id, attempt) of each check leased, in id order.
pub(super) async fn pick(
    conn: &mut SqliteConnection,
    worker_id: i64,
    max: u32,
    lease: Duration,
    now: i64,
) -> StoreResult<Vec<(i64, i32)>> {
    let since = now.saturating_sub(expiry(0, lease));
    let picked: Vec<(i64, bool)> = sqlx::query_as(
        "SELECT j.id, r.error IS NOT NULL
         FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
         JOIN results r ON r.build_id = j.build_id AND r.suite_id = j.suite_id
                       AND r.position_index = j.first_index AND r.depth = j.depth
         WHERE j.kind = 'check' AND j.state IN ('queued', 'leased')
           AND (j.state = 'queued' OR j.lease_expires_at < ?3)
           AND NOT s.cancelled
           AND (r.error IS NOT NULL OR (
               NOT EXISTS (SELECT 1 FROM build_failures bf
                           WHERE bf.build_id = j.build_id AND bf.worker_id = ?1)
               AND (s.source_sha256 IS NOT NULL
                    OR EXISTS (SELECT 1 FROM worker_engines we
                               WHERE we.worker_id = ?1 AND we.engine = s.engine))
               AND (r.worker_id <> ?1 OR NOT EXISTS (
                   SELECT 1 FROM workers w
                   WHERE w.id <> ?1 AND w.last_seen_at > ?4
                     AND NOT EXISTS (SELECT 1 FROM build_failures bw
                                     WHERE bw.build_id = j.build_id AND bw.worker_id = w.id)
                     AND (s.source_sha256 IS NOT NULL
                          OR EXISTS (SELECT 1 FROM worker_engines ew
                                     WHERE ew.worker_id = w.id AND ew.engine = s.engine))))))
         ORDER BY j.id
         LIMIT ?2",
    )
    .bind(worker_id)
    .bind(i64::from(max))
    .bind(now)
    .bind(since)
    .fetch_all(&mut *conn)
    .await
    .db()?;
    let mut leased = Vec::new();
    for (id, original_failed) in picked {
        if original_failed {
            // Nothing to compare: closed, so the sweep does not wait for it.
            sqlx::query("UPDATE jobs SET state = 'done', updated_at = ?2 WHERE id = ?1")
                .bind(id)
                .bind(now)
                .execute(&mut *conn)
                .await
                .db()?;
        } else {
            let attempt: i32 = sqlx::query_scalar(
                "UPDATE jobs SET state = 'leased', attempt = attempt + 1, worker_id = ?2,
                        lease_expires_at = ?3, updated_at = ?4 WHERE id = ?1 RETURNING attempt",
            )
            .bind(id)
            .bind(worker_id)
            .bind(expiry(now, lease))
            .bind(now)
            .fetch_one(&mut *conn)
            .await
            .db()?;
            leased.push((id, attempt));
        }
    }
    Ok(leased)
}

/// Stores a cross-check's measurements (errors included: a failed check is recorded, not
/// retried) in `cross_checks`, never in `results`, and renews or closes the job. The lease
/// was checked by the caller; it marks the worker seen and commits.
pub(super) async fn report(
    conn: &mut SqliteConnection,
    job: &JobRow,
    report: &Report<'_>,
    checked: &[Checked],
    now: i64,
    lease: Duration,
) -> StoreResult<BatchAck> {
    let mut accepted = 0u32;
    for c in checked {
        let insert = sqlx::query(concat!(
            "INSERT INTO cross_checks (",
            measured_columns!(),
            ", original_worker_id, mismatch)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    (SELECT r.worker_id FROM results r WHERE r.build_id = ?1 AND r.suite_id = ?2
                       AND r.position_index = ?3 AND r.depth = ?4),
                    COALESCE((SELECT r.error IS NULL AND ?15 IS NULL
                                     AND (r.nodes <> ?11 OR r.bestmove <> ?12)
                              FROM results r WHERE r.build_id = ?1 AND r.suite_id = ?2
                                AND r.position_index = ?3 AND r.depth = ?4), FALSE)
             WHERE TRUE
             ON CONFLICT DO NOTHING"
        ));
        accepted += bind_measured(insert, job, report, c, now)
            .execute(&mut *conn)
            .await
            .db()?
            .rows_affected() as u32;
    }
    settle(conn, job, report, Measured::CrossChecks, now, lease).await?;
    Ok(BatchAck {
        accepted,
        duplicates: (report.results.len() as u32).saturating_sub(accepted),
        cancelled: job.cancelled,
    })
}

/// Per worker of `workers`: cross-checks it took part in and how many mismatched (see the
/// Postgres twin).
pub(super) async fn per_worker(
    pool: &SqlitePool,
    workers: &[i64],
) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
    let mut out = BTreeMap::new();
    for &w in workers {
        // Over the indexes on either worker column: only this worker's checks are read.
        let (n, m): (i64, i64) = sqlx::query_as(
            "SELECT count(*), COALESCE(sum(mismatch), 0) FROM (
                 SELECT mismatch FROM cross_checks WHERE worker_id = ?1
                 UNION ALL
                 SELECT mismatch FROM cross_checks
                 WHERE original_worker_id = ?1 AND worker_id <> ?1
             )",
        )
        .bind(w)
        .fetch_one(pool)
        .await
        .db()?;
        if n > 0 {
            out.insert(w, (n as u64, m as u64));
        }
    }
    Ok(out)
}
