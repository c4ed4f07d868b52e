//! The order jobs are leased in, which differs by backend. Postgres (distributed workers)
//! has build affinity (issue 14 item 2): a lease prefers queued jobs of builds the worker
//! already has, and workers new to a sweep start on different builds, so each compiles few
//! variants instead of every one. SQLite serves local runs, where one worker has every
//! build: it leases round-robin over the builds, a job of each in turn, which keeps them
//! level.

mod support;

use std::collections::BTreeSet;

use support::*;
use sweep_domain::spec::DEFAULT_BASELINE;
use sweep_domain::wire::JobLease;

/// The build names of `leases`.
fn builds(leases: &[JobLease]) -> BTreeSet<String> {
    leases.iter().map(|l| l.build.name.clone()).collect()
}

#[tokio::test]
async fn postgres_workers_keep_to_their_builds_and_start_on_different_ones() {
    let backend = Backend::postgres().await;
    let store = backend.store.as_ref();
    let queue = backend.db.queue.as_ref();
    // Four builds (baseline and three values) of five one-position chunks: 20 jobs, queued
    // round-robin over the builds.
    let (_, jobs) = create_sweep(store, "affinity", &[1, 2, 3], 1).await;
    assert_eq!(jobs, 20);
    let a = worker(store, "a").await;
    let b = worker(store, "b").await;

    let first_a = queue.lease_jobs(a, 3, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(first_a.len(), 3);
    assert_eq!(
        builds(&first_a).len(),
        1,
        "a new worker starts on one build: {first_a:?}"
    );
    let first_b = queue.lease_jobs(b, 3, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(first_b.len(), 3);
    assert_eq!(builds(&first_b).len(), 1, "{first_b:?}");
    assert_ne!(
        builds(&first_a),
        builds(&first_b),
        "the second worker starts on another build"
    );

    // Each comes back for its own build's last two jobs before anything else.
    let again_a = queue.lease_jobs(a, 2, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(builds(&again_a), builds(&first_a), "{again_a:?}");
    let again_b = queue.lease_jobs(b, 2, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(builds(&again_b), builds(&first_b), "{again_b:?}");

    // Their builds exhausted, they move on to the others; every job is leased exactly once.
    let mut seen: BTreeSet<i64> = first_a
        .iter()
        .chain(&first_b)
        .chain(&again_a)
        .chain(&again_b)
        .map(|l| l.job_id)
        .collect();
    assert_eq!(seen.len(), 10);
    for worker_id in [a, b] {
        let rest = queue
            .lease_jobs(worker_id, 5, LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
        assert_eq!(rest.len(), 5);
        assert_eq!(builds(&rest).len(), 1, "one fresh build each: {rest:?}");
        for lease in &rest {
            assert!(
                seen.insert(lease.job_id),
                "job {} leased twice",
                lease.job_id
            );
        }
    }
    assert_eq!(seen.len(), 20);
    assert!(queue
        .lease_jobs(a, 5, LONG, MAX_ATTEMPTS)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn sqlite_leases_round_robin_over_builds() {
    let backend = Backend::sqlite().await;
    let store = backend.store.as_ref();
    let queue = backend.db.queue.as_ref();
    create_sweep(store, "s", &[2, 4], 2).await;
    let (a, b) = (worker(store, "a").await, worker(store, "b").await);
    let first = queue.lease_jobs(a, 2, LONG, MAX_ATTEMPTS).await.unwrap();
    let order = |leases: &[JobLease]| -> Vec<(String, Vec<u32>)> {
        leases
            .iter()
            .map(|l| (l.build.name.clone(), indices(l)))
            .collect()
    };
    // The same chunk of the next build comes next.
    assert_eq!(
        order(&first),
        [
            (DEFAULT_BASELINE.to_string(), vec![0, 1]),
            ("NULLMOVE_R_BASE=2".to_string(), vec![0, 1]),
        ]
    );
    let rest = queue.lease_jobs(b, 100, LONG, MAX_ATTEMPTS).await.unwrap();
    let expected: Vec<(String, Vec<u32>)> = [
        ("NULLMOVE_R_BASE=4", vec![0, 1]),
        (DEFAULT_BASELINE, vec![2, 3]),
        ("NULLMOVE_R_BASE=2", vec![2, 3]),
        ("NULLMOVE_R_BASE=4", vec![2, 3]),
        (DEFAULT_BASELINE, vec![4]),
        ("NULLMOVE_R_BASE=2", vec![4]),
        ("NULLMOVE_R_BASE=4", vec![4]),
    ]
    .into_iter()
    .map(|(b, i)| (b.to_string(), i))
    .collect();
    assert_eq!(order(&rest), expected);
}

#[tokio::test]
async fn postgres_workers_with_binary_engines_keep_to_their_builds_too() {
    // A worker that reports a binary-only engine is served on its own (it may take that
    // engine's sweeps too), in queue order at first, then by its builds.
    let backend = Backend::postgres().await;
    let store = backend.store.as_ref();
    let queue = backend.db.queue.as_ref();
    create_sweep(store, "affinity", &[1, 2, 3], 1).await;
    let a = worker_with_engines(store, "a", &["fish"]).await;
    let b = worker_with_engines(store, "b", &["fish"]).await;
    let first_a = queue.lease_jobs(a, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    let first_b = queue.lease_jobs(b, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_ne!(
        builds(&first_a),
        builds(&first_b),
        "queue order: the next build"
    );
    for (worker_id, first) in [(a, &first_a), (b, &first_b)] {
        let again = queue
            .lease_jobs(worker_id, 4, LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
        assert_eq!(again.len(), 4, "{again:?}");
        assert_eq!(
            &builds(&again),
            &builds(first),
            "its own build's other four chunks"
        );
    }
}
