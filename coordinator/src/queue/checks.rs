//! Leasing cross-checks (see [`sweep_domain::crosscheck`]): a check is taken only once its
//! original result exists, and not by a worker of the token that measured the original (one
//! token may register many workers) unless no live worker of another token could take it,
//! nor by the original's own worker unless no other live worker could at all. The original's
//! worker is kept on the check with `original_stored`. A check whose original is an error is
//! closed instead: there is
//! nothing to compare, and the sweep must not wait for it. Checks keep their state in `jobs`
//! (`queued`, `leased`, `done`): they are a few per cent of the jobs. A submit queues them all
//! at once, so whether a check's original is stored is kept on the check too
//! (`original_stored`, set in the transaction that stores the original): the pick walks only
//! those, never the checks of work not done yet, and never all of `results`.

use chrono::{DateTime, Utc};

use super::statements as stmt;
use super::Queue;
use crate::store::backend::Backend;
use crate::store::job::JobRow;
use crate::store::sql::{Columns, Tx, Value};
use crate::store::StoreResult;

/// Takes up to `max` open cross-checks whose original is stored (index `jobs_check_ready`, id
/// order) worker `worker` may take now, workers seen after `live_since` counting as live:
/// marks them `leased` and returns them in id order; closes those picked whose original is an
/// error; of `sweep` only when given. Run only for room the work picks left (of `sweep`'s
/// work, or of all); the checks it walks past are those this worker may not take (originals of
/// its token, engines it lacks, builds it failed).
pub(super) async fn pick<B: Backend>(
    tx: &mut B::Tx,
    worker: i64,
    max: u32,
    live_since: DateTime<Utc>,
    sweep: Option<i64>,
) -> StoreResult<Vec<i64>> {
    let sql = stmt::pick_checks::<B>(sweep.is_some());
    let mut params = vec![
        Value::Int(worker),
        Value::Int(i64::from(max)),
        Value::Time(live_since),
    ];
    params.extend(sweep.map(Value::Int));
    let picked = tx.rows(&sql, &params).await?;
    let mut taken = Vec::new();
    for r in &picked {
        if r.text("state")? == "leased" {
            taken.push(r.int("id")?);
        }
    }
    taken.sort_unstable();
    Ok(taken)
}

/// Marks takeable the cross-checks of the positions of the work jobs `work` whose original
/// result is stored now; run in the transaction that stored results of those jobs. Only the
/// jobs a check of their sweep re-measures are looked up (the sweep's checks are kept in
/// memory: see [`SweepStatic`](super::cache::SweepStatic)): with the default share of
/// checks, a few in a hundred. Looking up every job stored was 7 % of Postgres' statement
/// time in a load run of 100 workers, a third of that since (`bench/RESULTS.md`, session 22).
pub(crate) async fn originals_stored<B: Backend>(
    db: &Queue<B>,
    tx: &mut B::Tx,
    work: &[&JobRow],
) -> StoreResult<()> {
    let statics = &db.memory().statics;
    let mut covering = Vec::new();
    for job in work {
        if statics.sweep(tx, job.sweep_id).await?.checks_any_of(job) {
            covering.push(job.id);
        }
    }
    if covering.is_empty() {
        return Ok(());
    }
    let sql = stmt::mark_originals_stored::<B>();
    tx.execute(&sql, &[Value::Ints(&covering)]).await?;
    Ok(())
}

/// Sets the state of the cross-checks `jobs`.
pub(crate) async fn set_state<B: Backend>(
    tx: &mut B::Tx,
    jobs: &[i64],
    state: &str,
) -> StoreResult<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let sql = stmt::set_check_state::<B>();
    tx.execute(&sql, &[Value::Ints(jobs), Value::Text(state)])
        .await?;
    Ok(())
}
