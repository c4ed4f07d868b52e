//! Workers and leases: registering, handing out jobs, giving them back (heartbeats renew them
//! in [`super::beats`]).

use chrono::{DateTime, Utc};
use std::time::Duration;

use std::collections::{HashMap, HashSet};

use sqlx::{PgPool, Postgres, Transaction};
use sweep_domain::wire::{HeldLease, JobLease, LeaseStatus, RegisterWorker};

use super::{secs, statements, PgStore};
use crate::store::job::{job_lease, limit_of, LeasedJob};
use crate::store::retry::{build_fails, failed_build_error};
use crate::store::{JobOutcome, StoreError, StoreResult};

/// Registers a worker with the binary-only engines it has; returns its id.
pub(super) async fn register_worker(
    pool: &PgPool,
    w: &RegisterWorker,
    token_id: Option<i64>,
    now: DateTime<Utc>,
) -> StoreResult<i64> {
    let mut tx = pool.begin().await?;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO workers (name, host, cores, token_id, registered_at, last_seen_at)
         VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
    )
    .bind(&w.name)
    .bind(&w.host)
    .bind(w.cores as i32)
    .bind(token_id)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO worker_engines (worker_id, engine)
         SELECT $1, e FROM unnest($2::text[]) AS e ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(&w.engines)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Marks a worker seen outside any transaction, unless this coordinator did so within a
/// tenth of a lease; `NotFound` when it is not registered.
pub(super) async fn touch_unless_recent(
    store: &PgStore,
    worker_id: i64,
    lease: Duration,
) -> StoreResult<()> {
    if touch_all_unless_recent(store, &[worker_id], lease)
        .await?
        .is_empty()
    {
        Ok(())
    } else {
        Err(StoreError::NotFound(format!("worker {worker_id}")))
    }
}

/// Marks the workers `workers` seen in one statement outside any transaction, but for those
/// this coordinator marked within a tenth of a lease; returns those of them not registered.
pub(super) async fn touch_all_unless_recent(
    store: &PgStore,
    workers: &[i64],
    lease: Duration,
) -> StoreResult<HashSet<i64>> {
    let now = store.clock.now();
    let mut stale: Vec<i64> = workers
        .iter()
        .copied()
        .filter(|&w| !store.seen.recent(w, lease, now))
        .collect();
    if stale.is_empty() {
        return Ok(HashSet::new());
    }
    stale.sort_unstable();
    stale.dedup();
    let marked: HashSet<i64> = sqlx::query_scalar(statements::MARK_SEEN_MANY)
        .bind(&stale)
        .bind(now)
        .fetch_all(&store.pool)
        .await?
        .into_iter()
        .collect();
    for &w in &marked {
        store.seen.marked(w, now);
    }
    Ok(stale.into_iter().filter(|w| !marked.contains(w)).collect())
}

/// The picks for one worker, inside the claim's transaction: expired leases first (a dead
/// worker's jobs are redone before the queue moves on, so partial tables keep comparing the
/// same positions), then queued jobs of the builds it was last leased (`known`, newest
/// first: build affinity), then the queue in id order, then the jobs it saw a position fail
/// on.
pub(super) async fn pick_for(
    tx: &mut Transaction<'_, Postgres>,
    worker_id: i64,
    max: u32,
    lease: Duration,
    now: DateTime<Utc>,
    known: &[i64],
) -> StoreResult<Vec<Leased>> {
    // Each step is a statement, with the builds it takes as `$5` where it takes any.
    let steps: [(&str, Option<&[i64]>); 4] = [
        (statements::LEASE_EXPIRED, None),
        (statements::LEASE_KNOWN, Some(known)),
        (statements::LEASE_FRESH, None),
        (statements::LEASE_RETRIED, None),
    ];
    let mut rows = Vec::new();
    for (statement, builds) in steps {
        let room = max - rows.len() as u32;
        if room == 0 {
            break;
        }
        // A worker known to have no build has nothing to pick by build.
        if builds.is_some_and(<[i64]>::is_empty) {
            continue;
        }
        rows.extend(pick(tx, statement, worker_id, room, lease, now, builds).await?);
    }
    Ok(rows)
}

/// Runs one of the lease statements for up to `max` jobs (with the builds `known` as `$5`
/// when it takes them); rows in id order (RETURNING promises none).
async fn pick(
    tx: &mut Transaction<'_, Postgres>,
    statement: &str,
    worker_id: i64,
    max: u32,
    lease: Duration,
    now: DateTime<Utc>,
    known: Option<&[i64]>,
) -> StoreResult<Vec<Leased>> {
    let query = sqlx::query_as(statement)
        .bind(worker_id)
        .bind(i64::from(max))
        .bind(secs(lease))
        .bind(now);
    let query = match known {
        Some(builds) => query.bind(builds),
        None => query,
    };
    let mut rows: Vec<Leased> = query.fetch_all(&mut **tx).await?;
    rows.sort_by_key(|r| r.id);
    Ok(rows)
}

/// A job row as a lease statement returns it.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Leased {
    pub id: i64,
    attempt: i32,
    sweep_id: i64,
    /// The job's build (what build affinity remembers).
    pub build_id: i64,
    suite_id: i64,
    first_index: i32,
    count: i32,
    depth: i32,
    nodes_limit: i64,
    results_done: i32,
    /// 'work' or 'check' (a cross-check: see [`super::checks`]).
    kind: String,
}

/// Turns freshly leased rows into the leases sent to the worker, leaving out positions that
/// already have results (only a job leased before, or one that took results of earlier
/// sweeps at submission, can have any), and closes the jobs that have none left.
pub(super) async fn leases_of(
    store: &PgStore,
    tx: &mut Transaction<'_, Postgres>,
    rows: &[Leased],
) -> StoreResult<Vec<JobLease>> {
    // A work job that took results of earlier sweeps at submission has some before its
    // first lease.
    let again = |kind: &str| -> Vec<i64> {
        rows.iter()
            .filter(|r| (r.attempt > 1 || r.results_done > 0) && r.kind == kind)
            .map(|r| r.id)
            .collect()
    };
    let mut done: HashMap<i64, Vec<i32>> = HashMap::new();
    // A work job leaves out positions with a result; a cross-check those it measured (its
    // position always has a result: the original it checks).
    for (ids, statement) in [
        (again("work"), statements::DONE_POSITIONS),
        (again("check"), statements::DONE_CHECKS),
    ] {
        if ids.is_empty() {
            continue;
        }
        let found: Vec<(i64, i32)> = sqlx::query_as(statement)
            .bind(&ids)
            .fetch_all(&mut **tx)
            .await?;
        for (job, index) in found {
            done.entry(job).or_default().push(index);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    let mut emptied = Vec::new();
    for row in rows {
        let sweep = store.sweeps.get(&store.pool, row.sweep_id).await?;
        let build = sweep.builds.get(&row.build_id).cloned().ok_or_else(|| {
            StoreError::Internal(anyhow::anyhow!("job {}: unknown build", row.id))
        })?;
        let suite_name = sweep.suites.get(&row.suite_id).cloned().ok_or_else(|| {
            StoreError::Internal(anyhow::anyhow!("job {}: unknown suite", row.id))
        })?;
        let suite = store.suite_positions(row.suite_id).await?;
        let lease = job_lease(LeasedJob {
            job_id: row.id,
            attempt: row.attempt,
            sweep_id: row.sweep_id,
            first_index: row.first_index,
            count: row.count,
            build,
            limit: limit_of(row.depth, row.nodes_limit)?,
            suite_name,
            suite: &suite,
            done: done.get(&row.id).map(Vec::as_slice).unwrap_or_default(),
        })
        .map(|mut l| {
            l.cross_check = row.kind == "check";
            l
        });
        match lease {
            Some(lease) => out.push(lease),
            // Everything was reported before the previous holder could close the job.
            None => emptied.push(row.id),
        }
    }
    if !emptied.is_empty() {
        sqlx::query("UPDATE jobs SET state = 'done', updated_at = $2 WHERE id = ANY($1)")
            .bind(&emptied)
            .bind(store.clock.now())
            .execute(&mut **tx)
            .await?;
    }
    Ok(out)
}

/// Judges again the builds that failed on some workers, are not failed yet and still have
/// open jobs, against the workers live now, and fails those the rule fails now: when the
/// workers that had not tried a build died, the ones left all failed it and are never leased
/// its jobs, so without this the sweep would never finish. A binary-only engine's build
/// counts only the live workers that have its binary (the others never get its jobs).
pub(super) async fn fail_stalled_builds(
    pool: &PgPool,
    lease: Duration,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    // One lock-free look per lease, touching only builds with recorded failures and no build
    // error (a handful); only those the rule would fail now get a transaction, which checks
    // again under the build's lock.
    let candidates: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT bf.build_id, count(*),
                (SELECT count(*) FROM workers w
                 JOIN builds lb ON lb.id = bf.build_id JOIN sweeps ls ON ls.id = lb.sweep_id
                 WHERE w.last_seen_at > $2 - make_interval(secs => $1)
                   AND (ls.source_sha256 IS NOT NULL
                        OR EXISTS (SELECT 1 FROM worker_engines we
                                   WHERE we.worker_id = w.id AND we.engine = ls.engine)))
         FROM build_failures bf JOIN builds b ON b.id = bf.build_id
         WHERE b.build_error IS NULL
           AND EXISTS (SELECT 1 FROM jobs j
                       WHERE j.build_id = bf.build_id AND j.state IN ('queued', 'leased'))
         GROUP BY bf.build_id
         ORDER BY bf.build_id",
    )
    .bind(secs(lease))
    .bind(now)
    .fetch_all(pool)
    .await?;
    for (build_id, failed_workers, live_workers) in candidates {
        if build_fails(failed_workers, max_attempts, live_workers) {
            fail_stalled_build(pool, build_id, lease, max_attempts, now).await?;
        }
    }
    Ok(())
}

/// Fails one build if, under its row lock, it still has no build error and the rule fails it
/// with the workers live now; leaves it for the next lease when one of its open jobs is
/// being written by someone else.
async fn fail_stalled_build(
    pool: &PgPool,
    build_id: i64,
    lease: Duration,
    max_attempts: u32,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut tx = pool.begin().await?;
    // The same lock build_failed takes: a failure recorded meanwhile is counted here, and a
    // build it failed meanwhile is left alone.
    let build_error_now: Option<Option<String>> =
        sqlx::query_scalar("SELECT build_error FROM builds WHERE id = $1 FOR UPDATE")
            .bind(build_id)
            .fetch_optional(&mut *tx)
            .await?;
    if !matches!(build_error_now, Some(None)) {
        return Ok(());
    }
    let (failed_workers, live_workers, last_output): (i64, i64, Option<String>) = sqlx::query_as(
        "SELECT count(*),
                    (SELECT count(*) FROM workers w
                     JOIN builds lb ON lb.id = $1 JOIN sweeps ls ON ls.id = lb.sweep_id
                     WHERE w.last_seen_at > $3 - make_interval(secs => $2)
                       AND (ls.source_sha256 IS NOT NULL
                            OR EXISTS (SELECT 1 FROM worker_engines we
                                       WHERE we.worker_id = w.id AND we.engine = ls.engine))),
                    (SELECT output FROM build_failures WHERE build_id = $1
                     ORDER BY created_at DESC, worker_id DESC LIMIT 1)
             FROM build_failures WHERE build_id = $1",
    )
    .bind(build_id)
    .bind(secs(lease))
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let Some(error) = failed_build_error(
        failed_workers,
        max_attempts,
        live_workers,
        last_output.as_deref().unwrap_or_default(),
    ) else {
        return Ok(());
    };
    // Never wait for a job lock while holding the build's: build_failed holds its job's lock
    // while it waits for the build's, so waiting here could deadlock. A job locked by someone
    // else is being written right now; the next lease judges the build again.
    let locked: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM jobs WHERE build_id = $1 AND state IN ('queued', 'leased')
         FOR UPDATE SKIP LOCKED",
    )
    .bind(build_id)
    .fetch_all(&mut *tx)
    .await?;
    let open: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE build_id = $1 AND state IN ('queued', 'leased')",
    )
    .bind(build_id)
    .fetch_one(&mut *tx)
    .await?;
    if (locked.len() as i64) < open {
        return Ok(());
    }
    sqlx::query("UPDATE builds SET build_error = $2 WHERE id = $1")
        .bind(build_id)
        .bind(error)
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE jobs SET state = 'failed', updated_at = $2 WHERE id = ANY($1)")
        .bind(&locked)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Gives back the leases `worker_id` names with one statement (see [`statements::RELEASE`]);
/// one outcome per lease, in request order.
pub(super) async fn release(
    store: &PgStore,
    worker_id: i64,
    leases: &[HeldLease],
) -> StoreResult<Vec<JobOutcome>> {
    let mut sorted: Vec<(i64, i32)> = leases.iter().map(|l| (l.job_id, l.attempt)).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let (ids, attempts): (Vec<i64>, Vec<i32>) = sorted.into_iter().unzip();
    let released: Vec<(i64, i32)> = sqlx::query_as(statements::RELEASE)
        .bind(&ids)
        .bind(&attempts)
        .bind(worker_id)
        .bind(store.clock.now())
        .fetch_all(&store.pool)
        .await?;
    Ok(leases
        .iter()
        .map(|l| {
            if released.contains(&(l.job_id, l.attempt)) {
                JobOutcome {
                    status: LeaseStatus::Held,
                    accepted: 0,
                    duplicates: 0,
                }
            } else {
                JobOutcome::LOST
            }
        })
        .collect())
}

/// Marks a worker seen inside `tx`, after its job rows are locked (the order every worker
/// call locks in), unless this coordinator did so within a tenth of a lease; `NotFound`
/// when it is not registered.
pub(super) async fn mark_seen(
    store: &PgStore,
    tx: &mut Transaction<'_, Postgres>,
    worker_id: i64,
    lease: Duration,
) -> StoreResult<()> {
    let now = store.clock.now();
    if store.seen.recent(worker_id, lease, now) {
        return Ok(());
    }
    let touched = sqlx::query(statements::MARK_SEEN)
        .bind(worker_id)
        .bind(now)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if touched == 0 {
        return Err(StoreError::NotFound(format!("worker {worker_id}")));
    }
    store.seen.marked(worker_id, now);
    Ok(())
}
