//! Storage of tokens, the audit log, worker ownership and build retries, on both backends
//! (as `store_conformance.rs`: one case, two stores).

#[macro_use]
mod support;

use support::*;
use sweep_coordinator::store::{NewAudit, StoreError};
use sweep_domain::auth::Role;
use sweep_domain::spec::DEFAULT_BASELINE;
use sweep_domain::wire::{BuildFailure, SweepState};

on_both_backends!(
    tokens_are_found_by_hash_until_revoked,
    audit_entries_read_back_newest_first,
    workers_remember_the_token_that_registered_them,
    a_failed_build_can_be_retried,
);

async fn tokens_are_found_by_hash_until_revoked(Database { store, .. }: Database) {
    let id = store
        .create_token("ci-workers", Role::Worker, "hash-1")
        .await
        .unwrap();
    let found = store.token_by_hash("hash-1").await.unwrap().unwrap();
    assert_eq!(
        (found.id, found.name.as_str(), found.role),
        (id, "ci-workers", Role::Worker)
    );
    assert!(store.token_by_hash("hash-2").await.unwrap().is_none());
    // A live name cannot be taken twice.
    match store
        .create_token("ci-workers", Role::Admin, "hash-2")
        .await
    {
        Err(StoreError::Invalid(m)) => assert!(m.contains("ci-workers"), "{m}"),
        other => panic!("{other:?}"),
    }
    let revoked = store.revoke_token("ci-workers").await.unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(store.token_by_hash("hash-1").await.unwrap().is_none());
    assert!(matches!(
        store.revoke_token("ci-workers").await,
        Err(StoreError::NotFound(_))
    ));
    // After a revoke the name is free again; the list keeps both, oldest first.
    store
        .create_token("ci-workers", Role::Reader, "hash-3")
        .await
        .unwrap();
    let all = store.tokens().await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].revoked_at.is_some() && all[1].revoked_at.is_none());
    assert_eq!(all[1].role, Role::Reader);
}

async fn audit_entries_read_back_newest_first(Database { store, .. }: Database) {
    for action in ["submit", "cancel"] {
        store
            .audit(&NewAudit {
                actor: "alice".into(),
                role: "submitter".into(),
                action: action.into(),
                target: "sweep 1".into(),
                detail: "demo".into(),
            })
            .await
            .unwrap();
    }
    let log = store.audit_log(10).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0].action.as_str(), log[1].action.as_str()),
        ("cancel", "submit")
    );
    assert!(log[0].id > log[1].id);
    assert_eq!(log[0].actor, "alice");
    assert_eq!(store.audit_log(1).await.unwrap().len(), 1);
}

async fn workers_remember_the_token_that_registered_them(Database { store, .. }: Database) {
    let register = |token| {
        let store = store.clone();
        async move {
            store
                .register_worker(&registration("w", 1), token)
                .await
                .unwrap()
        }
    };
    let owned = register(Some(7)).await;
    let legacy = register(None).await;
    assert_eq!(store.worker_token(owned).await.unwrap(), Some(7));
    assert_eq!(store.worker_token(legacy).await.unwrap(), None);
    assert!(matches!(
        store.worker_token(legacy + 100).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn a_failed_build_can_be_retried(Database { store, queue }: Database) {
    let (id, _) = create_sweep(&*store, "s", &[2], 2).await;
    let a = worker(&*store, "a").await;
    let leases = queue.lease_jobs(a, 100, LONG, MAX_ATTEMPTS).await.unwrap();
    let variant: Vec<_> = leases
        .iter()
        .filter(|l| l.build.name == "NULLMOVE_R_BASE=2")
        .cloned()
        .collect();
    // Nothing failed yet: a retry is refused, and unknown names are not found.
    assert!(matches!(
        store.retry_build(id, "NULLMOVE_R_BASE=2").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.retry_build(id, "nope").await,
        Err(StoreError::NotFound(m)) if m.contains("nope")
    ));
    assert!(matches!(
        store.retry_build(id + 100, "NULLMOVE_R_BASE=2").await,
        Err(StoreError::NotFound(m)) if m.contains("sweep")
    ));
    let failure = BuildFailure {
        worker_id: a,
        attempt: variant[0].attempt,
        output: "error: boom".into(),
    };
    queue
        .build_failed(variant[0].job_id, &failure, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    for l in leases.iter().filter(|l| l.build.name == DEFAULT_BASELINE) {
        finish(&*queue, a, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::DoneWithErrors);

    // The retry clears the error and the failure, and queues the variant's jobs again, for
    // the very worker that failed it (its compiler may have been fixed).
    let queued = store.retry_build(id, "NULLMOVE_R_BASE=2").await.unwrap();
    assert_eq!(queued, variant.len() as u64);
    let record = store.sweep(id).await.unwrap();
    assert!(record.builds.iter().all(|b| b.build_error.is_none()));
    assert_eq!(summary(&*store, id).await.state, SweepState::Running);
    let again = queue.lease_jobs(a, 100, LONG, MAX_ATTEMPTS).await.unwrap();
    assert_eq!(again.len(), variant.len());
    assert!(again.iter().all(|l| l.build.name == "NULLMOVE_R_BASE=2"));
    for l in &again {
        finish(&*queue, a, l).await;
    }
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);

    // A cancelled sweep's builds are not retried.
    let (cancelled, _) = create_sweep(&*store, "c", &[2], 2).await;
    store.cancel_sweep(cancelled).await.unwrap();
    assert!(matches!(
        store.retry_build(cancelled, "NULLMOVE_R_BASE=2").await,
        Err(StoreError::Invalid(m)) if m.contains("cancelled")
    ));
}
