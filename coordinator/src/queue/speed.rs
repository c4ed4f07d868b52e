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
use crate::store::sql::{stamp, Columns, Tx, Value};
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
        let row = Row {
            job,
            worker_id,
            attempt,
            pair: run.repeat as i64,
            figures,
            error: None,
        };
        new += insert::<B>(tx, &row, now).await?;
    }
    if let Some(error) = &report.error {
        let error = clean_result_error(error);
        let pair = report.runs.len() as i64;
        let row = Row {
            job,
            worker_id,
            attempt,
            pair,
            figures: [None; 6],
            error: Some(&error),
        };
        new += insert::<B>(tx, &row, now).await?;
    }
    Ok(new)
}

/// One row of `speed_runs`.
struct Row<'a> {
    job: &'a JobRow,
    worker_id: i64,
    attempt: i64,
    pair: i64,
    /// Base CPU, wall, nodes, then test CPU, wall, nodes.
    figures: [Option<i64>; 6],
    error: Option<&'a str>,
}

/// Inserts `row` unless its (job, pair) is stored; returns the rows inserted.
async fn insert<B: Backend>(
    tx: &mut B::Tx,
    row: &Row<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u32> {
    let job = row.job;
    let mut cols = vec![
        "job_id",
        "pair",
        "sweep_id",
        "build_id",
        "worker_id",
        "attempt",
        "base_cpu_us",
        "base_wall_us",
        "base_nodes",
        "test_cpu_us",
        "test_wall_us",
        "test_nodes",
        "error",
    ];
    let mut values = vec![
        Value::Int(job.id),
        Value::Int(row.pair),
        Value::Int(job.sweep_id),
        Value::Int(job.build_id),
        Value::Int(row.worker_id),
        Value::Int(row.attempt),
    ];
    values.extend(row.figures.iter().map(|f| Value::OptInt(*f)));
    values.push(Value::OptText(row.error));
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let marks: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO speed_runs ({}) VALUES ({}) ON CONFLICT (job_id, pair) DO NOTHING",
        cols.join(", "),
        marks.join(", ")
    );
    Ok(tx.execute(&sql, &values).await? as u32)
}
