//! Speed jobs on both store backends (issue 49, item 2): planned one per variant with
//! `[speed]`, dealt only once the sweep's work is done and only to a worker given nothing else
//! that holds no lease, alone; a report is checked (the field named), stored once, closes the
//! job and shows on the table row; an expired speed lease goes back to the queue; a failed
//! baseline closes every speed job of its sweep.

#[macro_use]
mod support;

use std::sync::Arc;
use std::time::Duration;

use support::*;
use sweep_coordinator::store::{Store, StoreError};
use sweep_domain::limit::Limit;
use sweep_domain::spec::SpeedSpec;
use sweep_domain::wire::{
    BuildFailure, JobLease, JobReport, LeaseStatus, SpeedReport, SpeedRun, SpeedSide, SweepState,
};

on_both_backends!(
    speed_jobs_wait_for_the_work_and_go_alone_to_an_idle_worker,
    speed_reports_are_checked_stored_once_and_shown,
    an_expired_speed_lease_is_taken_again,
    a_failed_baseline_closes_the_speed_jobs,
    speed_jobs_get_their_share_while_another_sweep_keeps_workers_busy,
);

const REPEATS: u32 = 3;

/// A sweep of two variants over the five-position suite in one job per build, timing each
/// variant over the first 4 positions. Returns (sweep id, jobs).
async fn timed_sweep(store: &dyn Store) -> (i64, u64) {
    let spec = sweep_domain::spec::SweepSpec {
        speed: Some(SpeedSpec {
            suite: "tiny".into(),
            count: 4,
            repeats: REPEATS,
            limit: Limit::Depth(DEPTH),
        }),
        ..spec("timed", &[2, 3], 5)
    };
    create_sweep_of(store, spec, &suite()).await
}

/// `n` pairs, the test side `ratio` times the base's CPU, equal nodes.
fn runs(n: u32, ratio: f64) -> Vec<SpeedRun> {
    (0..n)
        .map(|repeat| {
            let base = SpeedSide {
                cpu_us: 100_000 + u64::from(repeat) * 100,
                wall_us: 120_000,
                nodes: 5_000,
            };
            let test = SpeedSide {
                cpu_us: (base.cpu_us as f64 * ratio) as u64,
                ..base
            };
            SpeedRun { repeat, base, test }
        })
        .collect()
}

/// Sends `speed` as the finished report of `lease` from `worker`.
async fn send_speed(
    queue: &dyn WorkerQueue,
    worker: i64,
    lease: &JobLease,
    speed: SpeedReport,
) -> Result<Vec<sweep_coordinator::queue::JobOutcome>, StoreError> {
    let report = JobReport {
        speed: Some(speed),
        ..job_report(lease, Vec::new(), true)
    };
    queue
        .report_many(worker, Arc::from([report]), LONG, MAX_ATTEMPTS)
        .await
}

/// Finishes every work job `worker` can lease; returns how many.
async fn do_the_work(queue: &dyn WorkerQueue, worker: i64) -> usize {
    let work = lease(queue, worker, 100, LONG).await;
    assert!(work.iter().all(|l| l.speed.is_none()));
    for l in &work {
        finish(queue, worker, l).await;
    }
    work.len()
}

async fn speed_jobs_wait_for_the_work_and_go_alone_to_an_idle_worker(
    Database { store, queue }: Database,
) {
    let (id, jobs) = timed_sweep(&*store).await;
    // Three work jobs and two speed jobs (none for the baseline).
    assert_eq!(jobs, 3 + 2);
    assert_eq!(summary(&*store, id).await.positions_total, 15);
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    // `a` holds one work job: nothing else of the sweep is open, yet `b` gets no speed job
    // while work is left, and `a` gets none while it holds a lease.
    let first = lease(&*queue, a, 1, LONG).await.remove(0);
    assert_eq!(do_the_work(&*queue, b).await, 2);
    assert!(nothing_to_lease(&*queue, b).await, "work still open");
    assert!(nothing_to_lease(&*queue, a).await, "a holds a lease");
    finish(&*queue, a, &first).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    // Now each idle worker gets one speed job, alone, with the baseline to time against.
    let sa = lease(&*queue, a, 100, LONG).await;
    assert_eq!(sa.len(), 1, "one speed job, nothing else");
    let speed = sa[0].speed.as_ref().expect("a speed job");
    assert_eq!(speed.repeats, REPEATS);
    assert_eq!(speed.baseline.name, "head_reference");
    assert_ne!(sa[0].build.name, "head_reference");
    assert_eq!(sa[0].positions.len(), 4);
    assert!(
        nothing_to_lease(&*queue, a).await,
        "a runs its speed job alone"
    );
    let sb = lease(&*queue, b, 100, LONG).await;
    assert_eq!(sb.len(), 1);
    assert_ne!(sb[0].build.name, sa[0].build.name);
    for (w, l) in [(a, &sa[0]), (b, &sb[0])] {
        let speed = SpeedReport {
            runs: runs(REPEATS, 1.0),
            error: None,
        };
        send_speed(&*queue, w, l, speed).await.unwrap();
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
}

async fn speed_reports_are_checked_stored_once_and_shown(Database { store, queue }: Database) {
    let (id, _) = timed_sweep(&*store).await;
    let a = worker(&*store, "a").await;
    do_the_work(&*queue, a).await;
    let l = lease_one(&*queue, a, LONG).await;
    let bad = |runs: Vec<SpeedRun>, error: Option<&str>| SpeedReport {
        runs,
        error: error.map(String::from),
    };
    // Too few pairs, a pair twice, a pair past the repeats, a zero CPU time: each refused,
    // naming the field; results on a speed job too.
    let mut twice = runs(REPEATS, 1.0);
    twice[1].repeat = 0;
    let mut zero = runs(REPEATS, 1.0);
    zero[2].test.cpu_us = 0;
    for (report, field) in [
        (bad(runs(2, 1.0), None), "speed.runs"),
        (bad(twice, None), "speed.runs[1].repeat"),
        (bad(runs(REPEATS + 1, 1.0), None), "speed.runs[3].repeat"),
        (bad(zero, None), "speed.runs[2].test.cpu_us"),
    ] {
        match send_speed(&*queue, a, &l, report).await {
            Err(StoreError::Invalid(m)) => assert!(m.starts_with(field), "{field}: {m}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    let with_results = JobReport {
        speed: Some(bad(runs(REPEATS, 1.0), None)),
        ..job_report(&l, good_results(&l), true)
    };
    let refused = queue
        .report_many(a, Arc::from([with_results]), LONG, MAX_ATTEMPTS)
        .await;
    assert!(matches!(refused, Err(StoreError::Invalid(m)) if m.starts_with("results")));
    // A good report is stored once: sent again, its lease is gone.
    let ok = send_speed(&*queue, a, &l, bad(runs(REPEATS, 1.3), None))
        .await
        .unwrap();
    assert_eq!((ok[0].status, ok[0].accepted), (LeaseStatus::Held, REPEATS));
    let again = send_speed(&*queue, a, &l, bad(runs(REPEATS, 1.3), None))
        .await
        .unwrap();
    assert_eq!(again[0].status, LeaseStatus::Lost);
    let stored = store.speed_runs(id).await.unwrap();
    assert_eq!(stored[&l.build.name].runs, runs(REPEATS, 1.3));
    // The other variant's job ends short: its pair before the failure and the error.
    let other = lease_one(&*queue, a, LONG).await;
    let short = bad(runs(1, 1.0), Some("engine crashed"));
    send_speed(&*queue, a, &other, short).await.unwrap();
    let stored = store.speed_runs(id).await.unwrap();
    assert_eq!(stored[&other.build.name].runs.len(), 1);
    assert_eq!(
        stored[&other.build.name].error.as_deref(),
        Some("engine crashed")
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
}

async fn an_expired_speed_lease_is_taken_again(Database { store, queue }: Database) {
    let (_, _) = timed_sweep(&*store).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    do_the_work(&*queue, a).await;
    let short = Duration::from_secs(60);
    let first = lease(&*queue, a, 1, short).await.remove(0);
    assert!(first.speed.is_some());
    store.clock().advance(short * 2);
    // `b` takes the other speed job first, then the one `a` lost.
    let mut names = Vec::new();
    for _ in 0..2 {
        let l = lease_one(&*queue, b, LONG).await;
        assert!(l.speed.is_some());
        names.push(l.build.name.clone());
        send_speed(
            &*queue,
            b,
            &l,
            SpeedReport {
                runs: runs(REPEATS, 1.0),
                error: None,
            },
        )
        .await
        .unwrap();
    }
    assert!(names.contains(&first.build.name), "{names:?}");
    let late = send_speed(
        &*queue,
        a,
        &first,
        SpeedReport {
            runs: runs(REPEATS, 1.0),
            error: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(late[0].status, LeaseStatus::Lost);
}

async fn a_failed_baseline_closes_the_speed_jobs(Database { store, queue }: Database) {
    let (id, _) = timed_sweep(&*store).await;
    let a = worker(&*store, "a").await;
    let work = lease(&*queue, a, 100, LONG).await;
    for l in &work {
        if l.build.name == "head_reference" {
            let failure = BuildFailure {
                worker_id: a,
                attempt: l.attempt,
                output: "cc: error".into(),
            };
            queue
                .build_failed(l.job_id, &failure, LONG, MAX_ATTEMPTS)
                .await
                .unwrap();
        } else {
            finish(&*queue, a, l).await;
        }
    }
    // The only live worker failed the baseline: it has its build error, and nothing is left.
    assert!(nothing_to_lease(&*queue, a).await);
    assert!(summary(&*store, id).await.state.is_final());
}

async fn speed_jobs_get_their_share_while_another_sweep_keeps_workers_busy(
    Database { store, queue }: Database,
) {
    // A sweep whose work is done and whose speed jobs wait...
    let (timed, _) = timed_sweep(&*store).await;
    let x = worker(&*store, "x").await;
    do_the_work(&*queue, x).await;
    // ...beside a big one whose work keeps three workers busy.
    let (busy, _) = create_sweep(&*store, "busy", &[5, 6, 7, 8, 9, 10], 1).await;
    let mut on_busy = Vec::new();
    for name in ["w1", "w2", "w3"] {
        let w = worker(&*store, name).await;
        let held = lease_one(&*queue, w, LONG).await;
        assert_eq!(held.sweep_id, busy);
        on_busy.push(w);
    }
    // Each holds a lease, so none is idle; the shares (the waiting sweep is owed about two
    // of the four workers, and has the one that did its work) send the next to ask to the
    // waiting speed job, dealt alone (the worker runs it once its running job ends).
    // (The sweeps' weights are read again after half a second: the last read saw the
    // waiting sweep's work still open.)
    tokio::time::sleep(Duration::from_millis(600)).await;
    let next = lease(&*queue, on_busy[0], 8, LONG).await;
    assert_eq!(next.len(), 1, "the speed job alone: {next:?}");
    assert_eq!(next[0].sweep_id, timed);
    assert!(next[0].speed.is_some());
}
