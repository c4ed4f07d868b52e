//! Speed jobs (`[speed]`, see [`sweep_domain::wire::SpeedLease`]): one to an ask its share
//! sends to a sweep whose work is done and whose speed job waits, else last, to an ask a
//! claim dealt nothing whose worker holds no lease; each alone in its lease (the worker runs
//! nothing else while it times); stored from the upload that finishes them, into
//! `speed_runs`. Their state is kept
//! in `jobs` (`queued`, `leased`, `done`), as a cross-check's is: a sweep has a few.

use sweep_domain::bounds::clean_result_error;
use sweep_domain::wire::SpeedReport;

use super::statements as stmt;
use crate::store::backend::Backend;
use crate::store::job::JobRow;
use crate::store::speed::{insert_run, SpeedRow};
use crate::store::sql::{Columns, Tx, Value};
use crate::store::StoreResult;

/// Whether any speed job waits: when none does (nearly always), a claim asks nothing more.
pub(super) async fn any_waiting<B: Backend>(tx: &mut B::Tx) -> StoreResult<bool> {
    Ok(!tx.rows(&stmt::speed_waiting(), &[]).await?.is_empty())
}

/// A speed job worker `worker` may take now, marked `leased`: none when it holds a lease (it
/// would not run alone) or none is takeable.
pub(super) async fn pick<B: Backend>(tx: &mut B::Tx, worker: i64) -> StoreResult<Option<i64>> {
    let w = [Value::Int(worker)];
    if !tx.rows(&stmt::holds_leases(), &w).await?.is_empty() {
        return Ok(None);
    }
    let picked = tx.rows(&stmt::pick_speed::<B>(false), &w).await?;
    picked.first().map(|r| r.int("id")).transpose()
}

/// A speed job of `sweep` (its share sent worker `worker` there) marked `leased`, whatever the
/// worker holds: it runs the job once its running jobs end, and asks for nothing meanwhile
/// (the worker's slots and permits see to that), so a sweep's speed jobs do not wait for
/// other sweeps' work to run dry.
pub(super) async fn pick_of<B: Backend>(
    tx: &mut B::Tx,
    worker: i64,
    sweep: i64,
) -> StoreResult<Option<i64>> {
    let values = [Value::Int(worker), Value::Int(sweep)];
    let picked = tx.rows(&stmt::pick_speed::<B>(true), &values).await?;
    picked.first().map(|r| r.int("id")).transpose()
}

/// Stores the runs of a speed job's report (and its error, as one more row without figures),
/// once: a report sent again adds nothing. Returns the rows new.
pub(super) async fn store_runs<B: Backend>(
    tx: &mut B::Tx,
    job: &JobRow,
    worker_id: i64,
    attempt: i64,
    report: &SpeedReport,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u32> {
    let mut new = 0;
    for run in &report.runs {
        let figures = [
            run.base.cpu_us,
            run.base.wall_us,
            run.base.nodes,
            run.test.cpu_us,
            run.test.wall_us,
            run.test.nodes,
        ]
        .map(|v| Some(i64::try_from(v).unwrap_or(i64::MAX)));
        let row = row_of(job, worker_id, attempt, run.repeat as i64, figures, None);
        new += insert_run::<B>(tx, &row, now).await?;
    }
    if let Some(error) = &report.error {
        let error = clean_result_error(error);
        let pair = report.runs.len() as i64;
        let row = row_of(job, worker_id, attempt, pair, [None; 6], Some(&error));
        new += insert_run::<B>(tx, &row, now).await?;
    }
    Ok(new)
}

/// The `speed_runs` row of pair `pair` of `job`.
fn row_of<'a>(
    job: &JobRow,
    worker_id: i64,
    attempt: i64,
    pair: i64,
    figures: [Option<i64>; 6],
    error: Option<&'a str>,
) -> SpeedRow<'a> {
    SpeedRow {
        job_id: job.id,
        sweep_id: job.sweep_id,
        build_id: job.build_id,
        worker_id,
        attempt,
        pair,
        figures,
        error,
    }
}
