//! Registering a worker, with the binary-only engines it has: one row, and one set-based
//! insert of its engines.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use sweep_domain::wire::RegisterWorker;

use crate::store::StoreResult;

/// Registers a worker with the binary-only engines it has; returns its id.
pub(super) async fn register(
    pool: &PgPool,
    w: &RegisterWorker,
    token_id: Option<i64>,
    now: DateTime<Utc>,
) -> StoreResult<i64> {
    let mut tx = pool.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO workers (name, host, cores, token_id, registered_at, last_seen_at)
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
    )
    .bind(&w.name)
    .bind(&w.host)
    .bind(w.cores as i32)
    .bind(token_id)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO worker_engines (worker_id, engine)
         SELECT $1, e FROM unnest($2::text[]) AS e ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(&w.engines)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}
