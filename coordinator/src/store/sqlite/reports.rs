//! What workers send back: result batches (with retries of failing positions) and build
//! failures (failing a variant only once enough workers failed it). The rules themselves
//! live in [`crate::store::retry`]; the statements mirror the Postgres ones.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::SqliteConnection;
use sweep_domain::wire::{BatchAck, JobReport};

use super::leases::mark_seen;
use super::measured::{bind_measured, measured_columns, Measured};
use super::settle::settle;
use super::{job_row, Db, SqliteStore};
use crate::store::batch::{check_batch, Checked, Report};
use crate::store::job::{check_lease, JobRow};
use crate::store::retry::final_failures;
use crate::store::{lock_order, JobOutcome, StoreResult};

/// Stores every report of one upload in one write transaction (see [`report_in`]); a lost
/// lease is that report's `Lost`, any other error rolls the whole upload back.
pub(super) async fn report_many(
    store: &SqliteStore,
    worker_id: i64,
    reports: &[JobReport],
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<Vec<JobOutcome>> {
    let now = store.clock.now_ms();
    let mut tx = store.write_tx().await?;
    let mut outcomes = vec![JobOutcome::LOST; reports.len()];
    // The same order as Postgres, though one writer at a time cannot deadlock here.
    for i in lock_order(reports.iter().map(|r| r.job_id)) {
        let report = Report::of_upload(worker_id, &reports[i]);
        let stored = report_in(store, &mut tx, &report, now, lease, max_attempts).await;
        outcomes[i] = JobOutcome::of(stored)?;
    }
    mark_seen(&mut tx, worker_id, now).await?;
    tx.commit().await.db()?;
    Ok(outcomes)
}

/// Stores one report inside a write transaction: checks the lease (`LeaseLost`/`NotFound`
/// before anything is written) and the whole batch (`Invalid`, likewise), then writes the
/// results and renews or closes the job. The caller marks the worker seen and commits.
async fn report_in(
    store: &SqliteStore,
    conn: &mut SqliteConnection,
    report: &Report<'_>,
    now: i64,
    lease: Duration,
    max_attempts: u32,
) -> StoreResult<BatchAck> {
    let job_id = report.job_id;
    let job = job_row(conn, job_id).await?;
    check_lease(job_id, &job, report.worker_id, report.attempt)?;
    let suite = store.suite_positions(conn, job.suite_id).await?;
    let checked = check_batch(&job, &suite, report)?;
    if job.check {
        // A cross-check's measurements, errors included, go to `cross_checks` only.
        return super::checks::report(conn, &job, report, &checked, now, lease).await;
    }
    let (failed, ok): (Vec<Checked>, Vec<Checked>) =
        checked.into_iter().partition(|c| c.error.is_some());
    let w = Writer {
        job: &job,
        report,
        now,
    };
    let mut accepted = w.insert_results(&mut *conn, &ok).await?;
    if !failed.is_empty() {
        accepted += w.record_failures(&mut *conn, &failed).await?;
        let failures = w.failures_of(&mut *conn, &failed).await?;
        let finals = final_failures(&failed, &failures, max_attempts);
        w.insert_results(&mut *conn, &finals).await?;
    }
    settle(conn, &job, report, Measured::Results, now, lease).await?;
    Ok(BatchAck {
        accepted,
        duplicates: report.results.len() as u32 - accepted,
        cancelled: job.cancelled,
    })
}

/// The context every row written for one batch shares.
struct Writer<'a> {
    job: &'a JobRow,
    report: &'a Report<'a>,
    now: i64,
}

impl Writer<'_> {
    /// Inserts results, ignoring positions that already have one; returns how many were new.
    async fn insert_results(
        &self,
        conn: &mut SqliteConnection,
        rows: &[Checked],
    ) -> StoreResult<u32> {
        let (job, report) = (self.job, self.report);
        let mut n = 0u32;
        for c in rows {
            // ON CONFLICT DO NOTHING (rather than INSERT OR IGNORE) ignores only the key
            // conflict of a duplicate, exactly like Postgres; other violations still fail.
            let insert = sqlx::query(concat!(
                "INSERT INTO results (",
                measured_columns!(),
                ", solved, score_cp, score_mate, counters)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                         ?17, ?18, ?19, ?20)
                 ON CONFLICT DO NOTHING"
            ));
            n += bind_measured(insert, job, report, c, self.now)
                .bind(c.solved)
                .bind(c.score_cp)
                .bind(c.score_mate)
                .bind(&c.counters)
                .execute(&mut *conn)
                .await
                .db()?
                .rows_affected() as u32;
        }
        Ok(n)
    }

    /// Records each failing position as one failed try of this (job, attempt); a re-sent
    /// batch and a position that already has its result add nothing. Returns how many were
    /// new.
    async fn record_failures(
        &self,
        conn: &mut SqliteConnection,
        failed: &[Checked],
    ) -> StoreResult<u32> {
        let (job, report) = (self.job, self.report);
        let mut n = 0u32;
        for c in failed {
            n += sqlx::query(
                "INSERT INTO position_failures (build_id, suite_id, position_index, depth,
                                                position_id, job_id, attempt, worker_id, error,
                                                created_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10
                 WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.build_id = ?1
                                     AND r.suite_id = ?2 AND r.position_index = ?3
                                     AND r.depth = ?4)
                 ON CONFLICT (job_id, attempt, position_index) DO NOTHING",
            )
            .bind(job.build_id)
            .bind(job.suite_id)
            .bind(c.index)
            .bind(job.depth)
            .bind(&c.position_id)
            .bind(report.job_id)
            .bind(report.attempt)
            .bind(report.worker_id)
            .bind(c.error.as_deref().unwrap_or_default())
            .bind(self.now)
            .execute(&mut *conn)
            .await
            .db()?
            .rows_affected() as u32;
        }
        Ok(n)
    }

    /// Every recorded failure reason of the given positions, oldest first, by position.
    async fn failures_of(
        &self,
        conn: &mut SqliteConnection,
        failed: &[Checked],
    ) -> StoreResult<BTreeMap<i32, Vec<String>>> {
        let mut by_position: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for c in failed {
            if by_position.contains_key(&c.index) {
                continue;
            }
            let reasons: Vec<String> = sqlx::query_scalar(
                "SELECT error FROM position_failures
                 WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3 AND position_index = ?4
                 ORDER BY id",
            )
            .bind(self.job.build_id)
            .bind(self.job.suite_id)
            .bind(self.job.depth)
            .bind(c.index)
            .fetch_all(&mut *conn)
            .await
            .db()?;
            by_position.insert(c.index, reasons);
        }
        Ok(by_position)
    }
}
