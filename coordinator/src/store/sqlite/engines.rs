//! Engine definitions added over the API (the twin of Postgres' `engines.rs`; timestamps are
//! unix milliseconds).

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};

use super::auth::time_of;
use super::{now_ms, Db, SqliteStore};
use crate::store::{StoreResult, StoredEngine};

fn stored(r: &SqliteRow) -> StoreResult<StoredEngine> {
    Ok(StoredEngine {
        name: r.get("name"),
        definition: r.get("definition"),
        updated_at: time_of(r.get("updated_at"))?,
        updated_by: r.get("updated_by"),
    })
}

/// See [`crate::store::Store::put_engine`].
pub(super) async fn put_engine(
    store: &SqliteStore,
    name: &str,
    definition: &str,
    updated_by: &str,
) -> StoreResult<(StoredEngine, bool)> {
    let mut tx = store.write_tx().await?;
    let existed: Option<String> = sqlx::query_scalar("SELECT name FROM engines WHERE name = ?1")
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .db()?;
    let row = sqlx::query(
        "INSERT INTO engines (name, definition, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (name) DO UPDATE
             SET definition = excluded.definition, updated_at = excluded.updated_at,
                 updated_by = excluded.updated_by
         RETURNING name, definition, updated_at, updated_by",
    )
    .bind(name)
    .bind(definition)
    .bind(now_ms())
    .bind(updated_by)
    .fetch_one(&mut *tx)
    .await
    .db()?;
    let engine = stored(&row)?;
    tx.commit().await.db()?;
    Ok((engine, existed.is_none()))
}

/// See [`crate::store::Store::engines`].
pub(super) async fn engines(reader: &SqlitePool) -> StoreResult<Vec<StoredEngine>> {
    sqlx::query("SELECT name, definition, updated_at, updated_by FROM engines ORDER BY name")
        .fetch_all(reader)
        .await
        .db()?
        .iter()
        .map(stored)
        .collect()
}
