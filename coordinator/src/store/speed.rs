//! Reading a sweep's speed runs (`speed_runs`, written by the worker queue's `speed.rs`).

use std::collections::BTreeMap;

use sweep_domain::wire::{SpeedRun, SpeedSide};

use super::backend::Backend;
use super::sql::{stamp, Columns, Reads, Tx, Value};
use super::{StoreError, StoreResult};

/// What the speed job of one build measured: its pairs in order, and why it ended short.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildSpeed {
    /// The pairs of runs (baseline, then the build).
    pub runs: Vec<SpeedRun>,
    /// The worker's reason, when the job ended short.
    pub error: Option<String>,
}

/// Sweep `id`'s speed runs by build name; builds whose speed job has not ended are left out
/// (a job's runs are stored together, by the upload that ends it).
pub(crate) async fn speed_runs(
    db: &impl Reads,
    id: i64,
) -> StoreResult<BTreeMap<String, BuildSpeed>> {
    let rows = db
        .rows(
            "SELECT b.name AS build, r.pair, r.base_cpu_us, r.base_wall_us, r.base_nodes,
                    r.test_cpu_us, r.test_wall_us, r.test_nodes, r.error
             FROM speed_runs r JOIN builds b ON b.id = r.build_id
             WHERE r.sweep_id = $1 ORDER BY b.ord, r.pair",
            &[Value::Int(id)],
        )
        .await?;
    let mut out: BTreeMap<String, BuildSpeed> = BTreeMap::new();
    for r in &rows {
        let speed = out.entry(r.text("build")?).or_default();
        if let Some(error) = r.opt_text("error")? {
            speed.error = Some(error);
            continue;
        }
        let side = |p: &str| -> StoreResult<SpeedSide> {
            // A pair without an error has every figure (checked when it was stored).
            let figure = |f: &str| -> StoreResult<u64> {
                let col = format!("{p}_{f}");
                r.opt_int(&col)?
                    .and_then(|v| u64::try_from(v).ok())
                    .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("speed run without {col}")))
            };
            Ok(SpeedSide {
                cpu_us: figure("cpu_us")?,
                wall_us: figure("wall_us")?,
                nodes: figure("nodes")?,
            })
        };
        speed.runs.push(SpeedRun {
            repeat: u32::try_from(r.int("pair")?).unwrap_or(u32::MAX),
            base: side("base")?,
            test: side("test")?,
        });
    }
    Ok(out)
}

/// One row of `speed_runs`: a pair of a speed job, or (no figures) the error that ended it.
pub(crate) struct SpeedRow<'a> {
    pub job_id: i64,
    pub sweep_id: i64,
    pub build_id: i64,
    pub worker_id: i64,
    pub attempt: i64,
    pub pair: i64,
    /// Base CPU, wall, nodes, then the variant's CPU, wall, nodes.
    pub figures: [Option<i64>; 6],
    pub error: Option<&'a str>,
}

/// Inserts `row` (written at `now`) unless its (job, pair) is stored; returns the rows
/// inserted. The one writer of `speed_runs`: uploads and imports alike.
pub(crate) async fn insert_run<B: Backend>(
    tx: &mut B::Tx,
    row: &SpeedRow<'_>,
    now: chrono::DateTime<chrono::Utc>,
) -> StoreResult<u32> {
    let mut cols = vec![
        "job_id",
        "pair",
        "sweep_id",
        "build_id",
        "worker_id",
        "attempt",
        "base_cpu_us",
        "base_wall_us",
        "base_nodes",
        "test_cpu_us",
        "test_wall_us",
        "test_nodes",
        "error",
    ];
    let mut values = vec![
        Value::Int(row.job_id),
        Value::Int(row.pair),
        Value::Int(row.sweep_id),
        Value::Int(row.build_id),
        Value::Int(row.worker_id),
        Value::Int(row.attempt),
    ];
    values.extend(row.figures.iter().map(|f| Value::OptInt(*f)));
    values.push(Value::OptText(row.error));
    stamp(&mut cols, &mut values, "created_at", B::written_at(now));
    let marks: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO speed_runs ({}) VALUES ({}) ON CONFLICT (job_id, pair) DO NOTHING",
        cols.join(", "),
        marks.join(", ")
    );
    Ok(tx.execute(&sql, &values).await? as u32)
}
