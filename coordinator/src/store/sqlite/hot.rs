//! The worker protocol's writes of many rows on SQLite: a prepared statement per row, inside
//! the caller's write transaction (in-process, so a row costs no round trip; SQLite's one
//! writer needs no set-based statement to avoid waiting on locks).

use chrono::{DateTime, Utc};
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Sqlite, Transaction};

use std::sync::LazyLock;

use super::Db;
use crate::store::backend::{LockedCursor, Measurement, NewLease};
use crate::store::job::{JobRow, JOB_COLUMNS};
use crate::store::sql::Columns;
use crate::store::StoreResult;

type Tx = Transaction<'static, Sqlite>;

/// See `Backend::lock_cursors`: the write transaction holds the file's write lock, so a
/// cursor is read, not locked; then one walk of its build's range of rowids.
pub(super) async fn lock_cursors(
    tx: &mut Tx,
    wants: &[(i64, i64)],
) -> StoreResult<Vec<LockedCursor>> {
    let mut out = Vec::new();
    for &(build, n) in wants {
        let Some(row) = sqlx::query(
            "SELECT next_job, last_job, remaining FROM build_queue WHERE build_id = ?1",
        )
        .bind(build)
        .fetch_optional(&mut **tx)
        .await
        .db()?
        else {
            continue;
        };
        let (next_job, last_job) = (row.int("next_job")?, row.int("last_job")?);
        out.push(LockedCursor {
            build_id: build,
            next_job,
            last_job,
            remaining: row.int("remaining")?,
            jobs: walk(tx, (build, next_job, last_job, n)).await?,
        });
    }
    Ok(out)
}

/// See `Backend::jobs_after`: one walk of the build's range of rowids each.
pub(super) async fn jobs_after(
    tx: &mut Tx,
    wants: &[(i64, i64, i64, i64)],
) -> StoreResult<Vec<JobRow>> {
    let mut out = Vec::new();
    for &want in wants {
        out.extend(walk(tx, want).await?);
    }
    Ok(out)
}

/// Up to `n` queued work jobs of `build` with ids from `after` to `last`, in id order.
async fn walk(
    tx: &mut Tx,
    (build, after, last, n): (i64, i64, i64, i64),
) -> StoreResult<Vec<JobRow>> {
    sqlx::query(JOBS_AFTER.as_str())
        .bind(build)
        .bind(after)
        .bind(last)
        .bind(n)
        .fetch_all(&mut **tx)
        .await
        .db()?
        .iter()
        .map(JobRow::read)
        .collect()
}

/// See [`walk`].
static JOBS_AFTER: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {JOB_COLUMNS} FROM jobs j
         WHERE j.id >= ?2 AND j.id <= ?3 AND j.build_id = ?1 AND j.state = 'queued'
           AND j.kind = 'work'
         ORDER BY j.id LIMIT ?4"
    )
});

/// See `Backend::set_cursors`.
pub(super) async fn set_cursors(tx: &mut Tx, rows: &[(i64, i64, i64)]) -> StoreResult<()> {
    for &(build, next, remaining) in rows {
        sqlx::query("UPDATE build_queue SET next_job = ?2, remaining = ?3 WHERE build_id = ?1")
            .bind(build)
            .bind(next)
            .bind(remaining)
            .execute(&mut **tx)
            .await
            .db()?;
    }
    Ok(())
}

/// See `Backend::insert_leases`: the jobs as a JSON array.
pub(super) async fn insert_leases(tx: &mut Tx, rows: &[NewLease]) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(rows.len());
    for r in rows {
        let jobs = serde_json::to_string(&r.jobs).expect("integers");
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO leases (worker_id, jobs, expires_at) VALUES (?1, ?2, ?3) RETURNING id",
        )
        .bind(r.worker_id)
        .bind(jobs)
        .bind(r.expires_at.timestamp_millis())
        .fetch_one(&mut **tx)
        .await
        .db()?;
        ids.push(id);
    }
    Ok(ids)
}

/// See `Backend::set_leases`.
pub(super) async fn set_leases(tx: &mut Tx, rows: &[(i64, i64, DateTime<Utc>)]) -> StoreResult<()> {
    for &(id, closed, expires) in rows {
        sqlx::query("UPDATE leases SET closed = ?2, expires_at = ?3 WHERE id = ?1")
            .bind(id)
            .bind(closed)
            .bind(expires.timestamp_millis())
            .execute(&mut **tx)
            .await
            .db()?;
    }
    Ok(())
}

/// The columns [`bind_measured`] binds, as `?1` to `?16`, for an insert's column list.
macro_rules! measured_columns {
    () => {
        "build_id, suite_id, position_index, depth, nodes_limit, sweep_id, job_id, attempt, \
         worker_id, position_id, nodes, bestmove, reached_depth, time_ms, error, created_at"
    };
}

/// An insert into `results` or `cross_checks` with `?1` to `?16` bound, in the order of
/// [`measured_columns`] (`created_at` is `now`); each statement binds its own columns after
/// them.
fn bind_measured<'q>(
    query: Query<'q, Sqlite, SqliteArguments<'q>>,
    r: &Measurement<'q>,
    now: i64,
) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    let (job, c) = (r.job, r.c);
    query
        .bind(job.build_id)
        .bind(job.suite_id)
        .bind(c.index)
        .bind(job.depth)
        .bind(job.nodes_limit)
        .bind(job.sweep_id)
        .bind(job.id)
        .bind(r.attempt)
        .bind(r.worker_id)
        .bind(&c.position_id)
        .bind(c.nodes)
        .bind(&c.bestmove)
        .bind(c.reached_depth)
        .bind(c.time_ms)
        .bind(&c.error)
        .bind(now)
}

/// A statement inserting one measured row, bound by [`bind_measured`] and then by the
/// function the caller gives (the columns only its table has).
type Bind = for<'q> fn(
    Query<'q, Sqlite, SqliteArguments<'q>>,
    &'q Measurement<'q>,
) -> Query<'q, Sqlite, SqliteArguments<'q>>;

/// Inserts `rows` one statement each (`sql`, bound by [`bind_measured`] and `more`); returns
/// the job of each row inserted.
async fn insert_each(
    tx: &mut Tx,
    rows: &[Measurement<'_>],
    now: DateTime<Utc>,
    sql: &str,
    more: Bind,
) -> StoreResult<Vec<i64>> {
    let mut new = Vec::new();
    for r in rows {
        let added = more(
            bind_measured(sqlx::query(sql), r, now.timestamp_millis()),
            r,
        )
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
        if added > 0 {
            new.push(r.job.id);
        }
    }
    Ok(new)
}

/// See `Backend::insert_results`. ON CONFLICT DO NOTHING (rather than INSERT OR IGNORE)
/// ignores only the key conflict of a duplicate, exactly like Postgres; other violations
/// still fail.
pub(super) async fn insert_results(
    tx: &mut Tx,
    rows: &[Measurement<'_>],
    now: DateTime<Utc>,
) -> StoreResult<Vec<i64>> {
    let sql = concat!(
        "INSERT INTO results (",
        measured_columns!(),
        ", solved, score_cp, score_mate, counters)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                 ?17, ?18, ?19, ?20)
         ON CONFLICT DO NOTHING"
    );
    insert_each(tx, rows, now, sql, |q, r| {
        q.bind(r.c.solved)
            .bind(r.c.score_cp)
            .bind(r.c.score_mate)
            .bind(&r.c.counters)
    })
    .await
}

/// See `Backend::insert_checks`: each judged against its original as it is stored.
pub(super) async fn insert_checks(
    tx: &mut Tx,
    rows: &[Measurement<'_>],
    now: DateTime<Utc>,
) -> StoreResult<Vec<i64>> {
    let sql = concat!(
        "INSERT INTO cross_checks (",
        measured_columns!(),
        ", original_worker_id, mismatch)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                (SELECT r.worker_id FROM results r WHERE r.build_id = ?1 AND r.suite_id = ?2
                   AND r.position_index = ?3 AND r.depth = ?4),
                COALESCE((SELECT r.error IS NULL AND ?15 IS NULL
                                 AND (r.nodes <> ?11 OR r.bestmove <> ?12)
                          FROM results r WHERE r.build_id = ?1 AND r.suite_id = ?2
                            AND r.position_index = ?3 AND r.depth = ?4), FALSE)
         WHERE TRUE
         ON CONFLICT DO NOTHING"
    );
    insert_each(tx, rows, now, sql, |q, _| q).await
}
