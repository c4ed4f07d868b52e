//! Reading a sweep out whole, for its export file (see [`crate::transfer`]).

use super::super::reads::origin_of;
use super::super::sql::{Columns, Reads, Value};
use super::super::{StoreError, StoreResult};
use crate::transfer::{ExportedRecord, ExportedResult, ExportedSpeedRun, Original, SweepExport};

/// Sweep `id` as an export, its snapshots and suites left for the caller to add (it decides
/// which snapshots the reader may have; the suites are the store's `sweep_suite`).
pub(crate) async fn export(db: &impl Reads, id: i64) -> StoreResult<SweepExport> {
    let by = [Value::Int(id)];
    let row = db
        .row(
            "SELECT spec, engine_def, source_sha256, source_kind, source_uploader, source_git_url,
                    source_git_rev, source_git_commit, created_at, cancelled
             FROM sweeps WHERE id = $1",
            &by,
        )
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("sweep {id}")))?;
    let mut build_errors = Vec::new();
    for b in db
        .rows(
            "SELECT name, build_error FROM builds
             WHERE sweep_id = $1 AND build_error IS NOT NULL ORDER BY ord",
            &by,
        )
        .await?
    {
        build_errors.push((b.text("name")?, b.text("build_error")?));
    }
    Ok(SweepExport {
        original: Original {
            sweep_id: id,
            created_at: row.time("created_at")?,
            exported_at: chrono::Utc::now(),
            sweep_version: env!("CARGO_PKG_VERSION").to_string(),
            snapshots_left_out: Vec::new(),
        },
        spec: row.json("spec")?,
        engine_def: row.json("engine_def")?,
        source_sha256: row.opt_text("source_sha256")?,
        origin: origin_of(&row)?,
        snapshots: Vec::new(),
        suites: Vec::new(),
        cancelled: row.flag("cancelled")?,
        build_errors,
        results: measured(db, id, "results").await?,
        cross_checks: measured(db, id, "cross_checks").await?,
        build_records: records(db, id).await?,
        speed_runs: speed_runs(db, id).await?,
    })
}

/// The snapshots sweep `id`'s builds build: its own source's and its variants'.
pub(crate) async fn snapshots_of(db: &impl Reads, id: i64) -> StoreResult<Vec<String>> {
    let rows = db
        .rows(
            "SELECT source_sha256 AS sha FROM sweeps WHERE id = $1 AND source_sha256 IS NOT NULL
             UNION SELECT source_sha256 AS sha FROM builds
             WHERE sweep_id = $1 AND source_sha256 IS NOT NULL",
            &[Value::Int(id)],
        )
        .await?;
    rows.iter().map(|r| r.text("sha")).collect()
}

/// Every row of `table` (`results` or `cross_checks`) of sweep `id`, in key order.
async fn measured(db: &impl Reads, id: i64, table: &str) -> StoreResult<Vec<ExportedResult>> {
    let results = table == "results";
    let extra = if results {
        "r.solved, r.score_cp, r.score_mate, CAST(r.counters AS TEXT) AS counters,
         r.origin_sweep_id IS NOT NULL AS reused, FALSE AS mismatch"
    } else {
        "FALSE AS solved, NULL AS score_cp, NULL AS score_mate, NULL AS counters,
         FALSE AS reused, r.mismatch"
    };
    let sql = format!(
        "SELECT b.name AS build, su.name AS suite, COALESCE(w.name, '') AS worker,
                r.position_index, r.depth, r.nodes_limit, r.position_id, r.nodes, r.bestmove,
                r.reached_depth, r.time_ms, r.error, {extra}
         FROM {table} r JOIN builds b ON b.id = r.build_id JOIN suites su ON su.id = r.suite_id
         LEFT JOIN workers w ON w.id = r.worker_id
         WHERE r.sweep_id = $1
         ORDER BY b.ord, su.name, r.depth, r.nodes_limit, r.position_index"
    );
    let mut out = Vec::new();
    for r in db.rows(&sql, &[Value::Int(id)]).await? {
        let counters = match r.opt_text("counters")? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                StoreError::Internal(anyhow::anyhow!("stored counters `{text}`: {e}"))
            })?),
            None => None,
        };
        let small = |c: &str| -> StoreResult<Option<i32>> { Ok(r.opt_int(c)?.map(|v| v as i32)) };
        out.push(ExportedResult {
            build: r.text("build")?,
            suite: r.text("suite")?,
            worker: r.text("worker")?,
            index: r.int("position_index")? as i32,
            depth: r.int("depth")? as i32,
            nodes_limit: r.int("nodes_limit")?,
            position_id: r.text("position_id")?,
            nodes: r.int("nodes")?,
            bestmove: r.text("bestmove")?,
            solved: r.flag("solved")?,
            score_cp: small("score_cp")?,
            score_mate: small("score_mate")?,
            reached_depth: r.int("reached_depth")? as i32,
            time_ms: r.int("time_ms")?,
            error: r.opt_text("error")?,
            counters,
            reused: r.flag("reused")?,
            mismatch: r.flag("mismatch")?,
        });
    }
    Ok(out)
}

/// Sweep `id`'s build records.
async fn records(db: &impl Reads, id: i64) -> StoreResult<Vec<ExportedRecord>> {
    let rows = db
        .rows(
            "SELECT b.name AS build, COALESCE(w.name, '') AS worker, r.host, r.cpu_model,
                    r.compiler, CAST(r.argv AS TEXT) AS argv, r.binary_sha256, r.bench_nodes,
                    r.bench_mismatch, r.sandbox
             FROM build_records r JOIN builds b ON b.id = r.build_id
             LEFT JOIN workers w ON w.id = r.worker_id
             WHERE b.sweep_id = $1 ORDER BY b.ord, r.worker_id",
            &[Value::Int(id)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let argv = r.text("argv")?;
            Ok(ExportedRecord {
                build: r.text("build")?,
                worker: r.text("worker")?,
                host: r.text("host")?,
                cpu_model: r.text("cpu_model")?,
                compiler: r.opt_text("compiler")?,
                argv: serde_json::from_str(&argv).map_err(|e| {
                    StoreError::Internal(anyhow::anyhow!("stored argv `{argv}`: {e}"))
                })?,
                binary_sha256: r.text("binary_sha256")?,
                bench_nodes: r.opt_int("bench_nodes")?,
                bench_mismatch: r.opt_text("bench_mismatch")?,
                sandbox: r.opt_text("sandbox")?,
            })
        })
        .collect()
}

/// Sweep `id`'s speed runs.
async fn speed_runs(db: &impl Reads, id: i64) -> StoreResult<Vec<ExportedSpeedRun>> {
    let rows = db
        .rows(
            "SELECT b.name AS build, COALESCE(w.name, '') AS worker, s.pair, s.base_cpu_us,
                    s.base_wall_us, s.base_nodes, s.test_cpu_us, s.test_wall_us, s.test_nodes,
                    s.error
             FROM speed_runs s JOIN builds b ON b.id = s.build_id
             LEFT JOIN workers w ON w.id = s.worker_id
             WHERE s.sweep_id = $1 ORDER BY b.ord, s.pair",
            &[Value::Int(id)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let cols = [
                "base_cpu_us",
                "base_wall_us",
                "base_nodes",
                "test_cpu_us",
                "test_wall_us",
                "test_nodes",
            ];
            let mut figures = [0i64; 6];
            let mut all = true;
            for (f, c) in figures.iter_mut().zip(cols) {
                match r.opt_int(c)? {
                    Some(v) => *f = v,
                    None => all = false,
                }
            }
            Ok(ExportedSpeedRun {
                build: r.text("build")?,
                worker: r.text("worker")?,
                pair: r.int("pair")? as i32,
                figures: all.then_some(figures),
                error: r.opt_text("error")?,
            })
        })
        .collect()
}
