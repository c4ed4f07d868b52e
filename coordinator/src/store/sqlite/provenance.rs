//! Build records on SQLite (see the Postgres twin).

use sqlx::{Row, SqlitePool};
use sweep_domain::provenance::BuildReport;

use super::auth::time_of;
use super::{job_row, now_ms, Db, SqliteStore};
use crate::store::job::check_lease;
use crate::store::provenance::{group, row_of, BuildRecords};
use crate::store::StoreResult;

/// Keeps `report` for the build of `job_id`, whose lease the worker must hold; a second
/// report of the same (build, worker) keeps the first.
pub(super) async fn record_build(
    store: &SqliteStore,
    job_id: i64,
    report: &BuildReport,
) -> StoreResult<()> {
    let mut tx = store.write_tx().await?;
    let job = job_row(&mut tx, job_id).await?;
    check_lease(job_id, &job, report.worker_id, report.attempt)?;
    let r = &report.record;
    sqlx::query(
        "INSERT INTO build_records (build_id, worker_id, host, cpu_model, compiler, argv, binary_sha256, reported_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (build_id, worker_id) DO NOTHING",
    )
    .bind(job.build_id)
    .bind(report.worker_id)
    .bind(&r.host)
    .bind(&r.cpu_model)
    .bind(&r.compiler)
    .bind(serde_json::to_string(&r.argv).expect("strings serialize"))
    .bind(&r.binary_sha256)
    .bind(now_ms())
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    Ok(())
}

/// The first `per_build` records of each build of sweep `id`, and how many each has.
pub(super) async fn build_records(
    reader: &SqlitePool,
    id: i64,
    per_build: u32,
) -> StoreResult<BuildRecords> {
    let rows = sqlx::query(
        "WITH ranked AS (
             SELECT r.*, b.name AS build, b.ord,
                    row_number() OVER (PARTITION BY r.build_id ORDER BY r.reported_at, r.worker_id) AS rn,
                    count(*) OVER (PARTITION BY r.build_id) AS total
             FROM build_records r JOIN builds b ON b.id = r.build_id
             WHERE b.sweep_id = ?1)
         SELECT k.build, w.name AS worker, k.host, k.cpu_model, k.compiler, k.argv,
                k.binary_sha256, k.reported_at, k.total
         FROM ranked k JOIN workers w ON w.id = k.worker_id
         WHERE k.rn <= ?2 ORDER BY k.ord, k.rn",
    )
    .bind(id)
    .bind(i64::from(per_build))
    .fetch_all(reader)
    .await
    .db()?;
    let rows = rows
        .iter()
        .map(|r| row_of(r, time_of(r.get("reported_at"))?))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(group(rows))
}
