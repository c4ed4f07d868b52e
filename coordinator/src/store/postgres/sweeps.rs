//! Sweeps on Postgres: the steps of writing one that differ (the identity's advisory lock,
//! one set-based insert of its jobs, fresh statistics after a large one; the rest is
//! `store/sweeps.rs`), and the read Postgres does next to the data (one limit's results
//! of a few builds). The other reads are written once for both backends, in
//! `store/reads.rs`.

use sqlx::{PgPool, Postgres, Transaction};
use sweep_domain::limit::Limit;
use sweep_domain::table::ResultRow;

use crate::store::backend::JobRange;
use crate::store::reads::{result_row, RESULT_COLUMNS};
use crate::store::rows::{JobKind, NewJob};
use crate::store::StoreResult;

/// A sweep of at least this many jobs refreshes the planner's statistics of `jobs`.
const ANALYZE_AFTER_JOBS: u64 = 10_000;

/// Makes transactions naming one key (a sweep identity, ...) wait for each other: a
/// transaction-scoped advisory lock, so the second of two concurrent ones looks only after
/// the first has committed.
pub(super) async fn lock_key(
    tx: &mut Transaction<'static, Postgres>,
    key: &str,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(lock_number(key))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The advisory lock of a key, which is hex (a sha256): its first 60 bits (a collision only
/// serializes two unrelated transactions).
fn lock_number(key: &str) -> i64 {
    i64::from_str_radix(key.get(..15).unwrap_or(key), 16).unwrap_or(0)
}

/// Fresh statistics at once after a large sweep, so the lease statements are planned for the
/// queue as it is now rather than as autovacuum last saw it.
pub(super) async fn analyze_if_large(pool: &PgPool, jobs: u64) -> StoreResult<()> {
    if jobs >= ANALYZE_AFTER_JOBS {
        sqlx::query("ANALYZE jobs").execute(pool).await?;
    }
    Ok(())
}

/// Inserts a new sweep's jobs of one kind in one multi-row statement (WITH ORDINALITY keeps
/// their order, so job ids follow it), and keeps each build's range of work jobs on the
/// build; returns the ranges.
pub(super) async fn insert_jobs(
    tx: &mut Transaction<'static, Postgres>,
    sweep_id: i64,
    kind: JobKind,
    jobs: &[NewJob],
) -> StoreResult<Vec<JobRange>> {
    let col = |f: fn(&NewJob) -> i64| jobs.iter().map(f).collect::<Vec<_>>();
    let col32 = |f: fn(&NewJob) -> i32| jobs.iter().map(f).collect::<Vec<_>>();
    let rows: Vec<(i64, i64, i64, i64)> = sqlx::query_as(
        "WITH ins AS (
             INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth,
                               nodes_limit, kind)
             SELECT $1, t.build, t.suite, t.first, t.count, t.depth, t.nodes, $8
             FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int4[],
                         $7::int8[])
                  WITH ORDINALITY AS t(build, suite, first, count, depth, nodes, n)
             ORDER BY t.n
             RETURNING id, build_id),
         ranges AS (
             SELECT build_id, min(id) AS first, max(id) AS last, count(*) AS n
             FROM ins GROUP BY build_id),
         kept AS (
             UPDATE builds SET first_job = LEAST(builds.first_job, r.first),
                               last_job = GREATEST(builds.last_job, r.last)
             FROM ranges r WHERE builds.id = r.build_id AND $8 = 'work')
         SELECT build_id, first, last, n FROM ranges",
    )
    .bind(sweep_id)
    .bind(col(|j| j.build_id))
    .bind(col(|j| j.suite_id))
    .bind(col32(|j| j.first))
    .bind(col32(|j| j.count))
    .bind(col32(|j| j.depth))
    .bind(col(|j| j.nodes_limit))
    .bind(kind.as_str())
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(build_id, first, last, count)| JobRange {
            build_id,
            first,
            last,
            count,
        })
        .collect())
}

/// The results of the named builds at one limit, in build, suite, position order (the
/// primary key's order per build: no scan of the sweep's other builds).
pub(super) async fn build_results(
    pool: &PgPool,
    id: i64,
    builds: &[String],
    limit: Limit,
) -> StoreResult<Vec<ResultRow>> {
    let (depth, nodes_limit) = limit.key();
    let rows = sqlx::query(&format!(
        "SELECT {RESULT_COLUMNS}
         FROM builds b JOIN results r ON r.build_id = b.id JOIN suites su ON su.id = r.suite_id
         WHERE b.sweep_id = $1 AND b.name = ANY($2) AND r.depth = $3 AND r.nodes_limit = $4
         ORDER BY b.ord, su.name, r.position_index"
    ))
    .bind(id)
    .bind(builds)
    .bind(depth)
    .bind(nodes_limit)
    .fetch_all(pool)
    .await?;
    rows.iter().map(result_row).collect()
}
