//! Sweeps: creating one with its builds and jobs, and everything the read side asks about it.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::epd::Suite;
use sweep_domain::limit::Limit;
use sweep_domain::plan;
use sweep_domain::source::{SourceKind, SourceOrigin, SourceProvenance};
use sweep_domain::table::{CellSums, ResultRow, SumsKey};
use sweep_domain::wire::{ActiveWorker, BuildStatus, PositionError, Progress, SweepSummary};

use crate::store::job::limit_of;
use crate::store::retry::{error_list, ErrorRow};
use crate::store::reuse;
use crate::store::saturating_u64;
use crate::store::state::{state_of, SweepCounts};
use crate::store::{Created, NewSweep, StoreError, StoreResult, SweepRecord};

/// A sweep of at least this many jobs refreshes the planner's statistics of `jobs`.
const ANALYZE_AFTER_JOBS: u64 = 10_000;

/// Writes a sweep, its suites, builds and jobs in one transaction; returns (id, jobs).
pub(super) async fn create(pool: &PgPool, sweep: &NewSweep) -> StoreResult<(i64, u64)> {
    let mut tx = pool.begin().await?;
    let (id, jobs, _) = insert(&mut tx, sweep).await?;
    tx.commit().await?;
    analyze_if_large(pool, jobs).await?;
    Ok((id, jobs))
}

/// As [`create`], unless a sweep with the same identity is still queued or running: then
/// that one. Submissions of one identity take the same transaction-scoped advisory lock, so
/// the second of two concurrent ones looks only after the first has committed, and finds it.
pub(super) async fn create_unless_running(pool: &PgPool, sweep: &NewSweep) -> StoreResult<Created> {
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
    if let Some(row) = rows.iter().find(|r| !summary_of(r).state.is_final()) {
        return Ok(Created {
            id: row.get("id"),
            jobs: row.get::<i64, _>("jobs") as u64,
            existing: true,
            reused: 0,
        });
    }
    let (id, jobs, reused) = insert(&mut tx, sweep).await?;
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
        super::reuse::take_earlier_results(tx, id, &fingerprint_of).await?
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

/// The counts [`state_of`] needs, plus the listing's columns.
const SUMMARY_SQL: &str = "
SELECT s.id, s.name, s.engine, s.cancelled, s.created_at, s.submitter, s.source_sha256,
       s.source_kind, s.source_uploader, s.source_git_url, s.source_git_rev, s.source_git_commit,
       count(j.id) AS jobs,
       count(j.id) FILTER (WHERE j.state IN ('done', 'failed', 'cancelled')) AS closed,
       count(j.id) FILTER (WHERE j.attempt > 0) AS started,
       COALESCE(sum(j.count) FILTER (WHERE j.kind = 'work'), 0)::bigint AS total_positions,
       (SELECT count(*) FROM results r WHERE r.sweep_id = s.id) AS done_positions,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NULL) AS ok_builds,
       COALESCE((SELECT bool_or(b.build_error IS NOT NULL) FROM builds b
                 WHERE b.sweep_id = s.id AND b.is_baseline), FALSE) AS baseline_failed,
       (SELECT count(*) FROM results r WHERE r.sweep_id = s.id AND r.error IS NOT NULL) AS error_results,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NOT NULL) AS failed_builds
FROM sweeps s LEFT JOIN jobs j ON j.sweep_id = s.id";

fn summary_of(row: &PgRow) -> SweepSummary {
    SweepSummary {
        id: row.get("id"),
        name: row.get("name"),
        engine: row.get("engine"),
        state: state_of(SweepCounts {
            cancelled: row.get("cancelled"),
            jobs: row.get("jobs"),
            closed: row.get("closed"),
            started: row.get("started"),
            baseline_failed: row.get("baseline_failed"),
            ok_builds: row.get("ok_builds"),
            error_results: row.get("error_results"),
            failed_builds: row.get("failed_builds"),
        }),
        created_at: row.get::<DateTime<Utc>, _>("created_at"),
        positions_done: row.get::<i64, _>("done_positions") as u64,
        positions_total: row.get::<i64, _>("total_positions") as u64,
        submitter: row.get("submitter"),
        source: row
            .get::<Option<String>, _>("source_sha256")
            .map(|sha256| SourceProvenance {
                sha256,
                origin: SourceOrigin {
                    kind: SourceKind::parse(row.get("source_kind")),
                    uploader: row.get("source_uploader"),
                    git_url: row.get("source_git_url"),
                    git_rev: row.get("source_git_rev"),
                    git_commit: row.get("source_git_commit"),
                },
            }),
    }
}

/// Sweeps, newest first.
pub(super) async fn list(pool: &PgPool, limit: u32) -> StoreResult<Vec<SweepSummary>> {
    let rows = sqlx::query(&format!(
        "{SUMMARY_SQL} GROUP BY s.id ORDER BY s.id DESC LIMIT $1"
    ))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.iter().map(summary_of).collect())
}

/// One sweep with its spec, builds and suites.
pub(super) async fn read(pool: &PgPool, id: i64) -> StoreResult<SweepRecord> {
    let row = sqlx::query(&format!("{SUMMARY_SQL} WHERE s.id = $1 GROUP BY s.id"))
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
    let summary = summary_of(&row);
    let extra = sqlx::query(
        "SELECT spec, engine_def, source_sha256, submitter_token, source_kind, source_uploader,
                source_git_url, source_git_rev, source_git_commit
         FROM sweeps WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await?;
    let builds = sqlx::query(
        "SELECT name, defines, is_baseline, build_error FROM builds WHERE sweep_id = $1 ORDER BY ord",
    )
    .bind(id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(|b| {
        Ok(BuildStatus {
            name: b.get("name"),
            defines: serde_json::from_value(b.get("defines")).context("decoding defines")?,
            is_baseline: b.get("is_baseline"),
            build_error: b.get("build_error"),
            // Attached by the sweep's detail (`Store::build_records`), not every read.
            records: Vec::new(),
            records_total: 0,
        })
    })
    .collect::<anyhow::Result<Vec<_>>>()?;
    let suite_rows = sqlx::query(
        "SELECT su.name, su.size, su.sha256 FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
         WHERE ss.sweep_id = $1 ORDER BY ss.ord",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let suite_sha256 = suite_rows
        .iter()
        .map(|r| (r.get::<String, _>("name"), r.get::<String, _>("sha256")))
        .collect();
    let suites = suite_rows
        .iter()
        .map(|r| (r.get::<String, _>("name"), r.get::<i32, _>("size") as usize))
        .collect();
    Ok(SweepRecord {
        summary,
        spec: serde_json::from_value(extra.get("spec")).context("decoding spec")?,
        engine_def: serde_json::from_value(extra.get("engine_def")).context("decoding engine")?,
        source_sha256: extra.get("source_sha256"),
        origin: SourceOrigin {
            kind: SourceKind::parse(extra.get("source_kind")),
            uploader: extra.get("source_uploader"),
            git_url: extra.get("source_git_url"),
            git_rev: extra.get("source_git_rev"),
            git_commit: extra.get("source_git_commit"),
        },
        builds,
        suites,
        suite_sha256,
        submitter_token: extra.get("submitter_token"),
    })
}

/// Progress per build and suite; `errors` counts final failures only.
pub(super) async fn progress(pool: &PgPool, id: i64) -> StoreResult<Vec<Progress>> {
    let rows = sqlx::query(
        "SELECT b.name AS build, su.name AS suite, su.size, l.depth, l.nodes_limit,
                count(r.position_index) AS done, count(r.error) AS errors,
                COALESCE(sum(r.nodes) FILTER (WHERE r.error IS NULL), 0)::text AS nodes
         FROM builds b
         JOIN sweep_suites ss ON ss.sweep_id = b.sweep_id
         JOIN suites su ON su.id = ss.suite_id
         JOIN (SELECT DISTINCT depth, nodes_limit FROM jobs WHERE sweep_id = $1) l ON TRUE
         LEFT JOIN results r ON r.build_id = b.id AND r.suite_id = su.id
                            AND r.depth = l.depth AND r.nodes_limit = l.nodes_limit
         WHERE b.sweep_id = $1
         GROUP BY b.id, b.name, b.ord, su.id, su.name, su.size, ss.ord, l.depth, l.nodes_limit
         ORDER BY l.depth, l.nodes_limit, b.ord, ss.ord",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(Progress {
                build: r.get("build"),
                suite: r.get("suite"),
                limit: limit_of(r.get("depth"), r.get("nodes_limit"))?,
                done: r.get::<i64, _>("done") as u64,
                total: r.get::<i32, _>("size") as u64,
                errors: r.get::<i64, _>("errors") as u64,
                // sum(bigint) is numeric, which may exceed 64 bits (a cast would fail).
                nodes: saturating_u64(big_sum(r, "nodes")?),
            })
        })
        .collect()
}

/// A `sum(bigint)` column read as text (see [`table_sums`]).
fn big_sum(r: &PgRow, col: &str) -> StoreResult<u128> {
    let text: String = r.get(col);
    text.parse::<u128>()
        .map_err(|e| StoreError::Internal(anyhow::anyhow!("sum {col} `{text}`: {e}")))
}

/// Workers holding unexpired leases on the sweep's jobs.
pub(super) async fn active_workers(pool: &PgPool, id: i64) -> StoreResult<Vec<ActiveWorker>> {
    let rows = sqlx::query(
        "SELECT w.id, w.name, w.host, count(*) AS jobs FROM jobs j JOIN workers w ON w.id = j.worker_id
         WHERE j.sweep_id = $1 AND j.state = 'leased' AND j.lease_expires_at > now()
         GROUP BY w.id ORDER BY w.id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .iter()
        .map(|r| ActiveWorker {
            id: r.get("id"),
            name: r.get("name"),
            host: r.get("host"),
            jobs: r.get::<i64, _>("jobs") as u64,
        })
        .collect())
}

fn error_row(r: &PgRow) -> ErrorRow {
    ErrorRow {
        ord: i64::from(r.get::<i32, _>("ord")),
        build: r.get("build"),
        suite: r.get("suite"),
        index: i64::from(r.get::<i32, _>("position_index")),
        position: r.get("position_id"),
        error: r.get("error"),
    }
}

/// Final position errors (results with an error) and failures still to be retried.
pub(super) async fn position_errors(
    pool: &PgPool,
    id: i64,
    limit: u32,
) -> StoreResult<Vec<PositionError>> {
    let finals = sqlx::query(
        "SELECT b.ord, b.name AS build, su.name AS suite, r.position_index, r.position_id, r.error
         FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
         WHERE r.sweep_id = $1 AND r.error IS NOT NULL
         ORDER BY b.ord, su.name, r.position_index LIMIT $2",
    )
    .bind(id)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    // Pending failures are few (a position leaves this list once it has a result), so they
    // are read whole and grouped in Rust, identically on both backends.
    let pending = sqlx::query(
        "SELECT b.ord, b.name AS build, su.name AS suite, f.position_index, f.position_id, f.error
         FROM position_failures f JOIN builds b ON b.id = f.build_id JOIN suites su ON su.id = f.suite_id
         WHERE b.sweep_id = $1
           AND NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = f.build_id
                             AND r.suite_id = f.suite_id AND r.position_index = f.position_index
                             AND r.depth = f.depth)
         ORDER BY b.ord, su.name, f.position_index, f.id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(error_list(
        finals.iter().map(error_row).collect(),
        pending.iter().map(error_row).collect(),
        limit,
    ))
}

/// Every result of the sweep, in build, suite, position order.
pub(super) async fn results(pool: &PgPool, id: i64) -> StoreResult<Vec<ResultRow>> {
    let rows = sqlx::query(
        "SELECT b.name AS build, su.name AS suite, r.position_index, r.position_id, r.nodes,
                r.bestmove, r.solved, r.error, r.depth, r.nodes_limit, r.counters::text AS counters,
                r.origin_sweep_id IS NOT NULL AS reused
         FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
         WHERE r.sweep_id = $1 ORDER BY b.ord, su.name, r.position_index",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    rows.iter().map(result_row).collect()
}

fn result_row(r: &PgRow) -> StoreResult<ResultRow> {
    Ok(ResultRow {
        build: r.get("build"),
        suite: r.get("suite"),
        limit: limit_of(r.get("depth"), r.get("nodes_limit"))?,
        index: r.get::<i32, _>("position_index") as u32,
        position_id: r.get("position_id"),
        nodes: r.get::<i64, _>("nodes") as u64,
        bestmove: r.get("bestmove"),
        solved: r.get("solved"),
        error: r.get("error"),
        counters: crate::store::counters_of(r.get("counters"))?,
        reused: r.get("reused"),
    })
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
    let rows = sqlx::query(
        "SELECT b.name AS build, su.name AS suite, r.position_index, r.position_id, r.nodes,
                r.bestmove, r.solved, r.error, r.depth, r.nodes_limit, r.counters::text AS counters,
                r.origin_sweep_id IS NOT NULL AS reused
         FROM builds b JOIN results r ON r.build_id = b.id JOIN suites su ON su.id = r.suite_id
         WHERE b.sweep_id = $1 AND b.name = ANY($2) AND r.depth = $3 AND r.nodes_limit = $4
         ORDER BY b.ord, su.name, r.position_index",
    )
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

/// The suite version the sweep ran under `name`.
pub(super) async fn sweep_suite(pool: &PgPool, id: i64, name: &str) -> StoreResult<Suite> {
    let row = sqlx::query(
        "SELECT su.sha256, su.positions FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
         WHERE ss.sweep_id = $1 AND su.name = $2",
    )
    .bind(id)
    .bind(name)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| StoreError::NotFound(format!("suite `{name}` of sweep {id}")))?;
    Ok(Suite {
        name: name.to_string(),
        sha256: row.get("sha256"),
        positions: serde_json::from_value(row.get("positions"))
            .context("decoding stored suite positions")?,
    })
}

/// Cancels a sweep and closes its open jobs; holders learn it from their next ack.
pub(super) async fn cancel(pool: &PgPool, id: i64) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    let n = sqlx::query("UPDATE sweeps SET cancelled = TRUE WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(StoreError::NotFound(format!("sweep {id}")));
    }
    sqlx::query(
        "UPDATE jobs SET state = 'cancelled', updated_at = now()
         WHERE sweep_id = $1 AND state IN ('queued', 'leased')",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
