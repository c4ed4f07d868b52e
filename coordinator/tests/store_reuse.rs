//! Result reuse (issue 10 item 3) on both backends: a sweep takes the results earlier sweeps
//! measured with the same build on the same position and limit, runs only the rest, and says
//! how many it took; `recompute` takes none.

#[macro_use]
mod support;

use std::collections::BTreeMap;

use support::*;
use sweep_coordinator::store::Store;
use sweep_domain::crosscheck::Share;
use sweep_domain::epd::parse_suite;
use sweep_domain::table::ResultRow;
use sweep_domain::wire::SweepState;

on_both_backends!(
    an_identical_rerun_takes_every_result_and_runs_nothing,
    the_baseline_is_shared_with_a_sweep_of_other_values,
    recompute_takes_nothing,
    positions_match_by_content_in_an_edited_suite,
    binary_only_engines_reuse_nothing,
    an_identical_rerun_takes_the_cross_checks_too,
    checks_of_positions_measured_anew_run,
    checks_of_taken_results_are_taken_at_once,
);

/// Leases every job of the store to `worker_id` and reports good results for all of them.
async fn run_everything(queue: &dyn WorkerQueue, worker_id: i64) -> usize {
    let mut positions = 0;
    loop {
        let leases = queue
            .lease_jobs(worker_id, 16, LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
        if leases.is_empty() {
            return positions;
        }
        for lease in &leases {
            positions += lease.positions.len();
            finish(queue, worker_id, lease).await;
        }
    }
}

/// (build, index) -> (nodes, bestmove, solved, reused) of a sweep's results.
async fn results_of(store: &dyn Store, id: i64) -> BTreeMap<(String, u32), ResultRow> {
    store
        .results(id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| ((r.build.clone(), r.index), r))
        .collect()
}

async fn an_identical_rerun_takes_every_result_and_runs_nothing(
    Database { store, queue }: Database,
) {
    let (first, _) = create_sweep(&*store, "first", &[2], 2).await;
    let w = worker(&*store, "w").await;
    assert_eq!(run_everything(&*queue, w).await, 10);
    assert_eq!(summary(&*store, first).await.state, SweepState::Done);

    // The identical config once more: the first sweep has finished, so this is a new sweep,
    // and every one of its results is the first one's.
    let again = new_sweep(&*store, spec("first", &[2], 2), &suite()).await;
    let created = store.create_sweep_unless_running(&again).await.unwrap();
    assert!(!created.existing);
    assert_ne!(created.id, first);
    assert_eq!(created.reused, 10);
    let s = summary(&*store, created.id).await;
    assert_eq!(s.state, SweepState::Done, "nothing is left to run");
    assert_eq!((s.positions_done, s.positions_total), (10, 10));
    assert!(
        queue
            .lease_jobs(w, 16, LONG, MAX_ATTEMPTS)
            .await
            .unwrap()
            .is_empty(),
        "no job to lease: no engine starts"
    );
    let (old, new) = (
        results_of(&*store, first).await,
        results_of(&*store, created.id).await,
    );
    assert_eq!(old.len(), new.len());
    for (key, o) in &old {
        let n = &new[key];
        assert!(!o.reused && n.reused, "{key:?}");
        assert_eq!(
            (n.nodes, &n.bestmove, n.solved, &n.position_id),
            (o.nodes, &o.bestmove, o.solved, &o.position_id),
            "{key:?}"
        );
    }
    // The table says so, cell by cell.
    let sums = store.table_sums(created.id).await.unwrap();
    assert_eq!(sums.len(), 2);
    for cell in sums.values() {
        assert_eq!((cell.done, cell.reused), (5, 5));
    }
    // A third run takes the measured originals again (a copy is never the source).
    let third = new_sweep(&*store, spec("first", &[2], 5), &suite()).await;
    let created = store.create_sweep_unless_running(&third).await.unwrap();
    assert_eq!(created.reused, 10);
    assert_eq!(summary(&*store, created.id).await.state, SweepState::Done);
}

async fn the_baseline_is_shared_with_a_sweep_of_other_values(Database { store, queue }: Database) {
    create_sweep(&*store, "two", &[2], 5).await;
    let w = worker(&*store, "w").await;
    run_everything(&*queue, w).await;
    let other = new_sweep(&*store, spec("four", &[4], 5), &suite()).await;
    let created = store.create_sweep_unless_running(&other).await.unwrap();
    assert_eq!(created.reused, 5, "the baseline's five positions");
    let leases = queue.lease_jobs(w, 16, LONG, MAX_ATTEMPTS).await.unwrap();
    let names: Vec<&str> = leases.iter().map(|l| l.build.name.as_str()).collect();
    assert_eq!(names, [format!("{KNOB}=4")], "only the new value runs");
    assert_eq!(leases[0].positions.len(), 5);
    let s = summary(&*store, created.id).await;
    assert_eq!((s.positions_done, s.positions_total), (5, 10));
    finish(&*queue, w, &leases[0]).await;
    assert_eq!(summary(&*store, created.id).await.state, SweepState::Done);
    let results = results_of(&*store, created.id).await;
    assert!(results
        .iter()
        .all(|((build, _), r)| r.reused == (build == "head_reference")));
}

async fn recompute_takes_nothing(Database { store, queue }: Database) {
    create_sweep(&*store, "once", &[2], 5).await;
    let w = worker(&*store, "w").await;
    run_everything(&*queue, w).await;
    let mut again = spec("once", &[2], 5);
    again.recompute = true;
    let created = store
        .create_sweep_unless_running(&new_sweep(&*store, again, &suite()).await)
        .await
        .unwrap();
    assert_eq!(created.reused, 0);
    assert_eq!(run_everything(&*queue, w).await, 10, "every position runs");
    let results = results_of(&*store, created.id).await;
    assert!(results.values().all(|r| !r.reused));
}

async fn positions_match_by_content_in_an_edited_suite(Database { store, queue }: Database) {
    create_sweep(&*store, "before", &[2], 5).await;
    let w = worker(&*store, "w").await;
    run_everything(&*queue, w).await;
    // The suite gains a position at the top: every old position moves down one line, and
    // one ("pawn") gets another id. Reuse follows the positions, not the lines.
    let edited = format!(
        "4k3/8/8/8/8/8/3P4/4K3 w - - bm d4; id \"new\";\n{}",
        SUITE.replace("id \"pawn\"", "id \"pawn-renamed\"")
    );
    let edited = parse_suite("tiny", &edited).unwrap();
    let created = store
        .create_sweep_unless_running(&new_sweep(&*store, spec("after", &[2], 6), &edited).await)
        .await
        .unwrap();
    assert_eq!(created.reused, 10);
    let leases = queue.lease_jobs(w, 16, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(
        leases.len(),
        2,
        "one job per build, each with one position left"
    );
    for lease in &leases {
        assert_eq!(indices(lease), [0], "only the new position runs");
    }
    let results = results_of(&*store, created.id).await;
    let pawn = &results[&("head_reference".to_string(), 3)];
    assert!(pawn.reused);
    assert_eq!(pawn.position_id, "pawn-renamed", "the new suite's id");
    assert_eq!(pawn.nodes, 1000 + 2, "measured at index 2 of the old suite");
    // The verdict is the coordinator's, for the new suite's position.
    assert!(pawn.solved);
    for lease in &leases {
        let ack = queue
            .report(
                lease.job_id,
                &batch(w, lease, vec![result(0, "d2d4")], true),
                LONG,
                MAX_ATTEMPTS,
            )
            .await
            .unwrap();
        assert_eq!(ack.accepted, 1);
    }
    let s = summary(&*store, created.id).await;
    assert_eq!(s.state, SweepState::Done);
    assert_eq!((s.positions_done, s.positions_total), (12, 12));
}

async fn binary_only_engines_reuse_nothing(Database { store, queue }: Database) {
    let (first, _) = create_binary_sweep(&*store, "fish", &[32], 5).await;
    let w = worker_with_engines(&*store, "w", &["fish"]).await;
    run_everything(&*queue, w).await;
    assert_eq!(summary(&*store, first).await.state, SweepState::Done);
    let (second, _) = create_binary_sweep(&*store, "fish", &[32], 5).await;
    assert_eq!(
        summary(&*store, second).await.positions_done,
        0,
        "a binary on each worker's disk is no content the coordinator can name"
    );
    assert_eq!(run_everything(&*queue, w).await, 10);
}

/// `spec` with every position cross-checked.
fn all_checked(name: &str, values: &[i64]) -> sweep_domain::spec::SweepSpec {
    sweep_domain::spec::SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        cross_check: Share(1.0),
        cross_check_min: 5,
        ..spec(name, values, 5)
    }
}

async fn an_identical_rerun_takes_the_cross_checks_too(Database { store, queue }: Database) {
    let first = store
        .create_sweep_unless_running(&new_sweep(&*store, all_checked("c", &[2]), &suite()).await)
        .await
        .unwrap();
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    // a measures, b checks (never the worker that measured, while another is live).
    assert_eq!(run_everything(&*queue, a).await, 10);
    assert_eq!(run_everything(&*queue, b).await, 10);
    assert_eq!(summary(&*store, first.id).await.state, SweepState::Done);
    let checks = store.cross_checks(first.id, 10).await.unwrap();
    assert_eq!(
        (checks.planned, checks.done, checks.mismatches),
        (10, 10, 0)
    );

    let again = store
        .create_sweep_unless_running(&new_sweep(&*store, all_checked("c", &[2]), &suite()).await)
        .await
        .unwrap();
    assert_eq!(again.reused, 10);
    assert_eq!(
        summary(&*store, again.id).await.state,
        SweepState::Done,
        "neither work nor checks are left: no engine starts"
    );
    for w in [a, b] {
        assert!(queue
            .lease_jobs(w, 16, LONG, MAX_ATTEMPTS)
            .await
            .unwrap()
            .is_empty());
    }
    let checks = store.cross_checks(again.id, 10).await.unwrap();
    assert_eq!(
        (checks.planned, checks.done, checks.mismatches),
        (10, 10, 0)
    );
    assert!(checks.builds.iter().all(|c| c.done == 5), "{checks:?}");
}

async fn checks_of_positions_measured_anew_run(Database { store, queue }: Database) {
    create_sweep_of(&*store, all_checked("c", &[2]), &suite()).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    run_everything(&*queue, a).await;
    run_everything(&*queue, b).await;
    // Another value: its baseline (results and checks) is taken, its variant is measured
    // and then checked.
    let other = store
        .create_sweep_unless_running(&new_sweep(&*store, all_checked("d", &[4]), &suite()).await)
        .await
        .unwrap();
    assert_eq!(other.reused, 5);
    let checks = store.cross_checks(other.id, 10).await.unwrap();
    assert_eq!(
        (checks.planned, checks.done),
        (10, 5),
        "the baseline's checks"
    );
    assert_eq!(run_everything(&*queue, a).await, 5, "the variant's work");
    assert_eq!(run_everything(&*queue, b).await, 5, "and its checks");
    let s = summary(&*store, other.id).await;
    assert_eq!(s.state, SweepState::Done);
    let checks = store.cross_checks(other.id, 10).await.unwrap();
    assert_eq!(
        (checks.planned, checks.done, checks.mismatches),
        (10, 10, 0)
    );
}

/// A sweep that cross-checks positions whose results it takes from an earlier sweep that
/// checked none: those checks can run at once (their originals are stored as it is
/// submitted), and the sweep ends when they have.
async fn checks_of_taken_results_are_taken_at_once(Database { store, queue }: Database) {
    let first = create_sweep_of(&*store, spec("c", &[2], 5), &suite()).await;
    let (a, b) = (worker(&*store, "a").await, worker(&*store, "b").await);
    assert_eq!(run_everything(&*queue, a).await, 10);
    assert_eq!(summary(&*store, first.0).await.state, SweepState::Done);
    let checked = store
        .create_sweep_unless_running(&new_sweep(&*store, all_checked("c", &[2]), &suite()).await)
        .await
        .unwrap();
    assert_eq!(checked.reused, 10);
    let checks = store.cross_checks(checked.id, 10).await.unwrap();
    assert_eq!((checks.planned, checks.done), (10, 0));
    // `a` measured every original and `b` is live: `b` takes them all, and nothing else.
    assert_eq!(run_everything(&*queue, b).await, 10);
    assert_eq!(run_everything(&*queue, a).await, 0);
    let checks = store.cross_checks(checked.id, 10).await.unwrap();
    assert_eq!(
        (checks.planned, checks.done, checks.mismatches),
        (10, 10, 0)
    );
    assert_eq!(summary(&*store, checked.id).await.state, SweepState::Done);
}
