//! The Postgres [`Backend`] (the [`crate::store::Store`] is written once over it). Leasing uses
//! `FOR UPDATE SKIP LOCKED`, so several coordinators can share one database; results are
//! keyed so a duplicate report is a no-op.
//!
//! Layout: this file holds the connection, the caches and the [`Backend`] impl, which only
//! delegates (the calls themselves are `impl BackendCalls`); [`sweeps`] holds the steps of
//! writing a sweep that differ and reads a few builds' results, [`reuse`] copies earlier
//! results into a new sweep, [`leases`] hands out jobs (lease calls served together by [`claims`]) and takes
//! them back, [`beats`] renews them for heartbeats served together, [`reports`] takes results
//! and build failures, and [`statements`] holds the worker protocol's hot statements.

mod beats;
mod cache;
mod checks;
mod claims;
mod columns;
mod gauges;
mod group;
mod leases;
mod reports;
mod reuse;
pub mod statements;
mod sweeps;

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::epd::SuitePosition;
use sweep_domain::table::ResultRow;
use sweep_domain::wire::{HeldLease, JobLease, JobReport, RegisterWorker};

use super::backend::Backend;
use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::BackendCalls;
use super::{Clock, JobOutcome, StoreError, StoreResult};

/// How long one statement may run before Postgres cancels it.
const STATEMENT_TIMEOUT: &str = "15s";

/// Postgres-backed store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Suite versions are immutable, so their positions are cached by id.
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
    /// A sweep's builds and suite names never change after submit: leases read them here.
    sweeps: cache::SweepCache,
    /// Lease calls of this coordinator are served together (see [`claims`]).
    claims: claims::Claims,
    /// Result uploads of this coordinator are stored together (see [`reports`]).
    uploads: reports::Uploads,
    /// Heartbeats of this coordinator are served together (see [`beats`]).
    beats: beats::Beats,
    /// When this coordinator last marked each worker seen.
    seen: Seen,
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
        sqlx::migrate!("../migrations/postgres")
            .run(&pool)
            .await
            .context("applying migrations")?;
        Ok(Self::with_pool(pool))
    }

    /// Connects to an existing database as it is, for reading commands: never migrates.
    /// Fails with a sentence naming the database when it is not a Sweep database or needs
    /// migrations (see [`crate::store::check_migrations`]).
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
        crate::store::check_migrations(
            &shown,
            has_table,
            &applied,
            &sqlx::migrate!("../migrations/postgres"),
        )?;
        Ok(Self::with_pool(pool))
    }

    fn with_pool(pool: PgPool) -> Self {
        Self {
            pool,
            suites: Arc::default(),
            sweeps: cache::SweepCache::default(),
            claims: claims::Claims::default(),
            uploads: group::Group::new(reports::UPLOAD_TURNS),
            beats: group::Group::new(beats::BEAT_TURNS),
            seen: Seen::default(),
            clock: Clock::default(),
        }
    }

    /// The underlying pool (for tests and tools).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The positions of a suite version, from the cache or the database.
    async fn suite_positions(&self, suite_id: i64) -> StoreResult<Arc<Vec<SuitePosition>>> {
        if let Some(p) = self.suites.lock().expect("suite cache lock").get(&suite_id) {
            return Ok(p.clone());
        }
        let json: serde_json::Value =
            sqlx::query_scalar("SELECT positions FROM suites WHERE id = $1")
                .bind(suite_id)
                .fetch_optional(&self.pool)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("suite {suite_id}")))?;
        let positions: Vec<SuitePosition> =
            serde_json::from_value(json).context("decoding stored suite positions")?;
        let positions = Arc::new(positions);
        self.suites
            .lock()
            .expect("suite cache lock")
            .insert(suite_id, positions.clone());
        Ok(positions)
    }
}

/// When each worker was last marked seen by this coordinator. A worker's `last_seen_at`
/// only has to be fresh to within a fraction of a lease (it decides who is live), so a
/// worker marked within the last tenth of a lease is not marked again: one write per worker
/// every few seconds instead of one per call.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<i64, DateTime<Utc>>>>);

impl Seen {
    /// Workers remembered at most; past it the memory starts over.
    const MAX: usize = 100_000;

    /// Whether `worker_id` was marked within the `lease / 10` before `now`.
    fn recent(&self, worker_id: i64, lease: Duration, now: DateTime<Utc>) -> bool {
        let seen = self.0.lock().expect("seen lock");
        seen.get(&worker_id)
            .is_some_and(|t| (now - *t).to_std().is_ok_and(|ago| ago < lease / 10))
    }

    /// Remembers that `worker_id` (a registered worker) was marked at `now`.
    fn marked(&self, worker_id: i64, now: DateTime<Utc>) {
        let mut seen = self.0.lock().expect("seen lock");
        if seen.len() >= Self::MAX {
            seen.clear();
        }
        seen.insert(worker_id, now);
    }
}

/// A job read under its row lock.
struct Locked {
    /// What the lease and result checks need.
    job: JobRow,
    /// Results stored for the job so far (kept by every insert, so closing a job needs no
    /// count).
    results_done: i32,
}

/// Reads jobs and locks their rows (in id order, see [`statements::LOCK_JOBS`]) for the
/// rest of the transaction, so concurrent calls about one job (a report racing a re-lease)
/// serialize. Unknown ids are simply absent.
async fn jobs_for_update(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
) -> StoreResult<HashMap<i64, Locked>> {
    let rows = sqlx::query(statements::LOCK_JOBS)
        .bind(ids)
        .fetch_all(&mut **tx)
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let job = job_row(row);
            let locked = Locked {
                job,
                results_done: row.get("results_done"),
            };
            (row.get("id"), locked)
        })
        .collect())
}

/// A job row as the lease checks need it, from a row with the columns of
/// [`statements::LOCK_JOBS`].
fn job_row(row: &sqlx::postgres::PgRow) -> JobRow {
    JobRow {
        state: row.get("state"),
        worker_id: row.get("worker_id"),
        attempt: row.get("attempt"),
        build_id: row.get("build_id"),
        suite_id: row.get("suite_id"),
        first_index: row.get("first_index"),
        count: row.get("count"),
        sweep_id: row.get("sweep_id"),
        cancelled: row.get("cancelled"),
        depth: row.get("depth"),
        nodes_limit: row.get("nodes_limit"),
        check: row.get("is_check"),
    }
}

/// Postgres' interval for a lease, as the seconds `make_interval` takes.
fn secs(lease: Duration) -> f64 {
    lease.as_secs_f64()
}

#[async_trait]
impl Backend for PgStore {
    type Reader = PgPool;
    type Tx = Transaction<'static, Postgres>;
    fn lock_rows(alias: &str) -> String {
        format!(" FOR UPDATE OF {alias}")
    }
    async fn begin(&self) -> StoreResult<Self::Tx> {
        Ok(self.pool.begin().await?)
    }
    fn clock(&self) -> &Clock {
        &self.clock
    }
    fn reader(&self) -> &PgPool {
        &self.pool
    }
    fn written_at(_now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        None
    }
    async fn lock_identity(&self, tx: &mut Self::Tx, identity: &str) -> StoreResult<()> {
        sweeps::lock_identity(tx, identity).await
    }
    async fn insert_jobs(
        &self,
        tx: &mut Self::Tx,
        sweep_id: i64,
        kind: JobKind,
        jobs: &[NewJob],
        _now: DateTime<Utc>,
    ) -> StoreResult<u64> {
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
    async fn job_for_update(&self, tx: &mut Self::Tx, job_id: i64) -> StoreResult<JobRow> {
        Ok(jobs_for_update(tx, &[job_id])
            .await?
            .remove(&job_id)
            .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?
            .job)
    }
}

#[async_trait]
impl BackendCalls for PgStore {
    async fn gauges(&self, alive_within: Duration) -> StoreResult<super::StoreGauges> {
        gauges::gauges(self, alive_within).await
    }

    async fn worker_checks(
        &self,
        workers: &[i64],
    ) -> StoreResult<std::collections::BTreeMap<i64, (u64, u64)>> {
        checks::per_worker(&self.pool, workers).await
    }

    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: sweep_domain::limit::Limit,
    ) -> StoreResult<Vec<ResultRow>> {
        sweeps::build_results(&self.pool, id, builds, limit).await
    }

    async fn register_worker(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
    ) -> StoreResult<i64> {
        leases::register_worker(&self.pool, worker, token_id, self.clock.now()).await
    }

    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>> {
        let ask = claims::Ask {
            worker_id,
            max,
            lease,
            max_attempts,
        };
        leases::touch_unless_recent(self, worker_id, lease).await?;
        // The claim judges stalled builds first, after the touch, so the asking worker
        // counts as live; the pick, the lease and the reads that turn rows into leases are
        // one transaction shared with the calls waiting meanwhile (see `claims`), so a call
        // that fails anywhere leaves no job leased.
        self.claims.lease(self, ask).await
    }

    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>> {
        let beat = beats::Beat {
            worker_id,
            leases: leases.to_vec(),
            lease,
        };
        let acks = beats::heartbeat(self, beat).await?;
        acks.into_iter().map(JobOutcome::of).collect()
    }

    async fn release_leases(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> StoreResult<Vec<JobOutcome>> {
        leases::release(self, worker_id, leases).await
    }

    async fn report_many(
        &self,
        worker_id: i64,
        reports: Arc<[JobReport]>,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobOutcome>> {
        let acks = reports::report_jobs(self, worker_id, reports, lease, max_attempts).await?;
        acks.into_iter().map(JobOutcome::of).collect()
    }
}
