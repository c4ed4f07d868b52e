//! Registering a worker, with the binary-only engines it has.

use sweep_domain::wire::RegisterWorker;

use super::{Db, SqliteStore};
use crate::store::StoreResult;

/// Registers a worker with the binary-only engines it has; returns its id.
pub(super) async fn register(
    store: &SqliteStore,
    w: &RegisterWorker,
    token_id: Option<i64>,
) -> StoreResult<i64> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO workers (name, host, cores, registered_at, last_seen_at, token_id)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5) RETURNING id",
    )
    .bind(&w.name)
    .bind(&w.host)
    .bind(i64::from(w.cores))
    .bind(now)
    .bind(token_id)
    .fetch_one(&mut *tx)
    .await
    .db()?;
    for engine in &w.engines {
        sqlx::query("INSERT OR IGNORE INTO worker_engines (worker_id, engine) VALUES (?1, ?2)")
            .bind(id)
            .bind(engine)
            .execute(&mut *tx)
            .await
            .db()?;
    }
    tx.commit().await.db()?;
    Ok(id)
}
