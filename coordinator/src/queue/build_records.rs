//! Storing a build record (see [`sweep_domain::provenance`]) under the job's lease, written
//! once for both backends, with the bench check that refuses a worker whose bench total
//! disagrees with another's for the same binary. (Reading them back is the store's:
//! `store/provenance.rs`.)

use std::time::Duration;

use sha2::{Digest, Sha256};
use sweep_domain::provenance::BuildReport;

use super::build_failures::{refuse_build, Refusal};
use super::fence::check_lease;
use super::queued::{jobs, leases};
use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::JobRow;
use crate::store::sql::{insert_sql, stamp};
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// Keeps `report` for the build of `job_id`, whose lease the worker must hold; a second
/// report of the same (build, worker) keeps the first. A record whose bench total differs
/// from the one an earlier record of the same binary in the sweep holds is kept with the
/// mismatch spelled out, and the worker is refused the build (see [`refuse_build`]): its
/// job goes to the others. Returns that mismatch.
pub(crate) async fn record_build<B: Backend>(
    db: &Queue<B>,
    job_id: i64,
    report: &BuildReport,
    lease_time: Duration,
    max_attempts: u32,
) -> StoreResult<Option<String>> {
    let now = db.clock().now();
    let mut tx = db.backend.begin().await?;
    let lease = leases::<B>(&mut tx, &[report.attempt], true)
        .await?
        .remove(&report.attempt);
    let job = jobs(db, &mut tx, &[job_id])
        .await?
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?;
    check_lease(&job, lease.as_ref(), report.worker_id, report.attempt)?;
    let mismatch = match report.record.bench_nodes {
        Some(nodes) => bench_mismatch(db, &mut tx, &job, report, nodes).await?,
        None => None,
    };
    insert_record::<B>(&mut tx, &job, report, mismatch.as_deref(), now).await?;
    if let Some(why) = &mismatch {
        let output = format!("bench mismatch: {why}");
        let refusal = Refusal {
            worker_id: report.worker_id,
            output: &output,
            lease: lease_time,
            max_attempts,
            now,
        };
        refuse_build::<B>(db, &mut tx, &job, lease.as_ref(), &refusal).await?;
    }
    tx.commit().await?;
    Ok(mismatch)
}

/// Writes the record (unless this worker's record of the build is kept already).
async fn insert_record<B: Backend>(
    tx: &mut B::Tx,
    job: &JobRow,
    report: &BuildReport,
    mismatch: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<()> {
    let r = &report.record;
    let argv = serde_json::to_value(&r.argv).expect("strings serialize");
    let bench = r.bench_nodes.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let mut cols = vec![
        "build_id",
        "worker_id",
        "host",
        "cpu_model",
        "compiler",
        "argv",
        "binary_sha256",
        "bench_nodes",
        "bench_mismatch",
        "sandbox",
    ];
    let mut values = vec![
        Value::Int(job.build_id),
        Value::Int(report.worker_id),
        Value::Text(&r.host),
        Value::Text(&r.cpu_model),
        Value::OptText(r.compiler.as_deref()),
        Value::Json(&argv),
        Value::Text(&r.binary_sha256),
        Value::OptInt(bench),
        Value::OptText(mismatch),
        Value::Text(&r.sandbox),
    ];
    stamp(&mut cols, &mut values, "reported_at", B::written_at(now));
    let sql = insert_sql(
        "build_records",
        &cols,
        "ON CONFLICT (build_id, worker_id) DO NOTHING",
    );
    tx.execute(&sql, &values).await?;
    Ok(())
}

/// How `report`'s bench total (`nodes`) disagrees with the first bench another worker
/// reported for the same binary in the job's sweep (records that are mismatches themselves
/// are not references), in words naming both workers; `None` when it agrees or is the first.
async fn bench_mismatch<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    job: &JobRow,
    report: &BuildReport,
    nodes: u64,
) -> StoreResult<Option<String>> {
    // Two workers' first records of one binary must not both become references: the
    // binary's records in this sweep are written one at a time.
    let key = format!("bench\0{}\0{}", job.sweep_id, report.record.binary_sha256);
    db.backend
        .lock_key(tx, &hex::encode(Sha256::digest(key)))
        .await?;
    let reference = tx
        .rows(
            "SELECT r.bench_nodes, w.name AS worker, b.name AS build
             FROM build_records r
             JOIN builds b ON b.id = r.build_id
             JOIN workers w ON w.id = r.worker_id
             WHERE r.binary_sha256 = $1 AND r.bench_nodes IS NOT NULL
               AND r.bench_mismatch IS NULL AND r.worker_id <> $2
               AND b.sweep_id = $3
             ORDER BY r.reported_at, r.worker_id LIMIT 1",
            &[
                Value::Text(&report.record.binary_sha256),
                Value::Int(report.worker_id),
                Value::Int(job.sweep_id),
            ],
        )
        .await?;
    let Some(first) = reference.first() else {
        return Ok(None);
    };
    let theirs = first.int("bench_nodes")?;
    if u64::try_from(theirs).ok() == Some(nodes) {
        return Ok(None);
    }
    let (worker, build) = (first.text("worker")?, first.text("build")?);
    drop(reference);
    let me = tx
        .row(
            "SELECT name FROM workers WHERE id = $1",
            &[Value::Int(report.worker_id)],
        )
        .await?
        .map(|r| r.text("name"))
        .transpose()?
        .unwrap_or_else(|| report.worker_id.to_string());
    Ok(Some(format!(
        "worker {me} benched {nodes} nodes where worker {worker} benched {theirs} for the same binary (sha256 {}, build {build}); its jobs of the build go to other workers",
        &report.record.binary_sha256[..12],
    )))
}
