//! Source snapshots and suite versions: content-addressed, written once, never changed.

use anyhow::Context;
use sqlx::PgPool;
use sweep_domain::epd::Suite;

use crate::store::StoreResult;

/// Stores a snapshot unless its hash is present (the first archive under a hash wins).
pub(super) async fn put_snapshot(pool: &PgPool, sha256: &str, archive: &[u8]) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO source_snapshots (sha256, archive) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(sha256)
    .bind(archive)
    .execute(pool)
    .await?;
    Ok(())
}

/// Reads a snapshot.
pub(super) async fn snapshot(pool: &PgPool, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
    Ok(
        sqlx::query_scalar("SELECT archive FROM source_snapshots WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(pool)
            .await?,
    )
}

/// Whether a snapshot is stored.
pub(super) async fn has_snapshot(pool: &PgPool, sha256: &str) -> StoreResult<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM source_snapshots WHERE sha256 = $1)")
            .bind(sha256)
            .fetch_one(pool)
            .await?,
    )
}

/// Stores a suite version (or finds it by name and hash); returns its id.
pub(super) async fn put_suite(pool: &PgPool, suite: &Suite) -> StoreResult<i64> {
    let positions = serde_json::to_value(&suite.positions).context("encoding suite")?;
    // The no-op update makes RETURNING yield the existing id on a conflict.
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO suites (name, sha256, positions, size) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name, sha256) DO UPDATE SET name = EXCLUDED.name RETURNING id",
    )
    .bind(&suite.name)
    .bind(&suite.sha256)
    .bind(positions)
    .bind(suite.positions.len() as i32)
    .fetch_one(pool)
    .await?;
    Ok(id)
}
