//! SQLite implementation of [`Store`], for local mode: one file, no server. Semantics mirror
//! [`super::PgStore`] statement for statement; `tests/store_conformance.rs` holds both to the
//! same behaviour.
//!
//! Concurrency: a sweep run has the in-process coordinator's HTTP handlers and several tasks
//! writing at once. SQLite allows one writer per file, so writes go through a pool of exactly
//! one connection, and every write transaction starts with `BEGIN IMMEDIATE`:
//! - the single connection makes in-process writers queue fairly on the pool instead of
//!   polling in SQLite's busy handler, so two leases can never interleave;
//! - `BEGIN IMMEDIATE` takes the file's write lock before the first read, so even another
//!   process on the same file cannot slip between our read of the queued jobs and our update.
//!   (A deferred transaction would read first and then fail to upgrade with `SQLITE_BUSY`,
//!   which `busy_timeout` does not retry.)
//!
//! Reads use a separate small pool: in WAL mode readers never block the writer nor wait for it.
//!
//! Layout, as for Postgres: this file holds the connections, the caches and the [`Backend`]
//! impl, which only delegates; [`sweeps`] inserts a new sweep's jobs, [`reuse`] copies
//! earlier results into it, [`leases`] hands out and renews jobs, [`reports`] takes results
//! and build failures.

mod checks;
mod gauges;
mod leases;
mod measured;
mod reports;
mod reuse;
mod settle;
mod sweeps;

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqliteConnection, SqlitePool, Transaction};
use sweep_domain::epd::SuitePosition;
use sweep_domain::wire::{HeldLease, JobLease, JobReport, RegisterWorker};

use super::backend::Backend;
use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::sql::sqlite_error;
use super::{reads, BackendCalls};
use super::{Clock, JobOutcome, StoreError, StoreResult};
use sweep_domain::limit::Limit;
use sweep_domain::table::ResultRow;

/// How long a statement waits for another process's write lock before giving up with
/// `SQLITE_BUSY` (reported as [`StoreError::Unavailable`]).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller waits for the single write connection. Longer than the busy timeout:
/// queued writers are served in order, each transaction takes milliseconds.
const WRITE_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// Read connections; WAL readers run beside the writer, and a few suffice for the HTTP API.
const READ_CONNECTIONS: u32 = 4;

/// SQLite-backed store (local mode).
#[derive(Clone)]
pub struct SqliteStore {
    /// The one connection that writes (see the module comment).
    writer: SqlitePool,
    /// Connections for plain reads. The same pool as `writer` for an in-memory database,
    /// which exists only within the connections that share it.
    reader: SqlitePool,
    /// `reader` is `writer` (an in-memory database): pool gauges show one pool.
    shared_pool: bool,
    /// Suite versions are immutable, so their positions are cached by id.
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
    /// Where time comes from (see [`Clock`]).
    clock: Clock,
}

/// Applies the migrations with foreign keys off, then checks them. A migration may rebuild a
/// table (SQLite cannot change a column in place), and with foreign keys enforced, dropping
/// the old table would cascade into every row that refers to it. SQLite ignores this pragma
/// inside a transaction, and every migration runs in one, so it is set around the migrator.
async fn migrate(writer: &SqlitePool) -> anyhow::Result<()> {
    let mut conn = writer.acquire().await.context("opening a connection")?;
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await
        .context("disabling foreign keys for migrations")?;
    let migrated = sqlx::migrate!("../migrations/sqlite").run(&mut *conn).await;
    sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await
        .context("enabling foreign keys after migrations")?;
    migrated.context("applying migrations")?;
    let broken = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&mut *conn)
        .await
        .context("checking foreign keys after migrations")?;
    anyhow::ensure!(
        broken.is_empty(),
        "{} rows break foreign keys after the migrations",
        broken.len()
    );
    Ok(())
}

/// The connect options a `sqlite:` URL or a plain file path names.
fn options_of(path_or_url: &str) -> anyhow::Result<SqliteConnectOptions> {
    Ok(if path_or_url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(path_or_url).context("parsing the SQLite URL")?
    } else {
        SqliteConnectOptions::new().filename(Path::new(path_or_url))
    })
}

impl SqliteStore {
    /// Opens an existing database as it is, for reading commands: never creates the file,
    /// never changes its journal mode, never migrates. Fails with a sentence naming the file
    /// when it is missing, not a Sweep database, or needs migrations (see
    /// [`super::check_migrations`]).
    pub async fn open_existing(path_or_url: &str) -> anyhow::Result<Self> {
        let options = options_of(path_or_url)?
            .create_if_missing(false)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let file = options.get_filename();
        if !path_or_url.contains(":memory:") && !file.exists() {
            anyhow::bail!("no database at {}", file.display());
        }
        let connect = |max| {
            SqlitePoolOptions::new()
                .max_connections(max)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(options.clone())
        };
        let writer = connect(1)
            .await
            .with_context(|| format!("opening SQLite database {path_or_url}"))?;
        let has_table: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master
                            WHERE type = 'table' AND name = '_sqlx_migrations')",
        )
        .fetch_one(&writer)
        .await
        .map_err(|e| anyhow::anyhow!("{path_or_url} is not a SQLite database ({e})"))?;
        let applied: Vec<i64> = if has_table {
            sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
                .fetch_all(&writer)
                .await
                .context("reading the applied migrations")?
        } else {
            Vec::new()
        };
        super::check_migrations(
            path_or_url,
            has_table,
            &applied,
            &sqlx::migrate!("../migrations/sqlite"),
        )?;
        let reader = connect(READ_CONNECTIONS)
            .await
            .with_context(|| format!("opening SQLite database {path_or_url}"))?;
        Ok(Self {
            writer,
            reader,
            // Two pools here, even for `:memory:` (which nobody reads without writing first).
            shared_pool: false,
            suites: Arc::default(),
            clock: Clock::default(),
        })
    }

    /// Opens (creating the file if missing) a database given as a `sqlite:` URL or a plain
    /// file path, switches it to WAL, and applies migrations.
    pub async fn connect(path_or_url: &str) -> anyhow::Result<Self> {
        let options = options_of(path_or_url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // NORMAL is safe against corruption under WAL; a power cut may lose the last commits,
            // which only means re-running positions whose jobs then are still open.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let in_memory = path_or_url.contains(":memory:") || path_or_url.contains("mode=memory");
        if !in_memory {
            // SQLite creates the file but not its directory; local mode's default path
            // (e.g. `.sweep/sweep.db`) may not exist yet.
            if let Some(dir) = options
                .get_filename()
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating directory {}", dir.display()))?;
            }
        }
        // The writer connection lives as long as the store: an in-memory database exists
        // only while a connection holds it, and a file keeps its WAL set up.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(WRITE_ACQUIRE_TIMEOUT)
            .connect_with(options.clone())
            .await
            .with_context(|| format!("opening SQLite database {path_or_url}"))?;
        migrate(&writer).await?;
        let reader = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READ_CONNECTIONS)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(options)
                .await
                .with_context(|| format!("opening SQLite database {path_or_url}"))?
        };
        Ok(Self {
            writer,
            reader,
            shared_pool: in_memory,
            suites: Arc::default(),
            clock: Clock::default(),
        })
    }

    /// Whether reads share the write pool (an in-memory database).
    fn reader_is_writer(&self) -> bool {
        self.shared_pool
    }

    /// The write pool (for tests and tools).
    pub fn pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Starts a write transaction holding the file's write lock from its first statement.
    async fn write_tx(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.db()
    }

    /// The positions of a suite version, from the cache or the database (read on `conn`, so
    /// a write transaction sees its own snapshot).
    async fn suite_positions(
        &self,
        conn: &mut SqliteConnection,
        suite_id: i64,
    ) -> StoreResult<Arc<Vec<SuitePosition>>> {
        if let Some(p) = self.suites.lock().expect("suite cache lock").get(&suite_id) {
            return Ok(p.clone());
        }
        let json: String = sqlx::query_scalar("SELECT positions FROM suites WHERE id = ?1")
            .bind(suite_id)
            .fetch_optional(conn)
            .await
            .db()?
            .ok_or_else(|| StoreError::NotFound(format!("suite {suite_id}")))?;
        let positions: Vec<SuitePosition> =
            serde_json::from_str(&json).context("decoding stored suite positions")?;
        let positions = Arc::new(positions);
        self.suites
            .lock()
            .expect("suite cache lock")
            .insert(suite_id, positions.clone());
        Ok(positions)
    }
}

/// Reads a job inside a write transaction (which already excludes other writers, so no row
/// lock is needed).
async fn job_row(conn: &mut SqliteConnection, job_id: i64) -> StoreResult<JobRow> {
    let row = sqlx::query(
        "SELECT j.state, j.worker_id, j.attempt, j.build_id, j.suite_id, j.first_index,
                j.count, j.sweep_id, s.cancelled, j.depth, j.nodes_limit,
                j.kind = 'check' AS is_check
         FROM jobs j JOIN sweeps s ON s.id = j.sweep_id WHERE j.id = ?1",
    )
    .bind(job_id)
    .fetch_optional(conn)
    .await
    .db()?
    .ok_or_else(|| StoreError::NotFound(format!("job {job_id}")))?;
    Ok(JobRow {
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
    })
}

/// `.db()?` instead of `?` on sqlx results, so every error passes through [`sqlite_error`].
trait Db<T> {
    fn db(self) -> StoreResult<T>;
}

impl<T> Db<T> for Result<T, sqlx::Error> {
    fn db(self) -> StoreResult<T> {
        self.map_err(sqlite_error)
    }
}

/// `now` plus `span`, saturating instead of overflowing on absurd leases.
fn expiry(now: i64, span: Duration) -> i64 {
    now.saturating_add(i64::try_from(span.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait]
impl Backend for SqliteStore {
    type Reader = SqlitePool;
    type Tx = Transaction<'static, Sqlite>;
    fn lock_rows(_alias: &str) -> String {
        String::new()
    }
    async fn begin(&self) -> StoreResult<Self::Tx> {
        self.write_tx().await
    }
    fn clock(&self) -> &Clock {
        &self.clock
    }
    fn reader(&self) -> &SqlitePool {
        &self.reader
    }
    fn written_at(now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(now)
    }
    async fn lock_identity(&self, _tx: &mut Self::Tx, _identity: &str) -> StoreResult<()> {
        // The write transaction holds the file's write lock from its start.
        Ok(())
    }
    async fn insert_jobs(
        &self,
        tx: &mut Self::Tx,
        sweep_id: i64,
        kind: JobKind,
        jobs: &[NewJob],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        sweeps::insert_jobs(tx, sweep_id, kind, jobs, now.timestamp_millis()).await
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
    async fn sweep_written(&self, _jobs: u64) -> StoreResult<()> {
        Ok(())
    }
    async fn job_for_update(&self, tx: &mut Self::Tx, job_id: i64) -> StoreResult<JobRow> {
        job_row(tx, job_id).await
    }
}

#[async_trait]
impl BackendCalls for SqliteStore {
    async fn gauges(&self, alive_within: Duration) -> StoreResult<super::StoreGauges> {
        gauges::gauges(self, alive_within).await
    }

    async fn register_worker(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
    ) -> StoreResult<i64> {
        leases::register_worker(self, worker, token_id).await
    }

    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
        max_attempts: u32,
    ) -> StoreResult<Vec<JobLease>> {
        leases::lease_jobs(self, worker_id, max, lease, max_attempts).await
    }

    async fn heartbeat_many(
        &self,
        worker_id: i64,
        leases: &[HeldLease],
        lease: Duration,
    ) -> StoreResult<Vec<JobOutcome>> {
        leases::heartbeat_many(self, worker_id, leases, lease).await
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
        reports::report_many(self, worker_id, &reports, lease, max_attempts).await
    }

    async fn worker_checks(
        &self,
        workers: &[i64],
    ) -> StoreResult<std::collections::BTreeMap<i64, (u64, u64)>> {
        checks::per_worker(&self.reader, workers).await
    }

    async fn build_results(
        &self,
        id: i64,
        builds: &[String],
        limit: Limit,
    ) -> StoreResult<Vec<ResultRow>> {
        reads::build_results(&self.reader, id, builds, limit).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn busy_and_io_codes_are_passing() {
        // The primary code sits in the low byte of SQLite's extended codes.
        assert_eq!(517 & 0xff, 5); // SQLITE_BUSY_SNAPSHOT
        assert_eq!(266 & 0xff, 10); // SQLITE_IOERR_READ
        assert!(matches!(
            sqlite_error(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
    }

    #[test]
    fn expiry_saturates() {
        assert_eq!(expiry(1_000, Duration::from_millis(500)), 1_500);
        assert_eq!(expiry(i64::MAX - 1, Duration::from_secs(10)), i64::MAX);
    }

    #[tokio::test]
    async fn locked_database_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locked.db");
        let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
        // Another "process" takes the write lock and keeps it past the busy timeout.
        let mut other = <SqliteConnection as sqlx::Connection>::connect_with(
            &SqliteConnectOptions::new()
                .filename(&path)
                .busy_timeout(Duration::from_millis(10)),
        )
        .await
        .unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut other)
            .await
            .unwrap();
        let quick = SqliteStore {
            writer: SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(
                    SqliteConnectOptions::new()
                        .filename(&path)
                        .busy_timeout(Duration::from_millis(50)),
                )
                .await
                .unwrap(),
            ..store
        };
        let err = quick.put_snapshot("x", b"y").await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        quick.put_snapshot("x", b"y").await.unwrap();
    }
}
