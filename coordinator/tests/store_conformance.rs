//! Storage conformance: every case is written once against `dyn Store` and run against both
//! backends, Postgres (a fresh database per test) and SQLite (a fresh file per test), so the
//! two implementations cannot drift apart. Run one backend with `cargo test --test
//! store_conformance sqlite::` (or `postgres::`).

#[macro_use]
mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use sweep_domain::limit::Limit;

use support::*;
use sweep_coordinator::queue::JobOutcome;
use sweep_coordinator::store::{NewSearchStep, NewStage, Store, StoreError};
use sweep_domain::spec::DEFAULT_BASELINE;
use sweep_domain::table::sums_of;
use sweep_domain::wire::{
    BuildFailure, HeldLease, JobLease, JobReport, LeaseStatus, PositionResult, SweepState,
};

on_both_backends!(
    a_held_sweep_is_leased_only_once_approved,
    a_planned_sweep_is_counted_and_rolled_back,
    a_later_stage_is_added_once_when_the_stage_before_is_done,
    a_search_step_is_added_once_and_only_its_cells_get_jobs,
    ended_sweeps_are_claimed_for_announcement_once,
    snapshots_are_idempotent,
    source_provenance_reads_back,
    put_suite_is_idempotent,
    create_sweep_reads_back,
    lease_takes_jobs_in_order_once,
    concurrent_leases_take_each_job_once,
    expired_lease_is_re_leased_without_reported_positions,
    fully_reported_job_is_closed_on_re_lease,
    stale_worker_loses_the_lease,
    duplicate_report_is_counted,
    out_of_range_index_is_invalid,
    finished_job_closes_and_sweep_completes,
    finished_job_with_holes_is_requeued,
    build_failure_closes_the_build,
    baseline_failure_fails_the_sweep,
    cancel_stops_the_sweep,
    progress_results_and_errors,
    solved_is_recomputed_from_the_suite,
    failing_position_is_retried_then_final,
    failing_position_moves_to_another_worker,
    build_failure_waits_for_every_live_worker,
    build_failure_with_one_live_worker_is_final,
    build_failure_is_final_once_the_other_workers_die,
    baseline_build_failure_is_final_once_the_other_workers_die,
    upload_with_a_lost_lease_stores_the_others,
    upload_with_an_invalid_report_stores_nothing,
    bad_results_fail_their_positions_not_the_upload,
    heartbeat_of_many_leases_renews_only_the_held,
    released_leases_are_queued_again_at_once,
    sweep_suite_is_the_version_the_sweep_ran,
    binary_engine_jobs_go_only_to_workers_with_it,
    binary_build_failure_counts_only_workers_with_the_engine,
    identical_running_sweep_is_returned_not_copied,
    concurrent_identical_submits_make_one_sweep,
    huge_node_counts_are_summed_exactly,
    table_sums_follow_every_arrival_order,
    workers_list_their_leases_and_recent_results,
);

fn assert_lease_lost(err: StoreError, job: i64, worker: i64, attempt: i64) {
    match err {
        StoreError::LeaseLost {
            job_id,
            worker_id,
            attempt: a,
        } => assert_eq!((job_id, worker_id, a), (job, worker, attempt)),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
}

/// Webhooks announce a sweep once: it is listed until claimed, only when ended is it worth
/// claiming (the caller's rule), and of two claims only the first wins.
/// A sweep held for approval hands out nothing until approved (once); a rejected one never
/// runs.
async fn a_held_sweep_is_leased_only_once_approved(Database { store, queue }: Database) {
    let mut held = new_sweep(&*store, spec("held", &[2], 5), &suite()).await;
    held.hold = Some("over budget".into());
    let (id, _) = create(&*store, &held).await;
    let s = summary(&*store, id).await;
    assert_eq!(s.state, SweepState::PendingApproval);
    assert_eq!(s.approval_note.as_deref(), Some("over budget"));
    let w = worker(&*store, "w").await;
    assert!(
        lease(&*queue, w, 100, LONG).await.is_empty(),
        "held: nothing leased"
    );
    assert!(store.approve_sweep(id).await.unwrap());
    assert!(!store.approve_sweep(id).await.unwrap(), "approved twice");
    assert_eq!(summary(&*store, id).await.state, SweepState::Queued);
    let leases = lease(&*queue, w, 100, LONG).await;
    assert_eq!(leases.len(), 2, "both builds' jobs once approved");
    for l in &leases {
        finish(&*queue, w, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);

    let mut other = new_sweep(&*store, spec("other", &[3], 5), &suite()).await;
    other.hold = Some("over budget".into());
    let (id, _) = create(&*store, &other).await;
    assert!(store.reject_sweep(id, "too big").await.unwrap());
    assert!(
        !store.approve_sweep(id).await.unwrap(),
        "a rejected sweep stays rejected"
    );
    let s = summary(&*store, id).await;
    assert_eq!(
        (s.state, s.approval_note.as_deref()),
        (SweepState::Rejected, Some("too big"))
    );
    assert!(lease(&*queue, w, 100, LONG).await.is_empty());
}

/// `plan_sweep` counts what a submission would write (reuse included) and keeps nothing;
/// `search_costs` prices the searches measured since.
async fn a_planned_sweep_is_counted_and_rolled_back(Database { store, queue }: Database) {
    let sweep = new_sweep(&*store, spec("planned", &[2], 5), &suite()).await;
    let planned = store.plan_sweep(&sweep).await.unwrap();
    assert_eq!(
        (planned.jobs, planned.positions, planned.reused),
        (2, 10, 0)
    );
    assert_eq!(
        planned.cells,
        [("tiny".to_string(), Limit::Depth(DEPTH), 10)]
    );
    assert!(
        store.list_sweeps(10).await.unwrap().is_empty(),
        "nothing kept"
    );
    assert!(store.search_costs("minnow").await.unwrap().is_empty());

    let (id, _) = create(&*store, &sweep).await;
    // Planned again while it runs: the identical sweep is named.
    assert_eq!(store.plan_sweep(&sweep).await.unwrap().existing, Some(id));
    let w = worker(&*store, "w").await;
    for lease in lease(&*queue, w, 100, LONG).await {
        finish(&*queue, w, &lease).await;
    }
    let again = store.plan_sweep(&sweep).await.unwrap();
    assert_eq!(
        (again.existing, again.reused),
        (None, 10),
        "every result reused"
    );
    assert_eq!(again.cells[0].2, 0, "nothing left to search");
    let costs = store.search_costs("minnow").await.unwrap();
    assert_eq!(costs.len(), 1);
    assert_eq!((costs[0].suite.as_str(), costs[0].searches), ("tiny", 10));
    assert_eq!(
        store.list_sweeps(10).await.unwrap().len(),
        1,
        "still one sweep"
    );
}

/// A staged sweep (two values; a second stage at another depth for the best one): due only
/// once its first stage's work is done, running meanwhile; added once though two calls
/// claim it; the new stage's jobs leased and finished like any; then done.
async fn a_later_stage_is_added_once_when_the_stage_before_is_done(
    Database { store, queue }: Database,
) {
    let mut staged = spec("staged", &[2, 3], 5);
    staged.stages = vec![sweep_domain::spec::Stage {
        suites: vec!["tiny".into()],
        limits: vec![Limit::Depth(DEPTH + 1)],
        promote: 1,
        max_solved_loss: 0,
    }];
    let sweep = new_sweep(&*store, staged, &suite()).await;
    let (id, jobs) = create(&*store, &sweep).await;
    assert_eq!(jobs, 3, "the first stage only: 3 builds x 1 chunk");
    let s = summary(&*store, id).await;
    assert_eq!((s.stage.unwrap().current, s.stage.unwrap().total), (1, 2));
    assert!(
        store.stages_due(10).await.unwrap().is_empty(),
        "stage 1 is not done"
    );

    let w = worker(&*store, "w").await;
    for lease in lease(&*queue, w, 100, LONG).await {
        finish(&*queue, w, &lease).await;
    }
    // Every job is closed, but a stage is left: the sweep runs on until it is added.
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    assert_eq!(store.stages_due(10).await.unwrap(), [(id, 1)]);

    let chosen = format!("{KNOB}=3");
    let stage = NewStage {
        stages_left: 1,
        decided: 0,
        decision: sweep_domain::table::Promotion {
            promoted: vec![chosen.clone()],
            eligible: vec![chosen.clone()],
            standings: Vec::new(),
            failed: None,
        },
        builds: vec![DEFAULT_BASELINE.to_string(), chosen.clone()],
        chunks: sweep.chunks.clone(),
        limits: vec![Limit::Depth(DEPTH + 1)],
        recompute: false,
    };
    assert!(store.add_stage(id, &stage).await.unwrap());
    assert!(!store.add_stage(id, &stage).await.unwrap(), "added twice");
    assert!(store.stages_due(10).await.unwrap().is_empty());
    let rec = store.sweep(id).await.unwrap();
    assert_eq!(rec.stages.len(), 1);
    assert_eq!(rec.stages[0].1.promoted, std::slice::from_ref(&chosen));
    let s = rec.summary;
    assert_eq!(s.stage.unwrap().current, 2);
    assert_eq!(s.positions_total, 5 * 3 + 5 * 2);
    assert!(!s.state.is_final(), "{:?}", s.state);

    // The stage's jobs: the baseline's and the chosen variant's, at the new depth, once.
    let leases = lease(&*queue, w, 100, LONG).await;
    let mut got: Vec<(i64, Limit)> = leases.iter().map(|l| (l.job_id, l.limit)).collect();
    got.dedup();
    assert_eq!(got.len(), 2, "{leases:?}");
    assert!(leases.iter().all(|l| l.limit == Limit::Depth(DEPTH + 1)));
    for lease in &leases {
        finish(&*queue, w, lease).await;
    }
    assert!(lease(&*queue, w, 100, LONG).await.is_empty());
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    assert!(store.stages_due(10).await.unwrap().is_empty());
}

/// A sweep with a search over four values: only the baseline and the cells the search
/// planned get jobs at submission (the others none, and no positions to search); due once
/// those finished, running meanwhile; a step adds its cells once though two calls claim it;
/// the step that ends the search adds nothing and the sweep is done.
async fn a_search_step_is_added_once_and_only_its_cells_get_jobs(
    Database { store, queue }: Database,
) {
    let mut searched = spec("searched", &[1, 2, 3, 4], 5);
    searched.search = Some(sweep_domain::spec::Search {
        strategy: "coordinate".into(),
        max_rounds: 3,
        max_solved_loss: 0,
        start: format!("{KNOB}=2"),
    });
    let mut sweep = new_sweep(&*store, searched.clone(), &suite()).await;
    let mut report = sweep_domain::table::walk(
        searched.search.as_ref().unwrap(),
        &searched.knobs,
        &searched.variants,
        &[],
        &[],
    );
    // As if the search first wanted two of the four cells.
    report.planned = vec![format!("{KNOB}=2"), format!("{KNOB}=3")];
    report.next = report.planned.clone();
    sweep.search = Some(report.clone());
    let (id, jobs) = create(&*store, &sweep).await;
    assert_eq!(jobs, 3, "the baseline and two cells x 1 chunk");
    let s = summary(&*store, id).await;
    assert_eq!(s.positions_total, 5 * 3);
    assert!(store.stages_due(10).await.unwrap().is_empty());
    let w = worker(&*store, "w").await;
    for lease in lease(&*queue, w, 100, LONG).await {
        finish(&*queue, w, &lease).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    assert_eq!(store.stages_due(10).await.unwrap(), [(id, 0)]);
    assert_eq!(store.sweep(id).await.unwrap().search, Some(report.clone()));

    let mut next = report.clone();
    next.next = vec![format!("{KNOB}=4")];
    next.planned.push(format!("{KNOB}=4"));
    let step = NewSearchStep {
        planned_before: 2,
        report: next.clone(),
        chunks: sweep.chunks.clone(),
        limits: searched.limits.clone(),
        recompute: false,
    };
    assert!(store.add_search_step(id, &step).await.unwrap());
    assert!(
        !store.add_search_step(id, &step).await.unwrap(),
        "added twice"
    );
    assert!(store.stages_due(10).await.unwrap().is_empty());
    assert_eq!(summary(&*store, id).await.positions_total, 5 * 4);
    let leases = lease(&*queue, w, 100, LONG).await;
    assert_eq!(leases.len(), 1, "the one new cell: {leases:?}");
    finish(&*queue, w, &leases[0]).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);

    let mut end = next.clone();
    end.next = Vec::new();
    end.finished = true;
    end.chosen = Some(format!("{KNOB}=4"));
    let last = NewSearchStep {
        planned_before: 3,
        report: end.clone(),
        ..step
    };
    assert!(store.add_search_step(id, &last).await.unwrap());
    assert!(
        !store.add_search_step(id, &last).await.unwrap(),
        "ended twice"
    );
    assert!(lease(&*queue, w, 100, LONG).await.is_empty());
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
    assert!(store.stages_due(10).await.unwrap().is_empty());
    assert_eq!(store.sweep(id).await.unwrap().search, Some(end));
    // The cell never asked for has no results and is not in the progress.
    let progress = store.progress(id).await.unwrap();
    assert!(
        progress.iter().all(|p| p.build != format!("{KNOB}=1")),
        "{progress:?}"
    );
}

async fn ended_sweeps_are_claimed_for_announcement_once(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "announced", &[2], 5).await;
    let listed = store.sweeps_to_announce(10).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.id).collect::<Vec<_>>(), [id]);
    assert!(!listed[0].state.is_final(), "{:?}", listed[0].state);
    let w = worker(&*store, "w").await;
    for lease in lease(&*queue, w, 100, LONG).await {
        finish(&*queue, w, &lease).await;
    }
    let listed = store.sweeps_to_announce(10).await.unwrap();
    assert_eq!(listed[0].state, SweepState::Done);
    assert!(store.claim_announcement(id).await.unwrap());
    assert!(
        !store.claim_announcement(id).await.unwrap(),
        "claimed twice"
    );
    assert!(store.sweeps_to_announce(10).await.unwrap().is_empty());
}

async fn snapshots_are_idempotent(Database { store, .. }: Database) {
    store.ping().await.unwrap();
    store.put_snapshot("abc", b"first").await.unwrap();
    store.put_snapshot("abc", b"first").await.unwrap();
    // Content-addressed: a second archive under the same hash never replaces the first.
    store.put_snapshot("abc", b"other").await.unwrap();
    assert_eq!(
        store.snapshot("abc").await.unwrap().as_deref(),
        Some(&b"first"[..])
    );
    assert_eq!(store.snapshot("missing").await.unwrap(), None);
}

async fn put_suite_is_idempotent(Database { store, .. }: Database) {
    let first = store.put_suite(&suite()).await.unwrap();
    assert_eq!(store.put_suite(&suite()).await.unwrap(), first);
    let edited = sweep_domain::epd::parse_suite(
        "tiny",
        &format!("{SUITE}4k3/8/8/8/8/8/3P4/4K3 w - - bm d4; id \"more\";\n"),
    )
    .unwrap();
    let second = store.put_suite(&edited).await.unwrap();
    assert_ne!(second, first, "changed content is a new version");
    assert_eq!(store.put_suite(&edited).await.unwrap(), second);
    let renamed = sweep_domain::epd::parse_suite("other", SUITE).unwrap();
    let third = store.put_suite(&renamed).await.unwrap();
    assert!(
        third != first && third != second,
        "same content, other name: a new suite"
    );
    assert_eq!(store.put_suite(&suite()).await.unwrap(), first);
}

async fn create_sweep_reads_back(Database { store, .. }: Database) {
    let before = chrono::Utc::now();
    let (id, jobs) = create_sweep(&*store, "first", &[2, 4], 2).await;
    assert_eq!(jobs, 9, "3 builds x 3 chunks");
    let listed = store.list_sweeps(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    let s = &listed[0];
    assert_eq!(
        (s.id, s.name.as_str(), s.engine.as_str()),
        (id, "first", "minnow")
    );
    assert_eq!(s.state, SweepState::Queued);
    assert_eq!((s.positions_done, s.positions_total), (0, 15));
    let skew = chrono::Duration::seconds(5);
    assert!(
        s.created_at >= before - skew && s.created_at <= chrono::Utc::now() + skew,
        "created_at {} is not now",
        s.created_at
    );

    let record = store.sweep(id).await.unwrap();
    assert_eq!(&record.summary, s);
    assert_eq!(record.spec, spec("first", &[2, 4], 2));
    assert_eq!(record.engine_def, engine());
    assert_eq!(record.source_sha256.as_deref(), Some(SNAPSHOT));
    assert_eq!(record.suites, vec![("tiny".to_string(), 5)]);
    let builds: Vec<_> = record
        .builds
        .iter()
        .map(|b| (b.name.as_str(), b.is_baseline))
        .collect();
    assert_eq!(
        builds,
        [
            (DEFAULT_BASELINE, true),
            ("NULLMOVE_R_BASE=2", false),
            ("NULLMOVE_R_BASE=4", false)
        ]
    );
    assert!(record.builds[0].defines.is_empty());
    assert_eq!(
        record.builds[2].defines,
        BTreeMap::from([(KNOB.to_string(), 4)])
    );
    assert!(record.builds.iter().all(|b| b.build_error.is_none()));

    let progress = store.progress(id).await.unwrap();
    assert_eq!(progress.len(), 3);
    assert!(progress
        .iter()
        .all(|p| p.suite == "tiny" && p.done == 0 && p.total == 5));
    assert_eq!(progress[1].build, "NULLMOVE_R_BASE=2");
    assert!(store.active_workers(id).await.unwrap().is_empty());
    assert!(store.results(id).await.unwrap().is_empty());
    assert!(store.position_errors(id, 10).await.unwrap().is_empty());

    let (newer, _) = create_sweep(&*store, "second", &[3], 5).await;
    let ids: Vec<i64> = store
        .list_sweeps(10)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, [newer, id], "newest first");
    let ids: Vec<i64> = store
        .list_sweeps(1)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, [newer]);
    assert!(matches!(
        store.sweep(newer + 1000).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Leases in build order (baseline first), then chunk order: jobs are leased round-robin over
/// builds, and tests that treat one build at a time read them this way.
fn by_build(mut leases: Vec<JobLease>) -> Vec<JobLease> {
    leases.sort_by_key(|l| {
        (
            l.build.name != DEFAULT_BASELINE,
            l.build.name.clone(),
            l.job_id,
        )
    });
    leases
}

async fn lease_takes_jobs_in_order_once(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2, 4], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let first = lease(&*queue, a, 2, LONG).await;
    assert_eq!(first.len(), 2);
    assert!(first[0].job_id < first[1].job_id);
    let l = &first[0];
    assert_eq!(
        (l.sweep_id, l.attempt, l.limit),
        (id, 1, Limit::Depth(DEPTH))
    );
    assert_eq!(
        (l.suite.as_str(), l.build.name.as_str()),
        ("tiny", DEFAULT_BASELINE)
    );
    assert_eq!(indices(l), [0, 1]);
    // Which job comes next differs by backend (round-robin over builds on SQLite, build
    // affinity on Postgres): see lease_order.rs.
    let p = &l.positions[1];
    assert_eq!(
        (p.id.as_str(), p.bm.as_slice()),
        ("WAC.001", &["g3g6".to_string()][..])
    );
    assert_eq!(p.fen, suite().positions[1].fen);
    assert_eq!(l.build.engine, "minnow");
    assert_eq!(l.build.source_sha256, SNAPSHOT);
    assert_eq!(
        l.build.build_command,
        engine().build.expect("source engine").command
    );
    assert!(l
        .build
        .options
        .contains(&("Hash".to_string(), "16".to_string())));

    let rest = lease(&*queue, b, 100, LONG).await;
    assert_eq!(rest.len(), 7);
    // Every job exactly once: 3 builds x 3 chunks.
    let mut all: Vec<(String, Vec<u32>)> = first
        .iter()
        .chain(&rest)
        .map(|l| (l.build.name.clone(), indices(l)))
        .collect();
    all.sort();
    let mut expected = Vec::new();
    for build in [DEFAULT_BASELINE, "NULLMOVE_R_BASE=2", "NULLMOVE_R_BASE=4"] {
        for chunk in [vec![0, 1], vec![2, 3], vec![4]] {
            expected.push((build.to_string(), chunk));
        }
    }
    expected.sort();
    assert_eq!(all, expected);
    let two = rest
        .iter()
        .find(|l| l.build.name == "NULLMOVE_R_BASE=2")
        .expect("a job of the variant =2");
    assert_eq!(two.build.defines, BTreeMap::from([(KNOB.to_string(), 2)]));
    assert!(nothing_to_lease(&*queue, a).await);

    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    let active: Vec<_> = store
        .active_workers(id)
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.id, w.name, w.host, w.jobs))
        .collect();
    assert_eq!(
        active,
        [
            (a, "a".into(), "a.local".into(), 2),
            (b, "b".into(), "b.local".into(), 7)
        ]
    );
    assert!(matches!(
        queue.lease_jobs(a + b + 1000, 1, LONG, MAX_ATTEMPTS).await,
        Err(StoreError::NotFound(_))
    ));
    // Per-worker calls (heartbeat, results) check the worker the same way.
    queue.heartbeat_many(a, &[], LONG).await.unwrap();
    assert!(matches!(
        queue.heartbeat_many(a + b + 1000, &[], LONG).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        queue
            .report_many(a + b + 1000, Vec::new().into(), LONG, MAX_ATTEMPTS)
            .await,
        Err(StoreError::NotFound(_))
    ));
}

async fn concurrent_leases_take_each_job_once(Database { store, queue }: Database) {
    let (_, jobs) = create_sweep(&*store, "s", &[1, 2, 3, 4, 5], 1).await;
    assert_eq!(jobs, 30);
    let mut tasks = Vec::new();
    for n in 0..6 {
        let id = worker(&*store, &format!("w{n}")).await;
        // Two tasks per worker, as a worker with several engine slots would lease.
        for _ in 0..2 {
            let queue = queue.clone();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let leases = queue
                        .lease_jobs(id, 2, LONG, MAX_ATTEMPTS)
                        .await
                        .expect("lease");
                    if leases.is_empty() {
                        return got;
                    }
                    got.extend(leases.into_iter().map(|l| (l.job_id, l.attempt)));
                }
            }));
        }
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), 30, "every job leased exactly once: {all:?}");
    assert_eq!(all.iter().map(|(j, _)| j).collect::<HashSet<_>>().len(), 30);
    // At most two jobs per lease call, each call its own lease.
    let mut per_lease: HashMap<i64, usize> = HashMap::new();
    for (_, attempt) in &all {
        *per_lease.entry(*attempt).or_default() += 1;
    }
    assert!(per_lease.values().all(|&n| n <= 2), "{per_lease:?}");
}

async fn expired_lease_is_re_leased_without_reported_positions(
    Database { store, queue }: Database,
) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let old = lease_one(&*queue, a, SHORT).await;
    let ack = upload(&*queue, a, &old, vec![result(0, "e1g1")], false, SHORT).await;
    assert_eq!(ack.accepted, 1);
    // a also holds a second job on a long lease; only time passing is assumed below, so the
    // test cannot flake on a slow machine.
    let live = lease_one(&*queue, a, LONG).await;
    store.clock().advance(SHORT * 4);
    let active = |store: Arc<dyn Store>| async move {
        let workers = store.active_workers(id).await.unwrap();
        workers.iter().map(|w| (w.id, w.jobs)).collect::<Vec<_>>()
    };
    assert_eq!(
        active(store.clone()).await,
        [(a, 1)],
        "an expired lease is not active"
    );

    let again = lease_one(&*queue, b, LONG).await;
    assert_eq!(
        again.job_id, old.job_id,
        "the expired job comes first, in id order"
    );
    assert!(
        again.attempt > old.attempt,
        "a new lease fences the old holder"
    );
    assert_eq!(indices(&again), [1], "reported position 0 is left out");
    // The live lease is not taken: b's next job is a fresh one.
    let next = lease_one(&*queue, b, LONG).await;
    assert!(
        ![live.job_id, old.job_id].contains(&next.job_id),
        "{} is {} or {}",
        next.job_id,
        live.job_id,
        old.job_id
    );
    assert_eq!(active(store.clone()).await, [(a, 1), (b, 2)]);
    let ack = queue
        .heartbeat(again.job_id, &beat(b, &again), LONG)
        .await
        .unwrap();
    assert!(!ack.cancelled);
}

async fn fully_reported_job_is_closed_on_re_lease(Database { store, queue }: Database) {
    let (id, jobs) = create_sweep(&*store, "s", &[2], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let old = lease_one(&*queue, a, SHORT).await;
    let results = vec![result(0, "e1g1"), result(1, "g3g6")];
    // Every position reported, but the worker dies before saying "finished".
    upload(&*queue, a, &old, results, false, SHORT).await;
    store.clock().advance(SHORT * 4);
    let leases = lease(&*queue, b, 100, LONG).await;
    assert_eq!(
        leases.len() as u64,
        jobs - 1,
        "the job with nothing left is not handed out"
    );
    assert!(leases.iter().all(|l| l.job_id != old.job_id));
    assert!(
        lease(&*queue, a, 100, LONG).await.is_empty(),
        "and it is closed"
    );
    assert_lease_lost(
        queue
            .heartbeat(old.job_id, &beat(a, &old), LONG)
            .await
            .unwrap_err(),
        old.job_id,
        a,
        1,
    );
    for l in &leases {
        finish(&*queue, b, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
}

async fn stale_worker_loses_the_lease(Database { store, queue }: Database) {
    create_sweep(&*store, "s", &[2], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let old = lease_one(&*queue, a, SHORT).await;
    store.clock().advance(SHORT * 4);
    let new = lease_one(&*queue, b, LONG).await;
    assert_eq!((new.job_id, new.attempt), (old.job_id, 2));
    let job = old.job_id;

    let err = queue
        .heartbeat(job, &beat(a, &old), LONG)
        .await
        .unwrap_err();
    assert_lease_lost(err, job, a, 1);
    let stale = batch(a, &old, vec![result(0, "e1g1")], true);
    assert_lease_lost(
        queue
            .report(job, &stale, LONG, MAX_ATTEMPTS)
            .await
            .unwrap_err(),
        job,
        a,
        1,
    );
    let failure = BuildFailure {
        worker_id: a,
        attempt: 1,
        output: "late".into(),
    };
    assert_lease_lost(
        queue
            .build_failed(job, &failure, LONG, MAX_ATTEMPTS)
            .await
            .unwrap_err(),
        job,
        a,
        1,
    );
    // The right worker with a wrong attempt, and a wrong worker with the right attempt.
    let wrong = Heartbeat {
        worker_id: b,
        attempt: 1,
    };
    assert_lease_lost(
        queue.heartbeat(job, &wrong, LONG).await.unwrap_err(),
        job,
        b,
        1,
    );
    assert_lease_lost(
        queue
            .heartbeat(job, &beat(a, &new), LONG)
            .await
            .unwrap_err(),
        job,
        a,
        2,
    );
    // An unknown job is lost as well: the worker drops it either way.
    assert_lease_lost(
        queue
            .heartbeat(job + 1000, &beat(b, &new), LONG)
            .await
            .unwrap_err(),
        job + 1000,
        b,
        2,
    );

    // Nothing of the stale report was stored, and the holder carries on.
    let sweep_id = new.sweep_id;
    assert!(store.results(sweep_id).await.unwrap().is_empty());
    assert_eq!(indices(&new), [0, 1]);
    finish(&*queue, b, &new).await;
}

async fn duplicate_report_is_counted(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let l = lease_one(&*queue, a, LONG).await;
    let one = batch(a, &l, vec![result(0, "e1g1")], false);
    let ack = queue
        .report(l.job_id, &one, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!((ack.accepted, ack.duplicates, ack.cancelled), (1, 0, false));
    let both = batch(a, &l, vec![result(0, "e1g1"), result(1, "g3g6")], false);
    let ack = queue
        .report(l.job_id, &both, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (1, 1));
    let ack = queue
        .report(l.job_id, &both, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!((ack.accepted, ack.duplicates), (0, 2));
    // A retried upload with different numbers does not overwrite the first one.
    let mut changed = result(0, "h1h2");
    changed.nodes = 1;
    let ack = upload(&*queue, a, &l, vec![changed], false, LONG).await;
    assert_eq!((ack.accepted, ack.duplicates), (0, 1));
    let rows = store.results(id).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].bestmove.as_str(), rows[0].nodes), ("e1g1", 1000));
}

async fn out_of_range_index_is_invalid(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = by_build(lease(&*queue, a, 100, LONG).await);
    let (first, second) = (&leases[0], &leases[1]);
    // Index 2 exists in the suite but belongs to the next job; the valid index 1 before it
    // must not be stored either.
    for bad in [2, 5, u32::MAX] {
        let b = batch(a, first, vec![result(1, "g3g6"), result(bad, "e2e4")], true);
        let err = queue
            .report(first.job_id, &b, LONG, MAX_ATTEMPTS)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Invalid(_)),
            "index {bad}: {err:?}"
        );
    }
    let b = batch(a, second, vec![result(0, "e1g1")], false);
    assert!(matches!(
        queue.report(second.job_id, &b, LONG, MAX_ATTEMPTS).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(store.results(id).await.unwrap().is_empty());
    // The lease survives a rejected batch.
    queue
        .heartbeat(first.job_id, &beat(a, first), LONG)
        .await
        .unwrap();
}

async fn finished_job_closes_and_sweep_completes(Database { store, queue }: Database) {
    let (id, jobs) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    assert_eq!(leases.len() as u64, jobs);
    finish(&*queue, a, &leases[0]).await;
    assert_lease_lost(
        queue
            .heartbeat(leases[0].job_id, &beat(a, &leases[0]), LONG)
            .await
            .unwrap_err(),
        leases[0].job_id,
        a,
        1,
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    for l in &leases[1..] {
        finish(&*queue, a, l).await;
    }
    let s = summary(&*store, id).await;
    assert_eq!(s.state, SweepState::Done);
    assert_eq!((s.positions_done, s.positions_total), (10, 10));
    assert_eq!(
        store.list_sweeps(5).await.unwrap()[0].state,
        SweepState::Done
    );
    assert!(nothing_to_lease(&*queue, a).await);
    assert!(store.active_workers(id).await.unwrap().is_empty());
    let nodes: u64 = (0..5).map(|i| 1000 + i).sum();
    for p in store.progress(id).await.unwrap() {
        assert_eq!(
            (p.done, p.total, p.errors, p.nodes),
            (5, 5, 0, nodes),
            "{p:?}"
        );
    }
}

async fn finished_job_with_holes_is_requeued(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let l = lease_one(&*queue, a, LONG).await;
    let ack = upload(&*queue, a, &l, vec![result(0, "e1g1")], true, LONG).await;
    assert_eq!(ack.accepted, 1);
    // The job is queued again, so the old lease is gone even though it had not expired.
    assert_lease_lost(
        queue
            .heartbeat(l.job_id, &beat(a, &l), LONG)
            .await
            .unwrap_err(),
        l.job_id,
        a,
        1,
    );
    let again = lease_one(&*queue, b, LONG).await;
    assert_eq!((again.job_id, again.attempt), (l.job_id, 2));
    assert_eq!(indices(&again), [1]);
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
}

async fn build_failure_closes_the_build(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = by_build(lease(&*queue, a, 100, LONG).await);
    let (baseline, variant) = leases.split_at(3);
    assert!(variant.iter().all(|l| l.build.name == "NULLMOVE_R_BASE=2"));
    let failure = BuildFailure {
        worker_id: a,
        attempt: variant[0].attempt,
        output: "error: boom".into(),
    };
    let ack = queue
        .build_failed(variant[0].job_id, &failure, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert!(!ack.cancelled);
    let record = store.sweep(id).await.unwrap();
    assert_eq!(record.builds[0].build_error, None);
    // The only live worker failed it, so nobody else could: the variant fails at once.
    assert_eq!(
        record.builds[1].build_error.as_deref(),
        Some("build failed on 1 worker; last output:\nerror: boom")
    );
    // Every open job of the build is closed, including ones another slot holds.
    for l in variant {
        assert_lease_lost(
            queue
                .heartbeat(l.job_id, &beat(a, l), LONG)
                .await
                .unwrap_err(),
            l.job_id,
            a,
            1,
        );
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    for l in baseline {
        finish(&*queue, a, l).await;
    }
    let s = summary(&*store, id).await;
    assert_eq!(
        s.state,
        SweepState::DoneWithErrors,
        "a failed variant still lets the sweep finish, with errors"
    );
    assert_eq!((s.positions_done, s.positions_total), (5, 10));
}

async fn baseline_failure_fails_the_sweep(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = by_build(lease(&*queue, a, 100, LONG).await);
    let failure = BuildFailure {
        worker_id: a,
        attempt: 1,
        output: "cc: not found".into(),
    };
    queue
        .build_failed(leases[0].job_id, &failure, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    for l in &leases[3..] {
        finish(&*queue, a, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Failed);
    let record = store.sweep(id).await.unwrap();
    let error = record.builds[0].build_error.as_deref().unwrap();
    assert!(error.ends_with("\ncc: not found"), "{error}");
}

async fn cancel_stops_the_sweep(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let l = lease_one(&*queue, a, LONG).await;
    store.cancel_sweep(id).await.unwrap();
    assert_eq!(summary(&*store, id).await.state, SweepState::Cancelled);
    assert_eq!(
        store.list_sweeps(1).await.unwrap()[0].state,
        SweepState::Cancelled
    );
    // The holder is told through the ack, not with an error.
    let ack = queue.heartbeat(l.job_id, &beat(a, &l), LONG).await.unwrap();
    assert!(ack.cancelled);
    let ack = upload(&*queue, a, &l, vec![result(0, "e1g1")], true, LONG).await;
    assert!(ack.cancelled);
    assert!(nothing_to_lease(&*queue, b).await);
    assert!(store.active_workers(id).await.unwrap().is_empty());
    assert_eq!(summary(&*store, id).await.state, SweepState::Cancelled);
    assert!(matches!(
        store.cancel_sweep(id + 1000).await,
        Err(StoreError::NotFound(_))
    ));

    // Other sweeps are unaffected.
    let (other, _) = create_sweep(&*store, "t", &[2], 5).await;
    let leases = lease(&*queue, b, 100, LONG).await;
    assert_eq!(leases.len(), 2);
    assert!(leases.iter().all(|l| l.sweep_id == other));
}

async fn progress_results_and_errors(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    let (base, var) = (&leases[0], &leases[1]);
    // One attempt (`upload_once`): every error is final at once (retries have their own
    // cases).
    assert_eq!(indices(base), [0, 1, 2, 3, 4]);
    upload_once(&*queue, a, base, results_with_a_crash(), false).await;
    let results = vec![result(0, "e1g1"), failed(2, "timeout")];
    upload_once(&*queue, a, var, results, false).await;

    let progress: Vec<_> = store
        .progress(id)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.build, p.suite, p.done, p.total, p.errors, p.nodes))
        .collect();
    let tiny = "tiny".to_string();
    assert_eq!(
        progress,
        [
            (
                DEFAULT_BASELINE.to_string(),
                tiny.clone(),
                5,
                5,
                1,
                1000 + 1001 + 1003 + 1004
            ),
            ("NULLMOVE_R_BASE=2".to_string(), tiny.clone(), 2, 5, 1, 1000),
        ]
    );
    let s = summary(&*store, id).await;
    assert_eq!((s.positions_done, s.positions_total), (7, 10));

    let rows = store.results(id).await.unwrap();
    let keys: Vec<_> = rows.iter().map(|r| (r.build.as_str(), r.index)).collect();
    assert_eq!(
        keys,
        [
            (DEFAULT_BASELINE, 0),
            (DEFAULT_BASELINE, 1),
            (DEFAULT_BASELINE, 2),
            (DEFAULT_BASELINE, 3),
            (DEFAULT_BASELINE, 4),
            ("NULLMOVE_R_BASE=2", 0),
            ("NULLMOVE_R_BASE=2", 2),
        ]
    );
    let r = &rows[1];
    assert_eq!(
        (
            r.suite.as_str(),
            r.position_id.as_str(),
            r.nodes,
            r.bestmove.as_str(),
            r.solved
        ),
        ("tiny", "WAC.001", 1001, "g3g6", true)
    );
    assert_eq!(r.error, None);
    assert_eq!(
        rows[2].error.as_deref(),
        Some("failed 1 time: engine crashed")
    );
    assert!(!rows[2].solved);

    let errors: Vec<_> = store
        .position_errors(id, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.build, e.suite, e.position, e.error))
        .collect();
    assert_eq!(
        errors,
        [
            (
                DEFAULT_BASELINE.into(),
                tiny.clone(),
                "pawn".into(),
                "failed 1 time: engine crashed".into()
            ),
            (
                "NULLMOVE_R_BASE=2".into(),
                tiny,
                "pawn".into(),
                "failed 1 time: timeout".into()
            ),
        ]
    );
    assert_eq!(store.position_errors(id, 1).await.unwrap().len(), 1);
}

async fn solved_is_recomputed_from_the_suite(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let l = lease_one(&*queue, a, LONG).await;
    let claim = |index, bestmove: &str, solved| {
        let mut r = result(index, bestmove);
        r.solved = solved;
        r
    };
    let mut crashed = claim(2, "e2e4", true);
    crashed.error = Some("crashed after bestmove".into());
    let results = vec![
        claim(0, "h1h8", true),  // wrong move, claimed solved
        claim(1, "g3g6", false), // right move, claimed unsolved
        crashed,                 // right move but an error: never solved
        claim(3, "e1c1", true),  // the avoid move
        claim(4, "e8c8", false), // right move
    ];
    upload_once(&*queue, a, &l, results, true).await;
    let solved: Vec<bool> = store
        .results(id)
        .await
        .unwrap()
        .iter()
        .map(|r| r.solved)
        .collect();
    assert_eq!(solved, [false, true, false, false, true]);
}

async fn failing_position_is_retried_then_final(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    let (base, var) = (&leases[0], &leases[1]);
    finish(&*queue, a, var).await;

    // First try: position 2 crashes. The failure is taken (accepted), and a re-sent batch
    // is a duplicate, not a second failure.
    let first = vec![
        result(0, "e1g1"),
        result(1, "g3g6"),
        failed(2, "crash"),
        result(3, "e1c1"),
        result(4, "e8c8"),
    ];
    assert_eq!(send(&*queue, a, base, first.clone(), false).await, (5, 0));
    assert_eq!(send(&*queue, a, base, first, false).await, (0, 5));
    assert_eq!(send(&*queue, a, base, vec![], true).await, (0, 0));
    // No result for it yet, so "finished" left a hole and the job is queued again.
    assert_eq!(store.results(id).await.unwrap().len(), 9);
    assert_lease_lost(
        queue
            .heartbeat(base.job_id, &beat(a, base), LONG)
            .await
            .unwrap_err(),
        base.job_id,
        a,
        1,
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    let errors = store.position_errors(id, 10).await.unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        (errors[0].position.as_str(), errors[0].error.as_str()),
        ("pawn", "failed 1 time so far, retrying: crash")
    );
    assert!(store
        .progress(id)
        .await
        .unwrap()
        .iter()
        .all(|p| p.errors == 0));

    // Two more tries (the only worker gets it back), the last one reaching the limit.
    for (attempt, reason) in [(2, "hang"), (3, "crash")] {
        let again = lease(&*queue, a, 100, LONG).await;
        assert_eq!(again.len(), 1);
        let l = &again[0];
        assert_eq!((l.job_id, l.attempt), (base.job_id, attempt));
        assert_eq!(indices(l), [2], "only the failing position");
        assert_eq!(
            send(&*queue, a, l, vec![failed(2, reason)], true).await,
            (1, 0)
        );
    }
    let rows = store.results(id).await.unwrap();
    assert_eq!(rows.len(), 10);
    let failed_row = rows
        .iter()
        .find(|r| r.build == DEFAULT_BASELINE && r.index == 2)
        .unwrap();
    assert_eq!(
        failed_row.error.as_deref(),
        Some("failed 3 times: crash; hang")
    );
    assert!(!failed_row.solved);
    // Final: the job is closed, nothing is leased again, and the sweep is done.
    assert!(nothing_to_lease(&*queue, a).await);
    let s = summary(&*store, id).await;
    assert_eq!(s.state, SweepState::DoneWithErrors);
    assert_eq!((s.positions_done, s.positions_total), (10, 10));
    let errors = store.position_errors(id, 10).await.unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].error, "failed 3 times: crash; hang");
    let errors: Vec<u64> = store
        .progress(id)
        .await
        .unwrap()
        .iter()
        .map(|p| p.errors)
        .collect();
    assert_eq!(errors, [1, 0]);
}

async fn failing_position_moves_to_another_worker(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let first = lease_one(&*queue, a, LONG).await;
    assert_eq!(first.build.name, DEFAULT_BASELINE);
    let mut results: Vec<_> = (1..5).map(|i| result(i, GOOD_MOVES[i as usize])).collect();
    results.push(failed(0, "crash"));
    assert_eq!(send(&*queue, a, &first, results, true).await, (5, 0));

    // a asks first, yet gets the other job although the failed one comes first by id...
    let other = lease_one(&*queue, a, LONG).await;
    assert!(other.job_id > first.job_id);
    assert_eq!(other.build.name, "NULLMOVE_R_BASE=2");
    // ...which goes to b, with only the failing position.
    let retry = lease_one(&*queue, b, LONG).await;
    assert_eq!(retry.job_id, first.job_id);
    assert!(retry.attempt > first.attempt);
    assert_eq!(indices(&retry), [0]);
    assert_eq!(
        send(&*queue, b, &retry, vec![failed(0, "timeout")], true).await,
        (1, 0)
    );
    finish(&*queue, a, &other).await;

    // Both failed it and nothing else is left: it comes back to a worker that tried.
    let last = lease_one(&*queue, a, LONG).await;
    assert_eq!(last.job_id, first.job_id);
    assert!(last.attempt > retry.attempt);
    assert_eq!(
        send(&*queue, a, &last, vec![failed(0, "crash")], true).await,
        (1, 0)
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
    let errors = store.position_errors(id, 10).await.unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(
        (errors[0].position.as_str(), errors[0].error.as_str()),
        ("castle", "failed 3 times: crash; timeout")
    );
}

async fn build_failure_waits_for_every_live_worker(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let leases = lease(&*queue, a, 100, LONG).await;
    let (base, var) = (&leases[0], &leases[1]);
    let failure = |worker_id, attempt, output: &str| BuildFailure {
        worker_id,
        attempt,
        output: output.into(),
    };
    // b is live too (registered just now): a's failure alone does not fail the variant.
    let ack = queue
        .build_failed(
            var.job_id,
            &failure(a, 1, "a: cc: not found"),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert!(!ack.cancelled);
    assert!(store
        .sweep(id)
        .await
        .unwrap()
        .builds
        .iter()
        .all(|b| b.build_error.is_none()));
    // The job is queued again without a holder...
    assert_lease_lost(
        queue
            .heartbeat(var.job_id, &beat(a, var), LONG)
            .await
            .unwrap_err(),
        var.job_id,
        a,
        1,
    );
    // ...and never handed to a again, even though it is queued and a asks.
    assert!(nothing_to_lease(&*queue, a).await);
    let retry = lease(&*queue, b, 100, LONG).await;
    assert_eq!(retry.len(), 1);
    assert_eq!((retry[0].job_id, retry[0].attempt), (var.job_id, 2));
    assert_eq!(indices(&retry[0]), [0, 1, 2, 3, 4]);

    // b fails too: 2 workers >= min(3 attempts, 2 live workers), so the variant fails.
    queue
        .build_failed(
            var.job_id,
            &failure(b, 2, "b: error: boom"),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    let record = store.sweep(id).await.unwrap();
    assert_eq!(record.builds[0].build_error, None);
    assert_eq!(
        record.builds[1].build_error.as_deref(),
        Some("build failed on 2 workers; last output:\nb: error: boom")
    );
    assert_lease_lost(
        queue
            .heartbeat(var.job_id, &beat(b, &retry[0]), LONG)
            .await
            .unwrap_err(),
        var.job_id,
        b,
        2,
    );
    assert!(nothing_to_lease(&*queue, b).await);
    finish(&*queue, a, base).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

async fn build_failure_with_one_live_worker_is_final(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    // b registered, but was not seen within the (short) lease: only a is live.
    let b = worker(&*store, "b").await;
    store.clock().advance(SHORT * 4);
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    let failure = BuildFailure {
        worker_id: a,
        attempt: 1,
        output: "error: boom".into(),
    };
    queue
        .build_failed(leases[1].job_id, &failure, SHORT, MAX_ATTEMPTS)
        .await
        .unwrap();
    let record = store.sweep(id).await.unwrap();
    assert_eq!(
        record.builds[1].build_error.as_deref(),
        Some("build failed on 1 worker; last output:\nerror: boom")
    );
    // The build's jobs are closed, so b, back later, finds nothing of it.
    assert!(nothing_to_lease(&*queue, b).await);
    finish(&*queue, a, &leases[0]).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

/// Fails the build of `lease` on worker `a` at the lease's attempt, with two live workers, so
/// it must not fail yet, not even when leasing judges it again.
async fn fail_build_while_two_live(db: &Database, id: i64, a: i64, lease: &JobLease) {
    let (store, queue) = (&db.store, &*db.queue);
    let failure = BuildFailure {
        worker_id: a,
        attempt: lease.attempt,
        output: "a: cc: not found".into(),
    };
    queue
        .build_failed(lease.job_id, &failure, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    let no_errors =
        |builds: &[sweep_domain::wire::BuildStatus]| builds.iter().all(|b| b.build_error.is_none());
    assert!(no_errors(&store.sweep(id).await.unwrap().builds));
    // Leasing judges the build again, but b is still live: nothing changes, and a is not
    // handed the build it failed.
    assert!(nothing_to_lease(queue, a).await);
    assert!(no_errors(&store.sweep(id).await.unwrap().builds));
}

async fn build_failure_is_final_once_the_other_workers_die(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let leases = lease(&*queue, a, 100, LONG).await;
    let (base, var) = (&leases[0], &leases[1]);
    fail_build_while_two_live(&db, id, a, var).await;
    // b goes silent for longer than a (short) lease: a is the only live worker, and it
    // failed the build, so nobody could ever take its queued job. a's next lease fails it.
    store.clock().advance(SHORT * 4);
    assert!(lease(&*queue, a, 100, SHORT).await.is_empty());
    let record = store.sweep(id).await.unwrap();
    assert_eq!(record.builds[0].build_error, None);
    assert_eq!(
        record.builds[1].build_error.as_deref(),
        Some("build failed on 1 worker; last output:\na: cc: not found")
    );
    // Its job is closed: b, back later, finds nothing of it.
    assert!(nothing_to_lease(&*queue, b).await);
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    finish(&*queue, a, base).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

async fn baseline_build_failure_is_final_once_the_other_workers_die(db: Database) {
    let (store, queue) = (db.store.clone(), db.queue.clone());
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let leases = lease(&*queue, a, 100, LONG).await;
    let (base, var) = (&leases[0], &leases[1]);
    fail_build_while_two_live(&db, id, a, base).await;
    store.clock().advance(SHORT * 4);
    assert!(lease(&*queue, a, 100, SHORT).await.is_empty());
    let record = store.sweep(id).await.unwrap();
    assert_eq!(
        record.builds[0].build_error.as_deref(),
        Some("build failed on 1 worker; last output:\na: cc: not found")
    );
    assert_eq!(record.builds[1].build_error, None);
    assert!(nothing_to_lease(&*queue, b).await);
    // With the baseline failed there is nothing to compare against once the rest is done.
    finish(&*queue, a, var).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::Failed);
}

/// Local mode opens the store by file path: the file is created, and data survives a
/// reopen (with migrations applied only once).
#[tokio::test]
async fn sqlite_file_is_created_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not").join("yet").join("sweep.db");
    let url = format!("sqlite:{}", path.display());
    let store = sweep_coordinator::database::connect(&url)
        .await
        .unwrap()
        .store;
    assert!(path.exists());
    let (id, _) = create_sweep(&*store, "kept", &[2], 2).await;
    drop(store);
    let store = sweep_coordinator::database::connect(path.to_str().unwrap())
        .await
        .unwrap()
        .store;
    assert_eq!(summary(&*store, id).await.name, "kept");
    assert!(sweep_coordinator::database::connect("mysql://localhost/x")
        .await
        .is_err());
}

/// A SQLite store in memory (handy for tools) works across its pools.
#[tokio::test]
async fn sqlite_in_memory_works() {
    let store = sweep_coordinator::database::connect("sqlite::memory:")
        .await
        .unwrap()
        .store;
    let (id, jobs) = create_sweep(&*store, "mem", &[2], 5).await;
    assert_eq!(jobs, 2);
    assert_eq!(summary(&*store, id).await.state, SweepState::Queued);
}

/// The outcome of a job whose results were all new.
fn stored(status: LeaseStatus, accepted: u32) -> JobOutcome {
    JobOutcome {
        status,
        accepted,
        duplicates: 0,
    }
}

/// The suite indices that have a result in sweep `id`, sorted.
async fn result_indices(store: &dyn Store, id: i64) -> Vec<u32> {
    let mut got: Vec<u32> = store
        .results(id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.index)
        .collect();
    got.sort_unstable();
    got
}

async fn upload_with_a_lost_lease_stores_the_others(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[], 2).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let take = |lease| {
        let queue = queue.clone();
        async move { lease_one(&*queue, a, lease).await }
    };
    // Only the middle job's lease runs out, and b takes it over.
    let (first, middle, last) = (take(LONG).await, take(SHORT).await, take(LONG).await);
    assert_eq!(indices(&first), [0, 1]);
    assert_eq!(indices(&last), [4]);
    store.clock().advance(SHORT * 4);
    let taken = lease_one(&*queue, b, LONG).await;
    assert_eq!(taken.job_id, middle.job_id);
    assert!(taken.attempt > middle.attempt);

    // Sent highest job first: the outcomes still come back in request order.
    let reports: Arc<[JobReport]> = [
        job_report(&last, good_results(&last), false),
        job_report(&middle, good_results(&middle), false),
        job_report(&first, good_results(&first), false),
    ]
    .into();
    let outcomes = queue
        .report_many(a, reports.clone(), LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        [
            stored(LeaseStatus::Held, 1),
            JobOutcome::LOST,
            stored(LeaseStatus::Held, 2),
        ]
    );
    assert_eq!(result_indices(&*store, id).await, [0, 1, 4]);

    // Sent again: duplicates, and still nothing for the lost job.
    let again = queue
        .report_many(a, reports.clone(), LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(again[0].duplicates, 1);
    assert_eq!(again[1], JobOutcome::LOST);
    assert_eq!(again[2].duplicates, 2);
    assert_eq!(result_indices(&*store, id).await, [0, 1, 4]);

    // An unknown job is lost too; an unknown worker fails the call and stores nothing.
    let mut unknown = job_report(&first, vec![], false);
    unknown.job_id += 1000;
    assert_eq!(
        queue
            .report_many(a, [unknown].into(), LONG, MAX_ATTEMPTS)
            .await
            .unwrap(),
        [JobOutcome::LOST]
    );
    assert!(matches!(
        queue
            .report_many(a + b + 1000, Vec::new().into(), LONG, MAX_ATTEMPTS)
            .await,
        Err(StoreError::NotFound(_))
    ));
    finish(&*queue, b, &taken).await;
}

async fn upload_with_an_invalid_report_stores_nothing(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 3, LONG).await;
    let (first, second, third) = (&leases[0], &leases[1], &leases[2]);
    // The second report names index 4, which belongs to the third job; the reports around it
    // are valid, and the first one even closes its job.
    let reports = [
        job_report(first, good_results(first), true),
        job_report(second, vec![result(2, "e2e4"), result(4, "e8c8")], false),
        job_report(third, good_results(third), false),
    ];
    let err = queue
        .report_many(a, reports.into(), LONG, MAX_ATTEMPTS)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    assert!(store.results(id).await.unwrap().is_empty());
    // The first job was not closed: its lease is still held.
    let held = held(&leases);
    let beats = queue.heartbeat_many(a, &held, LONG).await.unwrap();
    assert!(beats.iter().all(|o| o.status == LeaseStatus::Held));
}

/// A NUL byte in a best move (which Postgres text cannot hold), node counts past what can be
/// stored and a 3 MB error text each fail their own position (a failed try, retried), never
/// the upload; the good results beside them are stored, and the stored texts are bounded.
async fn bad_results_fail_their_positions_not_the_upload(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[], 5).await;
    let a = worker(&*store, "a").await;
    let lease = lease_one(&*queue, a, LONG).await;
    assert_eq!(lease.positions.len(), 5);
    let mut results = good_results(&lease);
    results[0].bestmove = "e1\0g1".into();
    results[1].nodes = u64::MAX;
    results[2].error = Some(format!("crash\0{}", "x".repeat(3 << 20)));
    let outcomes = queue
        .report_many(
            a,
            [job_report(&lease, results, true)].into(),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!(outcomes[0].status, LeaseStatus::Held);
    assert_eq!(outcomes[0].accepted, 5, "2 results and 3 failed tries");
    let stored = store.results(id).await.unwrap();
    let indices: Vec<u32> = stored.iter().map(|r| r.index).collect();
    assert_eq!(indices, [3, 4]);
    let errors = store.position_errors(id, 10).await.unwrap();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let text = |i: usize| errors[i].error.clone();
    assert!(text(0).contains("invalid best move"), "{}", text(0));
    assert!(text(1).contains("more than can be stored"), "{}", text(1));
    assert!(text(2).contains("crash\u{FFFD}x") && text(2).len() < 10_000);
    // The job went back to the queue for the three positions, to be tried again.
    let again = lease_one(&*queue, a, LONG).await;
    let left: Vec<u32> = again.positions.iter().map(|p| p.index).collect();
    assert_eq!(left, [0, 1, 2]);
}

async fn heartbeat_of_many_leases_renews_only_the_held(Database { store, queue }: Database) {
    let (x, _) = create_sweep(&*store, "x", &[2, 4], 5).await;
    let (y, _) = create_sweep(&*store, "y", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    // Four lease calls: a heartbeat renews the leases (lease calls) it names, with every job
    // each still holds, so the job a does not name must be a lease of its own to expire.
    let mut leases = Vec::new();
    for _ in 0..4 {
        leases.push(lease_one(&*queue, a, SHORT).await);
    }
    let (held, lost, untouched, cancelled) = (&leases[0], &leases[1], &leases[2], &leases[3]);
    assert_eq!(
        [held, lost, untouched].map(|l| l.sweep_id),
        [x, x, x],
        "one job per build of x"
    );
    assert_eq!(cancelled.sweep_id, y);
    finish(&*queue, a, lost).await;
    store.cancel_sweep(y).await.unwrap();

    let beat_of = |l: &JobLease| HeldLease {
        job_id: l.job_id,
        attempt: l.attempt,
    };
    let unknown = HeldLease {
        job_id: held.job_id + 1000,
        attempt: 1,
    };
    let beats = [beat_of(cancelled), beat_of(lost), beat_of(held), unknown];
    let outcomes = queue.heartbeat_many(a, &beats, LONG).await.unwrap();
    let statuses: Vec<LeaseStatus> = outcomes.iter().map(|o| o.status).collect();
    assert_eq!(
        statuses,
        [
            LeaseStatus::Cancelled,
            LeaseStatus::Lost,
            LeaseStatus::Held,
            LeaseStatus::Lost
        ]
    );
    assert!(outcomes
        .iter()
        .all(|o| o.accepted == 0 && o.duplicates == 0));

    // The short leases run out; only the renewed one survives, so b gets just the job a
    // did not name (the cancelled sweep's jobs are never leased, the lost one is done).
    store.clock().advance(SHORT * 4);
    let taken = lease(&*queue, b, 100, LONG).await;
    assert_eq!(
        taken.iter().map(|l| l.job_id).collect::<Vec<_>>(),
        [untouched.job_id]
    );
    assert!(matches!(
        queue.heartbeat_many(a + b + 1000, &[], LONG).await,
        Err(StoreError::NotFound(_))
    ));
    finish(&*queue, a, held).await;
}

async fn released_leases_are_queued_again_at_once(Database { store, queue }: Database) {
    let (x, _) = create_sweep(&*store, "x", &[2], 5).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    let leases = lease(&*queue, a, 2, LONG).await;
    assert_eq!(leases.len(), 2);
    let (kept, given) = (&leases[0], &leases[1]);
    let held = |l: &JobLease| HeldLease {
        job_id: l.job_id,
        attempt: l.attempt,
    };
    // b cannot release a's lease; an attempt a never held is not released either.
    let stale = HeldLease {
        job_id: given.job_id,
        attempt: given.attempt + 1000,
    };
    let outcomes = queue.release_leases(b, &[held(given)]).await.unwrap();
    assert_eq!(outcomes[0].status, LeaseStatus::Lost);
    let outcomes = queue
        .release_leases(a, &[stale, held(given)])
        .await
        .unwrap();
    let statuses: Vec<LeaseStatus> = outcomes.iter().map(|o| o.status).collect();
    assert_eq!(statuses, [LeaseStatus::Lost, LeaseStatus::Held]);

    // Long leases: only the released job can go to b now, under a new lease.
    let taken = lease(&*queue, b, 100, LONG).await;
    assert_eq!(
        taken.iter().map(|l| l.job_id).collect::<Vec<_>>(),
        [given.job_id]
    );
    assert!(taken[0].attempt > given.attempt);
    assert_eq!(taken[0].sweep_id, x);
    // a's late report of the released attempt is fenced.
    let late = queue.heartbeat_many(a, &[held(given)], LONG).await.unwrap();
    assert_eq!(late[0].status, LeaseStatus::Lost);
    finish(&*queue, a, kept).await;
    finish(&*queue, b, &taken[0]).await;
}

async fn sweep_suite_is_the_version_the_sweep_ran(Database { store, .. }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    // A newer version of the file, stored after the sweep started, must not leak in.
    let edited = sweep_domain::epd::parse_suite(
        "tiny",
        &format!("{SUITE}4k3/8/8/8/8/8/3P4/4K3 w - - bm d4; id \"more\";\n"),
    )
    .unwrap();
    store.put_suite(&edited).await.unwrap();
    let read = store.sweep_suite(id, "tiny").await.unwrap();
    assert_eq!(read, suite(), "name, sha256 and positions as stored");
    assert!(
        read.positions.iter().all(|p| p.epd.is_some()),
        "the original EPD records are stored with the positions"
    );
    assert!(matches!(
        store.sweep_suite(id, "other").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.sweep_suite(id + 1000, "tiny").await,
        Err(StoreError::NotFound(_))
    ));
}

/// A binary-only engine's jobs go only to workers that reported its binary; source engines'
/// jobs go to every worker, as before.
async fn binary_engine_jobs_go_only_to_workers_with_it(Database { store, queue }: Database) {
    // Binary sweep first, so its jobs come first in job id order.
    let (fish, fish_jobs) = create_binary_sweep(&*store, "fish", &[64], 5).await;
    let (minnow, minnow_jobs) = create_sweep(&*store, "minnow", &[2], 5).await;
    assert_eq!((fish_jobs, minnow_jobs), (2, 2));
    assert_eq!(store.sweep(fish).await.unwrap().source_sha256, None);
    assert_eq!(
        store.sweep(minnow).await.unwrap().source_sha256.as_deref(),
        Some(SNAPSHOT)
    );

    let without = worker(&*store, "without").await;
    let other = worker_with_engines(&*store, "other", &["cod"]).await;
    let with = worker_with_engines(&*store, "with", &["fish", "fish"]).await;

    let leased = lease(&*queue, without, 10, LONG).await;
    assert_eq!(leased.len(), 2, "every job of the source engine");
    assert!(leased.iter().all(|l| l.sweep_id == minnow));
    assert!(lease(&*queue, other, 10, LONG).await.is_empty());

    let leased = lease(&*queue, with, 10, LONG).await;
    assert_eq!(leased.len(), 2, "every job of the binary-only engine");
    assert!(leased.iter().all(|l| l.sweep_id == fish));
    let variant = leased
        .iter()
        .find(|l| l.build.name == "Hash=64")
        .expect("the variant's job");
    let b = &variant.build;
    assert_eq!(b.binary_path.as_deref(), Some("/opt/engines/fish"));
    assert_eq!((b.source_sha256.as_str(), b.binary.as_str()), ("", "fish"));
    assert!(b.defines.is_empty() && b.build_command.is_empty());
    assert_eq!(
        b.options,
        [
            ("Threads".to_string(), "1".to_string()),
            ("Hash".to_string(), "64".to_string())
        ]
    );
    assert_eq!(b.checked_options, ["Hash".to_string()]);
    let baseline = leased
        .iter()
        .find(|l| l.build.name == DEFAULT_BASELINE)
        .unwrap();
    assert_eq!(
        baseline.build.options,
        [("Threads".to_string(), "1".to_string())]
    );
}

/// A binary-only build that failed on every live worker having the engine is final, however
/// many live workers lack it (they would never get its jobs, so waiting for them would stall
/// the sweep).
async fn binary_build_failure_counts_only_workers_with_the_engine(
    Database { store, queue }: Database,
) {
    let (id, _) = create_binary_sweep(&*store, "fish", &[2048], 5).await;
    let _without = [
        worker(&*store, "a").await,
        worker(&*store, "b").await,
        worker(&*store, "c").await,
    ];
    let with = worker_with_engines(&*store, "with", &["fish"]).await;
    let leases = lease(&*queue, with, 100, LONG).await;
    assert_eq!(leases.len(), 2);
    let variant = leases.iter().find(|l| l.build.name == "Hash=2048").unwrap();
    let failure = BuildFailure {
        worker_id: with,
        attempt: variant.attempt,
        output: "option `Hash` value `2048` is out of the announced range".into(),
    };
    queue
        .build_failed(variant.job_id, &failure, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    let record = store.sweep(id).await.unwrap();
    let error = record.builds[1].build_error.as_deref().unwrap_or_default();
    assert!(error.contains("failed on 1 worker"), "{error}");
    assert!(error.contains("`Hash`"), "{error}");
    let baseline = leases
        .iter()
        .find(|l| l.build.name == DEFAULT_BASELINE)
        .unwrap();
    finish(&*queue, with, baseline).await;
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

async fn identical_running_sweep_is_returned_not_copied(Database { store, queue }: Database) {
    let sweep = new_sweep(&*store, spec("s", &[2], 5), &suite()).await;
    let first = store.create_sweep_unless_running(&sweep).await.unwrap();
    assert!(!first.existing);
    assert_eq!(first.jobs, 2);
    let again = store.create_sweep_unless_running(&sweep).await.unwrap();
    assert_eq!((again.id, again.jobs, again.existing), (first.id, 2, true));
    // Running (a job leased) is still running.
    let a = worker(&*store, "a").await;
    let _held = lease(&*queue, a, 1, LONG).await;
    assert_eq!(summary(&*store, first.id).await.state, SweepState::Running);
    let running = store.create_sweep_unless_running(&sweep).await.unwrap();
    assert_eq!((running.id, running.existing), (first.id, true));
    // Another spec, or the same spec on another source, is another sweep.
    let renamed = new_sweep(&*store, spec("t", &[2], 5), &suite()).await;
    assert!(
        !store
            .create_sweep_unless_running(&renamed)
            .await
            .unwrap()
            .existing
    );
    let mut other_source = sweep.clone();
    store.put_snapshot("0ther", b"other").await.unwrap();
    other_source.source_sha256 = Some("0ther".into());
    let other = store
        .create_sweep_unless_running(&other_source)
        .await
        .unwrap();
    assert!(!other.existing && other.id != first.id);
    // Once cancelled (or finished), the same submission makes a new sweep.
    store.cancel_sweep(first.id).await.unwrap();
    let after_cancel = store.create_sweep_unless_running(&sweep).await.unwrap();
    assert!(!after_cancel.existing && after_cancel.id > other.id);
    let single = new_sweep(&*store, spec("one", &[], 5), &suite()).await;
    let one = store.create_sweep_unless_running(&single).await.unwrap();
    let b = worker(&*store, "b").await;
    loop {
        let leases = lease(&*queue, b, 10, LONG).await;
        if leases.is_empty() {
            break;
        }
        for l in &leases {
            finish(&*queue, b, l).await;
        }
    }
    assert_eq!(summary(&*store, one.id).await.state, SweepState::Done);
    let after_done = store.create_sweep_unless_running(&single).await.unwrap();
    assert!(!after_done.existing && after_done.id != one.id);
}

async fn concurrent_identical_submits_make_one_sweep(Database { store, .. }: Database) {
    let sweep = Arc::new(new_sweep(&*store, spec("race", &[2, 4], 5), &suite()).await);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, sweep) = (store.clone(), sweep.clone());
            tokio::spawn(async move { store.create_sweep_unless_running(&sweep).await.unwrap() })
        })
        .collect();
    let mut created = Vec::new();
    for t in tasks {
        created.push(t.await.unwrap());
    }
    let ids: HashSet<i64> = created.iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 1, "{created:?}");
    assert_eq!(created.iter().filter(|c| !c.existing).count(), 1);
    assert_eq!(store.list_sweeps(100).await.unwrap().len(), 1);
}

async fn huge_node_counts_are_summed_exactly(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 2, LONG).await;
    let big = i64::MAX as u64;
    // The baseline's job: two positions at i64::MAX; the variant's: three, and one more
    // than can be stored.
    assert_eq!(leases.len(), 2);
    for lease in &leases {
        let huge = if lease.build.name == DEFAULT_BASELINE {
            2
        } else {
            3
        };
        let mut results = good_results(lease);
        for (i, r) in results.iter_mut().enumerate() {
            r.nodes = if i < huge { big } else { 0 };
        }
        if huge == 3 {
            results[4].nodes = u64::MAX;
        }
        queue
            .report_many(
                a,
                [job_report(lease, results, true)].into(),
                LONG,
                MAX_ATTEMPTS,
            )
            .await
            .unwrap();
    }
    let progress = store.progress(id).await.unwrap();
    let nodes: BTreeMap<&str, u64> = progress
        .iter()
        .map(|p| (p.build.as_str(), p.nodes))
        .collect();
    // 2 x (2^63 - 1) = 2^64 - 2: exact, no wrap, no overflow error.
    assert_eq!(nodes[DEFAULT_BASELINE], u64::MAX - 1, "{progress:?}");
    // 3 x (2^63 - 1) does not fit 64 bits: it saturates, never wraps.
    assert_eq!(
        nodes[format!("{KNOB}=2").as_str()],
        u64::MAX,
        "{progress:?}"
    );
    let sums = store.table_sums(id).await.unwrap();
    let of = |build: &str| {
        sums.iter()
            .find(|((b, _, _), _)| b == build)
            .map(|(_, s)| s.clone())
            .unwrap()
    };
    assert_eq!(of(DEFAULT_BASELINE).nodes, 2 * u128::from(big));
    let variant = of(&format!("{KNOB}=2"));
    assert_eq!(
        variant.nodes,
        3 * u128::from(big),
        "summed exactly in 128 bits"
    );
    assert_eq!(
        variant.errors, 0,
        "the unstorable count is a failed try, not a result"
    );
    assert_eq!(variant.done, 4);
}

/// The table's sums, which the database keeps as results arrive, equal the sums made from the
/// results themselves after every upload, whatever the order: baseline results before, after
/// and in the same upload as other builds', final errors on either side of a pair, unsolved
/// positions, node counts that differ per build and position. The progress counts the same
/// results.
async fn table_sums_follow_every_arrival_order(Database { store, queue }: Database) {
    // Four builds x three chunks (2, 2, 1 positions): 12 jobs.
    let (id, jobs) = create_sweep(&*store, "sums", &[2, 3, 4], 2).await;
    let a = worker(&*store, "a").await;
    let leases = lease(&*queue, a, 100, LONG).await;
    assert_eq!(leases.len() as u64, jobs);
    // A fixed shuffle that puts baseline jobs first, last and beside others.
    let order = [5, 0, 9, 3, 11, 1, 7, 2, 10, 4, 8, 6];
    let mut shuffled: Vec<JobLease> = order.iter().map(|&k| leases[k].clone()).collect();
    let mut uploads = 0;
    while !shuffled.is_empty() {
        let take = 1 + uploads % 3;
        let group: Vec<JobLease> = shuffled.drain(..take.min(shuffled.len())).collect();
        let reports: Vec<JobReport> = group
            .iter()
            .map(|l| {
                let salt = l.job_id as u32;
                let results = l
                    .positions
                    .iter()
                    .map(|p| match (p.index + salt) % 5 {
                        0 => failed(p.index, "engine crashed"),
                        1 => result(p.index, "a1a1"),
                        _ => PositionResult {
                            nodes: 1_000 + u64::from(salt) * 7_919 + u64::from(p.index) * 104_729,
                            ..result(p.index, GOOD_MOVES[p.index as usize])
                        },
                    })
                    .collect();
                job_report(l, results, true)
            })
            .collect();
        queue
            .report_many(a, reports.into(), LONG, 1)
            .await
            .expect("upload");
        uploads += 1;
        let rows = store.results(id).await.unwrap();
        assert_eq!(
            store.table_sums(id).await.unwrap(),
            sums_of(&rows, DEFAULT_BASELINE),
            "after upload {uploads}"
        );
        assert_eq!(summary(&*store, id).await.positions_done, rows.len() as u64);
    }
    let rows = store.results(id).await.unwrap();
    assert_eq!(rows.len(), 20, "every position of every build");
    assert!(rows.iter().any(|r| r.error.is_some()), "errors among them");
    let sums = store.table_sums(id).await.unwrap();
    assert!(
        sums.values().any(|s| s.compared > 0 && s.compared < s.done),
        "some positions not compared: {sums:?}"
    );
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);
}

/// A sweep's source provenance (kind, uploader, git url, rev, commit) is stored and read
/// back; a snapshot's presence is answered without reading it.
async fn source_provenance_reads_back(Database { store, .. }: Database) {
    use sweep_domain::source::{SourceKind, SourceOrigin};
    let plain = create_sweep(store.as_ref(), "registered", &[2], 5).await.0;
    assert_eq!(
        store.sweep(plain).await.unwrap().origin,
        SourceOrigin::default(),
        "registered unless said otherwise"
    );
    let git = SourceOrigin {
        kind: SourceKind::Git,
        uploader: None,
        git_url: Some("/srv/minnow.git".into()),
        git_rev: Some("main".into()),
        git_commit: Some("0123456789abcdef0123456789abcdef01234567".into()),
    };
    let uploaded = SourceOrigin {
        kind: SourceKind::Uploaded,
        uploader: Some("alice".into()),
        ..SourceOrigin::default()
    };
    // Values differ, so the second is not the first still queued.
    for (value, origin) in [(3, git), (4, uploaded)] {
        let mut new = new_sweep(store.as_ref(), spec("provenance", &[value], 5), &suite()).await;
        new.origin = origin.clone();
        let (id, _) = create(store.as_ref(), &new).await;
        let rec = store.sweep(id).await.unwrap();
        assert_eq!(rec.origin, origin);
        assert_eq!(rec.source_sha256.as_deref(), Some(SNAPSHOT));
    }
    assert!(store.has_snapshot(SNAPSHOT).await.unwrap());
    assert!(!store.has_snapshot(&"0".repeat(64)).await.unwrap());
}

/// The workers page: each worker seen lately with its unexpired leases and the results it
/// stored in the last minute; bounded by how recently it was seen and by a count.
async fn workers_list_their_leases_and_recent_results(Database { store, queue }: Database) {
    create_sweep(&*store, "s", &[2], 2).await;
    let (a, b, c) = (
        worker(&*store, "a").await,
        worker(&*store, "b").await,
        worker(&*store, "c").await,
    );
    let held_a = lease(&*queue, a, 2, LONG).await;
    assert_eq!(held_a.len(), 2);
    finish(&*queue, a, &held_a[0]).await;
    let held_b = lease(&*queue, b, 1, LONG).await;
    assert_eq!(held_b.len(), 1);

    let listed = store.workers(Duration::from_secs(3600), 10).await.unwrap();
    let by_id: BTreeMap<i64, _> = listed.iter().map(|w| (w.id, w)).collect();
    assert_eq!(by_id.len(), 3, "{listed:?}");
    let (wa, wb, wc) = (by_id[&a], by_id[&b], by_id[&c]);
    assert_eq!(
        (wa.name.as_str(), wa.host.as_str(), wa.cores),
        ("a", "a.local", 2)
    );
    assert_eq!(
        (wa.jobs, wa.results_last_minute),
        (1, held_a[0].positions.len() as u64)
    );
    assert_eq!((wb.jobs, wb.results_last_minute), (1, 0));
    assert_eq!((wc.jobs, wc.results_last_minute), (0, 0));
    assert!(wa.last_seen_at >= wa.registered_at);
    // Most recently seen first.
    assert!(listed
        .windows(2)
        .all(|w| w[0].last_seen_at >= w[1].last_seen_at));
    assert_eq!(
        store
            .workers(Duration::from_secs(3600), 2)
            .await
            .unwrap()
            .len(),
        2
    );
    // Workers not seen within the window are left out: an hour later, none was seen within
    // the last ten minutes, nor holds a live lease.
    store.clock().advance(Duration::from_secs(3600));
    assert!(store
        .workers(Duration::from_secs(600), 10)
        .await
        .unwrap()
        .is_empty());
    let later = store.workers(Duration::from_secs(7200), 10).await.unwrap();
    assert_eq!(later.len(), listed.len());
    assert!(
        later
            .iter()
            .all(|w| w.jobs == 0 && w.results_last_minute == 0),
        "{later:?}"
    );
}
