//! Build records on SQLite (see the Postgres twin).

use sweep_domain::provenance::BuildReport;

use super::{job_row, Db, SqliteStore};
use crate::store::job::check_lease;
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
    .bind(store.clock.now_ms())
    .execute(&mut *tx)
    .await
    .db()?;
    tx.commit().await.db()?;
    Ok(())
}
