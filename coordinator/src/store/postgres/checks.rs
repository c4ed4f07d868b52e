//! Cross-checks on Postgres (see [`sweep_domain::crosscheck`]): leasing them once their
//! originals exist, storing their measurements apart from `results`, and reading what they
//! found. Planning them at submission is shared (`store/sweeps.rs`).

use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

use super::leases::Leased;
use super::{secs, statements};
use crate::store::StoreResult;

/// Leases up to `max` cross-checks to `worker_id` (see [`statements::LEASE_CHECKS`]), and
/// closes the picked ones whose original is an error: nothing to compare, and the sweep must
/// not wait for them.
pub(super) async fn pick(
    tx: &mut Transaction<'_, Postgres>,
    worker_id: i64,
    max: u32,
    lease: Duration,
    now: DateTime<Utc>,
) -> StoreResult<Vec<Leased>> {
    let picked: Vec<(i64, bool)> = sqlx::query_as(statements::LEASE_CHECKS)
        .bind(worker_id)
        .bind(i64::from(max))
        .bind(secs(lease))
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
    let moot: Vec<i64> = picked.iter().filter(|p| p.1).map(|p| p.0).collect();
    if !moot.is_empty() {
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = ANY($1)")
            .bind(&moot)
            .bind(now)
            .execute(&mut **tx)
            .await?;
    }
    let ids: Vec<i64> = picked.iter().filter(|p| !p.1).map(|p| p.0).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: Vec<Leased> = sqlx::query_as(statements::ASSIGN)
        .bind(&ids)
        .bind(vec![worker_id; ids.len()])
        .bind(vec![secs(lease); ids.len()])
        .bind(now)
        .fetch_all(&mut **tx)
        .await?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// Per worker of `workers`: the cross-checks it took part in (measuring the original or the
/// check; a check on the same worker counts once) and how many of them mismatched.
pub(super) async fn per_worker(
    pool: &PgPool,
    workers: &[i64],
) -> StoreResult<BTreeMap<i64, (u64, u64)>> {
    if workers.is_empty() {
        return Ok(BTreeMap::new());
    }
    // Over the indexes on either worker column: only these workers' checks are read.
    let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT w, count(*), count(*) FILTER (WHERE mismatch) FROM (
             SELECT worker_id AS w, mismatch FROM cross_checks WHERE worker_id = ANY($1)
             UNION ALL
             SELECT original_worker_id, mismatch FROM cross_checks
             WHERE original_worker_id = ANY($1) AND original_worker_id <> worker_id
         ) involved GROUP BY w",
    )
    .bind(workers)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(w, n, m)| (w, (n as u64, m as u64)))
        .collect())
}
