//! Reading a sweep's speed runs (`speed_runs`, written by the worker queue's `speed.rs`).

use std::collections::BTreeMap;

use sweep_domain::wire::{SpeedRun, SpeedSide};

use super::sql::{Columns, Reads, Value};
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
