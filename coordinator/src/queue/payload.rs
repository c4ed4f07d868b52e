//! What a worker receives for each job a claim dealt it: the build, the suite, the limit and
//! the positions still to measure.

use std::collections::{HashMap, HashSet};

use sweep_domain::wire::{JobLease, SpeedLease};

use super::checks::set_state;
use super::fence::{job_lease, LeasedJob};
use super::queued::jobs;
use super::statements as stmt;
use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::JobRow;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::{StoreError, StoreResult};

/// One job as a claim hands it out.
pub(crate) struct Leased {
    /// What the worker receives (its attempt is set once the lease row is written).
    pub lease: JobLease,
    /// The job's build (what build affinity remembers).
    pub build_id: i64,
}

/// The leases of the jobs `dealt` to each ask, in order, leaving out positions that already
/// have results (only a job handed out `again`, or one that took earlier sweeps' results at
/// its submission, can have any: those are looked up), and jobs with none left: those are
/// complete (a cross-check's state is set `done`). A job of a cancelled sweep or of a build
/// that failed is not handed out.
pub(super) async fn leases_of<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    dealt: &[Vec<i64>],
    again: &HashSet<i64>,
) -> StoreResult<Vec<Vec<Leased>>> {
    let all: Vec<i64> = dealt.iter().flatten().copied().collect();
    let mut out: Vec<Vec<Leased>> = dealt.iter().map(|_| Vec::new()).collect();
    if all.is_empty() {
        return Ok(out);
    }
    let rows = jobs(db, tx, &all).await?;
    let done = measured::<B>(tx, &all, &rows, again).await?;
    let mut emptied = Vec::new();
    for (ask, ids) in dealt.iter().enumerate() {
        for id in ids {
            let Some(job) = rows.get(id) else { continue };
            if job.cancelled || job.build_failed {
                continue;
            }
            let done = done.get(id).map(Vec::as_slice).unwrap_or_default();
            match lease_of(db, tx, job, done).await? {
                Some(lease) => out[ask].push(Leased {
                    lease,
                    build_id: job.build_id,
                }),
                None if job.check || job.speed => emptied.push(*id),
                // Every position has its result: the job is complete.
                None => {}
            }
        }
    }
    set_state::<B>(tx, &emptied, "done").await?;
    Ok(out)
}

/// The positions measured already of the jobs of `all` that can have any (handed out
/// `again`, cross-checks, or with results taken at submission), by job.
async fn measured<B: Backend>(
    tx: &mut B::Tx,
    all: &[i64],
    rows: &HashMap<i64, JobRow>,
    again: &HashSet<i64>,
) -> StoreResult<HashMap<i64, Vec<i32>>> {
    let measured_before = |id: &i64| {
        again.contains(id) || rows.get(id).is_some_and(|j| j.check || j.results_done > 0)
    };
    let (checks, work): (Vec<i64>, Vec<i64>) = all
        .iter()
        .copied()
        .filter(measured_before)
        .partition(|id| rows.get(id).is_some_and(|j| j.check));
    // A work job leaves out positions with a result; a cross-check those it measured (its
    // position always has a result: the original it checks).
    let mut done: HashMap<i64, Vec<i32>> = HashMap::new();
    for (ids, table) in [(&work, "results"), (&checks, "cross_checks")] {
        if ids.is_empty() {
            continue;
        }
        let sql = stmt::measured_positions::<B>(table);
        for r in tx.rows(&sql, &[Value::Ints(ids)]).await? {
            let index = i32::try_from(r.int("position_index")?).unwrap_or(i32::MAX);
            done.entry(r.int("job_id")?).or_default().push(index);
        }
    }
    Ok(done)
}

/// What the worker receives for `job` (its attempt not set yet), leaving out the positions
/// `done`; none when every position is done.
async fn lease_of<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    job: &JobRow,
    done: &[i32],
) -> StoreResult<Option<JobLease>> {
    let id = job.id;
    let statics = &db.memory().statics;
    let sweep = statics.sweep(tx, job.sweep_id).await?;
    let build = sweep
        .builds
        .get(&job.build_id)
        .cloned()
        .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("job {id}: unknown build")))?;
    let suite_name = sweep
        .suites
        .get(&job.suite_id)
        .cloned()
        .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("job {id}: unknown suite")))?;
    let suite = statics.suite(tx, job.suite_id).await?;
    let speed = match (&sweep.speed, job.speed) {
        (Some(s), true) => Some(SpeedLease {
            baseline: s.baseline.clone(),
            repeats: s.repeats,
        }),
        (None, true) => {
            return Err(StoreError::Internal(anyhow::anyhow!(
                "speed job {id} of a sweep without [speed]"
            )))
        }
        _ => None,
    };
    job_lease(LeasedJob {
        job,
        attempt: 0,
        build,
        suite_name,
        suite: &suite,
        done,
        speed,
    })
}
