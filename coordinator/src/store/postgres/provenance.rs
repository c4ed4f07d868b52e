//! Build records on Postgres.

use sqlx::PgPool;
use sweep_domain::provenance::BuildReport;

use super::jobs_for_update;
use crate::store::job::check_lease;
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
