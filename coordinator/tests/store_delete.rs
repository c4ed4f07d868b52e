//! Deleting a sweep on both store backends (issue 50, item 3): everything of it goes in one
//! transaction, another sweep's rows and sums stay as they were; a worker still holding a
//! lease of the deleted sweep is told it lost it (its upload stores nothing and fails
//! nothing), and the queue goes on with the other sweep.

#[macro_use]
mod support;

use support::*;
use sweep_domain::wire::LeaseStatus;

on_both_backends!(a_deleted_sweep_takes_only_its_own_rows_and_its_leases_are_lost,);

async fn a_deleted_sweep_takes_only_its_own_rows_and_its_leases_are_lost(
    Database { store, queue }: Database,
) {
    let (keep, _) = create_sweep(&*store, "keep", &[2], 5).await;
    let a = worker(&*store, "a").await;
    for l in &lease(&*queue, a, 100, LONG).await {
        finish(&*queue, a, l).await;
    }
    let kept = summary(&*store, keep).await;
    let kept_sums = store.table_sums(keep).await.unwrap();
    let (gone, _) = create_sweep(&*store, "gone", &[3], 5).await;
    // Its baseline took the first sweep's results; its variant's job is held.
    let held = lease(&*queue, a, 1, LONG).await.remove(0);
    assert_eq!(held.sweep_id, gone);
    assert_eq!(store.results(gone).await.unwrap().len(), 5);

    // Running, with a lease held: cancelled first (as the service does), then deleted.
    store.cancel_sweep(gone).await.unwrap();
    assert!(store
        .delete_sweep(gone)
        .await
        .unwrap()
        .is_some_and(|n| n >= 5));
    assert!(store.sweep(gone).await.is_err(), "no such sweep now");
    assert_eq!(store.delete_sweep(gone).await.unwrap(), None);
    // The holder's upload is a lost lease, stored nowhere.
    let outcome = queue
        .report_many(
            a,
            [job_report(&held, good_results(&held), true)].into(),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!(outcome[0].status, LeaseStatus::Lost);
    // The other sweep is as it was, and the queue serves the next sweep.
    assert_eq!(summary(&*store, keep).await, kept);
    assert_eq!(store.table_sums(keep).await.unwrap(), kept_sums);
    let (next, _) = create_sweep(&*store, "next", &[4], 5).await;
    let l = lease_one(&*queue, a, LONG).await;
    assert_eq!(l.sweep_id, next);
}
