//! Sweeps: creating one with its builds and jobs, cancelling it, and the reads Postgres does
//! next to the data (a table's sums, one limit's results). The other reads are written once
//! for both backends, in `store/reads.rs`.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::limit::Limit;
use sweep_domain::plan;
use sweep_domain::table::{CellSums, ResultRow, SumsKey};

use crate::store::job::limit_of;
use crate::store::reads::{self, result_row, RESULT_COLUMNS, SUMMARY_SQL};
use crate::store::reuse;
use crate::store::{Created, NewSweep, StoreError, StoreResult};

/// A sweep of at least this many jobs refreshes the planner's statistics of `jobs`.
const ANALYZE_AFTER_JOBS: u64 = 10_000;

/// Writes a sweep, its suites, builds and jobs in one transaction, unless a sweep with the
/// same identity is still queued or running: then that one. Submissions of one identity take the same transaction-scoped advisory lock, so
/// the second of two concurrent ones looks only after the first has committed, and finds it.
pub(super) async fn create_unless_running(
    pool: &PgPool,
    sweep: &NewSweep,
    now: DateTime<Utc>,
) -> StoreResult<Created> {
    let identity = sweep.identity();
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(lock_key(&identity))
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query(&format!(
        "{SUMMARY_SQL} WHERE s.spec_sha256 = $1 AND NOT s.cancelled GROUP BY s.id ORDER BY s.id DESC"
    ))
    .bind(&identity)
    .fetch_all(&mut *tx)
    .await?;
    if let Some(running) = reads::running_of(&rows)? {
        return Ok(running);
    }
    let (id, jobs, reused) = insert(&mut tx, sweep, now).await?;
    tx.commit().await?;
    analyze_if_large(pool, jobs).await?;
    Ok(Created {
        id,
        jobs,
        existing: false,
        reused,
    })
}

/// The advisory lock of an identity: its first 60 bits (a collision only serializes two
/// unrelated submissions).
fn lock_key(identity: &str) -> i64 {
    i64::from_str_radix(identity.get(..15).unwrap_or(identity), 16).unwrap_or(0)
}

/// Fresh statistics at once after a large sweep, so the lease statements are planned for the
/// queue as it is now rather than as autovacuum last saw it.
async fn analyze_if_large(pool: &PgPool, jobs: u64) -> StoreResult<()> {
    if jobs >= ANALYZE_AFTER_JOBS {
        sqlx::query("ANALYZE jobs").execute(pool).await?;
    }
    Ok(())
}

/// Writes the sweep, its suites, builds and jobs inside `tx`, and takes the earlier results
/// it can reuse (unless its spec says `recompute`); returns (id, jobs, results reused).
async fn insert(
    tx: &mut Transaction<'_, Postgres>,
    sweep: &NewSweep,
    now: DateTime<Utc>,
) -> StoreResult<(i64, u64, u64)> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO sweeps (name, engine, spec, engine_def, source_sha256, spec_sha256,
                             submitter, submitter_token, source_kind, source_uploader,
                             source_git_url, source_git_rev, source_git_commit)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
    )
    .bind(&sweep.spec.name)
    .bind(&sweep.spec.engine)
    .bind(serde_json::to_value(&sweep.spec).context("encoding spec")?)
    .bind(serde_json::to_value(&sweep.engine_def).context("encoding engine")?)
    .bind(&sweep.source_sha256)
    .bind(sweep.identity())
    .bind(sweep.submitter.as_ref().map(|o| &o.name))
    .bind(sweep.submitter.as_ref().map(|o| o.token_id))
    .bind(sweep.origin.kind.as_str())
    .bind(&sweep.origin.uploader)
    .bind(&sweep.origin.git_url)
    .bind(&sweep.origin.git_rev)
    .bind(&sweep.origin.git_commit)
    .fetch_one(&mut **tx)
    .await?;
    let mut suite_ids = HashMap::new();
    for (ord, (suite_id, name)) in sweep.suite_ids.iter().zip(&sweep.spec.suites).enumerate() {
        sqlx::query("INSERT INTO sweep_suites (sweep_id, suite_id, ord) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(suite_id)
            .bind(ord as i32)
            .execute(&mut **tx)
            .await?;
        suite_ids.insert(name.clone(), *suite_id);
    }
    let mut build_ids = Vec::with_capacity(sweep.builds.len());
    let mut fingerprint_of = HashMap::new();
    for (ord, (build, fingerprint)) in sweep
        .builds
        .iter()
        .zip(reuse::fingerprints(sweep))
        .enumerate()
    {
        let build_id: i64 = sqlx::query_scalar(
            "INSERT INTO builds (sweep_id, name, defines, is_baseline, ord, fingerprint)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(id)
        .bind(&build.name)
        .bind(serde_json::to_value(&build.defines).context("encoding defines")?)
        .bind(build.is_baseline)
        .bind(ord as i32)
        .bind(&fingerprint)
        .fetch_one(&mut **tx)
        .await?;
        build_ids.push(build_id);
        if let Some(f) = fingerprint {
            fingerprint_of.insert(build_id, f);
        }
    }
    let planned = plan::jobs(sweep.builds.len(), sweep.chunks.len(), &sweep.spec.limits);
    let mut cols = JobColumns::default();
    for job in &planned {
        let chunk = &sweep.chunks[job.chunk];
        let suite_id = *suite_ids.get(&chunk.suite).ok_or_else(|| {
            StoreError::Invalid(format!("chunk of unknown suite `{}`", chunk.suite))
        })?;
        let (depth, nodes) = job.limit.key();
        cols.build.push(build_ids[job.build]);
        cols.suite.push(suite_id);
        cols.first.push(chunk.first as i32);
        cols.count.push(chunk.count as i32);
        cols.depth.push(depth);
        cols.nodes.push(nodes);
    }
    // WITH ORDINALITY keeps plan order, so job ids follow plan::jobs (round-robin over builds).
    let jobs = sqlx::query(
        "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth, nodes_limit)
         SELECT $1, t.build, t.suite, t.first, t.count, t.depth, t.nodes
         FROM UNNEST($2::int8[], $3::int8[], $4::int4[], $5::int4[], $6::int4[], $7::int8[])
              WITH ORDINALITY AS t(build, suite, first, count, depth, nodes, n)
         ORDER BY t.n",
    )
    .bind(id)
    .bind(&cols.build)
    .bind(&cols.suite)
    .bind(&cols.first)
    .bind(&cols.count)
    .bind(&cols.depth)
    .bind(&cols.nodes)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    let jobs = jobs + super::checks::insert(tx, id, sweep, &build_ids, &suite_ids).await?;
    let reused = if sweep.spec.recompute {
        0
    } else {
        super::reuse::take_earlier_results(tx, id, &fingerprint_of, now).await?
    };
    Ok((id, jobs, reused))
}

/// The planned jobs as the columns of one multi-row insert.
#[derive(Default)]
struct JobColumns {
    build: Vec<i64>,
    suite: Vec<i64>,
    first: Vec<i32>,
    count: Vec<i32>,
    depth: Vec<i32>,
    nodes: Vec<i64>,
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
/// (index `results_sweep`) joined by key to the baseline's, so a table of hundreds of
/// thousands of results costs no transfer and no memory in the coordinator. Sums travel as
/// text: `sum(bigint)` is `numeric`, which may exceed 64 bits.
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
         )
         SELECT b.name AS build, su.name AS suite, r.depth, r.nodes_limit,
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
         JOIN builds b ON b.id = r.build_id
         JOIN suites su ON su.id = r.suite_id
         LEFT JOIN base ON base.suite_id = r.suite_id AND base.position_index = r.position_index
                       AND base.depth = r.depth AND base.nodes_limit = r.nodes_limit
         WHERE r.sweep_id = $1
         GROUP BY b.name, su.name, r.depth, r.nodes_limit",
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
