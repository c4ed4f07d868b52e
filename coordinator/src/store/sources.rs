//! Source snapshots and suite versions, written once for both backends: content-addressed,
//! written once, never changed; and who may read a snapshot back.

use anyhow::Context;
use chrono::{DateTime, Utc};
use sweep_domain::epd::{Suite, SuitePosition};

use super::backend::Backend;
use super::sql::{insert_sql, stamp};
use super::sql::{Columns, Reads, Tx, Value};
use super::{StoreError, StoreResult};

/// Stores a snapshot unless its hash is present (the first archive under a hash wins).
pub(crate) async fn put_snapshot<B: Backend>(
    db: &B,
    sha256: &str,
    archive: &[u8],
) -> StoreResult<()> {
    let mut cols = vec!["sha256", "archive"];
    let mut values = vec![Value::Text(sha256), Value::Bytes(archive)];
    stamp(
        &mut cols,
        &mut values,
        "created_at",
        B::written_at(db.clock().now()),
    );
    let mut tx = db.begin().await?;
    tx.execute(
        &insert_sql("source_snapshots", &cols, "ON CONFLICT DO NOTHING"),
        &values,
    )
    .await?;
    tx.commit().await
}

/// Reads a snapshot.
pub(crate) async fn snapshot(db: &impl Reads, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
    db.row(
        "SELECT archive FROM source_snapshots WHERE sha256 = $1",
        &[Value::Text(sha256)],
    )
    .await?
    .map(|r| r.bytes("archive"))
    .transpose()
}

/// Whether a snapshot is stored.
pub(crate) async fn has_snapshot(db: &impl Reads, sha256: &str) -> StoreResult<bool> {
    db.row(
        "SELECT EXISTS (SELECT 1 FROM source_snapshots WHERE sha256 = $1) AS present",
        &[Value::Text(sha256)],
    )
    .await?
    .map_or(Ok(false), |r| r.flag("present"))
}

/// Keeps that token `token_id` uploaded snapshot `sha256` (stored already), so it may read
/// it back (see [`may_read_snapshot`]).
pub(crate) async fn add_uploader<B: Backend>(
    db: &B,
    sha256: &str,
    token_id: i64,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    tx.execute(
        &insert_sql(
            "snapshot_uploaders",
            &["sha256", "token_id"],
            "ON CONFLICT DO NOTHING",
        ),
        &[Value::Text(sha256), Value::Int(token_id)],
    )
    .await?;
    tx.commit().await
}

/// Whether token `token_id` may read snapshot `sha256` at `now`: it uploaded it, submitted a
/// sweep that uses it (as the sweep's source or a variant's own), or registered a worker
/// that holds a lease (unexpired, the job not closed in it) of a job built from it. A
/// snapshot not stored is read by nobody.
pub(crate) async fn may_read_snapshot<B: Backend>(
    db: &B,
    sha256: &str,
    token_id: i64,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    // The lease part walks the unexpired leases of the token's workers: a few per worker,
    // and asked once per worker and snapshot (workers cache what they fetched).
    let sql = format!(
        "SELECT (EXISTS (SELECT 1 FROM snapshot_uploaders su
                         WHERE su.sha256 = $1 AND su.token_id = $2)
                 OR EXISTS (SELECT 1 FROM sweeps s
                            WHERE s.source_sha256 = $1 AND s.submitter_token = $2)
                 OR EXISTS (SELECT 1 FROM builds b JOIN sweeps s ON s.id = b.sweep_id
                            WHERE b.source_sha256 = $1 AND s.submitter_token = $2)
                 OR EXISTS (SELECT 1 FROM workers w
                            JOIN leases l ON l.worker_id = w.id{}
                            JOIN jobs j ON j.id = u.value
                            JOIN sweeps s ON s.id = j.sweep_id
                            JOIN builds b ON b.id = j.build_id
                            WHERE w.token_id = $2 AND l.expires_at > $3
                              AND ((l.closed >> u.key) & 1) = 0
                              AND COALESCE(b.source_sha256, s.source_sha256) = $1)) AS visible",
        B::lease_jobs("l")
    );
    db.reader()
        .row(
            &sql,
            &[Value::Text(sha256), Value::Int(token_id), Value::Time(now)],
        )
        .await?
        .map_or(Ok(false), |r| r.flag("visible"))
}

/// Stores a suite version (or finds it by name and hash); returns its id.
pub(crate) async fn put_suite<B: Backend>(db: &B, suite: &Suite) -> StoreResult<i64> {
    let positions = serde_json::to_value(&suite.positions).context("encoding suite")?;
    let mut cols = vec!["name", "sha256", "positions", "size"];
    let mut values = vec![
        Value::Text(&suite.name),
        Value::Text(&suite.sha256),
        Value::Json(&positions),
        Value::Int(suite.positions.len() as i64),
    ];
    stamp(
        &mut cols,
        &mut values,
        "created_at",
        B::written_at(db.clock().now()),
    );
    // The no-op update makes RETURNING yield the existing id on a conflict.
    let sql = insert_sql(
        "suites",
        &cols,
        "ON CONFLICT (name, sha256) DO UPDATE SET name = EXCLUDED.name RETURNING id",
    );
    let mut tx = db.begin().await?;
    let id = tx
        .row(&sql, &values)
        .await?
        .ok_or_else(|| anyhow::anyhow!("INSERT ... RETURNING gave no row"))?
        .int("id")?;
    tx.commit().await?;
    Ok(id)
}

/// The positions of suite version `suite_id`, read through `tx`; [`StoreError::NotFound`]
/// when there is no such version.
pub(crate) async fn suite_positions<T: Tx>(
    tx: &mut T,
    suite_id: i64,
) -> StoreResult<Vec<SuitePosition>> {
    let row = tx
        .row(
            "SELECT positions FROM suites WHERE id = $1",
            &[Value::Int(suite_id)],
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("suite {suite_id}")))?;
    row.json("positions")
}
