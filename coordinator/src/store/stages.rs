//! The stages of a staged sweep after its first, written once for both backends: which
//! sweeps have a stage finished with another still to add, and adding it (the decision, the
//! jobs of the promoted builds and the baseline, their cursors) in one transaction whose
//! first statement is the claim, so several coordinators on one database add a stage once
//! (see `migrations/postgres/0028_stages.sql`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sweep_domain::limit::Limit;
use sweep_domain::plan::{self, ChunkPlan};
use sweep_domain::table::Promotion;

use super::backend::Backend;
use super::reuse;
use super::rows::{JobKind, NewJob};
use super::sql::{Columns, Reads, Tx, Value};
use super::{NewSearchStep, NewStage, StoreError, StoreResult};

/// See [`super::Store::stages_due`]: staged sweeps, not cancelled, with stages (or a
/// search's steps) left and no work open (every build that built has a result for each position it is to search).
pub(crate) async fn due(db: &impl Reads, limit: u32) -> StoreResult<Vec<(i64, u32)>> {
    db.rows(
        concat!(
            "SELECT s.id, s.stages_left FROM sweeps s
             WHERE (s.stages_left > 0 OR s.search_open) AND NOT s.cancelled AND NOT ",
            super::sql::work_open!(),
            " ORDER BY s.id LIMIT $1"
        ),
        &[Value::Int(i64::from(limit))],
    )
    .await?
    .iter()
    .map(|r| {
        Ok((
            r.int("id")?,
            u32::try_from(r.int("stages_left")?).unwrap_or(0),
        ))
    })
    .collect()
}

/// The decisions of sweep `id`'s finished stages, by stage (from 0).
pub(crate) async fn decisions(db: &impl Reads, id: i64) -> StoreResult<Vec<(u32, Promotion)>> {
    db.rows(
        "SELECT stage, decision FROM sweep_stages WHERE sweep_id = $1 ORDER BY stage",
        &[Value::Int(id)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok((
            u32::try_from(r.int("stage")?).unwrap_or(0),
            r.json("decision")?,
        ))
    })
    .collect()
}

/// See [`super::Store::add_stage`].
pub(crate) async fn add<B: Backend>(db: &B, id: i64, stage: &NewStage) -> StoreResult<bool> {
    let now = db.clock().now();
    let mut tx = db.begin().await?;
    // The claim: only the call that finds the count it decided on moves it on. A failed
    // stage ends the sweep: nothing more is added.
    let ends = stage.decision.failed.is_some() || stage.decision.promoted.is_empty();
    let claimed = tx
        .execute(
            "UPDATE sweeps SET stages_left = CASE WHEN $3 THEN 0 ELSE stages_left - 1 END,
                               stage_reached = CASE WHEN $3 THEN stage_reached
                                                    ELSE stage_reached + 1 END
             WHERE id = $1 AND stages_left = $2 AND NOT cancelled",
            &[
                Value::Int(id),
                Value::Int(i64::from(stage.stages_left)),
                Value::Flag(ends),
            ],
        )
        .await?;
    if claimed == 0 {
        return Ok(false);
    }
    let decision = serde_json::to_value(&stage.decision).map_err(anyhow::Error::from)?;
    tx.execute(
        "INSERT INTO sweep_stages (sweep_id, stage, decision, decided_at) VALUES ($1, $2, $3, $4)",
        &[
            Value::Int(id),
            Value::Int(i64::from(stage.decided)),
            Value::Json(&decision),
            Value::Time(now),
        ],
    )
    .await?;
    let work = (!ends).then_some(StageJobs {
        builds: &stage.builds,
        chunks: &stage.chunks,
        limits: &stage.limits,
        recompute: stage.recompute,
    });
    add_jobs_and_commit(db, tx, id, work, now).await?;
    Ok(true)
}

/// See [`super::Store::add_search_step`].
pub(crate) async fn add_search_step<B: Backend>(
    db: &B,
    id: i64,
    step: &NewSearchStep,
) -> StoreResult<bool> {
    let now = db.clock().now();
    let report = &step.report;
    let mut tx = db.begin().await?;
    let json = serde_json::to_value(report).map_err(anyhow::Error::from)?;
    // The claim, as for stages: only the call that finds the cells it replayed moves it on.
    // A failed search ends the sweep: no later stage is added.
    let claimed = tx
        .execute(
            "UPDATE sweeps SET search = $3, search_open = $4, search_step = $5,
                               stages_left = CASE WHEN $6 THEN 0 ELSE stages_left END
             WHERE id = $1 AND search_open AND search_step = $2 AND NOT cancelled",
            &[
                Value::Int(id),
                Value::Int(i64::from(step.planned_before)),
                Value::Json(&json),
                Value::Flag(!report.finished),
                Value::Int(report.planned.len() as i64),
                Value::Flag(report.failed.is_some()),
            ],
        )
        .await?;
    if claimed == 0 {
        return Ok(false);
    }
    let work = (!report.next.is_empty()).then_some(StageJobs {
        builds: &report.next,
        chunks: &step.chunks,
        limits: &step.limits,
        recompute: step.recompute,
    });
    add_jobs_and_commit(db, tx, id, work, now).await?;
    Ok(true)
}

/// Adds `work`'s jobs to sweep `id` in `tx` (none without it), commits, and tells the store
/// how many jobs were written: the end a stage and a search step share once claimed.
async fn add_jobs_and_commit<B: Backend>(
    db: &B,
    mut tx: B::Tx,
    id: i64,
    work: Option<StageJobs<'_>>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let jobs = match &work {
        Some(work) => insert_stage_jobs(db, &mut tx, id, work, now).await?,
        None => 0,
    };
    tx.commit().await?;
    db.sweep_written(jobs).await
}

/// Jobs added to a running sweep: its builds named `builds` (in the sweep's build order)
/// on `chunks` at `limits`.
struct StageJobs<'a> {
    builds: &'a [String],
    chunks: &'a [ChunkPlan],
    limits: &'a [Limit],
    recompute: bool,
}

/// Inserts the added work jobs (build by build, in the builds' order), grows the
/// sweep's and its builds' counts, takes earlier sweeps' results of the same builds, and
/// puts a cursor on each build with work; returns how many jobs it inserted.
async fn insert_stage_jobs<B: Backend>(
    db: &B,
    tx: &mut B::Tx,
    id: i64,
    stage: &StageJobs<'_>,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let builds = stage_builds(tx, id, stage.builds).await?;
    let suites = suite_ids(tx, id).await?;
    let work = planned(&builds, stage.chunks, stage.limits, &suites)?;
    let ranges = db.insert_jobs(tx, id, JobKind::Work, &work, now).await?;
    let first_job = ranges.iter().map(|r| r.first).min().unwrap_or(i64::MAX);
    let per_build: i64 =
        stage.chunks.iter().map(|c| i64::from(c.count)).sum::<i64>() * stage.limits.len() as i64;
    tx.execute(
        "UPDATE sweeps SET job_count = job_count + $2, position_count = position_count + $3
         WHERE id = $1",
        &[
            Value::Int(id),
            Value::Int(work.len() as i64),
            Value::Int(per_build * builds.len() as i64),
        ],
    )
    .await?;
    let mut fingerprints = HashMap::new();
    for b in &builds {
        tx.execute(
            "UPDATE builds SET position_count = position_count + $2 WHERE id = $1",
            &[Value::Int(b.id), Value::Int(per_build)],
        )
        .await?;
        if let Some(f) = &b.fingerprint {
            fingerprints.insert(b.id, f.clone());
        }
    }
    if !stage.recompute {
        // From earlier sweeps and from this one's earlier stages alike (no sweep has id 0).
        let takers = reuse::Takers {
            sweep: id,
            from_job: first_job,
            exclude_sweep: 0,
        };
        reuse::take_earlier_results(db, tx, takers, &fingerprints, stage.limits, now).await?;
    }
    // A build's cursor over the stage's jobs still queued (a row left by the stage before
    // is replaced: its range is walked out).
    tx.execute(
        "INSERT INTO build_queue (build_id, sweep_id, next_job, last_job, remaining)
         SELECT j.build_id, j.sweep_id, min(j.id), max(j.id), count(*) FROM jobs j
         WHERE j.id >= $2 AND j.sweep_id = $1 AND j.kind = 'work' AND j.state = 'queued'
         GROUP BY j.build_id, j.sweep_id
         ON CONFLICT (build_id) DO UPDATE SET next_job = excluded.next_job,
             last_job = excluded.last_job, remaining = excluded.remaining",
        &[Value::Int(id), Value::Int(first_job)],
    )
    .await?;
    Ok(work.len() as u64)
}

/// A build of the sweep as a stage adds its jobs.
struct StageBuild {
    id: i64,
    fingerprint: Option<String>,
}

/// The sweep's builds named `names`, in the sweep's build order.
async fn stage_builds<T: Tx>(
    tx: &mut T,
    id: i64,
    names: &[String],
) -> StoreResult<Vec<StageBuild>> {
    let rows = tx
        .rows(
            "SELECT id, name, fingerprint FROM builds WHERE sweep_id = $1 ORDER BY ord",
            &[Value::Int(id)],
        )
        .await?;
    let mut out = Vec::new();
    for r in &rows {
        if names.contains(&r.text("name")?) {
            out.push(StageBuild {
                id: r.int("id")?,
                fingerprint: r.opt_text("fingerprint")?,
            });
        }
    }
    if out.len() != names.len() {
        return Err(StoreError::Invalid(format!(
            "sweep {id} has no build of some of {}",
            names.join(", ")
        )));
    }
    Ok(out)
}

/// The sweep's suite versions by name.
async fn suite_ids<T: Tx>(tx: &mut T, id: i64) -> StoreResult<HashMap<String, i64>> {
    tx.rows(
        "SELECT su.name, su.id FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
         WHERE ss.sweep_id = $1",
        &[Value::Int(id)],
    )
    .await?
    .iter()
    .map(|r| Ok((r.text("name")?, r.int("id")?)))
    .collect()
}

/// The stage's work jobs, build by build, each build's in the plan's order.
fn planned(
    builds: &[StageBuild],
    chunks: &[ChunkPlan],
    limits: &[Limit],
    suites: &HashMap<String, i64>,
) -> StoreResult<Vec<NewJob>> {
    let mut planned = plan::jobs(builds.len(), chunks.len(), limits);
    planned.sort_by_key(|job| job.build);
    planned
        .iter()
        .map(|job| {
            let chunk = &chunks[job.chunk];
            let suite = suites.get(&chunk.suite).copied().ok_or_else(|| {
                StoreError::Invalid(format!("the sweep has no suite `{}`", chunk.suite))
            })?;
            Ok(NewJob::new(
                builds[job.build].id,
                suite,
                chunk.first,
                chunk.count,
                &job.limit,
            ))
        })
        .collect()
}
