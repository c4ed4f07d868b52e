//! Rules one worker token cannot get round by registering many workers (issue 46), on both
//! store backends: a token holds at most its cap of live workers; a cross-check goes to a
//! worker of another token than the original's while one is live; a build fails for good
//! only once enough distinct tokens failed it; and a snapshot is readable only by the tokens
//! that uploaded it, submitted a sweep on it, or hold a lease of such a sweep's job.

#[macro_use]
mod support;

use std::time::Duration;

use support::*;
use sweep_coordinator::store::{Owner, Store, StoreError, WorkerCap};
use sweep_domain::crosscheck::Share;
use sweep_domain::wire::{BuildFailure, HeldLease, JobLease, SweepState};

on_both_backends!(
    a_token_holds_at_most_its_cap_of_live_workers,
    concurrent_registrations_never_pass_the_cap,
    workers_of_one_token_do_not_check_each_other_while_another_token_is_live,
    workers_of_one_token_check_each_other_when_no_other_token_is_live,
    failures_of_one_token_do_not_fail_a_build_that_needs_two,
    one_tokens_failures_fail_a_build_once_no_other_token_is_live,
    a_snapshot_is_read_by_its_uploaders_submitters_and_lease_holders,
);

/// Token ids: workers' `token_id` has no foreign key, so any id names a token here.
const ONE: i64 = 101;
const OTHER: i64 = 202;

/// Registers worker `name` with token `token`, with no cap.
async fn worker_of(store: &dyn Store, name: &str, token: i64) -> i64 {
    store
        .register_worker(&registration(name, 1), Some(token))
        .await
        .expect("register_worker")
}

/// Registers worker `name` with token `token` under a cap of `max` live workers, a
/// [`SHORT`] lease making a worker live.
async fn capped(store: &dyn Store, name: &str, token: i64, max: u32) -> Result<i64, StoreError> {
    let cap = WorkerCap {
        max_live: max,
        lease: SHORT,
    };
    store
        .register_worker_capped(&registration(name, 1), Some(token), Some(cap))
        .await
}

async fn a_token_holds_at_most_its_cap_of_live_workers(Database { store, queue }: Database) {
    let a = capped(&*store, "a", ONE, 2).await.unwrap();
    let b = capped(&*store, "b", ONE, 2).await.unwrap();
    // A third live one is refused, naming the cap; another token, or none, is not held back.
    match capped(&*store, "c", ONE, 2).await {
        Err(StoreError::TooManyWorkers { limit, lease }) => {
            assert_eq!((limit, lease), (2, SHORT));
        }
        other => panic!("a third worker of one token: {other:?}"),
    }
    capped(&*store, "x", OTHER, 2).await.unwrap();
    for n in 0..3 {
        store
            .register_worker(&registration(format!("local{n}"), 1), None)
            .await
            .unwrap();
    }
    // A worker that stopped (its last heartbeat gives back its leases) frees its place at once.
    assert!(queue.release_leases(a, &[]).await.unwrap().is_empty());
    let c = capped(&*store, "c", ONE, 2).await.unwrap();
    assert!(capped(&*store, "d", ONE, 2).await.is_err());
    // One that is no longer seen frees its place a lease after it was last seen: `b` keeps
    // beating, `c` does not.
    store.clock().advance(SHORT / 2);
    queue.heartbeat_many(b, &[], SHORT).await.unwrap();
    store.clock().advance(SHORT / 2 + Duration::from_secs(1));
    let d = capped(&*store, "d", ONE, 2).await.unwrap();
    assert!(capped(&*store, "e", ONE, 2).await.is_err());
    // The refused registrations left no worker behind.
    let mut live: Vec<i64> = store
        .workers(SHORT, 100)
        .await
        .unwrap()
        .iter()
        .map(|w| w.id)
        .collect();
    live.sort_unstable();
    assert!(live.contains(&b) && live.contains(&d), "{live:?}");
    assert!(!live.contains(&a) && !live.contains(&c), "{live:?}");
}

async fn concurrent_registrations_never_pass_the_cap(Database { store, .. }: Database) {
    let tries: Vec<_> = (0..12)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move { capped(&*store, &format!("w{n}"), ONE, 3).await })
        })
        .collect();
    let mut registered = 0;
    for t in tries {
        match t.await.unwrap() {
            Ok(_) => registered += 1,
            Err(StoreError::TooManyWorkers { limit: 3, .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(registered, 3);
}

/// A sweep of one variant over the five-position suite, one job per build, checking two
/// positions per build: 2 work jobs and 4 checks.
async fn checked_sweep(store: &dyn Store) -> i64 {
    let spec = sweep_domain::spec::SweepSpec {
        cross_check: Share(0.4),
        cross_check_min: 1,
        ..spec("checked", &[2], 5)
    };
    create_sweep_of(store, spec, &suite()).await.0
}

/// Leases everything `worker` may take now.
async fn lease_all(queue: &dyn WorkerQueue, worker: i64) -> Vec<JobLease> {
    lease(queue, worker, 100, LONG).await
}

/// `worker` measures every position of the sweep's work.
async fn measure_all(queue: &dyn WorkerQueue, worker: i64) {
    let work = lease_all(queue, worker).await;
    assert_eq!(work.len(), 2);
    assert!(work.iter().all(|l| !l.cross_check));
    for l in &work {
        finish(queue, worker, l).await;
    }
}

async fn workers_of_one_token_do_not_check_each_other_while_another_token_is_live(
    Database { store, queue }: Database,
) {
    let id = checked_sweep(&*store).await;
    let a1 = worker_of(&*store, "a1", ONE).await;
    let a2 = worker_of(&*store, "a2", ONE).await;
    let b = worker_of(&*store, "b", OTHER).await;
    measure_all(&*queue, a1).await;
    // `a2` is another worker, but of the original's token: while `b` is live, it gets none.
    assert!(lease_all(&*queue, a1).await.is_empty());
    assert!(lease_all(&*queue, a2).await.is_empty());
    let checks = lease_all(&*queue, b).await;
    assert_eq!(checks.len(), 4);
    assert!(checks.iter().all(|l| l.cross_check));
    for l in &checks {
        finish(&*queue, b, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    let by_worker = store.worker_checks(&[a1, a2, b]).await.unwrap();
    assert_eq!(by_worker.get(&b), Some(&(4, 0)));
    assert_eq!(by_worker.get(&a2), None);
}

async fn workers_of_one_token_check_each_other_when_no_other_token_is_live(
    Database { store, queue }: Database,
) {
    let id = checked_sweep(&*store).await;
    let a1 = worker_of(&*store, "a1", ONE).await;
    let a2 = worker_of(&*store, "a2", ONE).await;
    let b = worker_of(&*store, "b", OTHER).await;
    measure_all(&*queue, a1).await;
    assert!(lease_all(&*queue, a2).await.is_empty());
    // `b` stops: no worker of another token is live, so `a2` checks `a1`'s results (and
    // `a1`, while `a2` could, still does not check its own).
    assert!(queue.release_leases(b, &[]).await.unwrap().is_empty());
    assert!(lease_all(&*queue, a1).await.is_empty());
    let checks = lease_all(&*queue, a2).await;
    assert_eq!(checks.len(), 4);
    assert!(checks.iter().all(|l| l.cross_check));
    for l in &checks {
        finish(&*queue, a2, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    let by_worker = store.worker_checks(&[a1, a2]).await.unwrap();
    assert_eq!(by_worker.get(&a2), Some(&(4, 0)));
}

/// Reports that `worker`'s build of `lease`'s job failed, with `attempts` tries per build.
async fn fail_build(queue: &dyn WorkerQueue, worker: i64, lease: &JobLease, attempts: u32) {
    let failure = BuildFailure {
        worker_id: worker,
        attempt: lease.attempt,
        output: format!("w{worker}: error: boom"),
    };
    queue
        .build_failed(lease.job_id, &failure, LONG, attempts)
        .await
        .unwrap();
}

/// The variant's job of `worker`'s lease call (the baseline's is finished).
async fn lease_variant(queue: &dyn WorkerQueue, worker: i64, attempts: u32) -> JobLease {
    let leases = queue.lease_jobs(worker, 100, LONG, attempts).await.unwrap();
    let mut variant = None;
    for l in leases {
        if l.build.name.starts_with(KNOB) {
            variant = Some(l);
        } else {
            finish(queue, worker, &l).await;
        }
    }
    variant.expect("the variant's job")
}

/// Two attempts per build: two workers of two tokens must fail it.
const TWO: u32 = 2;

/// A sweep whose variant's build failed on two workers of token [`ONE`] while a worker of
/// [`OTHER`] is live: returns (sweep id, the variant's job, that other worker).
async fn failed_by_one_token(db: &Database) -> (i64, i64, i64) {
    let (store, queue) = (&*db.store, &*db.queue);
    let (id, _) = create_sweep(store, "s", &[2], 5).await;
    let a1 = worker_of(store, "a1", ONE).await;
    let a2 = worker_of(store, "a2", ONE).await;
    let b = worker_of(store, "b", OTHER).await;
    let first = lease_variant(queue, a1, TWO).await;
    fail_build(queue, a1, &first, TWO).await;
    let second = lease_variant(queue, a2, TWO).await;
    assert_eq!(second.job_id, first.job_id);
    fail_build(queue, a2, &second, TWO).await;
    (id, first.job_id, b)
}

async fn failures_of_one_token_do_not_fail_a_build_that_needs_two(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let (id, job, b) = failed_by_one_token(&db).await;
    // Two workers failed it, both of one token: the build is not failed, and `b` gets it.
    let record = store.sweep(id).await.unwrap();
    assert!(record.builds.iter().all(|b| b.build_error.is_none()));
    let third = lease_variant(&*queue, b, TWO).await;
    assert_eq!(third.job_id, job);
    fail_build(&*queue, b, &third, TWO).await;
    let record = store.sweep(id).await.unwrap();
    assert_eq!(
        record.builds[1].build_error.as_deref(),
        Some(
            format!("build failed on 3 workers of 2 tokens; last output:\nw{b}: error: boom")
                .as_str()
        )
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

async fn one_tokens_failures_fail_a_build_once_no_other_token_is_live(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let (id, _, b) = failed_by_one_token(&db).await;
    // `b` stops without trying: the workers left are all of the token that failed the
    // build, so the next claim (stalled builds are judged at most once a second) fails it.
    assert!(queue.release_leases(b, &[]).await.unwrap().is_empty());
    store.clock().advance(Duration::from_secs(2));
    let a3 = worker_of(&*store, "a3", ONE).await;
    assert!(queue
        .lease_jobs(a3, 100, LONG, TWO)
        .await
        .unwrap()
        .is_empty());
    let record = store.sweep(id).await.unwrap();
    let error = record.builds[1].build_error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("build failed on 2 workers of 1 token; last output:\n"),
        "{error}"
    );
}

async fn a_snapshot_is_read_by_its_uploaders_submitters_and_lease_holders(
    Database { store, queue }: Database,
) {
    const ALICE: i64 = 7;
    const UPLOADER: i64 = 8;
    const STRANGER: i64 = 9;
    let mut sweep = new_sweep(&*store, spec("s", &[2], 5), &suite()).await;
    sweep.submitter = Some(Owner {
        token_id: ALICE,
        name: "alice".into(),
    });
    create(&*store, &sweep).await;
    store
        .add_snapshot_uploader(SNAPSHOT, UPLOADER)
        .await
        .unwrap();
    let may = |token: i64| {
        let store = store.clone();
        async move { store.may_read_snapshot(SNAPSHOT, token).await.unwrap() }
    };
    assert!(may(ALICE).await && may(UPLOADER).await);
    assert!(!may(STRANGER).await);
    assert!(!store.may_read_snapshot("0ther", ALICE).await.unwrap());
    // A worker token reads it while one of its workers holds a lease of the sweep's job...
    let w = worker_of(&*store, "w", ONE).await;
    worker_of(&*store, "idle", OTHER).await;
    assert!(!may(ONE).await);
    let leases = lease(&*queue, w, 1, SHORT).await;
    assert!(may(ONE).await && !may(OTHER).await);
    // ...not once the job is finished...
    finish(&*queue, w, &leases[0]).await;
    assert!(!may(ONE).await);
    // ...nor once the lease expired.
    let held = lease_one(&*queue, w, SHORT).await;
    assert!(may(ONE).await);
    store.clock().advance(SHORT + Duration::from_secs(1));
    assert!(!may(ONE).await);
    // Given back, it is not held either.
    let again = lease_one(&*queue, w, LONG).await;
    assert!(may(ONE).await);
    let back = [HeldLease {
        job_id: again.job_id,
        attempt: again.attempt,
    }];
    queue.release_leases(w, &back).await.unwrap();
    assert!(!may(ONE).await);
    assert_ne!(held.job_id, 0);
}
