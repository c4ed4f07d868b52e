//! Build records on Postgres.

use sqlx::{PgPool, Row};
use sweep_domain::provenance::BuildReport;

use super::jobs_for_update;
use crate::store::job::check_lease;
use crate::store::provenance::{group, row_of, BuildRecords};
use crate::store::{StoreError, StoreResult};

/// Keeps `report` for the build of `job_id`, whose lease the worker must hold; a second
/// report of the same (build, worker) keeps the first.
pub(super) async fn record_build(
    pool: &PgPool,
    job_id: i64,
    report: &BuildReport,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    let job = jobs_for_update(&mut tx, &[job_id])
        .await?
        .remove(&job_id)
        .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?
        .job;
    check_lease(job_id, &job, report.worker_id, report.attempt)?;
    let r = &report.record;
    sqlx::query(
        "INSERT INTO build_records (build_id, worker_id, host, cpu_model, compiler, argv, binary_sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (build_id, worker_id) DO NOTHING",
    )
    .bind(job.build_id)
    .bind(report.worker_id)
    .bind(&r.host)
    .bind(&r.cpu_model)
    .bind(&r.compiler)
    .bind(serde_json::to_value(&r.argv).expect("strings serialize"))
    .bind(&r.binary_sha256)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The first `per_build` records of each build of sweep `id`, and how many each has.
pub(super) async fn build_records(
    pool: &PgPool,
    id: i64,
    per_build: u32,
) -> StoreResult<BuildRecords> {
    let rows = sqlx::query(
        "WITH ranked AS (
             SELECT r.*, b.name AS build, b.ord,
                    row_number() OVER (PARTITION BY r.build_id ORDER BY r.reported_at, r.worker_id) AS rn,
                    count(*) OVER (PARTITION BY r.build_id) AS total
             FROM build_records r JOIN builds b ON b.id = r.build_id
             WHERE b.sweep_id = $1)
         SELECT k.build, w.name AS worker, k.host, k.cpu_model, k.compiler, k.argv::text AS argv,
                k.binary_sha256, k.reported_at, k.total
         FROM ranked k JOIN workers w ON w.id = k.worker_id
         WHERE k.rn <= $2 ORDER BY k.ord, k.rn",
    )
    .bind(id)
    .bind(i64::from(per_build))
    .fetch_all(pool)
    .await?;
    let rows = rows
        .iter()
        .map(|r| row_of(r, r.get("reported_at")))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(group(rows))
}
