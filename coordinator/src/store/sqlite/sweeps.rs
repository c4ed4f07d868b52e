//! Sweeps: creating one with its builds and jobs, and cancelling it. What the read side asks
//! about a sweep is written once for both backends, in `store/reads.rs`.

use std::collections::HashMap;

use anyhow::Context;
use sqlx::{Sqlite, Transaction};
use sweep_domain::plan;

use super::{Db, SqliteStore};
use crate::store::reads::{self, SUMMARY_SQL};
use crate::store::reuse;
use crate::store::{Created, NewSweep, StoreError, StoreResult};

/// Writes a sweep, its suites, builds and jobs in one transaction, unless a sweep with the
/// same identity is still queued or running: then that one. The write transaction holds the file's write lock from its start, so two
/// identical submissions look and write one after the other.
pub(super) async fn create_unless_running(
    store: &SqliteStore,
    sweep: &NewSweep,
) -> StoreResult<Created> {
    let identity = sweep.identity();
    let mut tx = store.write_tx().await?;
    let rows = sqlx::query(&format!(
        "{SUMMARY_SQL} WHERE s.spec_sha256 = $1 AND NOT s.cancelled GROUP BY s.id ORDER BY s.id DESC"
    ))
    .bind(&identity)
    .fetch_all(&mut *tx)
    .await
    .db()?;
    if let Some(running) = reads::running_of(&rows)? {
        return Ok(running);
    }
    let (id, jobs, reused) = insert(&mut tx, sweep, store.clock.now_ms()).await?;
    tx.commit().await.db()?;
    Ok(Created {
        id,
        jobs,
        existing: false,
        reused,
    })
}

/// Writes the sweep, its suites, builds and jobs inside `tx`, and takes the earlier results
/// it can reuse (unless its spec says `recompute`); returns (id, jobs, results reused).
async fn insert(
    tx: &mut Transaction<'static, Sqlite>,
    sweep: &NewSweep,
    now: i64,
) -> StoreResult<(i64, u64, u64)> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO sweeps (name, engine, spec, engine_def, source_sha256, created_at, spec_sha256,
                             submitter, submitter_token, source_kind, source_uploader,
                             source_git_url, source_git_rev, source_git_commit)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) RETURNING id",
    )
    .bind(&sweep.spec.name)
    .bind(&sweep.spec.engine)
    .bind(serde_json::to_string(&sweep.spec).context("encoding spec")?)
    .bind(serde_json::to_string(&sweep.engine_def).context("encoding engine")?)
    .bind(&sweep.source_sha256)
    .bind(now)
    .bind(sweep.identity())
    .bind(sweep.submitter.as_ref().map(|o| &o.name))
    .bind(sweep.submitter.as_ref().map(|o| o.token_id))
    .bind(sweep.origin.kind.as_str())
    .bind(&sweep.origin.uploader)
    .bind(&sweep.origin.git_url)
    .bind(&sweep.origin.git_rev)
    .bind(&sweep.origin.git_commit)
    .fetch_one(&mut **tx)
    .await
    .db()?;
    let mut suite_ids = HashMap::new();
    for (ord, (suite_id, name)) in sweep.suite_ids.iter().zip(&sweep.spec.suites).enumerate() {
        sqlx::query("INSERT INTO sweep_suites (sweep_id, suite_id, ord) VALUES (?1, ?2, ?3)")
            .bind(id)
            .bind(suite_id)
            .bind(ord as i64)
            .execute(&mut **tx)
            .await
            .db()?;
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
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )
        .bind(id)
        .bind(&build.name)
        .bind(serde_json::to_string(&build.defines).context("encoding defines")?)
        .bind(build.is_baseline)
        .bind(ord as i64)
        .bind(&fingerprint)
        .fetch_one(&mut **tx)
        .await
        .db()?;
        build_ids.push(build_id);
        if let Some(f) = fingerprint {
            fingerprint_of.insert(build_id, f);
        }
    }
    // One prepared statement per row: inside one transaction SQLite does no I/O per row, and
    // insertion order gives job ids in plan order (round-robin over builds, see plan::jobs).
    let mut jobs = 0u64;
    for job in plan::jobs(sweep.builds.len(), sweep.chunks.len(), &sweep.spec.limits) {
        let chunk = &sweep.chunks[job.chunk];
        let suite_id = *suite_ids.get(&chunk.suite).ok_or_else(|| {
            StoreError::Invalid(format!("chunk of unknown suite `{}`", chunk.suite))
        })?;
        let (depth, nodes) = job.limit.key();
        jobs += sqlx::query(
            "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth,
                               nodes_limit, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .bind(id)
        .bind(build_ids[job.build])
        .bind(suite_id)
        .bind(i64::from(chunk.first))
        .bind(i64::from(chunk.count))
        .bind(depth)
        .bind(nodes)
        .bind(now)
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
    }
    let jobs = jobs + super::checks::insert(tx, id, sweep, &build_ids, &suite_ids, now).await?;
    let reused = if sweep.spec.recompute {
        0
    } else {
        super::reuse::take_earlier_results(tx, id, &fingerprint_of, now).await?
    };
    Ok((id, jobs, reused))
}
