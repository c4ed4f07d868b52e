//! Build records (see [`sweep_domain::provenance`]) read back: the first few per build,
//! grouped, with how many each build has, and each build's bench. (Storing one, under the
//! job's lease, is the queue's: `queue/build_records.rs`.)

use std::collections::BTreeMap;

use sweep_domain::provenance::{BuildRecord, StoredBuildRecord};
use sweep_domain::table::BuildBench;

use super::sql::{Columns, Reads, Value};
use super::{StoreError, StoreResult};

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
