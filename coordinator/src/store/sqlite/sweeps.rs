//! Sweeps on SQLite: the one step of writing a sweep that differs (its jobs, a row at a time;
//! the rest is `store/sweeps.rs`). What the read side asks about a sweep is written once for
//! both backends, in `store/reads.rs`.

use std::collections::HashMap;

use sqlx::{Sqlite, Transaction};

use super::Db;
use crate::store::backend::JobRange;
use crate::store::rows::{JobKind, NewJob};
use crate::store::StoreResult;

/// Inserts a new sweep's jobs of one kind, in order, and keeps each build's range of work
/// jobs on the build; returns the ranges. One prepared statement per row: inside one
/// transaction SQLite does no I/O per row, and insertion order gives job ids in the order
/// given (build by build, see `store/sweeps.rs`).
pub(super) async fn insert_jobs(
    tx: &mut Transaction<'static, Sqlite>,
    sweep_id: i64,
    kind: JobKind,
    jobs: &[NewJob],
    now: i64,
) -> StoreResult<Vec<JobRange>> {
    let mut ranges: Vec<JobRange> = Vec::new();
    // Each build's place in `ranges`: a sweep of seed scale has 257 builds and 250,000 jobs.
    let mut range_of: HashMap<i64, usize> = HashMap::new();
    for job in jobs {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth,
                               nodes_limit, updated_at, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING id",
        )
        .bind(sweep_id)
        .bind(job.build_id)
        .bind(job.suite_id)
        .bind(job.first)
        .bind(job.count)
        .bind(job.depth)
        .bind(job.nodes_limit)
        .bind(now)
        .bind(kind.as_str())
        .fetch_one(&mut **tx)
        .await
        .db()?;
        match range_of.get(&job.build_id) {
            Some(&i) => {
                let r = &mut ranges[i];
                r.first = r.first.min(id);
                r.last = r.last.max(id);
                r.count += 1;
            }
            None => {
                range_of.insert(job.build_id, ranges.len());
                ranges.push(JobRange {
                    build_id: job.build_id,
                    first: id,
                    last: id,
                    count: 1,
                });
            }
        }
    }
    if kind == JobKind::Work {
        for r in &ranges {
            sqlx::query(
                "UPDATE builds SET first_job = min(coalesce(first_job, ?2), ?2),
                                   last_job = max(coalesce(last_job, ?3), ?3)
                 WHERE id = ?1",
            )
            .bind(r.build_id)
            .bind(r.first)
            .bind(r.last)
            .execute(&mut **tx)
            .await
            .db()?;
        }
    }
    Ok(ranges)
}
