//! The Postgres [`Backend`] (the [`crate::store::Store`] is written once over it, the worker
//! queue in `crate::queue`). Claims use `FOR UPDATE SKIP LOCKED`, so several
//! coordinators can share one database; results are keyed so a duplicate report is a no-op.
//!
//! Layout: this file holds the connection and the [`Backend`] impl, which only delegates;
//! [`sweeps`] holds the steps of writing a sweep that differ and reads a few builds' results,
//! [`reuse`] copies earlier results into a new sweep, [`hot`] the worker protocol's
//! multi-row writes, [`workers`] registration, and [`statements`] the multi-row statements
//! as Postgres runs them (so their plans can be checked).

mod hot;
mod reuse;
pub mod statements;
mod sweeps;
mod workers;

use chrono::{DateTime, Utc};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use sweep_domain::table::ResultRow;
use sweep_domain::wire::RegisterWorker;

use super::backend::{Backend, JobRange, LockedCursor, Measurement, NewLease};
use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::BackendCalls;
use super::{Clock, StoreResult, WorkerCap};

/// How long one statement may run before Postgres cancels it.
const STATEMENT_TIMEOUT: &str = "15s";

/// Postgres-backed store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Where time comes from (see [`Clock`]).
    clock: Clock,
}

/// A pool of at most `max` connections to `url`, with bounded pool waits and statement
/// timeouts; errors name the database with its password redacted.
async fn pool_of(url: &str, max: u32) -> anyhow::Result<PgPool> {
    let options: PgConnectOptions = url
        .parse::<PgConnectOptions>()
        .context("parsing the database URL")?
        .options([("statement_timeout", STATEMENT_TIMEOUT)]);
    PgPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
        .with_context(|| format!("connecting to {}", crate::store::redact(url)))
}

impl PgStore {
    /// Connects (with bounded pool waits and statement timeouts) and applies migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let pool = pool_of(url, 16).await?;
        crate::store::migrations::of_postgres()
            .await?
            .run(&pool)
            .await
            .context("applying migrations")?;
        Ok(Self::with_pool(pool))
    }

    /// Connects to an existing database as it is, for reading commands: never migrates.
    /// Fails with a sentence naming the database when it is not a Sweep database or needs
    /// migrations (see [`crate::store::migrations::check_migrations`]).
    pub async fn open_existing(url: &str) -> anyhow::Result<Self> {
        let pool = pool_of(url, 4).await?;
        let has_table: bool =
            sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                .fetch_one(&pool)
                .await
                .context("looking for the migrations table")?;
        let applied: Vec<i64> = if has_table {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&pool)
                .await
                .context("reading the applied migrations")?
        } else {
            Vec::new()
        };
        let shown = crate::store::redact(url);
        crate::store::migrations::check_migrations(
            &shown,
            has_table,
            &applied,
            &crate::store::migrations::of_postgres().await?,
        )?;
        Ok(Self::with_pool(pool))
    }

    fn with_pool(pool: PgPool) -> Self {
        Self {
            pool,
            clock: Clock::default(),
        }
    }

    /// The underlying pool (for tests and tools).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Backend for PgStore {
    type Reader = PgPool;
    type Tx = Transaction<'static, Postgres>;
    const NEWEST_FAILURE_FIRST: &'static str = "ORDER BY created_at DESC, worker_id DESC";
    const BUILD_AFFINITY: bool = true;
    fn lock_rows(alias: &str) -> String {
        format!(" FOR UPDATE OF {alias}")
    }
    fn skip_locked(alias: &str) -> String {
        format!(" FOR UPDATE OF {alias} SKIP LOCKED")
    }
    fn in_list(param: &str) -> String {
        format!("= ANY({param})")
    }
    fn lease_jobs(lease: &str) -> String {
        format!(
            " CROSS JOIN LATERAL (SELECT x.job AS value, CAST(x.n - 1 AS INTEGER) AS key
                                 FROM unnest({lease}.jobs) WITH ORDINALITY AS x(job, n)) u"
        )
    }
    async fn begin(&self) -> StoreResult<Self::Tx> {
        Ok(self.pool.begin().await?)
    }
    async fn begin_hot(&self) -> StoreResult<Self::Tx> {
        Ok(self.pool.begin_with(statements::HOT_BEGIN).await?)
    }
    async fn begin_claim(&self) -> StoreResult<Self::Tx> {
        Ok(self.pool.begin_with(statements::CLAIM_BEGIN).await?)
    }
    fn clock(&self) -> &Clock {
        &self.clock
    }
    fn reader(&self) -> &PgPool {
        &self.pool
    }
    fn pools(&self) -> Vec<super::PoolGauge> {
        vec![super::PoolGauge::of("main", &self.pool)]
    }
    fn written_at(_now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        None
    }
    async fn lock_key(&self, tx: &mut Self::Tx, key: &str) -> StoreResult<()> {
        sweeps::lock_key(tx, key).await
    }
    async fn insert_jobs(
        &self,
        tx: &mut Self::Tx,
        sweep_id: i64,
        kind: JobKind,
        jobs: &[NewJob],
        _now: DateTime<Utc>,
    ) -> StoreResult<Vec<JobRange>> {
        sweeps::insert_jobs(tx, sweep_id, kind, jobs).await
    }
    async fn reuse_candidates(
        &self,
        tx: &mut Self::Tx,
        query: &str,
        wanted: &[&str],
        id: i64,
    ) -> StoreResult<Vec<Prior>> {
        reuse::candidates(tx, query, wanted, id).await
    }
    async fn copy_earlier(
        &self,
        tx: &mut Self::Tx,
        id: i64,
        results: &[CopyRow],
        checks: &[CopyRow],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        reuse::copy(tx, id, results, checks, now).await
    }
    async fn sweep_written(&self, jobs: u64) -> StoreResult<()> {
        sweeps::analyze_if_large(&self.pool, jobs).await
    }
    async fn lock_cursors(
        &self,
        tx: &mut Self::Tx,
        wants: &[(i64, i64)],
    ) -> StoreResult<Vec<LockedCursor>> {
        hot::lock_cursors(tx, wants).await
    }
    async fn jobs_after(
        &self,
        tx: &mut Self::Tx,
        wants: &[(i64, i64, i64, i64)],
    ) -> StoreResult<Vec<JobRow>> {
        hot::jobs_after(tx, wants).await
    }
    async fn set_cursors(&self, tx: &mut Self::Tx, rows: &[(i64, i64, i64)]) -> StoreResult<()> {
        hot::set_cursors(tx, rows).await
    }
    async fn insert_leases(&self, tx: &mut Self::Tx, rows: &[NewLease]) -> StoreResult<Vec<i64>> {
        hot::insert_leases(tx, rows).await
    }
    async fn set_leases(
        &self,
        tx: &mut Self::Tx,
        rows: &[(i64, i64, DateTime<Utc>)],
    ) -> StoreResult<()> {
        hot::set_leases(tx, rows).await
    }
    async fn insert_results(
        &self,
        tx: &mut Self::Tx,
        rows: &[Measurement<'_>],
        _now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>> {
        hot::insert_results(tx, rows).await
    }
    async fn insert_checks(
        &self,
        tx: &mut Self::Tx,
        rows: &[Measurement<'_>],
        _now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>> {
        hot::insert_checks(tx, rows).await
    }
}

#[async_trait]
impl BackendCalls for PgStore {
    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: sweep_domain::limit::Limit,
    ) -> StoreResult<Vec<ResultRow>> {
        sweeps::build_results(&self.pool, id, builds, limit).await
    }

    async fn register_worker_capped(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
        cap: Option<WorkerCap>,
    ) -> StoreResult<i64> {
        workers::register(&self.pool, worker, token_id, cap, self.clock.now()).await
    }
}
