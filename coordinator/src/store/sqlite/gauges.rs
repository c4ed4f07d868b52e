//! What a `/metrics` scrape reads: jobs by state, live workers, pool occupancy.

use std::time::Duration;

use super::{expiry, Db, SqliteStore};
use crate::store::{PoolGauge, StoreGauges, StoreResult};

/// See [`crate::store::BackendCalls::gauges`]. Reads on the read pool: in WAL mode they never wait
/// for the writer. Jobs by state scan the covering index `jobs_sweep`; live workers search
/// `workers_last_seen`.
pub(super) async fn gauges(
    store: &SqliteStore,
    alive_within: Duration,
) -> StoreResult<StoreGauges> {
    // Before the queries, so the scrape's own connection is not counted as in use.
    let mut pools = vec![PoolGauge::of("writer", &store.writer)];
    if !store.reader_is_writer() {
        pools.push(PoolGauge::of("reader", &store.reader));
    }
    let jobs_by_state = sqlx::query_as::<_, (String, i64)>(
        "SELECT state, count(*) FROM jobs GROUP BY state ORDER BY state",
    )
    .fetch_all(&store.reader)
    .await
    .db()?;
    // "Seen within the window": the same arithmetic the lease path uses.
    let since = store.clock.now_ms().saturating_sub(expiry(0, alive_within));
    let workers_alive = sqlx::query_scalar("SELECT count(*) FROM workers WHERE last_seen_at > ?1")
        .bind(since)
        .fetch_one(&store.reader)
        .await
        .db()?;
    // Over the partial index `cross_checks_mismatch`: only mismatches are read.
    let cross_check_mismatches =
        sqlx::query_scalar("SELECT count(*) FROM cross_checks WHERE mismatch")
            .fetch_one(&store.reader)
            .await
            .db()?;
    Ok(StoreGauges {
        jobs_by_state,
        workers_alive,
        cross_check_mismatches,
        pools,
    })
}
