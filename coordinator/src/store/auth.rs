//! Tokens, the audit log, which token registered a worker, and what an admin or submitter
//! does to a sweep after submitting it (cancel it, retry a failed build): written once for
//! both backends over [`Backend`].

use sweep_domain::auth::{AuditEntry, Role, TokenInfo};

use super::backend::Backend;
use super::sql::{is_unique_violation, Columns, Reads, Tx, Value};
use super::work::{close_work, Scope};
use super::{NewAudit, StoreError, StoreResult, StoredToken};

/// Stores a new token by the hash of its secret; returns its id. A live token of that name
/// is [`StoreError::Invalid`].
pub(crate) async fn create_token(
    db: &impl Backend,
    name: &str,
    role: Role,
    hash: &str,
) -> StoreResult<i64> {
    let mut tx = db.begin().await?;
    let inserted = tx
        .row(
            "INSERT INTO tokens (name, role, hash, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id",
            &[
                Value::Text(name),
                Value::Text(role.as_str()),
                Value::Text(hash),
                Value::Time(db.clock().now()),
            ],
        )
        .await;
    let row = match inserted {
        Err(e) if is_unique_violation(&e) => {
            return Err(StoreError::Invalid(format!(
                "a token named `{name}` exists; revoke it first"
            )))
        }
        other => other?.ok_or_else(|| anyhow::anyhow!("INSERT ... RETURNING gave no row"))?,
    };
    let id = row.int("id")?;
    tx.commit().await?;
    Ok(id)
}

/// A stored role name as a [`Role`].
fn role_of(raw: &str) -> StoreResult<Role> {
    raw.parse()
        .map_err(|e: String| StoreError::Internal(anyhow::anyhow!("stored token role: {e}")))
}

/// The live token whose secret hashes to `hash`.
pub(crate) async fn token_by_hash(db: &impl Reads, hash: &str) -> StoreResult<Option<StoredToken>> {
    let row = db
        .row(
            "SELECT id, name, role FROM tokens WHERE hash = $1 AND revoked_at IS NULL",
            &[Value::Text(hash)],
        )
        .await?;
    row.map(|r| {
        Ok(StoredToken {
            id: r.int("id")?,
            name: r.text("name")?,
            role: role_of(&r.text("role")?)?,
        })
    })
    .transpose()
}

/// The columns [`token_info`] reads.
const TOKEN_COLUMNS: &str = "id, name, role, created_at, revoked_at";

/// A row of [`TOKEN_COLUMNS`].
fn token_info(r: &impl Columns) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: r.int("id")?,
        name: r.text("name")?,
        role: role_of(&r.text("role")?)?,
        created_at: r.time("created_at")?,
        revoked_at: r.opt_time("revoked_at")?,
    })
}

/// Every token, revoked ones included, oldest first.
pub(crate) async fn tokens(db: &impl Reads) -> StoreResult<Vec<TokenInfo>> {
    let sql = format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY id");
    db.rows(&sql, &[]).await?.iter().map(token_info).collect()
}

/// Revokes the live token named `name`.
pub(crate) async fn revoke_token(db: &impl Backend, name: &str) -> StoreResult<TokenInfo> {
    let mut tx = db.begin().await?;
    let sql = format!(
        "UPDATE tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL
         RETURNING {TOKEN_COLUMNS}"
    );
    let row = tx
        .row(&sql, &[Value::Text(name), Value::Time(db.clock().now())])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("token `{name}`")))?;
    let info = token_info(&row)?;
    tx.commit().await?;
    Ok(info)
}

/// Appends to the audit log.
pub(crate) async fn audit(db: &impl Backend, e: &NewAudit) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    tx.execute(
        "INSERT INTO audit_log (at, actor, role, action, target, detail)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            Value::Time(db.clock().now()),
            Value::Text(&e.actor),
            Value::Text(&e.role),
            Value::Text(&e.action),
            Value::Text(&e.target),
            Value::Text(&e.detail),
        ],
    )
    .await?;
    tx.commit().await
}

/// The newest `limit` audit log entries, newest first.
pub(crate) async fn audit_log(db: &impl Reads, limit: u32) -> StoreResult<Vec<AuditEntry>> {
    let rows = db
        .rows(
            "SELECT id, at, actor, role, action, target, detail FROM audit_log
             ORDER BY id DESC LIMIT $1",
            &[Value::Int(limit.into())],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AuditEntry {
                id: r.int("id")?,
                at: r.time("at")?,
                actor: r.text("actor")?,
                role: r.text("role")?,
                action: r.text("action")?,
                target: r.text("target")?,
                detail: r.text("detail")?,
            })
        })
        .collect()
}

/// The token that registered a worker (`None`: registered before tokens existed).
pub(crate) async fn worker_token(db: &impl Reads, worker_id: i64) -> StoreResult<Option<i64>> {
    let row = db
        .row(
            "SELECT token_id FROM workers WHERE id = $1",
            &[Value::Int(worker_id)],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("worker {worker_id}")))?;
    row.opt_int("token_id")
}

/// Cancels a sweep and closes its open work: its cursors and its jobs waiting to be handed
/// out again go, its open cross-checks are closed. Holders of its leases learn it from their
/// next ack.
pub(crate) async fn cancel<B: Backend>(db: &B, id: i64) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    let by_id = [Value::Int(id)];
    let n = tx
        .execute("UPDATE sweeps SET cancelled = TRUE WHERE id = $1", &by_id)
        .await?;
    if n == 0 {
        return Err(StoreError::NotFound(format!("sweep {id}")));
    }
    close_work::<B>(&mut tx, Scope::Sweep(id), "cancelled").await?;
    tx.commit().await
}

/// See [`crate::store::Store::retry_build`].
pub(crate) async fn retry_build<B: Backend>(db: &B, id: i64, build: &str) -> StoreResult<u64> {
    let mut tx = db.begin().await?;
    let build_id = failed_build::<B>(&mut tx, id, build).await?;
    let build_id = [Value::Int(build_id)];
    tx.execute(
        "UPDATE builds SET build_error = NULL WHERE id = $1",
        &build_id,
    )
    .await?;
    tx.execute("DELETE FROM build_failures WHERE build_id = $1", &build_id)
        .await?;
    // Its cross-checks and speed jobs open again (a baseline's: every speed job of the sweep).
    let checks = tx
        .execute(
            "UPDATE jobs SET state = 'queued'
             WHERE sweep_id = $1 AND kind <> 'work' AND state = 'failed'
               AND (build_id = $2 OR (kind = 'speed' AND EXISTS (
                      SELECT 1 FROM builds b WHERE b.id = $2 AND b.is_baseline)))",
            &[Value::Int(id), build_id[0]],
        )
        .await?;
    let work = requeue_missing::<B>(&mut tx, build_id[0], db.clock().now()).await?;
    tx.commit().await?;
    Ok(work + checks)
}

/// The id of build `build` of sweep `id`, locked, once it is known to have failed (a build
/// error, or failures reported) and its sweep not to be cancelled.
async fn failed_build<B: Backend>(tx: &mut B::Tx, id: i64, build: &str) -> StoreResult<i64> {
    let sql = format!(
        "SELECT b.id, b.build_error IS NOT NULL AS failed, s.cancelled
         FROM builds b JOIN sweeps s ON s.id = b.sweep_id
         WHERE b.sweep_id = $1 AND b.name = $2{}",
        B::lock_rows("b")
    );
    let Some(row) = tx.row(&sql, &[Value::Int(id), Value::Text(build)]).await? else {
        // Tell an unknown sweep from an unknown build.
        let exists = tx
            .row("SELECT id FROM sweeps WHERE id = $1", &[Value::Int(id)])
            .await?;
        return Err(StoreError::NotFound(match exists {
            Some(_) => format!("build `{build}` of sweep {id}"),
            None => format!("sweep {id}"),
        }));
    };
    if row.flag("cancelled")? {
        return Err(StoreError::Invalid(format!(
            "sweep {id} was cancelled; submit it again instead"
        )));
    }
    let build_id = row.int("id")?;
    let failures = tx
        .row(
            "SELECT count(*) AS n FROM build_failures WHERE build_id = $1",
            &[Value::Int(build_id)],
        )
        .await?
        .map_or(Ok(0), |r| r.int("n"))?;
    if !row.flag("failed")? && failures == 0 {
        return Err(StoreError::Invalid(format!(
            "build `{build}` of sweep {id} has not failed"
        )));
    }
    Ok(build_id)
}

/// Puts the work jobs of `build_id` missing results back in the queue as of `since`; returns
/// how many.
async fn requeue_missing<B: Backend>(
    tx: &mut B::Tx,
    build_id: Value<'_>,
    since: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u64> {
    // Its work jobs missing results go back to the queue, to be handed out again (each
    // with the positions it still misses): a walk of this one build's jobs, for an admin.
    let sql = "INSERT INTO requeued (job_id, sweep_id, build_id, since)
             SELECT j.id, j.sweep_id, j.build_id, $2
             FROM builds b JOIN jobs j ON j.id >= b.first_job AND j.id <= b.last_job
                                      AND j.build_id = b.id
             WHERE b.id = $1 AND j.state = 'queued' AND j.kind = 'work'
               AND (SELECT count(*) FROM results r
                    WHERE r.build_id = j.build_id AND r.suite_id = j.suite_id
                      AND r.position_index >= j.first_index
                      AND r.position_index < j.first_index + j.count
                      AND r.depth = j.depth AND r.nodes_limit = j.nodes_limit) < j.count
             ON CONFLICT DO NOTHING";
    tx.execute(sql, &[build_id, Value::Time(since)]).await
}
