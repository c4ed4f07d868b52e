//! Registering a worker, with the binary-only engines it has: one row, and one set-based
//! insert of its engines, within its token's cap on live workers.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use sweep_domain::wire::RegisterWorker;

use crate::store::clock::before;
use crate::store::workers::{check_cap, token_live_workers};
use crate::store::{StoreResult, WorkerCap};

/// The first key of the advisory locks registrations of one token take (the second is the
/// token's id): "SW" "R" in ASCII, apart from every other lock's.
const REGISTRATION_LOCKS: i32 = 0x5357_5200;

/// Registers a worker with the binary-only engines it has, unless its token holds `cap`
/// live workers already; returns its id.
pub(super) async fn register(
    pool: &PgPool,
    w: &RegisterWorker,
    token_id: Option<i64>,
    cap: Option<WorkerCap>,
    now: DateTime<Utc>,
) -> StoreResult<i64> {
    let mut tx = pool.begin().await?;
    if let (Some(token), Some(cap)) = (token_id, cap) {
        // Registrations of one token wait for each other, so two cannot both see room for
        // one. Tokens whose ids agree in their low 32 bits share a lock: they only wait.
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(REGISTRATION_LOCKS)
            .bind(token as i32)
            .execute(&mut *tx)
            .await?;
        let held: i64 = sqlx::query_scalar(&token_live_workers("$1", "$2"))
            .bind(token)
            .bind(before(now, cap.lease))
            .fetch_one(&mut *tx)
            .await?;
        check_cap(held, cap)?;
    }
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
