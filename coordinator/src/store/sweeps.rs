//! Writing a sweep, once for both backends: the look for an identical sweep still queued or
//! running, the sweep's row, its suites and builds, its planned work and check jobs, and the
//! earlier results it takes. A backend supplies only what differs ([`Backend`]): how
//! submissions of one identity wait for each other, how a sweep's jobs are inserted
//! (Postgres: one set-based statement; SQLite: a row at a time inside its write
//! transaction), how earlier results are copied, and what follows the commit.

use std::collections::HashMap;

use anyhow::Context;
use chrono::{DateTime, Utc};
use sweep_domain::table::SearchReport;
use sweep_domain::{crosscheck, plan};

use super::backend::{Backend, JobRange};
use super::checks::sweep_originals_stored;
use super::reads::{self, SUMMARY_SQL};
use super::reuse;
use super::rows::{JobKind, NewJob};
use super::sql::{insert_sql, stamp, Columns, Tx, Value};
use super::work::{close_work, Scope};
use super::{Created, NewSweep, StoreError, StoreResult};

/// Writes a sweep, its suites, builds and jobs in one transaction, unless a sweep with the
/// same identity is still queued or running: then that one. Submissions of one identity
/// wait for each other ([`Backend::lock_key`]), so the second of two concurrent ones
/// looks only after the first has committed, and finds it.
pub(crate) async fn create_unless_running<B: Backend>(
    db: &B,
    sweep: &NewSweep,
) -> StoreResult<Created> {
    let now = db.clock().now();
    let identity = sweep.identity();
    let mut tx = db.begin().await?;
    db.lock_key(&mut tx, &identity).await?;
    if let Some(running) = running_identical::<B>(&mut tx, &identity).await? {
        return Ok(running);
    }
    let (id, jobs, reused) = insert(db, &mut tx, sweep, now).await?;
    tx.commit().await?;
    db.sweep_written(jobs).await?;
    Ok(Created {
        id,
        jobs,
        existing: false,
        reused,
    })
}

/// The newest sweep of `identity` still queued or running, inside `tx`.
async fn running_identical<B: Backend>(
    tx: &mut B::Tx,
    identity: &str,
) -> StoreResult<Option<Created>> {
    let rows = tx
        .rows(
            &format!(
                "{SUMMARY_SQL} WHERE s.spec_sha256 = $1 AND NOT s.cancelled ORDER BY s.id DESC"
            ),
            &[Value::Text(identity)],
        )
        .await?;
    reads::running_of(&rows)
}

/// What [`plan_only`] finds a sweep would be: its identical sweep still running, its jobs,
/// cross-checks and planned searches, the results it would take, and per suite and limit
/// the searches left to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlannedSweep {
    /// An identical sweep still queued or running.
    pub existing: Option<i64>,
    /// Work jobs.
    pub jobs: u64,
    /// Cross-check jobs.
    pub checks: u64,
    /// Searches planned.
    pub positions: u64,
    /// Results taken from earlier sweeps.
    pub reused: u64,
    /// Per suite and limit, the searches left to run, in no particular order.
    pub cells: SearchesLeft,
}

/// (suite, limit, searches left to run) of each cell of a sweep.
pub type SearchesLeft = Vec<(String, sweep_domain::limit::Limit, u64)>;

/// See [`super::Store::plan_sweep`]: the sweep written as a submission would write it, its
/// counts read back, and the transaction rolled back, so the estimate is exactly what a
/// submission would do (reuse included) and nothing is kept.
pub(crate) async fn plan_only<B: Backend>(db: &B, sweep: &NewSweep) -> StoreResult<PlannedSweep> {
    let now = db.clock().now();
    let identity = sweep.identity();
    let mut tx = db.begin().await?;
    let existing = running_identical::<B>(&mut tx, &identity)
        .await?
        .map(|c| c.id);
    let (id, jobs, reused) = insert(db, &mut tx, sweep, now).await?;
    let by_id = [Value::Int(id)];
    let (mut checks, mut speed) = (0, 0);
    for r in tx
        .rows(
            "SELECT kind, count(*) AS n FROM jobs WHERE sweep_id = $1 AND kind <> 'work'
             GROUP BY kind",
            &by_id,
        )
        .await?
    {
        match r.text("kind")?.as_str() {
            "check" => checks = r.count("n")?,
            _ => speed += r.count("n")?,
        }
    }
    let (positions, cells) = searches_left::<B>(&mut tx, id).await?;
    // Dropped without a commit: rolled back, nothing of it stays.
    drop(tx);
    Ok(PlannedSweep {
        existing,
        jobs: jobs - checks - speed,
        checks,
        positions,
        reused,
        cells,
    })
}

/// Sweep `id`'s planned searches inside `tx`, and per suite and limit the searches left to
/// run: its work jobs' positions less the results already there (the reused).
async fn searches_left<B: Backend>(tx: &mut B::Tx, id: i64) -> StoreResult<(u64, SearchesLeft)> {
    let by_id = [Value::Int(id)];
    let planned = tx
        .rows(
            "SELECT su.name AS suite, j.depth, j.nodes_limit,
                    CAST(sum(j.count) AS BIGINT) AS planned
             FROM builds b JOIN jobs j ON j.id >= b.first_job AND j.id <= b.last_job
                                      AND j.build_id = b.id
             JOIN suites su ON su.id = j.suite_id
             WHERE b.sweep_id = $1 AND j.kind = 'work'
             GROUP BY su.name, j.depth, j.nodes_limit",
            &by_id,
        )
        .await?;
    let taken = tx
        .rows(
            "SELECT su.name AS suite, r.depth, r.nodes_limit, count(*) AS taken
             FROM results r JOIN suites su ON su.id = r.suite_id
             WHERE r.sweep_id = $1 GROUP BY su.name, r.depth, r.nodes_limit",
            &by_id,
        )
        .await?;
    let mut taken_in = HashMap::new();
    for t in &taken {
        taken_in.insert((t.text("suite")?, t.limit()?), t.count("taken")?);
    }
    let mut cells = Vec::new();
    let mut positions = 0;
    for r in &planned {
        let (suite, limit, n) = (r.text("suite")?, r.limit()?, r.count("planned")?);
        let t = taken_in.get(&(suite.clone(), limit)).copied().unwrap_or(0);
        positions += n;
        cells.push((suite, limit, n.saturating_sub(t)));
    }
    Ok((positions, cells))
}

/// A new sweep's rows as written (see [`write_rows`]).
pub(crate) struct Written {
    /// Its id.
    pub id: i64,
    /// Its jobs, of every kind.
    pub jobs: u64,
    /// Each build's range of work jobs.
    pub ranges: Vec<JobRange>,
    /// Each build's fingerprint, by build id (builds that can be reused only).
    pub fingerprint_of: HashMap<i64, String>,
    /// It has cross-checks.
    pub checks: bool,
}

/// Writes the sweep, its suites, builds and jobs inside `tx` (submitted at `now`), and the
/// counts kept on it: everything but the results it takes and its cursors.
pub(crate) async fn write_rows<B: Backend>(
    db: &B,
    tx: &mut B::Tx,
    sweep: &NewSweep,
    now: DateTime<Utc>,
) -> StoreResult<Written> {
    let id = insert_sweep::<B>(tx, sweep, now).await?;
    let suite_ids = insert_suites::<B>(tx, id, sweep).await?;
    let (build_ids, fingerprint_of) = insert_builds::<B>(tx, id, sweep).await?;
    let (work, checks) = planned_jobs(sweep, &suite_ids, &build_ids)?;
    let speed = speed_jobs(sweep, &suite_ids, &build_ids)?;
    let ranges = db.insert_jobs(tx, id, JobKind::Work, &work, now).await?;
    let mut jobs = work.len() as u64;
    for (kind, extra) in [(JobKind::Check, &checks), (JobKind::Speed, &speed)] {
        if !extra.is_empty() {
            db.insert_jobs(tx, id, kind, extra, now).await?;
            jobs += extra.len() as u64;
        }
    }
    // Kept on the sweep, so reading its progress never counts its jobs (they never change).
    let positions: i64 = work.iter().map(|j| i64::from(j.count)).sum();
    tx.execute(
        "UPDATE sweeps SET job_count = $2, position_count = $3, stages_left = $4,
                           stage_count = $4 + 1
         WHERE id = $1",
        &[
            Value::Int(id),
            Value::Int(i64::try_from(jobs).unwrap_or(i64::MAX)),
            Value::Int(positions),
            Value::Int(sweep.spec.stages.len() as i64),
        ],
    )
    .await?;
    count_build_positions::<B>(tx, id, sweep, &build_ids, positions).await?;
    Ok(Written {
        id,
        jobs,
        ranges,
        fingerprint_of,
        checks: !checks.is_empty(),
    })
}

/// Writes the sweep's rows (see [`write_rows`]) inside `tx`, and takes the earlier results
/// it can reuse (unless its spec says `recompute`); returns (id, jobs, results reused).
async fn insert<B: Backend>(
    db: &B,
    tx: &mut B::Tx,
    sweep: &NewSweep,
    now: DateTime<Utc>,
) -> StoreResult<(i64, u64, u64)> {
    let Written {
        id,
        jobs,
        ranges,
        fingerprint_of,
        checks,
    } = write_rows(db, tx, sweep, now).await?;
    let reused = if sweep.spec.recompute {
        0
    } else {
        let takers = reuse::Takers {
            sweep: id,
            from_job: 0,
            exclude_sweep: id,
        };
        reuse::take_earlier_results(db, tx, takers, &fingerprint_of, &sweep.spec.limits, now)
            .await?
    };
    if reused > 0 && checks {
        sweep_originals_stored(tx, id).await?;
    }
    // A held sweep gets its cursors when it is approved: until then nothing of it is leased.
    if sweep.hold.is_none() {
        queue_builds::<B>(tx, id, &ranges, reused > 0).await?;
    }
    Ok((id, jobs, reused))
}

/// See [`super::Store::approve_sweep`].
pub(crate) async fn approve<B: Backend>(db: &B, id: i64) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    let approved = tx
        .execute(
            "UPDATE sweeps SET approval = 'approved'
             WHERE id = $1 AND approval = 'pending' AND NOT cancelled",
            &[Value::Int(id)],
        )
        .await?;
    if approved == 0 {
        return Ok(false);
    }
    // Its cursors, counting the jobs still open (earlier results may have closed some).
    queue_builds::<B>(&mut tx, id, &[], true).await?;
    tx.commit().await?;
    Ok(true)
}

/// See [`super::Store::reject_sweep`].
pub(crate) async fn reject<B: Backend>(db: &B, id: i64, why: &str) -> StoreResult<bool> {
    let mut tx = db.begin().await?;
    let rejected = tx
        .execute(
            "UPDATE sweeps SET approval = 'rejected', approval_note = $2, cancelled = TRUE
             WHERE id = $1 AND approval = 'pending' AND NOT cancelled",
            &[Value::Int(id), Value::Text(why)],
        )
        .await?;
    if rejected == 0 {
        return Ok(false);
    }
    close_work::<B>(&mut tx, Scope::Sweep(id), "cancelled").await?;
    tx.commit().await?;
    Ok(true)
}

/// One cursor per build over its range of work jobs. When earlier results completed some
/// (`reused`), the cursor counts the jobs still open, a walk of the ranges; otherwise every
/// job of the range is.
async fn queue_builds<B: Backend>(
    tx: &mut B::Tx,
    id: i64,
    ranges: &[JobRange],
    reused: bool,
) -> StoreResult<()> {
    if reused {
        tx.execute(
            "INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
             SELECT b.id, b.sweep_id, b.first_job, b.last_job, n.open
             FROM builds b
             JOIN (SELECT j.build_id, count(*) AS open FROM builds jb
                   JOIN jobs j ON j.id >= jb.first_job AND j.id <= jb.last_job
                              AND j.build_id = jb.id
                   WHERE jb.sweep_id = $1 AND j.state = 'queued' AND j.kind = 'work'
                   GROUP BY j.build_id) n ON n.build_id = b.id
             WHERE b.sweep_id = $1",
            &[Value::Int(id)],
        )
        .await?;
        return Ok(());
    }
    for part in ranges.chunks(200) {
        let mut values = Vec::with_capacity(part.len() * 5);
        let mut rows = Vec::with_capacity(part.len());
        for (i, r) in part.iter().enumerate() {
            let n = i * 5;
            rows.push(format!(
                "(${}, ${}, ${}, ${}, ${})",
                n + 1,
                n + 2,
                n + 3,
                n + 4,
                n + 5
            ));
            values.extend([
                Value::Int(r.build_id),
                Value::Int(id),
                Value::Int(r.first),
                Value::Int(r.last),
                Value::Int(r.count),
            ]);
        }
        let sql = format!(
            "INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
             VALUES {}",
            rows.join(", ")
        );
        tx.execute(&sql, &values).await?;
    }
    Ok(())
}

/// Links sweep `id` to its suite versions, in the spec's order; returns each suite's
/// version id by name.
async fn insert_suites<B: Backend>(
    tx: &mut B::Tx,
    id: i64,
    sweep: &NewSweep,
) -> StoreResult<HashMap<String, i64>> {
    let mut suite_ids = HashMap::new();
    let names = sweep.spec.all_suites();
    for (ord, (suite_id, name)) in sweep.suite_ids.iter().zip(&names).enumerate() {
        tx.execute(
            "INSERT INTO sweep_suites (sweep_id, suite_id, ord) VALUES ($1, $2, $3)",
            &[
                Value::Int(id),
                Value::Int(*suite_id),
                Value::Int(ord as i64),
            ],
        )
        .await?;
        suite_ids.insert(name.clone(), *suite_id);
    }
    Ok(suite_ids)
}

/// Inserts sweep `id`'s builds in plan order; returns their ids (in that order) and the
/// fingerprint of each build that has one (by id), for result reuse.
async fn insert_builds<B: Backend>(
    tx: &mut B::Tx,
    id: i64,
    sweep: &NewSweep,
) -> StoreResult<(Vec<i64>, HashMap<i64, String>)> {
    let mut build_ids = Vec::with_capacity(sweep.builds.len());
    let mut fingerprint_of = HashMap::new();
    for (ord, (build, fingerprint)) in sweep
        .builds
        .iter()
        .zip(reuse::fingerprints(sweep))
        .enumerate()
    {
        let defines = serde_json::to_value(&build.defines).context("encoding defines")?;
        let build_id = tx
            .row(
                "INSERT INTO builds (sweep_id, name, defines, is_baseline, ord, fingerprint,
                                     source_sha256)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
                &[
                    Value::Int(id),
                    Value::Text(&build.name),
                    Value::Json(&defines),
                    Value::Flag(build.is_baseline),
                    Value::Int(ord as i64),
                    Value::OptText(fingerprint.as_deref()),
                    Value::OptText(build.source.as_deref()),
                ],
            )
            .await?
            .ok_or_else(|| anyhow::anyhow!("INSERT ... RETURNING gave no row"))?
            .int("id")?;
        build_ids.push(build_id);
        if let Some(f) = fingerprint {
            fingerprint_of.insert(build_id, f);
        }
    }
    Ok((build_ids, fingerprint_of))
}

/// The sweep's work jobs and cross-check jobs, as inserted: work build by build (each
/// build's in plan order, see `plan::jobs`), so a build's jobs are one range of ids its
/// cursor walks; check jobs after all work jobs.
fn planned_jobs(
    sweep: &NewSweep,
    suite_ids: &HashMap<String, i64>,
    build_ids: &[i64],
) -> StoreResult<(Vec<NewJob>, Vec<NewJob>)> {
    let suite_of = |suite: &str, what: &str| {
        suite_ids
            .get(suite)
            .copied()
            .ok_or_else(|| StoreError::Invalid(format!("{what} of unknown suite `{suite}`")))
    };
    let mut planned = plan::jobs(sweep.builds.len(), sweep.chunks.len(), &sweep.spec.limits);
    planned.retain(|job| sweep.plans_build(&sweep.builds[job.build].name));
    // Build by build, the plan's order within each (a stable sort).
    planned.sort_by_key(|job| job.build);
    let work = planned
        .iter()
        .map(|job| {
            let chunk = &sweep.chunks[job.chunk];
            let suite_id = suite_of(&chunk.suite, "chunk")?;
            Ok(NewJob::new(
                build_ids[job.build],
                suite_id,
                chunk.first,
                chunk.count,
                &job.limit,
            ))
        })
        .collect::<StoreResult<Vec<NewJob>>>()?;
    let checks = crosscheck::plan(
        &sweep.identity(),
        sweep.spec.cross_check.0,
        sweep.spec.cross_check_min,
        &sweep.builds,
        &sweep.chunks,
        &sweep.spec.limits,
    )
    .iter()
    // A search's later cells get no cross-checks, as a later stage's builds get none.
    .filter(|check| sweep.plans_build(&sweep.builds[check.build].name))
    .map(|check| {
        let suite_id = suite_of(&check.suite, "check")?;
        Ok(NewJob::new(
            build_ids[check.build],
            suite_id,
            check.index,
            1,
            &check.limit,
        ))
    })
    .collect::<StoreResult<Vec<_>>>()?;
    Ok((work, checks))
}

/// The sweep's speed jobs (`[speed]`): one per variant it plans now (a search's later cells
/// get none, as they get no cross-checks), each over the first `count` positions of the
/// speed suite at the speed limit.
fn speed_jobs(
    sweep: &NewSweep,
    suite_ids: &HashMap<String, i64>,
    build_ids: &[i64],
) -> StoreResult<Vec<NewJob>> {
    let Some(speed) = &sweep.spec.speed else {
        return Ok(Vec::new());
    };
    let suite_id = suite_ids.get(&speed.suite).copied().ok_or_else(|| {
        StoreError::Invalid(format!(
            "speed positions of unknown suite `{}`",
            speed.suite
        ))
    })?;
    Ok(sweep
        .builds
        .iter()
        .zip(build_ids)
        .filter(|(b, _)| !b.is_baseline && sweep.plans_build(&b.name))
        .map(|(_, &build_id)| NewJob::new(build_id, suite_id, 0, speed.count, &speed.limit))
        .collect())
}

/// Sets how many positions each build of the new sweep `id` is to search: every build of the
/// first stage the same share of its `positions`; with a search, the cells it has not asked
/// for none yet.
async fn count_build_positions<B: Backend>(
    tx: &mut B::Tx,
    id: i64,
    sweep: &NewSweep,
    build_ids: &[i64],
    positions: i64,
) -> StoreResult<()> {
    let planned = sweep
        .builds
        .iter()
        .filter(|b| sweep.plans_build(&b.name))
        .count();
    let per_build = positions / (planned.max(1) as i64);
    tx.execute(
        "UPDATE builds SET position_count = $2 WHERE sweep_id = $1",
        &[Value::Int(id), Value::Int(per_build)],
    )
    .await?;
    for (b, build_id) in sweep.builds.iter().zip(build_ids) {
        if !sweep.plans_build(&b.name) {
            tx.execute(
                "UPDATE builds SET position_count = 0 WHERE id = $1",
                &[Value::Int(*build_id)],
            )
            .await?;
        }
    }
    Ok(())
}

/// Adds a search's columns to the sweep's row: where it stands (`json`, of `report`), open
/// until it has ended, and its claim: the cells it planned.
fn push_search<'a>(
    cols: &mut Vec<&'static str>,
    values: &mut Vec<Value<'a>>,
    json: &'a serde_json::Value,
    report: &SearchReport,
) {
    cols.extend(["search", "search_open", "search_step"]);
    values.extend([
        Value::Json(json),
        Value::Flag(!report.finished),
        Value::Int(report.planned.len() as i64),
    ]);
}

/// Inserts the sweep's own row; returns its id.
async fn insert_sweep<B: Backend>(
    tx: &mut B::Tx,
    sweep: &NewSweep,
    now: DateTime<Utc>,
) -> StoreResult<i64> {
    let spec = serde_json::to_value(&sweep.spec).context("encoding spec")?;
    let engine = serde_json::to_value(&sweep.engine_def).context("encoding engine")?;
    let identity = sweep.identity();
    let origin = &sweep.origin;
    let mut cols = vec![
        "name",
        "engine",
        "spec",
        "engine_def",
        "source_sha256",
        "spec_sha256",
        "submitter",
        "submitter_token",
        "source_kind",
        "source_uploader",
        "source_git_url",
        "source_git_rev",
        "source_git_commit",
        "approval",
        "approval_note",
        "priority",
    ];
    let mut values = vec![
        Value::Text(&sweep.spec.name),
        Value::Text(&sweep.spec.engine),
        Value::Json(&spec),
        Value::Json(&engine),
        Value::OptText(sweep.source_sha256.as_deref()),
        Value::Text(&identity),
        Value::OptText(sweep.submitter.as_ref().map(|o| o.name.as_str())),
        Value::OptInt(sweep.submitter.as_ref().map(|o| o.token_id)),
        Value::Text(origin.kind.as_str()),
        Value::OptText(origin.uploader.as_deref()),
        Value::OptText(origin.git_url.as_deref()),
        Value::OptText(origin.git_rev.as_deref()),
        Value::OptText(origin.git_commit.as_deref()),
        Value::OptText(sweep.hold.as_ref().map(|_| "pending")),
        Value::OptText(sweep.hold.as_deref()),
        Value::Text(sweep.spec.priority.as_str()),
    ];
    let search = sweep
        .search
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .context("encoding search")?;
    if let (Some(json), Some(report)) = (&search, &sweep.search) {
        push_search(&mut cols, &mut values, json, report);
    }
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let row = tx
        .row(&insert_sql("sweeps", &cols, "RETURNING id"), &values)
        .await?
        .ok_or_else(|| anyhow::anyhow!("INSERT ... RETURNING gave no row"))?;
    row.int("id")
}
