//! Sweeps on SQLite: the one step of writing a sweep that differs (its jobs, a row at a time;
//! the rest is `store/sweeps.rs`). What the read side asks about a sweep is written once for
//! both backends, in `store/reads.rs`.

use sqlx::{Sqlite, Transaction};

use super::Db;
use crate::store::rows::{JobKind, NewJob};
use crate::store::StoreResult;

/// Inserts a new sweep's jobs of one kind, in order; returns how many. One prepared
/// statement per row: inside one transaction SQLite does no I/O per row, and insertion order
/// gives job ids in the order given (plan order: round-robin over builds, see `plan::jobs`).
pub(super) async fn insert_jobs(
    tx: &mut Transaction<'static, Sqlite>,
    sweep_id: i64,
    kind: JobKind,
    jobs: &[NewJob],
    now: i64,
) -> StoreResult<u64> {
    let mut n = 0;
    for job in jobs {
        n += sqlx::query(
            "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, depth,
                               nodes_limit, updated_at, kind)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
    }
    Ok(n)
}
