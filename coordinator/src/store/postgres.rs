//! Postgres implementation of [`Store`]. Leasing uses `FOR UPDATE SKIP LOCKED`, so several
//! coordinators can share one database; results are keyed so a duplicate report is a no-op.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};
use sweep_domain::engine::EngineDef;
use sweep_domain::epd::{Suite, SuitePosition};
use sweep_domain::spec::SweepSpec;
use sweep_domain::table::ResultRow;
use sweep_domain::wire::{
    ActiveWorker, BatchAck, BuildFailure, BuildSpec, BuildStatus, Heartbeat, JobLease, JobPosition,
    PositionError, Progress, RegisterWorker, ResultBatch, SweepState, SweepSummary,
};

use super::{NewSweep, Store, StoreError, StoreResult, SweepRecord};

/// How long one statement may run before Postgres cancels it.
const STATEMENT_TIMEOUT: &str = "15s";

/// Postgres-backed store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Suite versions are immutable, so their positions are cached by id.
    suites: Arc<Mutex<HashMap<i64, Arc<Vec<SuitePosition>>>>>,
}

impl PgStore {
    /// Connects (with bounded pool waits and statement timeouts) and applies migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options: PgConnectOptions = url
            .parse::<PgConnectOptions>()
            .context("parsing the database URL")?
            .options([("statement_timeout", STATEMENT_TIMEOUT)]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .context("connecting to Postgres")?;
        sqlx::migrate!("../migrations/postgres")
            .run(&pool)
            .await
            .context("applying migrations")?;
        Ok(Self {
            pool,
            suites: Arc::default(),
        })
    }

    /// The underlying pool (for tests and tools).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

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

    async fn job_for_update(
        tx: &mut Transaction<'_, Postgres>,
        job_id: i64,
    ) -> StoreResult<JobRow> {
        let row = sqlx::query(
            "SELECT j.state, j.worker_id, j.attempt, j.build_id, j.suite_id, j.first_index, j.count,
                    j.sweep_id, s.cancelled, (s.spec->>'depth')::int AS depth
             FROM jobs j JOIN sweeps s ON s.id = j.sweep_id WHERE j.id = $1 FOR UPDATE OF j",
        )
        .bind(job_id)
        .fetch_optional(&mut **tx)
        .await?
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

    async fn lease_one(&self, row: &sqlx::postgres::PgRow) -> StoreResult<Option<JobLease>> {
        let job_id: i64 = row.get("id");
        let build_id: i64 = row.get("build_id");
        let suite_id: i64 = row.get("suite_id");
        let first: i32 = row.get("first_index");
        let count: i32 = row.get("count");
        let info = sqlx::query(
            "SELECT s.spec, s.engine_def, s.source_sha256, b.name, b.defines, su.name AS suite
             FROM jobs j JOIN sweeps s ON s.id = j.sweep_id JOIN builds b ON b.id = j.build_id
             JOIN suites su ON su.id = j.suite_id WHERE j.id = $1",
        )
        .bind(job_id)
        .fetch_one(&self.pool)
        .await?;
        let spec: SweepSpec = serde_json::from_value(info.get("spec")).context("decoding spec")?;
        let def: EngineDef =
            serde_json::from_value(info.get("engine_def")).context("decoding engine definition")?;
        let defines = serde_json::from_value(info.get("defines")).context("decoding defines")?;
        let done: Vec<i32> = sqlx::query_scalar(
            "SELECT position_index FROM results WHERE build_id = $1 AND suite_id = $2 AND depth = $3
               AND position_index >= $4 AND position_index < $5",
        )
        .bind(build_id)
        .bind(suite_id)
        .bind(spec.depth as i32)
        .bind(first)
        .bind(first + count)
        .fetch_all(&self.pool)
        .await?;
        let suite = self.suite_positions(suite_id).await?;
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
            sqlx::query("UPDATE jobs SET state = 'done', updated_at = now() WHERE id = $1")
                .bind(job_id)
                .execute(&self.pool)
                .await?;
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
       COALESCE(sum(j.count), 0)::bigint AS total_positions,
       (SELECT count(*) FROM results r WHERE r.sweep_id = s.id) AS done_positions,
       (SELECT count(*) FROM builds b WHERE b.sweep_id = s.id AND b.build_error IS NULL) AS ok_builds,
       COALESCE((SELECT bool_or(b.build_error IS NOT NULL) FROM builds b
                 WHERE b.sweep_id = s.id AND b.is_baseline), FALSE) AS baseline_failed
FROM sweeps s LEFT JOIN jobs j ON j.sweep_id = s.id";

fn summary_of(row: &sqlx::postgres::PgRow) -> SweepSummary {
    SweepSummary {
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
        created_at: row.get::<DateTime<Utc>, _>("created_at"),
        positions_done: row.get::<i64, _>("done_positions") as u64,
        positions_total: row.get::<i64, _>("total_positions") as u64,
    }
}

#[async_trait]
impl Store for PgStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn put_snapshot(&self, sha256: &str, archive: &[u8]) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO source_snapshots (sha256, archive) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(sha256)
        .bind(archive)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn snapshot(&self, sha256: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(
            sqlx::query_scalar("SELECT archive FROM source_snapshots WHERE sha256 = $1")
                .bind(sha256)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn put_suite(&self, suite: &Suite) -> StoreResult<i64> {
        let positions = serde_json::to_value(&suite.positions).context("encoding suite")?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO suites (name, sha256, positions, size) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name, sha256) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        )
        .bind(&suite.name)
        .bind(&suite.sha256)
        .bind(positions)
        .bind(suite.positions.len() as i32)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    async fn create_sweep(&self, sweep: &NewSweep) -> StoreResult<(i64, u64)> {
        let mut tx = self.pool.begin().await?;
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO sweeps (name, engine, spec, engine_def, source_sha256) VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&sweep.spec.name)
        .bind(&sweep.spec.engine)
        .bind(serde_json::to_value(&sweep.spec).context("encoding spec")?)
        .bind(serde_json::to_value(&sweep.engine_def).context("encoding engine")?)
        .bind(&sweep.source_sha256)
        .fetch_one(&mut *tx)
        .await?;
        let mut suite_ids = HashMap::new();
        for (ord, (suite_id, name)) in sweep.suite_ids.iter().zip(&sweep.spec.suites).enumerate() {
            sqlx::query("INSERT INTO sweep_suites (sweep_id, suite_id, ord) VALUES ($1, $2, $3)")
                .bind(id)
                .bind(suite_id)
                .bind(ord as i32)
                .execute(&mut *tx)
                .await?;
            suite_ids.insert(name.clone(), *suite_id);
        }
        let mut jobs = 0u64;
        for (ord, build) in sweep.builds.iter().enumerate() {
            let build_id: i64 = sqlx::query_scalar(
                "INSERT INTO builds (sweep_id, name, defines, is_baseline, ord) VALUES ($1, $2, $3, $4, $5) RETURNING id",
            )
            .bind(id)
            .bind(&build.name)
            .bind(serde_json::to_value(&build.defines).context("encoding defines")?)
            .bind(build.is_baseline)
            .bind(ord as i32)
            .fetch_one(&mut *tx)
            .await?;
            let suite: Vec<i64> = sweep.chunks.iter().map(|c| suite_ids[&c.suite]).collect();
            let first: Vec<i32> = sweep.chunks.iter().map(|c| c.first as i32).collect();
            let count: Vec<i32> = sweep.chunks.iter().map(|c| c.count as i32).collect();
            let n = sqlx::query(
                "INSERT INTO jobs (sweep_id, build_id, suite_id, first_index, count)
                 SELECT $1, $2, t.suite, t.first, t.count
                 FROM UNNEST($3::int8[], $4::int4[], $5::int4[]) WITH ORDINALITY AS t(suite, first, count, n)
                 ORDER BY t.n",
            )
            .bind(id)
            .bind(build_id)
            .bind(&suite)
            .bind(&first)
            .bind(&count)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            jobs += n;
        }
        tx.commit().await?;
        Ok((id, jobs))
    }

    async fn list_sweeps(&self, limit: u32) -> StoreResult<Vec<SweepSummary>> {
        let rows = sqlx::query(&format!(
            "{SUMMARY_SQL} GROUP BY s.id ORDER BY s.id DESC LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(summary_of).collect())
    }

    async fn sweep(&self, id: i64) -> StoreResult<SweepRecord> {
        let row = sqlx::query(&format!("{SUMMARY_SQL} WHERE s.id = $1 GROUP BY s.id"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
        let summary = summary_of(&row);
        let extra = sqlx::query("SELECT spec, engine_def, source_sha256 FROM sweeps WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
        let builds = sqlx::query(
            "SELECT name, defines, is_baseline, build_error FROM builds WHERE sweep_id = $1 ORDER BY ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|b| {
            Ok(BuildStatus {
                name: b.get("name"),
                defines: serde_json::from_value(b.get("defines")).context("decoding defines")?,
                is_baseline: b.get("is_baseline"),
                build_error: b.get("build_error"),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
        let suites = sqlx::query(
            "SELECT su.name, su.size FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
             WHERE ss.sweep_id = $1 ORDER BY ss.ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| (r.get::<String, _>("name"), r.get::<i32, _>("size") as usize))
        .collect();
        Ok(SweepRecord {
            summary,
            spec: serde_json::from_value(extra.get("spec")).context("decoding spec")?,
            engine_def: serde_json::from_value(extra.get("engine_def"))
                .context("decoding engine")?,
            source_sha256: extra.get("source_sha256"),
            builds,
            suites,
        })
    }

    async fn progress(&self, id: i64) -> StoreResult<Vec<Progress>> {
        let rows = sqlx::query(
            "SELECT b.name AS build, su.name AS suite, su.size, count(r.position_index) AS done,
                    count(r.error) AS errors, COALESCE(sum(r.nodes), 0)::bigint AS nodes
             FROM builds b
             JOIN sweep_suites ss ON ss.sweep_id = b.sweep_id
             JOIN suites su ON su.id = ss.suite_id
             LEFT JOIN results r ON r.build_id = b.id AND r.suite_id = su.id
             WHERE b.sweep_id = $1
             GROUP BY b.id, b.name, b.ord, su.id, su.name, su.size, ss.ord
             ORDER BY b.ord, ss.ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| Progress {
                build: r.get("build"),
                suite: r.get("suite"),
                done: r.get::<i64, _>("done") as u64,
                total: r.get::<i32, _>("size") as u64,
                errors: r.get::<i64, _>("errors") as u64,
                nodes: r.get::<i64, _>("nodes") as u64,
            })
            .collect())
    }

    async fn active_workers(&self, id: i64) -> StoreResult<Vec<ActiveWorker>> {
        let rows = sqlx::query(
            "SELECT w.id, w.name, w.host, count(*) AS jobs FROM jobs j JOIN workers w ON w.id = j.worker_id
             WHERE j.sweep_id = $1 AND j.state = 'leased' AND j.lease_expires_at > now()
             GROUP BY w.id ORDER BY w.id",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
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
             WHERE r.sweep_id = $1 AND r.error IS NOT NULL ORDER BY b.ord, su.name, r.position_index LIMIT $2",
        )
        .bind(id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
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
             WHERE r.sweep_id = $1 ORDER BY b.ord, su.name, r.position_index",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| ResultRow {
                build: r.get("build"),
                suite: r.get("suite"),
                index: r.get::<i32, _>("position_index") as u32,
                position_id: r.get("position_id"),
                nodes: r.get::<i64, _>("nodes") as u64,
                bestmove: r.get("bestmove"),
                solved: r.get("solved"),
                error: r.get("error"),
            })
            .collect())
    }

    async fn cancel_sweep(&self, id: i64) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let n = sqlx::query("UPDATE sweeps SET cancelled = TRUE WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            return Err(StoreError::NotFound(format!("sweep {id}")));
        }
        sqlx::query(
            "UPDATE jobs SET state = 'cancelled', updated_at = now()
             WHERE sweep_id = $1 AND state IN ('queued', 'leased')",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn register_worker(&self, w: &RegisterWorker) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(
            "INSERT INTO workers (name, host, cores) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(&w.name)
        .bind(&w.host)
        .bind(w.cores as i32)
        .fetch_one(&self.pool)
        .await?)
    }

    async fn lease_jobs(
        &self,
        worker_id: i64,
        max: u32,
        lease: Duration,
    ) -> StoreResult<Vec<JobLease>> {
        let touched = sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
            .bind(worker_id)
            .execute(&self.pool)
            .await?
            .rows_affected();
        if touched == 0 {
            return Err(StoreError::NotFound(format!("worker {worker_id}")));
        }
        // Expired leases are taken back right here, so no reaper is needed: an expired job is
        // as claimable as a queued one, and the attempt bump fences the old holder.
        let rows = sqlx::query(
            "WITH picked AS (
                 SELECT j.id FROM jobs j JOIN sweeps s ON s.id = j.sweep_id
                 WHERE (j.state = 'queued' OR (j.state = 'leased' AND j.lease_expires_at < now()))
                   AND NOT s.cancelled
                 ORDER BY j.id
                 LIMIT $2
                 FOR UPDATE OF j SKIP LOCKED
             )
             UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, worker_id = $1,
                    lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
             FROM picked WHERE jobs.id = picked.id
             RETURNING jobs.id, jobs.attempt, jobs.sweep_id, jobs.build_id, jobs.suite_id,
                       jobs.first_index, jobs.count",
        )
        .bind(worker_id)
        .bind(i64::from(max))
        .bind(lease.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(job) = self.lease_one(row).await? {
                out.push(job);
            }
        }
        Ok(out)
    }

    async fn heartbeat(
        &self,
        job_id: i64,
        beat: &Heartbeat,
        lease: Duration,
    ) -> StoreResult<BatchAck> {
        let mut tx = self.pool.begin().await?;
        let job = Self::job_for_update(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, beat.worker_id, beat.attempt)?;
        if !job.cancelled {
            sqlx::query(
                "UPDATE jobs SET lease_expires_at = now() + make_interval(secs => $2), updated_at = now() WHERE id = $1",
            )
            .bind(job_id)
            .bind(lease.as_secs_f64())
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
            .bind(beat.worker_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
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
        let mut tx = self.pool.begin().await?;
        let job = Self::job_for_update(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, batch.worker_id, batch.attempt)?;
        let suite = self.suite_positions(job.suite_id).await?;
        let range = job.first_index..job.first_index + job.count;
        let mut idx = Vec::with_capacity(batch.results.len());
        let (mut pid, mut nodes, mut bm, mut solved) = (vec![], vec![], vec![], vec![]);
        let (mut cp, mut mate, mut depth, mut ms, mut err) =
            (vec![], vec![], vec![], vec![], vec![]);
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
            let n = i64::try_from(r.nodes).map_err(|_| {
                StoreError::Invalid(format!("results: nodes {} too large", r.nodes))
            })?;
            let pos = &suite[i as usize];
            idx.push(i);
            pid.push(pos.id.clone());
            nodes.push(n);
            bm.push(r.bestmove.clone());
            // The coordinator owns the verdict, so a worker cannot disagree with the suite.
            solved.push(r.error.is_none() && pos.is_solved(&r.bestmove));
            cp.push(r.score_cp);
            mate.push(r.score_mate);
            depth.push(r.depth.min(i32::MAX as u32) as i32);
            ms.push(r.time_ms.min(i64::MAX as u64) as i64);
            err.push(r.error.clone());
        }
        let accepted = sqlx::query(
            "INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id, attempt,
                                  worker_id, position_id, nodes, bestmove, solved, score_cp, score_mate,
                                  reached_depth, time_ms, error)
             SELECT $1, $2, t.idx, $3, $4, $5, $6, $7, t.pid, t.nodes, t.bm, t.solved, t.cp, t.mate, t.rd, t.ms, t.err
             FROM UNNEST($8::int4[], $9::text[], $10::int8[], $11::text[], $12::bool[], $13::int4[],
                         $14::int4[], $15::int4[], $16::int8[], $17::text[])
                  AS t(idx, pid, nodes, bm, solved, cp, mate, rd, ms, err)
             ON CONFLICT DO NOTHING",
        )
        .bind(job.build_id)
        .bind(job.suite_id)
        .bind(job.depth)
        .bind(job.sweep_id)
        .bind(job_id)
        .bind(batch.attempt)
        .bind(batch.worker_id)
        .bind(&idx)
        .bind(&pid)
        .bind(&nodes)
        .bind(&bm)
        .bind(&solved)
        .bind(&cp)
        .bind(&mate)
        .bind(&depth)
        .bind(&ms)
        .bind(&err)
        .execute(&mut *tx)
        .await?
        .rows_affected() as u32;
        if !job.cancelled {
            let new_state = if batch.finished {
                let have: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM results WHERE build_id = $1 AND suite_id = $2 AND depth = $3
                       AND position_index >= $4 AND position_index < $5",
                )
                .bind(job.build_id)
                .bind(job.suite_id)
                .bind(job.depth)
                .bind(range.start)
                .bind(range.end)
                .fetch_one(&mut *tx)
                .await?;
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
                "UPDATE jobs SET state = $2, lease_expires_at = now() + make_interval(secs => $3),
                        updated_at = now() WHERE id = $1",
            )
            .bind(job_id)
            .bind(new_state)
            .bind(lease.as_secs_f64())
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE workers SET last_seen_at = now() WHERE id = $1")
            .bind(batch.worker_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(BatchAck {
            accepted,
            duplicates: batch.results.len() as u32 - accepted,
            cancelled: job.cancelled,
        })
    }

    async fn build_failed(&self, job_id: i64, failure: &BuildFailure) -> StoreResult<BatchAck> {
        let mut tx = self.pool.begin().await?;
        let job = Self::job_for_update(&mut tx, job_id).await?;
        Self::check_lease(job_id, &job, failure.worker_id, failure.attempt)?;
        sqlx::query("UPDATE builds SET build_error = $2 WHERE id = $1")
            .bind(job.build_id)
            .bind(&failure.output)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE jobs SET state = 'failed', updated_at = now()
             WHERE build_id = $1 AND state IN ('queued', 'leased')",
        )
        .bind(job.build_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(BatchAck {
            accepted: 0,
            duplicates: 0,
            cancelled: job.cancelled,
        })
    }
}
