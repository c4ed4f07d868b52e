//! Registering a worker, with the binary-only engines it has, within its token's cap on live
//! workers.

use sweep_domain::wire::RegisterWorker;

use super::{Db, SqliteStore};
use crate::store::clock::before;
use crate::store::workers::{check_cap, token_live_workers};
use crate::store::{StoreResult, WorkerCap};

/// Registers a worker with the binary-only engines it has, unless its token holds `cap`
/// live workers already; returns its id. The write transaction holds the file's write lock
/// from its start, so registrations of one token never both see room for one.
pub(super) async fn register(
    store: &SqliteStore,
    w: &RegisterWorker,
    token_id: Option<i64>,
    cap: Option<WorkerCap>,
) -> StoreResult<i64> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    if let (Some(token), Some(cap)) = (token_id, cap) {
        let since = before(store.clock.now(), cap.lease).timestamp_millis();
        let held: i64 = sqlx::query_scalar(&token_live_workers("?1", "?2"))
            .bind(token)
            .bind(since)
            .fetch_one(&mut *tx)
            .await
            .db()?;
        check_cap(held, cap)?;
    }
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
