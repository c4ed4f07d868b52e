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

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqliteConnection, SqlitePool, Transaction};
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{Suite, SuitePosition};
use sweep_domain::spec::SweepSpec;
use sweep_domain::table::ResultRow;
use sweep_domain::wire::{
    ActiveWorker, BatchAck, BuildFailure, BuildSpec, BuildStatus, Heartbeat, JobLease, JobPosition,
    PositionError, Progress, RegisterWorker, ResultBatch, SweepState, SweepSummary,
};

use super::{NewSweep, Store, StoreError, StoreResult, SweepRecord};

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
    /// Suite versions are immutable, so their positions are cached by id.
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
}

impl SqliteStore {
    /// Opens (creating the file if missing) a database given as a `sqlite:` URL or a plain
    /// file path, switches it to WAL, and applies migrations.
    pub async fn connect(path_or_url: &str) -> anyhow::Result<Self> {
        let options = if path_or_url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(path_or_url).context("parsing the SQLite URL")?
        } else {
            SqliteConnectOptions::new().filename(Path::new(path_or_url))
        }
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
        sqlx::migrate!("../migrations/sqlite")
            .run(&writer)
            .await
            .context("applying migrations")?;
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
            suites: Arc::default(),
        })
    }

    /// The write pool (for tests and tools).
    pub fn pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Starts a write transaction holding the file's write lock from its first statement.
    async fn write_tx(&self) -> StoreResult<Transaction<'static, Sqlite>> {
        self.writer.begin_with("BEGIN IMMEDIATE").await.db()
    }

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

    /// Reads a job inside a write transaction (which already excludes other writers, so no
    /// row lock is needed).
    async fn job_row(conn: &mut SqliteConnection, job_id: i64) -> StoreResult<JobRow> {
        let row = sqlx::query(
            "SELECT j.state, j.worker_id, j.attempt, j.build_id, j.suite_id, j.first_index,
                    j.count, j.sweep_id, s.cancelled, json_extract(s.spec, '$.depth') AS depth
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
        })
    }

    /// Checks that `worker_id` holds `attempt` of the job. A cancelled sweep is not a lost
    /// lease: the worker is told to stop through the ack instead.
    fn check_lease(job_id: i64, job: &JobRow, worker_id: i64, attempt: i32) -> StoreResult<()> {
        let holds = job.worker_id == Some(worker_id) && job.attempt == attempt;
        if holds && (job.state == "leased" || job.cancelled) {
            Ok(())
        } else {
            Err(StoreError::LeaseLost {
                job_id,
                worker_id,
                attempt,
            })
        }
    }

    /// Turns a freshly leased job row into the lease sent to the worker, leaving out
    /// positions that already have results; closes the job (and returns `None`) when none
    /// are left.
    async fn lease_one(
        &self,
        conn: &mut SqliteConnection,
        row: &SqliteRow,
        now: i64,
    ) -> StoreResult<Option<JobLease>> {
        let job_id: i64 = row.get("id");
        let build_id: i64 = row.get("build_id");
        let suite_id: i64 = row.get("suite_id");
        let first: i32 = row.get("first_index");
        let count: i32 = row.get("count");
        let info = sqlx::query(
            "SELECT s.spec, s.engine_def, s.source_sha256, b.name, b.defines, su.name AS suite
             FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
             JOIN suites su ON su.id = j.suite_id WHERE j.id = ?1",
        )
        .bind(job_id)
        .fetch_one(&mut *conn)
        .await
        .db()?;
        let spec: SweepSpec = serde_json::from_str(info.get("spec")).context("decoding spec")?;
        let def: EngineDef =
            serde_json::from_str(info.get("engine_def")).context("decoding engine definition")?;
        let defines = serde_json::from_str(info.get("defines")).context("decoding defines")?;
        let done: Vec<i32> = sqlx::query_scalar(
            "SELECT position_index FROM results
             WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3
               AND position_index >= ?4 AND position_index < ?5",
        )
        .bind(build_id)
        .bind(suite_id)
        .bind(spec.depth as i32)
        .bind(first)
        .bind(first + count)
        .fetch_all(&mut *conn)
        .await
        .db()?;
        let suite = self.suite_positions(conn, suite_id).await?;
        let positions: Vec<JobPosition> = (first..first + count)
            .filter(|i| !done.contains(i))
            .filter_map(|i| {
                suite.get(i as usize).map(|p| JobPosition {
                    index: i as u32,
                    id: p.id.clone(),
                    fen: p.fen.clone(),
                    bm: p.bm.clone(),
                    am: p.am.clone(),
                })
            })
            .collect();
        if positions.is_empty() {
            // Everything was reported before the previous holder could close the job.
            sqlx::query("UPDATE jobs SET state = 'done', updated_at = ?2 WHERE id = ?1")
                .bind(job_id)
                .bind(now)
                .execute(&mut *conn)
                .await
                .db()?;
            return Ok(None);
        }
        Ok(Some(JobLease {
            job_id,
            attempt: row.get("attempt"),
            sweep_id: row.get("sweep_id"),
            build: BuildSpec {
                name: info.get("name"),
                engine: def.name.clone(),
                source_sha256: info.get("source_sha256"),
                defines,
                build_command: def.build.command.clone(),
                build_timeout_secs: def.build.timeout_secs,
                binary: def.binary.clone(),
                protocol: def.protocol,
                options: def
                    .options
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_string()))
                    .collect(),
                fresh_process_per_position: def.fresh_process_per_position,
                position_timeout_secs: def.position_timeout_secs,
            },
            suite: info.get("suite"),
            depth: spec.depth,
            positions,
        }))
    }
}

struct JobRow {
    state: String,
    worker_id: Option<i64>,
    attempt: i32,
    build_id: i64,
    suite_id: i64,
    first_index: i32,
    count: i32,
    sweep_id: i64,
    cancelled: bool,
    depth: i32,
}

/// Maps SQLite's passing conditions to [`StoreError::Unavailable`]; the shared conversion in
/// `mod.rs` only knows Postgres' SQLSTATE classes.
fn store_error(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &e {
        // sqlx reports the extended result code; its low byte is the primary code.
        let primary = db
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        // BUSY, LOCKED (another writer holds the file), IOERR, FULL (disk), CANTOPEN: the
        // same request can succeed later.
        if matches!(primary, Some(5 | 6 | 10 | 13 | 14)) {
            return StoreError::Unavailable(e);
        }
    }
    StoreError::from(e)
}

/// `.db()?` instead of `?` on sqlx results, so every error passes through [`store_error`].
trait Db<T> {
    fn db(self) -> StoreResult<T>;
}

impl<T> Db<T> for Result<T, sqlx::Error> {
    fn db(self) -> StoreResult<T> {
        self.map_err(store_error)
    }
}

/// Timestamps are unix milliseconds, all from this one clock (see the migration).
fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Lease expiry `lease` from `now`, saturating instead of overflowing on absurd leases.
fn expiry(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
}

fn state_of(
    cancelled: bool,
    jobs: i64,
    closed: i64,
    started: i64,
    baseline_failed: bool,
    ok_builds: i64,
) -> SweepState {
    if cancelled {
        SweepState::Cancelled
    } else if jobs > 0 && closed == jobs {
        if baseline_failed || ok_builds == 0 {
            SweepState::Failed
        } else {
            SweepState::Done
        }
    } else if started > 0 {
        SweepState::Running
    } else {
        SweepState::Queued
    }
}

const SUMMARY_SQL: &str = "
SELECT s.id, s.name, s.engine, s.cancelled, s.created_at,
       count(j.id) AS jobs,
       count(j.id) FILTER (WHERE j.state IN ('done', 'failed', 'cancelled')) AS closed,
       count(j.id) FILTER (WHERE j.attempt > 0) AS started,
       COALESCE(sum(j.count), 0) AS total_positions,
       (SELECT count(*) FROM results r WHERE r.sweep_id = s.id) AS done_positions,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NULL) AS ok_builds,
       COALESCE((SELECT max(b.build_error IS NOT NULL) FROM builds b
                 WHERE b.sweep_id = s.id AND b.is_baseline), FALSE) AS baseline_failed
FROM sweeps s LEFT JOIN jobs j ON j.sweep_id = s.id";

fn summary_of(row: &SqliteRow) -> StoreResult<SweepSummary> {
    let created_ms: i64 = row.get("created_at");
    Ok(SweepSummary {
        id: row.get("id"),
        name: row.get("name"),
        engine: row.get("engine"),
        state: state_of(
            row.get("cancelled"),
            row.get("jobs"),
            row.get("closed"),
            row.get("started"),
            row.get("baseline_failed"),
            row.get("ok_builds"),
        ),
        created_at: DateTime::from_timestamp_millis(created_ms)
            .with_context(|| format!("sweep created_at {created_ms} out of range"))?,
        positions_done: row.get::<i64, _>("done_positions") as u64,
        positions_total: row.get::<i64, _>("total_positions") as u64,
    })
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await.db()?;
        Ok(())
    }

    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO source_snapshots (sha256, archive, created_at) VALUES (?1, ?2, ?3)
             ON CONFLICT DO NOTHING",
        )
        .bind(sha256)
        .bind(archive)
        .bind(now_ms())
        .execute(&self.writer)
        .await
        .db()?;
        Ok(())
    }

    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT archive FROM source_snapshots WHERE sha256 = ?1")
            .bind(sha256)
            .fetch_optional(&self.reader)
            .await
            .db()
    }

    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64> {
        let positions = serde_json::to_string(&suite.positions).context("encoding suite")?;
        // The no-op update makes RETURNING yield the existing id on a conflict.
        sqlx::query_scalar(
            "INSERT INTO suites (name, sha256, positions, size, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (name, sha256) DO UPDATE SET name = excluded.name RETURNING id",
        )
        .bind(&suite.name)
        .bind(&suite.sha256)
        .bind(positions)
        .bind(suite.positions.len() as i64)
        .bind(now_ms())
        .fetch_one(&self.writer)
        .await
        .db()
    }

    async fn create_sweep(&self, sweep: &NewSweep) -> StoreResult<(i64, u64)> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO sweeps (name, engine, spec, engine_def, source_sha256, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        )
        .bind(&sweep.spec.name)
        .bind(&sweep.spec.engine)
        .bind(serde_json::to_string(&sweep.spec).context("encoding spec")?)
        .bind(serde_json::to_string(&sweep.engine_def).context("encoding engine")?)
        .bind(&sweep.source_sha256)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .db()?;
        let mut suite_ids = HashMap::new();
        for (ord, (suite_id, name)) in sweep.suite_ids.iter().zip(&sweep.spec.suites).enumerate() {
            sqlx::query("INSERT INTO sweep_suites (sweep_id, suite_id, ord) VALUES (?1, ?2, ?3)")
                .bind(id)
                .bind(suite_id)
                .bind(ord as i64)
                .execute(&mut *tx)
                .await
                .db()?;
            suite_ids.insert(name.clone(), *suite_id);
        }
        let mut jobs = 0u64;
        for (ord, build) in sweep.builds.iter().enumerate() {
            let build_id: i64 = sqlx::query_scalar(
                "INSERT INTO builds (sweep_id, name, defines, is_baseline, ord)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
            )
            .bind(id)
            .bind(&build.name)
            .bind(serde_json::to_string(&build.defines).context("encoding defines")?)
            .bind(build.is_baseline)
            .bind(ord as i64)
            .fetch_one(&mut *tx)
            .await
            .db()?;
            // One prepared statement per row: inside one transaction SQLite does no I/O per
            // row, and insertion order gives job ids in plan order (build, then chunk).
            for chunk in &sweep.chunks {
                let suite_id = *suite_ids.get(&chunk.suite).ok_or_else(|| {
                    StoreError::Invalid(format!("chunk of unknown suite `{}`", chunk.suite))
                })?;
                jobs += sqlx::query(
                    "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .bind(id)
                .bind(build_id)
                .bind(suite_id)
                .bind(i64::from(chunk.first))
                .bind(i64::from(chunk.count))
                .bind(now)
                .execute(&mut *tx)
                .await
                .db()?
                .rows_affected();
            }
        }
        tx.commit().await.db()?;
        Ok((id, jobs))
    }

    async fn list_sweeps(&self, limit: u32) -> StoreResult<Vec<SweepSummary>> {
        let rows = sqlx::query(&format!(
            "{SUMMARY_SQL} GROUP BY s.id ORDER BY s.id DESC LIMIT ?1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .db()?;
        rows.iter().map(summary_of).collect()
    }

    async fn sweep(&self, id: i64) -> StoreResult<SweepRecord> {
        let row = sqlx::query(&format!("{SUMMARY_SQL} WHERE s.id = ?1 GROUP BY s.id"))
            .bind(id)
            .fetch_optional(&self.reader)
            .await
            .db()?
            .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
        let summary = summary_of(&row)?;
        let extra = sqlx::query("SELECT spec, engine_def, source_sha256 FROM sweeps WHERE id = ?1")
            .bind(id)
            .fetch_one(&self.reader)
            .await
            .db()?;
        let builds = sqlx::query(
            "SELECT name, defines, is_baseline, build_error FROM builds
             WHERE sweep_id = ?1 ORDER BY ord",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .db()?
        .iter()
        .map(|b| {
            Ok(BuildStatus {
                name: b.get("name"),
                defines: serde_json::from_str(b.get("defines")).context("decoding defines")?,
                is_baseline: b.get("is_baseline"),
                build_error: b.get("build_error"),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
        let suites = sqlx::query(
            "SELECT su.name, su.size FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = ?1 ORDER BY ss.ord",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .db()?
        .iter()
        .map(|r| (r.get::<String, _>("name"), r.get::<i64, _>("size") as usize))
        .collect();
        Ok(SweepRecord {
            summary,
            spec: serde_json::from_str(extra.get("spec")).context("decoding spec")?,
            engine_def: serde_json::from_str(extra.get("engine_def")).context("decoding engine")?,
            source_sha256: extra.get("source_sha256"),
            builds,
            suites,
        })
    }

    async fn progress(&self, id: i64) -> StoreResult<Vec<Progress>> {
        let rows = sqlx::query(
            "SELECT b.name AS build, su.name AS suite, su.size, count(r.position_index) AS done,
                    count(r.error) AS errors, COALESCE(sum(r.nodes), 0) AS nodes
             FROM builds b
             JOIN sweep_suites ss ON ss.sweep_id = b.sweep_id
             JOIN suites su ON su.id = ss.suite_id
             LEFT JOIN results r ON r.build_id = b.id AND r.suite_id = su.id
             WHERE b.sweep_id = ?1
             GROUP BY b.id, b.name, b.ord, su.id, su.name, su.size, ss.ord
             ORDER BY b.ord, ss.ord",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .db()?;
        Ok(rows
            .iter()
            .map(|r| Progress {
                build: r.get("build"),
                suite: r.get("suite"),
                done: r.get::<i64, _>("done") as u64,
                total: r.get::<i64, _>("size") as u64,
                errors: r.get::<i64, _>("errors") as u64,
                nodes: r.get::<i64, _>("nodes") as u64,
            })
            .collect())
    }

    async fn active_workers(&self, id: i64) -> StoreResult<Vec<ActiveWorker>> {
        let rows = sqlx::query(
            "SELECT w.id, w.name, w.host, count(*) AS jobs
             FROM jobs j JOIN workers w ON w.id = j.worker_id
             WHERE j.sweep_id = ?1 AND j.state = 'leased' AND j.lease_expires_at > ?2
             GROUP BY w.id ORDER BY w.id",
        )
        .bind(id)
        .bind(now_ms())
        .fetch_all(&self.reader)
        .await
        .db()?;
        Ok(rows
            .iter()
            .map(|r| ActiveWorker {
                id: r.get("id"),
                name: r.get("name"),
                host: r.get("host"),
                jobs: r.get::<i64, _>("jobs") as u64,
            })
            .collect())
    }

    async fn position_errors(&self, id: i64, limit: u32) -> StoreResult<Vec<PositionError>> {
        let rows = sqlx::query(
            "SELECT b.name AS build, su.name AS suite, r.position_id, r.error FROM results r
             JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
             WHERE r.sweep_id = ?1 AND r.error IS NOT NULL
             ORDER BY b.ord, su.name, r.position_index LIMIT ?2",
        )
        .bind(id)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await
        .db()?;
        Ok(rows
            .iter()
            .map(|r| PositionError {
                build: r.get("build"),
                suite: r.get("suite"),
                position: r.get("position_id"),
                error: r.get("error"),
            })
            .collect())
    }

    async fn results(&self, id: i64) -> StoreResult<Vec<ResultRow>> {
        let rows = sqlx::query(
            "SELECT b.name AS build, su.name AS suite, r.position_index, r.position_id, r.nodes,
                    r.bestmove, r.solved, r.error
             FROM results r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
             WHERE r.sweep_id = ?1 ORDER BY b.ord, su.name, r.position_index",
        )
        .bind(id)
        .fetch_all(&self.reader)
        .await
        .db()?;
        Ok(rows
            .iter()
            .map(|r| ResultRow {
                build: r.get("build"),
                suite: r.get("suite"),
                index: r.get::<i64, _>("position_index") as u32,
                position_id: r.get("position_id"),
                nodes: r.get::<i64, _>("nodes") as u64,
                bestmove: r.get("bestmove"),
                solved: r.get("solved"),
                error: r.get("error"),
            })
            .collect())
    }

    async fn cancel_sweep(&self, id: i64) -> StoreResult<()> {
        let mut tx = self.write_tx().await?;
        let n = sqlx::query("UPDATE sweeps SET cancelled = TRUE WHERE id = ?1")
            .bind(id)
            .execute(&mut *tx)
            .await
            .db()?
            .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(format!("sweep {id}")));
        }
        sqlx::query(
            "UPDATE jobs SET state = 'cancelled', updated_at = ?2
             WHERE sweep_id = ?1 AND state IN ('queued', 'leased')",
        )
        .bind(id)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .db()?;
        tx.commit().await.db()?;
        Ok(())
    }

    async fn register_worker(&self, w: &RegisterWorker) -> StoreResult<i64> {
        let now = now_ms();
        sqlx::query_scalar(
            "INSERT INTO workers (name, host, cores, registered_at, last_seen_at)
             VALUES (?1, ?2, ?3, ?4, ?4) RETURNING id",
        )
        .bind(&w.name)
        .bind(&w.host)
        .bind(i64::from(w.cores))
        .bind(now)
        .fetch_one(&self.writer)
        .await
        .db()
    }

    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
    ) -> StoreResult<Vec<JobLease>> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let touched = sqlx::query("UPDATE workers SET last_seen_at = ?2 WHERE id = ?1")
            .bind(worker_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .db()?
            .rows_affected();
        if touched == 0 {
            return Err(StoreError::NotFound(format!("worker {worker_id}")));
        }
        // Expired leases are taken back right here, so no reaper is needed: an expired job is
        // as claimable as a queued one, and the attempt bump fences the old holder. The write
        // lock held since BEGIN IMMEDIATE is what FOR UPDATE SKIP LOCKED is on Postgres.
        let mut rows = sqlx::query(
            "UPDATE jobs SET state = 'leased', attempt = attempt + 1, worker_id = ?1,
                    lease_expires_at = ?2, updated_at = ?3
             WHERE id IN (
                 SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
                 WHERE (j.state = 'queued' OR (j.state = 'leased' AND j.lease_expires_at < ?3))
                   AND NOT s.cancelled
                 ORDER BY j.id
                 LIMIT ?4)
             RETURNING id, attempt, sweep_id, build_id, suite_id, first_index, count",
        )
        .bind(worker_id)
        .bind(expiry(now, lease))
        .bind(now)
        .bind(i64::from(max))
        .fetch_all(&mut *tx)
        .await
        .db()?;
        // RETURNING yields rows in no promised order; leases go out in job id order.
        rows.sort_by_key(|r| r.get::<i64, _>("id"));
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(job) = self.lease_one(&mut tx, row, now).await? {
                out.push(job);
            }
        }
        tx.commit().await.db()?;
        Ok(out)
    }

    async fn heartbeat(
        &self,
        job_id: i64,
        beat: &Heartbeat,
        lease: Duration,
    ) -> StoreResult<BatchAck> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let job = Self::job_row(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, beat.worker_id, beat.attempt)?;
        if !job.cancelled {
            sqlx::query("UPDATE jobs SET lease_expires_at = ?2, updated_at = ?3 WHERE id = ?1")
                .bind(job_id)
                .bind(expiry(now, lease))
                .bind(now)
                .execute(&mut *tx)
                .await
                .db()?;
        }
        sqlx::query("UPDATE workers SET last_seen_at = ?2 WHERE id = ?1")
            .bind(beat.worker_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .db()?;
        tx.commit().await.db()?;
        Ok(BatchAck {
            accepted: 0,
            duplicates: 0,
            cancelled: job.cancelled,
        })
    }

    async fn report(
        &self,
        job_id: i64,
        batch: &ResultBatch,
        lease: Duration,
    ) -> StoreResult<BatchAck> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let job = Self::job_row(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, batch.worker_id, batch.attempt)?;
        let suite = self.suite_positions(&mut tx, job.suite_id).await?;
        let range = job.first_index..job.first_index + job.count;
        // Validate the whole batch before writing any of it: a bad batch stores nothing.
        let mut rows = Vec::with_capacity(batch.results.len());
        for r in &batch.results {
            let i = i32::try_from(r.index)
                .ok()
                .filter(|i| range.contains(i))
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "results: position index {} is not part of job {job_id} ({}..{})",
                        r.index, range.start, range.end
                    ))
                })?;
            let nodes = i64::try_from(r.nodes).map_err(|_| {
                StoreError::Invalid(format!("results: nodes {} too large", r.nodes))
            })?;
            let pos = suite.get(i as usize).ok_or_else(|| {
                StoreError::Invalid(format!("results: suite has no position {i}"))
            })?;
            // The coordinator owns the verdict, so a worker cannot disagree with the suite.
            let solved = r.error.is_none() && pos.is_solved(&r.bestmove);
            rows.push((i, &pos.id, nodes, solved, r));
        }
        let mut accepted = 0u32;
        for (i, position_id, nodes, solved, r) in rows {
            // ON CONFLICT DO NOTHING (rather than INSERT OR IGNORE) ignores only the key
            // conflict of a duplicate, exactly like Postgres; other violations still fail.
            accepted += sqlx::query(
                "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                                      attempt, worker_id, position_id, nodes, bestmove, solved,
                                      score_cp, score_mate, reached_depth, time_ms, error, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
                 ON CONFLICT DO NOTHING",
            )
            .bind(job.build_id)
            .bind(job.suite_id)
            .bind(i)
            .bind(job.depth)
            .bind(job.sweep_id)
            .bind(job_id)
            .bind(batch.attempt)
            .bind(batch.worker_id)
            .bind(position_id)
            .bind(nodes)
            .bind(&r.bestmove)
            .bind(solved)
            .bind(r.score_cp)
            .bind(r.score_mate)
            .bind(r.depth.min(i32::MAX as u32) as i32)
            .bind(r.time_ms.min(i64::MAX as u64) as i64)
            .bind(&r.error)
            .bind(now)
            .execute(&mut *tx)
            .await
            .db()?
            .rows_affected() as u32;
        }
        if !job.cancelled {
            let new_state = if batch.finished {
                let have: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM results
                     WHERE build_id = ?1 AND suite_id = ?2 AND depth = ?3
                       AND position_index >= ?4 AND position_index < ?5",
                )
                .bind(job.build_id)
                .bind(job.suite_id)
                .bind(job.depth)
                .bind(range.start)
                .bind(range.end)
                .fetch_one(&mut *tx)
                .await
                .db()?;
                // A "finished" job with holes goes back to the queue for the missing positions.
                if have >= i64::from(job.count) {
                    "done"
                } else {
                    "queued"
                }
            } else {
                "leased"
            };
            sqlx::query(
                "UPDATE jobs SET state = ?2, lease_expires_at = ?3, updated_at = ?4 WHERE id = ?1",
            )
            .bind(job_id)
            .bind(new_state)
            .bind(expiry(now, lease))
            .bind(now)
            .execute(&mut *tx)
            .await
            .db()?;
        }
        sqlx::query("UPDATE workers SET last_seen_at = ?2 WHERE id = ?1")
            .bind(batch.worker_id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .db()?;
        tx.commit().await.db()?;
        Ok(BatchAck {
            accepted,
            duplicates: batch.results.len() as u32 - accepted,
            cancelled: job.cancelled,
        })
    }

    async fn build_failed(&self, job_id: i64, failure: &BuildFailure) -> StoreResult<BatchAck> {
        let now = now_ms();
        let mut tx = self.write_tx().await?;
        let job = Self::job_row(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, failure.worker_id, failure.attempt)?;
        sqlx::query("UPDATE builds SET build_error = ?2 WHERE id = ?1")
            .bind(job.build_id)
            .bind(&failure.output)
            .execute(&mut *tx)
            .await
            .db()?;
        sqlx::query(
            "UPDATE jobs SET state = 'failed', updated_at = ?2
             WHERE build_id = ?1 AND state IN ('queued', 'leased')",
        )
        .bind(job.build_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .db()?;
        tx.commit().await.db()?;
        Ok(BatchAck {
            accepted: 0,
            duplicates: 0,
            cancelled: job.cancelled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_io_codes_are_passing() {
        // The primary code sits in the low byte of SQLite's extended codes.
        assert_eq!(517 & 0xff, 5); // SQLITE_BUSY_SNAPSHOT
        assert_eq!(266 & 0xff, 10); // SQLITE_IOERR_READ
        assert!(matches!(
            store_error(sqlx::Error::PoolTimedOut),
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
