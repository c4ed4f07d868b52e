//! Sweeps that move between stores (see [`crate::transfer`]): a sweep read out whole, and an
//! export written into this store as a sweep of its own, in one transaction, as it ended
//! there: its rows, builds and jobs as a submission writes them (`sweeps::write_rows`), its
//! results, cross-checks, build records and speed runs under the new ids, each worker that
//! measured them a worker row of its own that is never live, and no cursor (it has ended).
//! Portable SQL, a statement per row: an import is rare, and a laptop's sweep is small.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sweep_domain::plan;

use super::backend::Backend;
use super::speed::SpeedRow;
use super::sql::{insert_sql, stamp, Columns, Tx, Value};
use super::{NewSweep, Owner, StoreError, StoreResult};
use crate::transfer::{ExportedRecord, ExportedResult, ExportedSpeedRun, SweepExport};

mod read;
pub(crate) use read::{export, snapshots_of};

/// Writes `export` as a new sweep submitted by `submitter`; returns its id. `label` says
/// where it came from (kept with the original's id in `sweeps.imported_from`).
pub(crate) async fn import<B: Backend>(
    db: &B,
    export: &SweepExport,
    suite_ids: Vec<i64>,
    submitter: Option<Owner>,
    label: &str,
) -> StoreResult<i64> {
    let sizes = export
        .suites
        .iter()
        .map(|s| (s.name.clone(), s.positions.len()))
        .collect();
    let sweep = NewSweep {
        builds: plan::builds(&export.spec),
        chunks: plan::chunks(&export.spec, &sizes),
        spec: export.spec.clone(),
        engine_def: export.engine_def.clone(),
        source_sha256: export.source_sha256.clone(),
        origin: export.origin.clone(),
        suite_ids,
        submitter,
        hold: None,
        search: None,
    };
    let mut tx = db.begin().await?;
    let written =
        super::sweeps::write_rows(db, &mut tx, &sweep, export.original.created_at).await?;
    let id = written.id;
    mark_imported::<B>(&mut tx, id, export, label, db.clock().now()).await?;
    let ids = Ids::read::<B>(&mut tx, id, export).await?;
    let at = B::written_at(db.clock().now());
    for r in &export.results {
        insert_result::<B>(&mut tx, &ids, r, "results", at).await?;
    }
    for c in &export.cross_checks {
        insert_result::<B>(&mut tx, &ids, c, "cross_checks", at).await?;
    }
    for r in &export.build_records {
        insert_record::<B>(&mut tx, &ids, r, at).await?;
    }
    for s in &export.speed_runs {
        insert_speed_run::<B>(&mut tx, &ids, s, db.clock().now()).await?;
    }
    // Every check and speed job ended with the sweep there.
    tx.execute(
        "UPDATE jobs SET state = 'done' WHERE sweep_id = $1 AND kind <> 'work'",
        &[Value::Int(id)],
    )
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Keeps where the sweep came from, when it was submitted there, its end (cancelled, failed
/// builds), and marks it started and announced (its webhooks were the original's to send).
async fn mark_imported<B: Backend>(
    tx: &mut B::Tx,
    id: i64,
    export: &SweepExport,
    label: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let from = serde_json::json!({
        "sweep_id": export.original.sweep_id,
        "from": label,
        "exported_at": export.original.exported_at,
        "sweep_version": export.original.sweep_version,
    })
    .to_string();
    tx.execute(
        "UPDATE sweeps SET imported_from = $2, cancelled = $3, started = TRUE, notified_at = $4,
                           created_at = $5
         WHERE id = $1",
        &[
            Value::Int(id),
            Value::Text(&from),
            Value::Flag(export.cancelled),
            Value::Time(now),
            // Submitted when it was there: its table's heading says so.
            Value::Time(export.original.created_at),
        ],
    )
    .await?;
    for (build, error) in &export.build_errors {
        tx.execute(
            "UPDATE builds SET build_error = $3 WHERE sweep_id = $1 AND name = $2",
            &[Value::Int(id), Value::Text(build), Value::Text(error)],
        )
        .await?;
    }
    Ok(())
}

/// The new sweep's ids an export's rows name: builds and suites by name, jobs by what they
/// cover, and a worker row per worker named.
struct Ids {
    sweep: i64,
    builds: HashMap<String, i64>,
    suites: HashMap<String, i64>,
    /// Each (kind, build, suite, depth, node limit)'s jobs as (first index, end, id), by
    /// first index: a row finds its job by a binary search, not a walk of every job (an
    /// export of a seed-scale sweep has 250,000 of each).
    jobs: HashMap<JobKey, Vec<(i32, i32, i64)>>,
    workers: HashMap<String, i64>,
}

/// What a job of the new sweep is found by: kind, build, suite, depth, node limit.
type JobKey = (String, i64, i64, i32, i64);

impl Ids {
    async fn read<B: Backend>(tx: &mut B::Tx, id: i64, export: &SweepExport) -> StoreResult<Ids> {
        let by = [Value::Int(id)];
        let mut builds = HashMap::new();
        for r in tx
            .rows("SELECT id, name FROM builds WHERE sweep_id = $1", &by)
            .await?
        {
            builds.insert(r.text("name")?, r.int("id")?);
        }
        let mut suites = HashMap::new();
        for r in tx
            .rows(
                "SELECT su.id, su.name FROM sweep_suites ss JOIN suites su ON su.id = ss.suite_id
                 WHERE ss.sweep_id = $1",
                &by,
            )
            .await?
        {
            suites.insert(r.text("name")?, r.int("id")?);
        }
        let mut jobs: HashMap<JobKey, Vec<(i32, i32, i64)>> = HashMap::new();
        for r in tx
            .rows(
                "SELECT id, kind, build_id, suite_id, first_index, count, depth, nodes_limit
                 FROM jobs WHERE sweep_id = $1",
                &by,
            )
            .await?
        {
            let int32 = |c: &str| -> StoreResult<i32> { Ok(r.int(c)? as i32) };
            let first = int32("first_index")?;
            let key = (
                r.text("kind")?,
                r.int("build_id")?,
                r.int("suite_id")?,
                int32("depth")?,
                r.int("nodes_limit")?,
            );
            let span = (first, first + int32("count")?, r.int("id")?);
            jobs.entry(key).or_default().push(span);
        }
        for spans in jobs.values_mut() {
            spans.sort_unstable();
        }
        let workers = import_workers::<B>(tx, export).await?;
        Ok(Ids {
            sweep: id,
            builds,
            suites,
            jobs,
            workers,
        })
    }

    fn build(&self, name: &str) -> StoreResult<i64> {
        self.builds.get(name).copied().ok_or_else(|| {
            invalid(format!(
                "rows name build `{name}`, which the spec does not plan"
            ))
        })
    }

    fn suite(&self, name: &str) -> StoreResult<i64> {
        self.suites.get(name).copied().ok_or_else(|| {
            invalid(format!(
                "rows name suite `{name}`, which the spec does not run"
            ))
        })
    }

    /// The job of `kind` covering position `index` of (build, suite) at the limit.
    fn job(
        &self,
        kind: &str,
        build: i64,
        suite: i64,
        index: i32,
        limit: (i32, i64),
    ) -> StoreResult<i64> {
        let key = (kind.to_string(), build, suite, limit.0, limit.1);
        self.jobs
            .get(&key)
            .and_then(|spans| {
                // The last job starting at or before `index`, if it reaches it.
                let i = spans.partition_point(|s| s.0 <= index);
                spans[..i].last().filter(|s| index < s.1).map(|s| s.2)
            })
            .ok_or_else(|| {
                invalid(format!(
                    "a {kind} row of position {index} no job of the spec covers"
                ))
            })
    }

    fn worker(&self, name: &str) -> StoreResult<i64> {
        self.workers
            .get(name)
            .copied()
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("no worker row for `{name}`")))
    }
}

fn invalid(what: String) -> StoreError {
    StoreError::Invalid(format!("the export's {what}"))
}

/// A worker row per worker the export names (its results', checks', records' and speed
/// runs'), registered long ago and never seen since: it is no live worker, and nothing waits
/// for it.
async fn import_workers<B: Backend>(
    tx: &mut B::Tx,
    export: &SweepExport,
) -> StoreResult<HashMap<String, i64>> {
    let names: std::collections::BTreeSet<&str> = export
        .results
        .iter()
        .chain(&export.cross_checks)
        .map(|r| r.worker.as_str())
        .chain(export.build_records.iter().map(|r| r.worker.as_str()))
        .chain(export.speed_runs.iter().map(|r| r.worker.as_str()))
        .collect();
    let long_ago = DateTime::<Utc>::UNIX_EPOCH;
    let mut out = HashMap::new();
    for name in names {
        let cols = ["name", "host", "cores", "registered_at", "last_seen_at"];
        let values = [
            Value::Text(name),
            Value::Text("imported"),
            Value::Int(0),
            Value::Time(long_ago),
            Value::Time(long_ago),
        ];
        let row = tx
            .row(&insert_sql("workers", &cols, "RETURNING id"), &values)
            .await?
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("no worker id returned")))?;
        out.insert(name.to_string(), row.int("id")?);
    }
    Ok(out)
}

/// One exported result into `results`, or a cross-check into `cross_checks`.
async fn insert_result<B: Backend>(
    tx: &mut B::Tx,
    ids: &Ids,
    r: &ExportedResult,
    table: &str,
    at: Option<DateTime<Utc>>,
) -> StoreResult<()> {
    let (build, suite) = (ids.build(&r.build)?, ids.suite(&r.suite)?);
    let kind = if table == "results" { "work" } else { "check" };
    let job = ids.job(kind, build, suite, r.index, (r.depth, r.nodes_limit))?;
    let mut cols = vec![
        "build_id",
        "suite_id",
        "position_index",
        "depth",
        "nodes_limit",
        "sweep_id",
        "job_id",
        "attempt",
        "worker_id",
        "position_id",
        "nodes",
        "bestmove",
        "reached_depth",
        "time_ms",
        "error",
    ];
    let mut values = vec![
        Value::Int(build),
        Value::Int(suite),
        Value::Int(r.index.into()),
        Value::Int(r.depth.into()),
        Value::Int(r.nodes_limit),
        Value::Int(ids.sweep),
        Value::Int(job),
        Value::Int(0),
        Value::Int(ids.worker(&r.worker)?),
        Value::Text(&r.position_id),
        Value::Int(r.nodes),
        Value::Text(&r.bestmove),
        Value::Int(r.reached_depth.into()),
        Value::Int(r.time_ms),
        Value::OptText(r.error.as_deref()),
    ];
    if table == "results" {
        cols.extend(["solved", "score_cp", "score_mate", "origin_sweep_id"]);
        values.extend([
            Value::Flag(r.solved),
            Value::OptInt(r.score_cp.map(i64::from)),
            Value::OptInt(r.score_mate.map(i64::from)),
            // A result the original took from an earlier sweep stays one taken, not measured.
            Value::OptInt(r.reused.then_some(ids.sweep)),
        ]);
        if let Some(counters) = &r.counters {
            cols.push("counters");
            values.push(Value::Json(counters));
        }
    } else {
        cols.push("mismatch");
        values.push(Value::Flag(r.mismatch));
    }
    stamp(&mut cols, &mut values, "created_at", at);
    tx.execute(&insert_sql(table, &cols, ""), &values).await?;
    Ok(())
}

/// One build record.
async fn insert_record<B: Backend>(
    tx: &mut B::Tx,
    ids: &Ids,
    r: &ExportedRecord,
    at: Option<DateTime<Utc>>,
) -> StoreResult<()> {
    let mut cols = vec![
        "build_id",
        "worker_id",
        "host",
        "cpu_model",
        "compiler",
        "argv",
        "binary_sha256",
        "bench_nodes",
        "bench_mismatch",
        "sandbox",
    ];
    let mut values = vec![
        Value::Int(ids.build(&r.build)?),
        Value::Int(ids.worker(&r.worker)?),
        Value::Text(&r.host),
        Value::Text(&r.cpu_model),
        Value::OptText(r.compiler.as_deref()),
        Value::Json(&r.argv),
        Value::Text(&r.binary_sha256),
        Value::OptInt(r.bench_nodes),
        Value::OptText(r.bench_mismatch.as_deref()),
        Value::OptText(r.sandbox.as_deref()),
    ];
    stamp(&mut cols, &mut values, "reported_at", at);
    tx.execute(&insert_sql("build_records", &cols, ""), &values)
        .await?;
    Ok(())
}

/// One pair (or the ending error) of a speed job.
async fn insert_speed_run<B: Backend>(
    tx: &mut B::Tx,
    ids: &Ids,
    s: &ExportedSpeedRun,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let build = ids.build(&s.build)?;
    let job = ids
        .jobs
        .iter()
        .find(|(key, _)| key.0 == "speed" && key.1 == build)
        .and_then(|(_, spans)| spans.first().map(|s| s.2))
        .ok_or_else(|| {
            invalid(format!(
                "speed runs of `{}`, which has no speed job",
                s.build
            ))
        })?;
    let row = SpeedRow {
        job_id: job,
        sweep_id: ids.sweep,
        build_id: build,
        worker_id: ids.worker(&s.worker)?,
        attempt: 0,
        pair: s.pair.into(),
        figures: s.figures.map_or([None; 6], |f| f.map(Some)),
        error: s.error.as_deref(),
    };
    super::speed::insert_run::<B>(tx, &row, now).await?;
    Ok(())
}
