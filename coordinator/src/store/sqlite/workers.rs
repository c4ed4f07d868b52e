//! The workers page: registered workers with what they hold and how fast they report.

use std::time::Duration;

use sqlx::{Row, SqlitePool};
use sweep_domain::wire::WorkerInfo;

use super::auth::time_of;
use super::{now_ms, Db};
use crate::store::StoreResult;

/// Workers seen within `seen_within`, most recently seen first, at most `limit`. Leases held
/// and recent results are each counted in one pass over an index, never once per worker.
pub(super) async fn workers(
    reader: &SqlitePool,
    seen_within: Duration,
    limit: u32,
) -> StoreResult<Vec<WorkerInfo>> {
    let now = now_ms();
    let since = now.saturating_sub(i64::try_from(seen_within.as_millis()).unwrap_or(i64::MAX));
    let rows = sqlx::query(
        "WITH held AS (
             SELECT worker_id, count(*) AS n FROM jobs
             WHERE state = 'leased' AND lease_expires_at > ?1 GROUP BY worker_id),
         recent AS (
             SELECT worker_id, count(*) AS n FROM results
             WHERE created_at > ?1 - 60000 GROUP BY worker_id)
         SELECT w.id, w.name, w.host, w.cores, w.registered_at, w.last_seen_at,
                coalesce(held.n, 0) AS jobs, coalesce(recent.n, 0) AS results
         FROM workers w
         LEFT JOIN held ON held.worker_id = w.id
         LEFT JOIN recent ON recent.worker_id = w.id
         WHERE w.last_seen_at > ?2
         ORDER BY w.last_seen_at DESC, w.id DESC
         LIMIT ?3",
    )
    .bind(now)
    .bind(since)
    .bind(i64::from(limit))
    .fetch_all(reader)
    .await
    .db()?;
    rows.iter()
        .map(|r| {
            Ok(WorkerInfo {
                id: r.get("id"),
                name: r.get("name"),
                host: r.get("host"),
                cores: u32::try_from(r.get::<i64, _>("cores")).unwrap_or(0),
                jobs: r.get::<i64, _>("jobs").max(0) as u64,
                results_last_minute: r.get::<i64, _>("results").max(0) as u64,
                registered_at: time_of(r.get("registered_at"))?,
                last_seen_at: time_of(r.get("last_seen_at"))?,
                // Filled in by the service (`Store::worker_checks`).
                checks: 0,
                mismatches: 0,
            })
        })
        .collect()
}
