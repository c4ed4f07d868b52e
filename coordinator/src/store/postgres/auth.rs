//! Tokens, the audit log, and which token registered a worker.

use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Row};
use sweep_domain::auth::{AuditEntry, Role, TokenInfo};

use crate::store::{NewAudit, StoreError, StoreResult, StoredToken};

/// Postgres' code for a unique violation.
const UNIQUE_VIOLATION: &str = "23505";

pub(super) async fn create_token(
    pool: &PgPool,
    name: &str,
    role: Role,
    hash: &str,
) -> StoreResult<i64> {
    let inserted = sqlx::query_scalar(
        "INSERT INTO tokens (name, role, hash) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(name)
    .bind(role.as_str())
    .bind(hash)
    .fetch_one(pool)
    .await;
    match inserted {
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some(UNIQUE_VIOLATION) => Err(
            StoreError::Invalid(format!("a token named `{name}` exists; revoke it first")),
        ),
        other => Ok(other?),
    }
}

fn role_of(raw: &str) -> StoreResult<Role> {
    raw.parse()
        .map_err(|e: String| StoreError::Internal(anyhow::anyhow!("stored token role: {e}")))
}

pub(super) async fn token_by_hash(pool: &PgPool, hash: &str) -> StoreResult<Option<StoredToken>> {
    let row =
        sqlx::query("SELECT id, name, role FROM tokens WHERE hash = $1 AND revoked_at IS NULL")
            .bind(hash)
            .fetch_optional(pool)
            .await?;
    row.map(|r| {
        Ok(StoredToken {
            id: r.get("id"),
            name: r.get("name"),
            role: role_of(r.get("role"))?,
        })
    })
    .transpose()
}

fn token_info(r: &PgRow) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: r.get("id"),
        name: r.get("name"),
        role: role_of(r.get("role"))?,
        created_at: r.get::<DateTime<Utc>, _>("created_at"),
        revoked_at: r.get::<Option<DateTime<Utc>>, _>("revoked_at"),
    })
}

pub(super) async fn tokens(pool: &PgPool) -> StoreResult<Vec<TokenInfo>> {
    sqlx::query("SELECT id, name, role, created_at, revoked_at FROM tokens ORDER BY id")
        .fetch_all(pool)
        .await?
        .iter()
        .map(token_info)
        .collect()
}

pub(super) async fn revoke_token(pool: &PgPool, name: &str) -> StoreResult<TokenInfo> {
    let row = sqlx::query(
        "UPDATE tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL
         RETURNING id, name, role, created_at, revoked_at",
    )
    .bind(name)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("token `{name}`")))?;
    token_info(&row)
}

pub(super) async fn audit(pool: &PgPool, e: &NewAudit) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO audit_log (actor, role, action, target, detail) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&e.actor)
    .bind(&e.role)
    .bind(&e.action)
    .bind(&e.target)
    .bind(&e.detail)
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) async fn audit_log(pool: &PgPool, limit: u32) -> StoreResult<Vec<AuditEntry>> {
    let rows = sqlx::query(
        "SELECT id, at, actor, role, action, target, detail FROM audit_log ORDER BY id DESC LIMIT $1",
    )
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| AuditEntry {
            id: r.get("id"),
            at: r.get("at"),
            actor: r.get("actor"),
            role: r.get("role"),
            action: r.get("action"),
            target: r.get("target"),
            detail: r.get("detail"),
        })
        .collect())
}

pub(super) async fn worker_token(pool: &PgPool, worker_id: i64) -> StoreResult<Option<i64>> {
    let row: Option<Option<i64>> = sqlx::query_scalar("SELECT token_id FROM workers WHERE id = $1")
        .bind(worker_id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| StoreError::NotFound(format!("worker {worker_id}")))
}

/// See [`crate::store::Store::retry_build`].
pub(super) async fn retry_build(pool: &PgPool, id: i64, build: &str) -> StoreResult<u64> {
    let mut tx = pool.begin().await?;
    let row = sqlx::query(
        "SELECT b.id, b.build_error IS NOT NULL AS failed, s.cancelled
         FROM builds b JOIN sweeps s ON s.id = b.sweep_id
         WHERE b.sweep_id = $1 AND b.name = $2 FOR UPDATE OF b",
    )
    .bind(id)
    .bind(build)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        // Tell an unknown sweep from an unknown build.
        let exists: Option<i64> = sqlx::query_scalar("SELECT id FROM sweeps WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
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
        sqlx::query_scalar("SELECT count(*) FROM build_failures WHERE build_id = $1")
            .bind(build_id)
            .fetch_one(&mut *tx)
            .await?;
    if !row.get::<bool, _>("failed") && failures == 0 {
        return Err(StoreError::Invalid(format!(
            "build `{build}` of sweep {id} has not failed"
        )));
    }
    sqlx::query("UPDATE builds SET build_error = NULL WHERE id = $1")
        .bind(build_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM build_failures WHERE build_id = $1")
        .bind(build_id)
        .execute(&mut *tx)
        .await?;
    let jobs = sqlx::query(
        "UPDATE jobs SET state = 'queued', worker_id = NULL, lease_expires_at = NULL,
                updated_at = now()
         WHERE build_id = $1 AND state = 'failed'",
    )
    .bind(build_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(jobs)
}
