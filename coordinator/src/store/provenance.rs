//! Build records (see [`sweep_domain::provenance`]), written once for both backends: storing
//! one under the job's lease, and reading them back: the first few per build, grouped, with
//! how many each build has.

use std::collections::BTreeMap;

use sweep_domain::provenance::{BuildRecord, BuildReport, StoredBuildRecord};

use super::job::check_lease;
use super::protocol::Serves;
use super::sql::{Columns, Reads, Tx, Value};
use super::sweeps::{insert_sql, stamp};
use super::{StoreError, StoreResult};

/// Keeps `report` for the build of `job_id`, whose lease the worker must hold; a second
/// report of the same (build, worker) keeps the first.
pub(crate) async fn record_build<B: Serves>(
    db: &B,
    job_id: i64,
    report: &BuildReport,
) -> StoreResult<()> {
    let mut tx = db.begin().await?;
    let lease = super::protocol::leases::<B>(&mut tx, &[report.attempt], true)
        .await?
        .remove(&report.attempt);
    let job = super::protocol::jobs(db, &mut tx, &[job_id])
        .await?
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?;
    check_lease(&job, lease.as_ref(), report.worker_id, report.attempt)?;
    let r = &report.record;
    let argv = serde_json::to_value(&r.argv).expect("strings serialize");
    let mut cols = vec![
        "build_id",
        "worker_id",
        "host",
        "cpu_model",
        "compiler",
        "argv",
        "binary_sha256",
    ];
    let mut values = vec![
        Value::Int(job.build_id),
        Value::Int(report.worker_id),
        Value::Text(&r.host),
        Value::Text(&r.cpu_model),
        Value::OptText(r.compiler.as_deref()),
        Value::Json(&argv),
        Value::Text(&r.binary_sha256),
    ];
    stamp(
        &mut cols,
        &mut values,
        "reported_at",
        B::written_at(db.clock().now()),
    );
    let sql = insert_sql(
        "build_records",
        &cols,
        "ON CONFLICT (build_id, worker_id) DO NOTHING",
    );
    tx.execute(&sql, &values).await?;
    tx.commit().await
}

/// Each build's first records (oldest first) and how many it has in all.
pub type BuildRecords = BTreeMap<String, (Vec<StoredBuildRecord>, u64)>;

/// Groups rows of (build name, record, total records of that build), already cut to the
/// first few per build and in order.
fn group(rows: impl IntoIterator<Item = (String, StoredBuildRecord, u64)>) -> BuildRecords {
    let mut out = BuildRecords::new();
    for (build, record, total) in rows {
        let entry = out.entry(build).or_insert_with(|| (Vec::new(), total));
        entry.0.push(record);
    }
    out
}

/// One row of [`build_records`]' query.
fn row_of(r: &impl Columns) -> StoreResult<(String, StoredBuildRecord, u64)> {
    let argv = r.text("argv")?;
    let record = StoredBuildRecord {
        worker: r.text("worker")?,
        record: BuildRecord {
            host: r.text("host")?,
            cpu_model: r.text("cpu_model")?,
            compiler: r.opt_text("compiler")?,
            argv: serde_json::from_str(&argv)
                .map_err(|e| StoreError::Internal(anyhow::anyhow!("stored argv `{argv}`: {e}")))?,
            binary_sha256: r.text("binary_sha256")?,
        },
        reported_at: r.time("reported_at")?,
    };
    Ok((r.text("build")?, record, r.count("total")?))
}

/// The first `per_build` records of each build of sweep `id`, and how many each has.
pub(crate) async fn build_records(
    db: &impl Reads,
    id: i64,
    per_build: u32,
) -> StoreResult<BuildRecords> {
    let rows = db
        .rows(
            "WITH ranked AS (
                 SELECT r.*, b.name AS build, b.ord,
                        row_number() OVER (PARTITION BY r.build_id
                                           ORDER BY r.reported_at, r.worker_id) AS rn,
                        count(*) OVER (PARTITION BY r.build_id) AS total
                 FROM build_records r JOIN builds b ON b.id = r.build_id
                 WHERE b.sweep_id = $1)
             SELECT k.build, w.name AS worker, k.host, k.cpu_model, k.compiler,
                    CAST(k.argv AS TEXT) AS argv, k.binary_sha256, k.reported_at, k.total
             FROM ranked k JOIN workers w ON w.id = k.worker_id
             WHERE k.rn <= $2 ORDER BY k.ord, k.rn",
            &[Value::Int(id), Value::Int(per_build.into())],
        )
        .await?;
    let rows = rows.iter().map(row_of).collect::<StoreResult<Vec<_>>>()?;
    Ok(group(rows))
}
