//! What a `/metrics` scrape reads from the store, written once for both backends: jobs by
//! state, live workers, cross-check mismatches (each backend adds its pools' occupancy).

use std::time::Duration;

use super::backend::Backend;
use super::clock::before;
use super::sql::{Columns, Reads, Value};
use super::workers::live;
use super::{StoreGauges, StoreResult};

/// Jobs waiting to be handed out and jobs held, without counting the queue job by job: the
/// cursors keep how many jobs each build has left, jobs to hand out again and open
/// cross-checks are few, and the held jobs are a walk of the live leases (a cancelled
/// sweep's or a failed build's are no longer held). Jobs done, failed or cancelled are not
/// counted here: a sweep's progress and state show them.
fn jobs_by_state_sql<B: Backend>() -> String {
    format!(
        "SELECT 'queued' AS state,
                COALESCE((SELECT CAST(sum(remaining) AS BIGINT) FROM build_queue), 0)
                + (SELECT count(*) FROM requeued)
                + (SELECT count(*) FROM jobs WHERE kind = 'check' AND state = 'queued') AS n
         UNION ALL
         SELECT 'leased' AS state,
                (SELECT count(*) FROM leases l{}
                 JOIN jobs j ON j.id = u.value JOIN sweeps s ON s.id = j.sweep_id
                 JOIN builds b ON b.id = j.build_id
                 WHERE ((l.closed >> u.key) & 1) = 0 AND NOT s.cancelled
                   AND b.build_error IS NULL) AS n",
        B::lease_jobs("l")
    )
}

/// See [`super::Store::gauges`]. On the read pool, which never waits for the writer.
pub(crate) async fn gauges<B: Backend>(db: &B, alive_within: Duration) -> StoreResult<StoreGauges> {
    // Before the queries, so the scrape's own connection is not counted as in use.
    let pools = db.pools();
    let reader = db.reader();
    let mut jobs_by_state = Vec::new();
    for r in reader.rows(&jobs_by_state_sql::<B>(), &[]).await? {
        let n = r.int("n")?;
        if n > 0 {
            jobs_by_state.push((r.text("state")?, n));
        }
    }
    let since = before(db.clock().now(), alive_within);
    let workers_alive = reader
        .row(
            &format!(
                "SELECT count(*) AS n FROM workers w WHERE {}",
                live("w", "$1")
            ),
            &[Value::Time(since)],
        )
        .await?
        .map_or(Ok(0), |r| r.int("n"))?;
    // Over the partial index `cross_checks_mismatch`: only mismatches are read.
    let cross_check_mismatches = reader
        .row("SELECT count(*) AS n FROM cross_checks WHERE mismatch", &[])
        .await?
        .map_or(Ok(0), |r| r.int("n"))?;
    Ok(StoreGauges {
        jobs_by_state,
        workers_alive,
        cross_check_mismatches,
        pools,
    })
}
