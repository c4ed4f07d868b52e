//! Engine definitions added over the API.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};

use crate::store::{StoreResult, StoredEngine};

fn stored(r: &PgRow) -> StoredEngine {
    StoredEngine {
        name: r.get("name"),
        definition: r.get("definition"),
        updated_at: r.get::<DateTime<Utc>, _>("updated_at"),
        updated_by: r.get("updated_by"),
    }
}

/// See [`crate::store::Store::put_engine`].
pub(super) async fn put_engine(
    pool: &PgPool,
    name: &str,
    definition: &str,
    updated_by: &str,
) -> StoreResult<(StoredEngine, bool)> {
    // `xmax = 0` holds for a freshly inserted row version, not for one an upsert updated.
    let row = sqlx::query(
        "INSERT INTO engines (name, definition, updated_by) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO UPDATE
             SET definition = EXCLUDED.definition, updated_by = EXCLUDED.updated_by,
                 updated_at = now()
         RETURNING name, definition, updated_at, updated_by, (xmax = 0) AS created",
    )
    .bind(name)
    .bind(definition)
    .bind(updated_by)
    .fetch_one(pool)
    .await?;
    Ok((stored(&row), row.get("created")))
}

/// See [`crate::store::Store::engines`].
pub(super) async fn engines(pool: &PgPool) -> StoreResult<Vec<StoredEngine>> {
    Ok(
        sqlx::query("SELECT name, definition, updated_at, updated_by FROM engines ORDER BY name")
            .fetch_all(pool)
            .await?
            .iter()
            .map(stored)
            .collect(),
    )
}
