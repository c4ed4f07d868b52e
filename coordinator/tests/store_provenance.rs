//! Build records (issue 10 item 7) on both backends: kept under the lease, the first per
//! (build, worker) stays, read back per build with the total.

#[macro_use]
mod support;

use std::sync::Arc;

use support::*;
use sweep_coordinator::store::{Store, StoreError};
use sweep_domain::provenance::{BuildRecord, BuildReport};

on_both_backends!(records_are_fenced_and_kept_once);

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
        },
    }
}

async fn records_are_fenced_and_kept_once(store: Arc<dyn Store>) {
    let (id, _) = create_sweep(&*store, "records", &[2], 5).await;
    let a = worker(&*store, "a").await;
    let b = worker(&*store, "b").await;
    let leases = store.lease_jobs(a, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    let job = &leases[0];
    // Not a's lease at that attempt, and not b's at all: refused, nothing kept.
    for (w, attempt) in [(a, job.attempt + 1), (b, job.attempt)] {
        let err = store
            .record_build(job.job_id, &report(w, attempt, 'f'))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    }
    assert!(store.build_records(id, 10).await.unwrap().is_empty());
    store
        .record_build(job.job_id, &report(a, job.attempt, 'a'))
        .await
        .unwrap();
    // A second report of the same build by the same worker keeps the first.
    store
        .record_build(job.job_id, &report(a, job.attempt, 'c'))
        .await
        .unwrap();
    let b_leases = store.lease_jobs(b, 1, LONG, MAX_ATTEMPTS).await.unwrap();
    store
        .record_build(b_leases[0].job_id, &report(b, b_leases[0].attempt, 'b'))
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
