//! The worker protocol's multi-row statements on Postgres: each writes or reads any number
//! of rows in one statement, its values bound as arrays (`UNNEST`), so a batch of calls
//! served together costs a statement, not a statement per row.

use std::collections::btree_map::{BTreeMap, Entry};

use chrono::{DateTime, Utc};
use sqlx::postgres::PgArguments;
use sqlx::query::QueryScalar;
use sqlx::{Postgres, Row, Transaction};

use super::statements;
use crate::store::backend::{LockedCursor, Measurement, NewLease};
use crate::store::job::JobRow;
use crate::store::sql::Columns;
use crate::store::StoreResult;

type Tx = Transaction<'static, Postgres>;

/// See `Backend::lock_cursors` ([`statements::LOCK_CURSORS`]).
pub(super) async fn lock_cursors(
    tx: &mut Tx,
    wants: &[(i64, i64)],
) -> StoreResult<Vec<LockedCursor>> {
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let builds: Vec<i64> = wants.iter().map(|w| w.0).collect();
    let n: Vec<i64> = wants.iter().map(|w| w.1).collect();
    let rows = sqlx::query(statements::LOCK_CURSORS.as_str())
        .bind(builds)
        .bind(n)
        .fetch_all(&mut **tx)
        .await?;
    // A cursor's rows, one per job, in no promised order: gathered by build.
    let mut by_build: BTreeMap<i64, LockedCursor> = BTreeMap::new();
    for r in &rows {
        let cursor = match by_build.entry(r.int("cursor_build")?) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let build_id = *e.key();
                e.insert(LockedCursor {
                    build_id,
                    next_job: r.int("next_job")?,
                    last_job: r.int("last_job")?,
                    remaining: r.int("remaining")?,
                    jobs: Vec::new(),
                })
            }
        };
        if r.opt_int("id")?.is_some() {
            cursor.jobs.push(JobRow::read(r)?);
        }
    }
    Ok(by_build
        .into_values()
        .map(|mut c| {
            c.jobs.sort_unstable_by_key(|j| j.id);
            c
        })
        .collect())
}

/// See `Backend::jobs_after` ([`statements::JOBS_AFTER`]).
pub(super) async fn jobs_after(
    tx: &mut Tx,
    wants: &[(i64, i64, i64, i64)],
) -> StoreResult<Vec<JobRow>> {
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    let col = |f: fn(&(i64, i64, i64, i64)) -> i64| wants.iter().map(f).collect::<Vec<_>>();
    sqlx::query(statements::JOBS_AFTER.as_str())
        .bind(col(|w| w.0))
        .bind(col(|w| w.1))
        .bind(col(|w| w.2))
        .bind(col(|w| w.3))
        .fetch_all(&mut **tx)
        .await?
        .iter()
        .map(JobRow::read)
        .collect()
}

/// See `Backend::set_cursors` ([`statements::SET_CURSORS`]).
pub(super) async fn set_cursors(tx: &mut Tx, rows: &[(i64, i64, i64)]) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&(i64, i64, i64)) -> i64| rows.iter().map(f).collect::<Vec<_>>();
    sqlx::query(statements::SET_CURSORS)
        .bind(col(|r| r.0))
        .bind(col(|r| r.1))
        .bind(col(|r| r.2))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// See `Backend::insert_leases` ([`statements::INSERT_LEASES`]).
pub(super) async fn insert_leases(tx: &mut Tx, rows: &[NewLease]) -> StoreResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let workers: Vec<i64> = rows.iter().map(|r| r.worker_id).collect();
    let jobs: Vec<String> = rows
        .iter()
        .map(|r| {
            let ids: Vec<String> = r.jobs.iter().map(i64::to_string).collect();
            format!("{{{}}}", ids.join(","))
        })
        .collect();
    let expiries: Vec<DateTime<Utc>> = rows.iter().map(|r| r.expires_at).collect();
    let written = sqlx::query(statements::INSERT_LEASES)
        .bind(&workers)
        .bind(&jobs)
        .bind(&expiries)
        .fetch_all(&mut **tx)
        .await?;
    // RETURNING promises no order: each row is told apart by its first job.
    let by_first: std::collections::HashMap<i64, i64> = written
        .iter()
        .map(|r| (r.get::<i64, _>("first"), r.get::<i64, _>("id")))
        .collect();
    rows.iter()
        .map(|r| {
            r.jobs
                .first()
                .and_then(|j| by_first.get(j).copied())
                .ok_or_else(|| {
                    anyhow::anyhow!("a lease row of worker {} was not written", r.worker_id).into()
                })
        })
        .collect()
}

/// See `Backend::set_leases` ([`statements::SET_LEASES`]).
pub(super) async fn set_leases(tx: &mut Tx, rows: &[(i64, i64, DateTime<Utc>)]) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let closed: Vec<i64> = rows.iter().map(|r| r.1).collect();
    let expiries: Vec<DateTime<Utc>> = rows.iter().map(|r| r.2).collect();
    sqlx::query(statements::SET_LEASES)
        .bind(&ids)
        .bind(&closed)
        .bind(&expiries)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The insert of a column set, before its columns are bound.
type Insert<'q> = QueryScalar<'q, Postgres, i64, PgArguments>;

/// What a result and a cross-check measurement both have, as columns: one array element per
/// position, bound as `$1` to `$15` of either insert.
#[derive(Default)]
pub(super) struct Measured {
    worker: Vec<i64>,
    build: Vec<i64>,
    suite: Vec<i64>,
    idx: Vec<i32>,
    depth: Vec<i32>,
    nodes_limit: Vec<i64>,
    sweep: Vec<i64>,
    job: Vec<i64>,
    attempt: Vec<i64>,
    pid: Vec<String>,
    nodes: Vec<i64>,
    bm: Vec<String>,
    reached: Vec<i32>,
    ms: Vec<i64>,
    err: Vec<Option<String>>,
}

impl Measured {
    fn of(rows: &[Measurement<'_>]) -> Self {
        let mut m = Measured::default();
        for r in rows {
            let (job, c) = (r.job, r.c);
            m.worker.push(r.worker_id);
            m.build.push(job.build_id);
            m.suite.push(job.suite_id);
            m.idx.push(c.index);
            m.depth.push(job.depth);
            m.nodes_limit.push(job.nodes_limit);
            m.sweep.push(job.sweep_id);
            m.job.push(job.id);
            m.attempt.push(r.attempt);
            m.pid.push(c.position_id.clone());
            m.nodes.push(c.nodes);
            m.bm.push(c.bestmove.clone());
            m.reached.push(c.reached_depth);
            m.ms.push(c.time_ms);
            m.err.push(c.error.clone());
        }
        m
    }

    /// Binds the columns as `$1` to `$15`, in the order the inserts list them.
    fn bind<'q>(&'q self, insert: Insert<'q>) -> Insert<'q> {
        insert
            .bind(&self.worker)
            .bind(&self.build)
            .bind(&self.suite)
            .bind(&self.idx)
            .bind(&self.depth)
            .bind(&self.nodes_limit)
            .bind(&self.sweep)
            .bind(&self.job)
            .bind(&self.attempt)
            .bind(&self.pid)
            .bind(&self.nodes)
            .bind(&self.bm)
            .bind(&self.reached)
            .bind(&self.ms)
            .bind(&self.err)
    }
}

/// See `Backend::insert_results` ([`statements::INSERT_RESULTS`]).
pub(super) async fn insert_results(tx: &mut Tx, rows: &[Measurement<'_>]) -> StoreResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let measured = Measured::of(rows);
    let solved: Vec<bool> = rows.iter().map(|r| r.c.solved).collect();
    let cp: Vec<Option<i32>> = rows.iter().map(|r| r.c.score_cp).collect();
    let mate: Vec<Option<i32>> = rows.iter().map(|r| r.c.score_mate).collect();
    let counters: Vec<Option<String>> = rows.iter().map(|r| r.c.counters.clone()).collect();
    Ok(measured
        .bind(sqlx::query_scalar(statements::INSERT_RESULTS))
        .bind(&solved)
        .bind(&cp)
        .bind(&mate)
        .bind(&counters)
        .fetch_all(&mut **tx)
        .await?)
}

/// See `Backend::insert_checks` ([`statements::INSERT_CHECKS`]).
pub(super) async fn insert_checks(tx: &mut Tx, rows: &[Measurement<'_>]) -> StoreResult<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let measured = Measured::of(rows);
    Ok(measured
        .bind(sqlx::query_scalar(statements::INSERT_CHECKS))
        .fetch_all(&mut **tx)
        .await?)
}
