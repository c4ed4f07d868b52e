//! Sweeps on Postgres: the steps of writing one that differ (the identity's advisory lock,
//! one set-based insert of its jobs, fresh statistics after a large one; the rest is
//! `store/sweeps.rs`), and the reads Postgres does next to the data (a table's sums, one
//! limit's results). The other reads are written once for both backends, in
//! `store/reads.rs`.

use std::collections::BTreeMap;

use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::limit::Limit;
use sweep_domain::table::{CellSums, ResultRow, SumsKey};

use crate::store::job::limit_of;
use crate::store::reads::{result_row, RESULT_COLUMNS};
use crate::store::rows::{JobKind, NewJob};
use crate::store::{StoreError, StoreResult};

/// A sweep of at least this many jobs refreshes the planner's statistics of `jobs`.
const ANALYZE_AFTER_JOBS: u64 = 10_000;

/// Makes submissions of one identity wait for each other: a transaction-scoped advisory lock,
/// so the second of two concurrent ones looks only after the first has committed.
pub(super) async fn lock_identity(
    tx: &mut Transaction<'static, Postgres>,
    identity: &str,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(lock_key(identity))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The advisory lock of an identity: its first 60 bits (a collision only serializes two
/// unrelated submissions).
fn lock_key(identity: &str) -> i64 {
    i64::from_str_radix(identity.get(..15).unwrap_or(identity), 16).unwrap_or(0)
}

/// Fresh statistics at once after a large sweep, so the lease statements are planned for the
/// queue as it is now rather than as autovacuum last saw it.
pub(super) async fn analyze_if_large(pool: &PgPool, jobs: u64) -> StoreResult<()> {
    if jobs >= ANALYZE_AFTER_JOBS {
        sqlx::query("ANALYZE jobs").execute(pool).await?;
    }
    Ok(())
}

/// Inserts a new sweep's jobs of one kind in one multi-row statement; returns how many.
/// WITH ORDINALITY keeps their order, so job ids follow it (plan order: round-robin over
/// builds, see `plan::jobs`).
pub(super) async fn insert_jobs(
    tx: &mut Transaction<'static, Postgres>,
    sweep_id: i64,
    kind: JobKind,
    jobs: &[NewJob],
) -> StoreResult<u64> {
    let col = |f: fn(&NewJob) -> i64| jobs.iter().map(f).collect::<Vec<_>>();
    let col32 = |f: fn(&NewJob) -> i32| jobs.iter().map(f).collect::<Vec<_>>();
    Ok(sqlx::query(
        "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth, nodes_limit,
                           kind)
         SELECT $1, t.build, t.suite, t.first, t.count, t.depth, t.nodes, $8
         FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int4[], $7::int8[])
              WITH ORDINALITY AS t(build, suite, first, count, depth, nodes, n)
         ORDER BY t.n",
    )
    .bind(sweep_id)
    .bind(col(|j| j.build_id))
    .bind(col(|j| j.suite_id))
    .bind(col32(|j| j.first))
    .bind(col32(|j| j.count))
    .bind(col32(|j| j.depth))
    .bind(col(|j| j.nodes_limit))
    .bind(kind.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected())
}

/// A `sum(bigint)` column read as text (see [`table_sums`]).
fn big_sum(r: &PgRow, col: &str) -> StoreResult<u128> {
    let text: String = r.get(col);
    text.parse::<u128>()
        .map_err(|e| StoreError::Internal(anyhow::anyhow!("sum {col} `{text}`: {e}")))
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

/// The table's sums, computed where the results are: one pass over the sweep's results
/// joined by key to the baseline's, so a table of hundreds of thousands of results costs no
/// transfer and no memory in the coordinator. Grouped by ids, then named: grouping 250,000
/// rows by build and suite names sorted them on disk (350 ms; by ids, a hash of a few hundred
/// groups: 110-140 ms). Sums travel as text: `sum(bigint)` is `numeric`, which may exceed 64
/// bits.
pub(super) async fn table_sums(
    pool: &PgPool,
    id: i64,
    baseline: &str,
) -> StoreResult<BTreeMap<SumsKey, CellSums>> {
    let rows = sqlx::query(
        "WITH base AS (
             SELECT r.suite_id, r.position_index, r.depth, r.nodes_limit, r.nodes, r.solved
             FROM results r JOIN builds b ON b.id = r.build_id
             WHERE b.sweep_id = $1 AND b.name = $2 AND r.error IS NULL
         ),
         sums AS (
         SELECT r.build_id, r.suite_id, r.depth, r.nodes_limit,
                count(*) AS done,
                count(r.error) AS errors,
                count(r.origin_sweep_id) AS reused,
                COALESCE(sum(r.nodes) FILTER (WHERE r.error IS NULL), 0)::text AS nodes,
                count(*) FILTER (WHERE r.error IS NULL AND r.solved) AS solved,
                count(base.nodes) FILTER (WHERE r.error IS NULL) AS compared,
                COALESCE(sum(r.nodes) FILTER (WHERE r.error IS NULL AND base.nodes IS NOT NULL), 0)::text
                    AS compared_nodes,
                COALESCE(sum(base.nodes) FILTER (WHERE r.error IS NULL), 0)::text AS compared_base_nodes,
                count(*) FILTER (WHERE r.error IS NULL AND base.nodes IS NOT NULL AND r.solved)
                    AS compared_solved,
                count(*) FILTER (WHERE r.error IS NULL AND base.solved) AS compared_base_solved
         FROM results r
         LEFT JOIN base ON base.suite_id = r.suite_id AND base.position_index = r.position_index
                       AND base.depth = r.depth AND base.nodes_limit = r.nodes_limit
         WHERE r.sweep_id = $1
         GROUP BY r.build_id, r.suite_id, r.depth, r.nodes_limit)
         SELECT b.name AS build, su.name AS suite, s.*
         FROM sums s JOIN builds b ON b.id = s.build_id JOIN suites su ON su.id = s.suite_id",
    )
    .bind(id)
    .bind(baseline)
    .fetch_all(pool)
    .await?;
    let count = |r: &PgRow, col: &str| r.get::<i64, _>(col) as u64;
    let big = big_sum;
    rows.iter()
        .map(|r| {
            let key = (
                r.get::<String, _>("build"),
                limit_of(r.get("depth"), r.get("nodes_limit"))?,
                r.get::<String, _>("suite"),
            );
            let sums = CellSums {
                done: count(r, "done"),
                errors: count(r, "errors"),
                reused: count(r, "reused"),
                nodes: big(r, "nodes")?,
                solved: count(r, "solved"),
                compared: count(r, "compared"),
                compared_nodes: big(r, "compared_nodes")?,
                compared_base_nodes: big(r, "compared_base_nodes")?,
                compared_solved: count(r, "compared_solved"),
                compared_base_solved: count(r, "compared_base_solved"),
            };
            Ok((key, sums))
        })
        .collect()
}
