//! What a `/metrics` scrape reads from the store, on both backends: jobs by state, workers
//! seen within a window, and the pools' occupancy.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use support::*;
use sweep_coordinator::store::StoreGauges;

on_both_backends!(gauges_follow_jobs_and_workers);

fn by_state(g: &StoreGauges) -> BTreeMap<&str, i64> {
    g.jobs_by_state
        .iter()
        .map(|(s, n)| (s.as_str(), *n))
        .collect()
}

async fn gauges_follow_jobs_and_workers(Database { store, queue }: Database) {
    let empty = store.gauges(LONG).await.unwrap();
    assert!(empty.jobs_by_state.is_empty(), "{empty:?}");
    assert_eq!(empty.workers_alive, 0);
    assert!(!empty.pools.is_empty());
    for p in &empty.pools {
        assert!(p.idle <= p.size && p.size <= p.max && p.max >= 1, "{p:?}");
    }

    let (id, jobs) = create_sweep(&*store, "s", &[2, 4], 2).await;
    let a = worker(&*store, "a").await;
    let leased = queue.lease_jobs(a, 2, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(leased.len(), 2);
    let g = store.gauges(LONG).await.unwrap();
    assert_eq!(
        by_state(&g),
        BTreeMap::from([("leased", 2), ("queued", jobs as i64 - 2)])
    );
    assert_eq!(g.workers_alive, 1);
    // Seen, but not within the last ten seconds (a minute later): not alive by that window.
    store.clock().advance(Duration::from_secs(60));
    let g = store.gauges(Duration::from_secs(10)).await.unwrap();
    assert_eq!(g.workers_alive, 0);

    // Cancelled: nothing waits and nothing is held (closed jobs are not gauged by state:
    // the sweep's progress and state show them).
    store.cancel_sweep(id).await.unwrap();
    let g = store.gauges(LONG).await.unwrap();
    assert!(by_state(&g).is_empty(), "{g:?}");
}
