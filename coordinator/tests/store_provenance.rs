//! Build records (issue 10 item 7) on both backends: kept under the lease, the first per
//! (build, worker) stays, read back per build with the total; bench signatures (issue 45):
//! a worker whose bench disagrees with another's for the same binary is refused the build.

#[macro_use]
mod support;

use support::*;
use sweep_coordinator::store::StoreError;
use sweep_domain::provenance::{BuildRecord, BuildReport};

on_both_backends!(
    records_are_fenced_and_kept_once,
    a_worker_whose_bench_disagrees_is_refused_the_build
);

fn report(worker_id: i64, attempt: i64, sha: char) -> BuildReport {
    BuildReport {
        worker_id,
        attempt,
        record: BuildRecord {
            host: format!("host-{worker_id}"),
            cpu_model: "cpu".into(),
            compiler: Some("cc 12".into()),
            argv: vec!["make".into(), "DEFINES=-DK=2".into()],
            binary_sha256: sha.to_string().repeat(64),
            bench_nodes: None,
            sandbox: "bwrap 0.8.0".into(),
        },
    }
}

fn benched(worker_id: i64, attempt: i64, nodes: u64) -> BuildReport {
    let mut r = report(worker_id, attempt, 'e');
    r.record.bench_nodes = Some(nodes);
    r
}

async fn records_are_fenced_and_kept_once(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "records", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let b = worker(&*store, "b").await;
    let leases = queue.lease_jobs(a, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    let job = &leases[0];
    // Not a's lease at that attempt, and not b's at all: refused, nothing kept.
    for (w, attempt) in [(a, job.attempt + 1), (b, job.attempt)] {
        let err = queue
            .record_build(job.job_id, &report(w, attempt, 'f'), LONG, MAX_ATTEMPTS)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    }
    assert!(store.build_records(id, 10).await.unwrap().is_empty());
    queue
        .record_build(job.job_id, &report(a, job.attempt, 'a'), LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    // A second report of the same build by the same worker keeps the first.
    queue
        .record_build(job.job_id, &report(a, job.attempt, 'c'), LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    let b_leases = queue.lease_jobs(b, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    queue
        .record_build(
            b_leases[0].job_id,
            &report(b, b_leases[0].attempt, 'b'),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    let records = store.build_records(id, 10).await.unwrap();
    let total: usize = records.values().map(|(list, _)| list.len()).sum();
    assert_eq!(total, 2, "{records:?}");
    let (list, count) = &records[&job.build.name];
    assert_eq!(list[0].worker, "a");
    assert_eq!(list[0].record, report(a, job.attempt, 'a').record);
    assert!(*count >= 1);
    // The list is cut per build; the total is not.
    if job.build.name == b_leases[0].build.name {
        let cut = store.build_records(id, 1).await.unwrap();
        let (list, count) = &cut[&job.build.name];
        assert_eq!((list.len(), *count), (1, 2));
    }
}

async fn a_worker_whose_bench_disagrees_is_refused_the_build(Database { store, queue }: Database) {
    // One build (the baseline alone), a job per position.
    let (id, jobs) = create_sweep(&*store, "benches", &[], 1).await;
    assert!(jobs >= 3, "{jobs}");
    let (a, b, c) = (
        worker(&*store, "a").await,
        worker(&*store, "b").await,
        worker(&*store, "c").await,
    );
    let lease = |w| {
        let queue = queue.clone();
        async move { queue.lease_jobs(w, 1, LONG, MAX_ATTEMPTS).await.unwrap() }
    };
    let ja = lease(a).await.remove(0);
    let first = queue
        .record_build(ja.job_id, &benched(a, ja.attempt, 500), LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert_eq!(first, None, "the first bench of a binary is the reference");

    let jb = lease(b).await.remove(0);
    let why = queue
        .record_build(jb.job_id, &benched(b, jb.attempt, 501), LONG, MAX_ATTEMPTS)
        .await
        .unwrap()
        .expect("a different bench for the same binary is a mismatch");
    assert!(
        why.contains("worker b benched 501") && why.contains("worker a benched 500"),
        "{why}"
    );
    // b's job went back to the queue and b gets no more jobs of the build; c, whose bench
    // agrees with a's (not with b's), does.
    assert!(lease(b).await.is_empty(), "b is refused the build");
    let jc = lease(c).await;
    assert!(!jc.is_empty());
    let agreed = queue
        .record_build(
            jc[0].job_id,
            &benched(c, jc[0].attempt, 500),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!(agreed, None);
    let taken: Vec<i64> = jc
        .iter()
        .chain(&lease(a).await)
        .chain(&lease(c).await)
        .map(|j| j.job_id)
        .collect();
    assert!(
        taken.contains(&jb.job_id),
        "b's job is measured by another worker: {taken:?}"
    );

    let benches = store.build_benches(id).await.unwrap();
    let bench = &benches[&ja.build.name];
    assert_eq!(bench.nodes, Some(500));
    assert_eq!(bench.mismatches, vec![why]);
}
