//! Tokens, the audit log, and which token registered a worker (the twin of Postgres'
//! `auth.rs`; timestamps are unix milliseconds).

use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqlitePool};
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};

use super::{now_ms, Db, SqliteStore};
use crate::store::{NewAudit, StoreError, StoreResult, StoredToken};

/// SQLite's extended code for a UNIQUE constraint failure.
const UNIQUE_VIOLATION: &str = "2067";

pub(super) async fn create_token(
    store: &SqliteStore,
    name: &str,
    role: Role,
    hash: &str,
) -> StoreResult<i64> {
    let mut tx = store.write_tx().await?;
    let inserted = sqlx::query_scalar(
        "INSERT INTO tokens (name, role, hash, created_at) VALUES (?1, ?2, ?3, ?4) RETURNING id",
    )
    .bind(name)
    .bind(role.as_str())
    .bind(hash)
    .bind(now_ms())
    .fetch_one(&mut *tx)
    .await;
    let id = match inserted {
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some(UNIQUE_VIOLATION) => {
            return Err(StoreError::Invalid(format!(
                "a token named `{name}` exists; revoke it first"
            )))
        }
        other => other.db()?,
    };
    tx.commit().await.db()?;
    Ok(id)
}

fn role_of(raw: &str) -> StoreResult<Role> {
    raw.parse()
        .map_err(|e: String| StoreError::Internal(anyhow::anyhow!("stored token role: {e}")))
}

pub(super) fn time_of(ms: i64) -> StoreResult<DateTime<Utc>> {
    Ok(DateTime::from_timestamp_millis(ms)
        .with_context(|| format!("timestamp {ms} out of range"))?)
}

pub(super) async fn token_by_hash(
    reader: &SqlitePool,
    hash: &str,
) -> StoreResult<Option<StoredToken>> {
    let row =
        sqlx::query("SELECT id, name, role FROM tokens WHERE hash = ?1 AND revoked_at IS NULL")
            .bind(hash)
            .fetch_optional(reader)
            .await
            .db()?;
    row.map(|r| {
        Ok(StoredToken {
            id: r.get("id"),
            name: r.get("name"),
            role: role_of(r.get("role"))?,
        })
    })
    .transpose()
}

fn token_info(r: &SqliteRow) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: r.get("id"),
        name: r.get("name"),
        role: role_of(r.get("role"))?,
        created_at: time_of(r.get("created_at"))?,
        revoked_at: r
            .get::<Option<i64>, _>("revoked_at")
            .map(time_of)
            .transpose()?,
    })
}

pub(super) async fn tokens(reader: &SqlitePool) -> StoreResult<Vec<TokenInfo>> {
    sqlx::query("SELECT id, name, role, created_at, revoked_at FROM tokens ORDER BY id")
        .fetch_all(reader)
        .await
        .db()?
        .iter()
        .map(token_info)
        .collect()
}

pub(super) async fn revoke_token(store: &SqliteStore, name: &str) -> StoreResult<TokenInfo> {
    let mut tx = store.write_tx().await?;
    let row = sqlx::query(
        "UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL
         RETURNING id, name, role, created_at, revoked_at",
    )
    .bind(name)
    .bind(now_ms())
    .fetch_optional(&mut *tx)
    .await
    .db()?
    .ok_or_else(|| StoreError::NotFound(format!("token `{name}`")))?;
    tx.commit().await.db()?;
    token_info(&row)
}

pub(super) async fn audit(store: &SqliteStore, e: &NewAudit) -> StoreResult<()> {
    let mut tx = store.write_tx().await?;
    sqlx::query(
        "INSERT INTO audit_log (at, actor, role, action, target, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .bind(now_ms())
    .bind(&e.actor)
    .bind(&e.role)
    .bind(&e.action)
    .bind(&e.target)
    .bind(&e.detail)
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    Ok(())
}

pub(super) async fn audit_log(reader: &SqlitePool, limit: u32) -> StoreResult<Vec<AuditEntry>> {
    let rows = sqlx::query(
        "SELECT id, at, actor, role, action, target, detail FROM audit_log ORDER BY id DESC LIMIT ?1",
    )
    .bind(i64::from(limit))
    .fetch_all(reader)
    .await
    .db()?;
    rows.iter()
        .map(|r| {
            Ok(AuditEntry {
                id: r.get("id"),
                at: time_of(r.get("at"))?,
                actor: r.get("actor"),
                role: r.get("role"),
                action: r.get("action"),
                target: r.get("target"),
                detail: r.get("detail"),
            })
        })
        .collect()
}

pub(super) async fn worker_token(reader: &SqlitePool, worker_id: i64) -> StoreResult<Option<i64>> {
    let row: Option<Option<i64>> = sqlx::query_scalar("SELECT token_id FROM workers WHERE id = ?1")
        .bind(worker_id)
        .fetch_optional(reader)
        .await
        .db()?;
    row.ok_or_else(|| StoreError::NotFound(format!("worker {worker_id}")))
}

/// See [`crate::store::Store::retry_build`].
pub(super) async fn retry_build(store: &SqliteStore, id: i64, build: &str) -> StoreResult<u64> {
    let now = now_ms();
    let mut tx = store.write_tx().await?;
    let row = sqlx::query(
        "SELECT b.id, b.build_error IS NOT NULL AS failed, s.cancelled
         FROM builds b JOIN sweeps s ON s.id = b.sweep_id
         WHERE b.sweep_id = ?1 AND b.name = ?2",
    )
    .bind(id)
    .bind(build)
    .fetch_optional(&mut *tx)
    .await
    .db()?;
    let Some(row) = row else {
        let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM sweeps WHERE id = ?1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .db()?;
        return Err(StoreError::NotFound(match exists {
            Some(_) => format!("build `{build}` of sweep {id}"),
            None => format!("sweep {id}"),
        }));
    };
    if row.get::<bool, _>("cancelled") {
        return Err(StoreError::Invalid(format!(
            "sweep {id} was cancelled; submit it again instead"
        )));
    }
    let build_id: i64 = row.get("id");
    let failures: i64 =
        sqlx::query_scalar("SELECT count(*) FROM build_failures WHERE build_id = ?1")
            .bind(build_id)
            .fetch_one(&mut *tx)
            .await
            .db()?;
    if !row.get::<bool, _>("failed") && failures == 0 {
        return Err(StoreError::Invalid(format!(
            "build `{build}` of sweep {id} has not failed"
        )));
    }
    sqlx::query("UPDATE builds SET build_error = NULL WHERE id = ?1")
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .db()?;
    sqlx::query("DELETE FROM build_failures WHERE build_id = ?1")
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .db()?;
    let jobs = sqlx::query(
        "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                updated_at = ?2
         WHERE build_id = ?1 AND state = 'failed'",
    )
    .bind(build_id)
    .bind(now)
    .execute(&mut *tx)
    .await
    .db()?
    .rows_affected();
    tx.commit().await.db()?;
    Ok(jobs)
}
