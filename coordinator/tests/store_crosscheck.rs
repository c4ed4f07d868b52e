//! Cross-checks on both store backends (issue 10 item 4): check jobs are planned after the
//! work, leased only once their original result exists and not to the worker that measured
//! it while another could take them, stored apart from `results`, and read back as
//! mismatches per sweep, build and worker.

#[macro_use]
mod support;

use std::time::Duration;

use support::*;
use sweep_coordinator::store::{Store, StoreError};
use sweep_domain::crosscheck::Share;
use sweep_domain::wire::{BuildFailure, JobLease, SweepState};

on_both_backends!(
    checks_are_planned_after_the_work,
    checks_wait_for_originals_and_go_to_another_worker,
    a_lone_worker_checks_its_own_results,
    a_worker_that_stopped_is_not_waited_for,
    checks_of_failed_originals_are_closed,
    check_reports_are_idempotent_and_fenced,
    cancel_and_build_failure_close_checks,
);

/// A sweep of one variant over the five-position suite, one job per build, checking `share`
/// of the positions (at least one). Returns (sweep id, jobs).
async fn checked_sweep(store: &dyn Store, share: f64) -> (i64, u64) {
    let spec = sweep_domain::spec::SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        cross_check: Share(share),
        cross_check_min: 1,
        ..spec("checked", &[2], 5)
    };
    create_sweep_of(store, spec, &suite()).await
}

/// Leases everything the worker may take now.
async fn lease_all(queue: &dyn WorkerQueue, worker: i64) -> Vec<JobLease> {
    queue
        .lease_jobs(worker, 100, LONG, MAX_ATTEMPTS)
        .await
        .unwrap()
}

async fn checks_are_planned_after_the_work(Database { store, .. }: Database) {
    // 40 % of 5 positions = 2 per build: 2 work jobs and 4 checks.
    let (id, jobs) = checked_sweep(&*store, 0.4).await;
    assert_eq!(jobs, 2 + 4);
    let checks = store.cross_checks(id, 10).await.unwrap();
    assert_eq!((checks.planned, checks.done, checks.mismatches), (4, 0, 0));
    // Checks are not positions of the sweep: its progress counts work only.
    let s = summary(&*store, id).await;
    assert_eq!((s.positions_done, s.positions_total), (0, 10));
    // With the share at 0, none.
    let (off, jobs) = create_sweep(&*store, "off", &[2], 5).await;
    assert_eq!(jobs, 2);
    assert_eq!(store.cross_checks(off, 10).await.unwrap().planned, 0);
}

async fn checks_wait_for_originals_and_go_to_another_worker(Database { store, queue }: Database) {
    let (id, _) = checked_sweep(&*store, 0.4).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    // No original exists yet: only the work is leased.
    let work = lease_all(&*queue, a).await;
    assert_eq!(work.len(), 2);
    assert!(work.iter().all(|l| !l.cross_check));
    assert!(lease_all(&*queue, b).await.is_empty());
    for l in &work {
        finish(&*queue, a, l).await;
    }
    // The work is done, the checks are not: the sweep still runs.
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    // `a` measured every original and `b` is live: `a` gets none of them, `b` all.
    assert!(lease_all(&*queue, a).await.is_empty());
    let checks = lease_all(&*queue, b).await;
    assert_eq!(checks.len(), 4);
    assert!(checks
        .iter()
        .all(|l| l.cross_check && l.positions.len() == 1));
    // The first check disagrees by a node; the others agree.
    for (n, l) in checks.iter().enumerate() {
        let mut results = good_results(l);
        if n == 0 {
            results[0].nodes += 1;
        }
        let ack = queue
            .report(l.job_id, &batch(b, l, results, true), LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
        assert_eq!(ack.accepted, 1);
    }
    let s = summary(&*store, id).await;
    assert_eq!(s.state, SweepState::Done);
    // Checks never touch `results`: the table's numbers are the originals'.
    let results = store.results(id).await.unwrap();
    assert_eq!(results.len(), 10);
    assert!(results.iter().all(|r| r.nodes == 1000 + u64::from(r.index)));
    assert_eq!(s.positions_done, 10);
    let found = store.cross_checks(id, 10).await.unwrap();
    assert_eq!(
        (found.planned, found.done, found.mismatches, found.errors),
        (4, 4, 1, 0)
    );
    let m = &found.positions[0];
    assert_eq!(m.build, checks[0].build.name);
    assert_eq!(m.index, checks[0].positions[0].index);
    assert_eq!((m.original.worker_id, m.check.worker_id), (a, b));
    assert_eq!(
        (m.original.worker.as_str(), m.check.worker.as_str()),
        ("a", "b")
    );
    assert_eq!(m.check.nodes, m.original.nodes + 1);
    assert_eq!(m.original.bestmove, m.check.bestmove);
    let per_build: u64 = found.builds.iter().map(|c| c.mismatches).sum();
    assert_eq!(per_build, 1);
    assert_eq!(found.builds.iter().map(|c| c.done).sum::<u64>(), 4);
    // Both workers took part in all four checks, one of which mismatched.
    let by_worker = store.worker_checks(&[a, b]).await.unwrap();
    assert_eq!(by_worker.get(&a), Some(&(4, 1)));
    assert_eq!(by_worker.get(&b), Some(&(4, 1)));
    // Listing nothing still counts everything.
    let counted = store.cross_checks(id, 0).await.unwrap();
    assert!(counted.positions.is_empty());
    assert_eq!(counted.mismatches, 1);
}

async fn a_lone_worker_checks_its_own_results(Database { store, queue }: Database) {
    let (id, _) = checked_sweep(&*store, 0.4).await;
    let a = worker(&*store, "a").await;
    // A second worker that was seen once, longer than a lease ago: not live.
    let gone = worker(&*store, "gone").await;
    let lease_short = Duration::from_secs(60);
    store.clock().advance(lease_short * 2);
    let work = queue
        .lease_jobs(a, 100, lease_short, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(work.len(), 2);
    for l in &work {
        finish(&*queue, a, l).await;
    }
    // `a` is the only live worker: it checks its own results (in a fresh process).
    let checks = queue
        .lease_jobs(a, 100, lease_short, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(checks.len(), 4);
    assert!(checks.iter().all(|l| l.cross_check));
    for l in &checks {
        finish(&*queue, a, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    let found = store.cross_checks(id, 10).await.unwrap();
    assert_eq!((found.done, found.mismatches), (4, 0));
    let by_worker = store.worker_checks(&[a, gone]).await.unwrap();
    // Measured and checked by `a`: each check counts once for it.
    assert_eq!(by_worker.get(&a), Some(&(4, 0)));
    assert_eq!(by_worker.get(&gone), None);
}

async fn a_worker_that_stopped_is_not_waited_for(Database { store, queue }: Database) {
    let (id, _) = checked_sweep(&*store, 0.4).await;
    let a = worker(&*store, "a").await;
    // Seen just now, so live by the clock: only its word that it stopped says otherwise.
    let gone = worker(&*store, "gone").await;
    let listed = |ws: Vec<sweep_domain::wire::WorkerInfo>| -> Vec<i64> {
        ws.into_iter().map(|w| w.id).collect()
    };
    let work = lease_all(&*queue, a).await;
    assert_eq!(work.len(), 2);
    for l in &work {
        finish(&*queue, a, l).await;
    }
    // `gone` could take the checks of `a`'s results, so `a` is not given them.
    assert!(lease_all(&*queue, a).await.is_empty());
    // It stops holding nothing: a release naming no lease.
    assert!(queue.release_leases(gone, &[]).await.unwrap().is_empty());
    assert_eq!(
        listed(store.workers(LONG, 10).await.unwrap()),
        [a],
        "a stopped worker is not listed"
    );
    assert_eq!(store.gauges(LONG).await.unwrap().workers_alive, 1);
    // `a` is now the only live worker, at the same instant: it checks its own results.
    let checks = lease_all(&*queue, a).await;
    assert_eq!(checks.len(), 4);
    for l in &checks {
        finish(&*queue, a, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    // A worker that calls again after stopping counts as live again.
    queue.heartbeat_many(gone, &[], LONG).await.unwrap();
    let mut both = listed(store.workers(LONG, 10).await.unwrap());
    both.sort_unstable();
    assert_eq!(both, [a, gone]);
}

async fn checks_of_failed_originals_are_closed(Database { store, queue }: Database) {
    // Every position checked.
    let (id, jobs) = checked_sweep(&*store, 1.0).await;
    assert_eq!(jobs, 2 + 10);
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let work = lease_all(&*queue, a).await;
    assert_eq!(work.len(), 2);
    // Position 0 of the baseline fails for good (one attempt allowed).
    let mut results = good_results(&work[0]);
    results[0] = failed(0, "engine crashed");
    queue
        .report(work[0].job_id, &batch(a, &work[0], results, true), LONG, 1)
        .await
        .unwrap();
    finish(&*queue, a, &work[1]).await;
    // Its check has nothing to compare: closed, never leased.
    let checks = lease_all(&*queue, b).await;
    assert_eq!(checks.len(), 9);
    assert!(!checks
        .iter()
        .any(|l| l.build.name == work[0].build.name && l.positions[0].index == 0));
    // A failed check is recorded, never a mismatch.
    for (n, l) in checks.iter().enumerate() {
        let results = if n == 0 {
            vec![failed(l.positions[0].index, "check crashed")]
        } else {
            good_results(l)
        };
        queue
            .report(l.job_id, &batch(b, l, results, true), LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
    }
    let s = summary(&*store, id).await;
    assert!(s.state.is_final(), "{:?}", s.state);
    let found = store.cross_checks(id, 10).await.unwrap();
    assert_eq!(
        (found.planned, found.done, found.errors, found.mismatches),
        (10, 9, 1, 0)
    );
    // The failed check added no error to the sweep's own results.
    let errors: usize = store
        .results(id)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.error.is_some())
        .count();
    assert_eq!(errors, 1);
}

async fn check_reports_are_idempotent_and_fenced(Database { store, queue }: Database) {
    let (id, _) = checked_sweep(&*store, 0.2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    for l in &lease_all(&*queue, a).await {
        finish(&*queue, a, l).await;
    }
    let checks = lease_all(&*queue, b).await;
    assert_eq!(checks.len(), 2);
    let l = &checks[0];
    // Sent before the worker finished: stored, the job stays leased.
    let first = queue
        .report(
            l.job_id,
            &batch(b, l, good_results(l), false),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!((first.accepted, first.duplicates), (1, 0));
    // Re-sent with `finished`: nothing stored twice, the job closes.
    let again = queue
        .report(
            l.job_id,
            &batch(b, l, good_results(l), true),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!((again.accepted, again.duplicates), (0, 1));
    // Another worker (or an older attempt) cannot report on a check it does not hold.
    let err = queue
        .report(
            checks[1].job_id,
            &batch(a, &checks[1], good_results(&checks[1]), true),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    let found = store.cross_checks(id, 10).await.unwrap();
    assert_eq!(found.done, 1);
}

async fn cancel_and_build_failure_close_checks(Database { store, queue }: Database) {
    // A build that fails on the only live worker closes its checks too.
    let (id, _) = checked_sweep(&*store, 0.4).await;
    let a = worker(&*store, "a").await;
    let work = lease_all(&*queue, a).await;
    let variant = work
        .iter()
        .find(|l| l.build.name != "head_reference")
        .unwrap();
    queue
        .build_failed(
            variant.job_id,
            &BuildFailure {
                worker_id: a,
                attempt: variant.attempt,
                output: "cc: error".into(),
            },
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    let base = work
        .iter()
        .find(|l| l.build.name == "head_reference")
        .unwrap();
    finish(&*queue, a, base).await;
    let checks = lease_all(&*queue, a).await;
    assert_eq!(checks.len(), 2, "only the baseline's checks are left");
    assert!(checks.iter().all(|l| l.build.name == "head_reference"));
    for l in &checks {
        finish(&*queue, a, l).await;
    }
    assert!(summary(&*store, id).await.state.is_final());

    // Cancelling closes the checks with the work: nothing is left to lease.
    let (id, _) = checked_sweep(&*store, 0.4).await;
    let b = worker(&*store, "b").await;
    for l in &lease_all(&*queue, b).await {
        finish(&*queue, b, l).await;
    }
    store.cancel_sweep(id).await.unwrap();
    assert!(lease_all(&*queue, a).await.is_empty());
    assert_eq!(summary(&*store, id).await.state, SweepState::Cancelled);
}
