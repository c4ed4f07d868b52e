//! The workers page: registered workers with what they hold and how fast they report.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row};
use sweep_domain::wire::WorkerInfo;

use crate::store::StoreResult;

/// Workers seen within `seen_within`, most recently seen first, at most `limit`. Leases held
/// and recent results are each counted in one pass over an index (`jobs_lease_expiry`,
/// `results_created`), never once per worker.
pub(super) async fn workers(
    pool: &PgPool,
    seen_within: Duration,
    limit: u32,
) -> StoreResult<Vec<WorkerInfo>> {
    let rows = sqlx::query(
        "WITH held AS (
             SELECT worker_id, count(*) AS n FROM jobs
             WHERE state = 'leased' AND lease_expires_at > now() GROUP BY worker_id),
         recent AS (
             SELECT worker_id, count(*) AS n FROM results
             WHERE created_at > now() - interval '1 minute' GROUP BY worker_id)
         SELECT w.id, w.name, w.host, w.cores, w.registered_at, w.last_seen_at,
                coalesce(held.n, 0) AS jobs, coalesce(recent.n, 0) AS results
         FROM workers w
         LEFT JOIN held ON held.worker_id = w.id
         LEFT JOIN recent ON recent.worker_id = w.id
         WHERE w.last_seen_at > now() - make_interval(secs => $1)
         ORDER BY w.last_seen_at DESC, w.id DESC
         LIMIT $2",
    )
    .bind(seen_within.as_secs_f64())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| WorkerInfo {
            id: r.get("id"),
            name: r.get("name"),
            host: r.get("host"),
            cores: u32::try_from(r.get::<i32, _>("cores")).unwrap_or(0),
            jobs: r.get::<i64, _>("jobs").max(0) as u64,
            results_last_minute: r.get::<i64, _>("results").max(0) as u64,
            registered_at: r.get::<DateTime<Utc>, _>("registered_at"),
            last_seen_at: r.get::<DateTime<Utc>, _>("last_seen_at"),
            // Filled in by the service (`Store::worker_checks`).
            checks: 0,
            mismatches: 0,
        })
        .collect())
}
