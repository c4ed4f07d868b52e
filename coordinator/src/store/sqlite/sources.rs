//! Source snapshots and suite versions: content-addressed, written once, never changed.

use anyhow::Context;
use sqlx::SqlitePool;
use sweep_domain::epd::Suite;

use super::Db;
use crate::store::StoreResult;

/// Stores a snapshot unless its hash is present (the first archive under a hash wins).
pub(super) async fn put_snapshot(
    writer: &SqlitePool,
    sha256: &str,
    archive: &[u8],
    now: i64,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO source_snapshots (sha256, archive, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
    )
    .bind(sha256)
    .bind(archive)
    .bind(now)
    .execute(writer)
    .await
    .db()?;
    Ok(())
}

/// Reads a snapshot.
pub(super) async fn snapshot(reader: &SqlitePool, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
    sqlx::query_scalar("SELECT archive FROM source_snapshots WHERE sha256 = ?1")
        .bind(sha256)
        .fetch_optional(reader)
        .await
        .db()
}

/// Whether a snapshot is stored.
pub(super) async fn has_snapshot(reader: &SqlitePool, sha256: &str) -> StoreResult<bool> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM source_snapshots WHERE sha256 = ?1)")
        .bind(sha256)
        .fetch_one(reader)
        .await
        .db()
}

/// Stores a suite version (or finds it by name and hash); returns its id.
pub(super) async fn put_suite(writer: &SqlitePool, suite: &Suite, now: i64) -> StoreResult<i64> {
    let positions = serde_json::to_string(&suite.positions).context("encoding suite")?;
    // The no-op update makes RETURNING yield the existing id on a conflict.
    sqlx::query_scalar(
        "INSERT INTO suites (name, sha256, positions, size, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (name, sha256) DO UPDATE SET name = excluded.name RETURNING id",
    )
    .bind(&suite.name)
    .bind(&suite.sha256)
    .bind(positions)
    .bind(suite.positions.len() as i64)
    .bind(now)
    .fetch_one(writer)
    .await
    .db()
}
