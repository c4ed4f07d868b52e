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
//! Layout, as for Postgres: this file holds the connections and the [`Backend`] impl, which
//! only delegates; [`sweeps`] inserts a new sweep's jobs, [`reuse`] copies earlier results
//! into it, [`hot`] holds the worker protocol's writes of many rows (a row at a time here:
//! one writer, no round trips), [`workers`] registration.

mod hot;
mod reuse;
mod sweeps;
mod workers;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};
use sweep_domain::wire::RegisterWorker;

use super::backend::{Backend, JobRange, LockedCursor, Measurement, NewLease};
use super::job::JobRow;
use super::rows::{CopyRow, JobKind, NewJob, Prior};
use super::sql::sqlite_error;
use super::{reads, BackendCalls};
use super::{Clock, StoreResult, WorkerCap};
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
    let migrator = super::migrations::of_sqlite().await?;
    let migrated = migrator.run(&mut *conn).await;
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
    /// [`super::migrations::check_migrations`]).
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
        super::migrations::check_migrations(
            path_or_url,
            has_table,
            &applied,
            &super::migrations::of_sqlite().await?,
        )?;
        let reader = connect(READ_CONNECTIONS)
            .await
            .with_context(|| format!("opening SQLite database {path_or_url}"))?;
        Ok(Self {
            writer,
            reader,
            // Two pools here, even for `:memory:` (which nobody reads without writing first).
            shared_pool: false,
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

#[async_trait]
impl Backend for SqliteStore {
    type Reader = SqlitePool;
    type Tx = Transaction<'static, Sqlite>;
    // rowid orders the failures as they were recorded.
    const NEWEST_FAILURE_FIRST: &'static str = "ORDER BY rowid DESC";
    const BUILD_AFFINITY: bool = false;
    fn lock_rows(_alias: &str) -> String {
        String::new()
    }
    fn skip_locked(_alias: &str) -> String {
        // The write transaction holds the file's write lock: nobody else holds a row.
        String::new()
    }
    fn in_list(param: &str) -> String {
        format!("IN (SELECT value FROM json_each({param}))")
    }
    fn lease_jobs(lease: &str) -> String {
        format!(" CROSS JOIN json_each({lease}.jobs) u")
    }
    async fn begin(&self) -> StoreResult<Self::Tx> {
        self.write_tx().await
    }
    async fn begin_hot(&self) -> StoreResult<Self::Tx> {
        self.write_tx().await
    }
    async fn begin_claim(&self) -> StoreResult<Self::Tx> {
        self.write_tx().await
    }
    fn clock(&self) -> &Clock {
        &self.clock
    }
    fn reader(&self) -> &SqlitePool {
        &self.reader
    }
    fn pools(&self) -> Vec<super::PoolGauge> {
        let mut pools = vec![super::PoolGauge::of("writer", &self.writer)];
        if !self.reader_is_writer() {
            pools.push(super::PoolGauge::of("reader", &self.reader));
        }
        pools
    }
    fn written_at(now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Some(now)
    }
    async fn lock_key(&self, _tx: &mut Self::Tx, _key: &str) -> StoreResult<()> {
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
    ) -> StoreResult<Vec<JobRange>> {
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
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>> {
        hot::insert_results(tx, rows, now).await
    }
    async fn insert_checks(
        &self,
        tx: &mut Self::Tx,
        rows: &[Measurement<'_>],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<i64>> {
        hot::insert_checks(tx, rows, now).await
    }
}

#[async_trait]
impl BackendCalls for SqliteStore {
    async fn register_worker_capped(
        &self,
        worker: &RegisterWorker,
        token_id: Option<i64>,
        cap: Option<WorkerCap>,
    ) -> StoreResult<i64> {
        workers::register(self, worker, token_id, cap).await
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
    use crate::store::{Store, StoreError};
    use sqlx::SqliteConnection;

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
