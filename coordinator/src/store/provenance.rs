//! Build records (see [`sweep_domain::provenance`]), written once for both backends: storing
//! one under the job's lease, and reading them back: the first few per build, grouped, with
//! how many each build has.

use std::collections::BTreeMap;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sweep_domain::provenance::{BuildRecord, BuildReport, StoredBuildRecord};
use sweep_domain::table::BuildBench;

use super::build_failures::{refuse_build, Refusal};
use super::job::{check_lease, JobRow};
use super::protocol::Serves;
use super::sql::{Columns, Reads, Tx, Value};
use super::sweeps::{insert_sql, stamp};
use super::{StoreError, StoreResult};

/// Keeps `report` for the build of `job_id`, whose lease the worker must hold; a second
/// report of the same (build, worker) keeps the first. A record whose bench total differs
/// from the one an earlier record of the same binary in the sweep holds is kept with the
/// mismatch spelled out, and the worker is refused the build (see [`refuse_build`]): its
/// job goes to the others. Returns that mismatch.
pub(crate) async fn record_build<B: Serves>(
    db: &B,
    job_id: i64,
    report: &BuildReport,
    lease_time: Duration,
    max_attempts: u32,
) -> StoreResult<Option<String>> {
    let now = db.clock().now();
    let mut tx = db.begin().await?;
    let lease = super::protocol::leases::<B>(&mut tx, &[report.attempt], true)
        .await?
        .remove(&report.attempt);
    let job = super::protocol::jobs(db, &mut tx, &[job_id])
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
async fn insert_record<B: Serves>(
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
async fn bench_mismatch<B: Serves>(
    db: &B,
    tx: &mut B::Tx,
    job: &JobRow,
    report: &BuildReport,
    nodes: u64,
) -> StoreResult<Option<String>> {
    // Two workers' first records of one binary must not both become references: the
    // binary's records in this sweep are written one at a time.
    let key = format!("bench\0{}\0{}", job.sweep_id, report.record.binary_sha256);
    db.lock_key(tx, &hex::encode(Sha256::digest(key))).await?;
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
            bench_nodes: r
                .opt_int("bench_nodes")?
                .and_then(|n| u64::try_from(n).ok()),
            sandbox: r.opt_text("sandbox")?.unwrap_or_default(),
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
                    CAST(k.argv AS TEXT) AS argv, k.binary_sha256, k.bench_nodes,
                    k.sandbox, k.reported_at, k.total
             FROM ranked k JOIN workers w ON w.id = k.worker_id
             WHERE k.rn <= $2 ORDER BY k.ord, k.rn",
            &[Value::Int(id), Value::Int(per_build.into())],
        )
        .await?;
    let rows = rows.iter().map(row_of).collect::<StoreResult<Vec<_>>>()?;
    Ok(group(rows))
}

/// Each build's bench of sweep `id` (see [`BuildBench`]), from its records in the order they
/// were reported. A build that ran nothing here (its results were all taken from an earlier
/// sweep of the same fingerprint) shows the bench of those earlier builds' binaries: the
/// numbers came from them. Mismatches are this sweep's own.
pub(crate) async fn build_benches(
    db: &impl Reads,
    id: i64,
) -> StoreResult<BTreeMap<String, BuildBench>> {
    let rows = db
        .rows(
            "SELECT b.name AS build, r.bench_nodes, r.bench_mismatch,
                    CASE WHEN e.id = b.id THEN 0 ELSE 1 END AS earlier
             FROM builds b
             JOIN builds e ON e.id = b.id
                           OR (b.fingerprint IS NOT NULL AND e.fingerprint = b.fingerprint)
             JOIN build_records r ON r.build_id = e.id
             WHERE b.sweep_id = $1 AND r.bench_nodes IS NOT NULL
             ORDER BY b.ord, earlier, r.reported_at, r.worker_id",
            &[Value::Int(id)],
        )
        .await?;
    let mut out: BTreeMap<String, BuildBench> = BTreeMap::new();
    for r in &rows {
        let bench = out.entry(r.text("build")?).or_default();
        let own = r.int("earlier")? == 0;
        match r.opt_text("bench_mismatch")? {
            Some(why) if own => bench.mismatches.push(why),
            Some(_) => {}
            None if bench.nodes.is_none() => {
                bench.nodes = r
                    .opt_int("bench_nodes")?
                    .and_then(|n| u64::try_from(n).ok());
            }
            None => {}
        }
    }
    Ok(out)
}
