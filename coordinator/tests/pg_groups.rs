//! Uploads stored together and heartbeats served together (Postgres, issue 14 item 2):
//! concurrent uploads share one transaction and concurrent heartbeats a few statements, yet
//! each is answered as if it ran alone. A bad upload stores nothing and fails only itself;
//! the same job re-sent by concurrent uploads is stored once; a heartbeat of an unknown
//! worker, or naming a lease it lost, fails only itself; an upload the database rolls back
//! to break a deadlock is stored on its retry, and the sums trigger takes its locks in key
//! order, so concurrent inserts do not deadlock on them.

mod support;

use std::sync::Arc;

use support::*;
use sweep_coordinator::store::{Store, StoreError};
use sweep_domain::wire::{HeldLease, LeaseStatus, SweepState};

/// Leases one job to each of `n` new workers; returns (worker, lease) pairs.
async fn one_job_each(db: &Database, n: usize) -> Vec<(i64, sweep_domain::wire::JobLease)> {
    let mut out = Vec::new();
    for k in 0..n {
        let w = worker(&*db.store, &format!("w{k}")).await;
        let queue = &db.queue;
        let mut leases = queue.lease_jobs(w, 1, LONG, MAX_ATTEMPTS).await.unwrap();
        assert_eq!(leases.len(), 1);
        out.push((w, leases.remove(0)));
    }
    out
}

/// How many of sweep `id`'s jobs are done.
async fn done(store: &dyn Store, id: i64) -> u64 {
    store
        .progress(id)
        .await
        .unwrap()
        .iter()
        .map(|p| p.done)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_upload_fails_alone_among_concurrent_ones() {
    let backend = Backend::postgres().await;
    let store: Arc<dyn Store> = backend.store.clone();
    let queue = backend.db.queue.clone();
    // Four builds x five one-position chunks: 20 jobs.
    let (id, jobs) = create_sweep(&*store, "groups", &[1, 2, 3], 1).await;
    let held = one_job_each(&backend.db, jobs as usize).await;
    let bad = held[7].clone();
    let mut calls = tokio::task::JoinSet::new();
    for (k, (w, lease)) in held.into_iter().enumerate() {
        let queue = queue.clone();
        calls.spawn(async move {
            let mut results = good_results(&lease);
            if k == 7 {
                // Outside the job's range: invalid input, the whole upload is refused.
                results[0].index += 1;
            }
            let report = job_report(&lease, results, true);
            (
                k,
                queue
                    .report_many(w, [report].into(), LONG, MAX_ATTEMPTS)
                    .await,
            )
        });
    }
    while let Some(done) = calls.join_next().await {
        let (k, outcome) = done.unwrap();
        if k == 7 {
            let err = outcome.expect_err("the bad upload is refused");
            assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
        } else {
            let outcome = outcome.unwrap_or_else(|e| panic!("upload {k}: {e}"));
            assert_eq!(outcome.len(), 1);
            assert_eq!(outcome[0].status, LeaseStatus::Held, "upload {k}");
            assert_eq!(
                (outcome[0].accepted, outcome[0].duplicates),
                (1, 0),
                "upload {k}"
            );
        }
    }
    // The bad upload's job still has its lease and no result: its worker can send it again.
    assert_eq!(done(&*store, id).await, jobs - 1);
    let (w, lease) = bad;
    let again = queue
        .report_many(
            w,
            [job_report(&lease, good_results(&lease), true)].into(),
            LONG,
            MAX_ATTEMPTS,
        )
        .await
        .unwrap();
    assert_eq!((again[0].accepted, again[0].duplicates), (1, 0));
    assert_eq!(summary(&*store, id).await.state, SweepState::Done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_job_sent_by_concurrent_uploads_is_stored_once() {
    let backend = Backend::postgres().await;
    let store: Arc<dyn Store> = backend.store.clone();
    let queue = backend.db.queue.clone();
    let (id, _) = create_sweep(&*store, "resent", &[1], 5).await;
    let (w, lease) = one_job_each(&backend.db, 1).await.remove(0);
    assert_eq!(lease.positions.len(), 5);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let queue = queue.clone();
        let report = job_report(&lease, good_results(&lease), false);
        calls.spawn(async move {
            queue
                .report_many(w, [report].into(), LONG, MAX_ATTEMPTS)
                .await
        });
    }
    let (mut accepted, mut duplicates) = (0, 0);
    while let Some(done) = calls.join_next().await {
        let outcome = done.unwrap().unwrap();
        assert_eq!(outcome[0].status, LeaseStatus::Held);
        accepted += outcome[0].accepted;
        duplicates += outcome[0].duplicates;
    }
    // Each position stored by exactly one of the ten; the other nine saw it stored already.
    assert_eq!((accepted, duplicates), (5, 45));
    assert_eq!(done(&*store, id).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_heartbeats_are_each_answered_as_alone() {
    let backend = Backend::postgres().await;
    let store: Arc<dyn Store> = backend.store.clone();
    let queue = backend.db.queue.clone();
    let (_, jobs) = create_sweep(&*store, "beats", &[1, 2, 3], 1).await;
    let held = one_job_each(&backend.db, jobs as usize).await;
    // Half the lease has gone by: every lease is due for renewal.
    store.clock().advance(LONG / 2);
    let thief = held[0].0;
    let stranger = held.iter().map(|(w, _)| *w).max().unwrap() + 1000;
    let mut calls = tokio::task::JoinSet::new();
    for (k, (w, lease)) in held.iter().cloned().enumerate() {
        let queue = queue.clone();
        calls.spawn(async move {
            let own = HeldLease {
                job_id: lease.job_id,
                attempt: lease.attempt,
            };
            (k, queue.heartbeat_many(w, &[own], LONG).await)
        });
    }
    // The first worker also names the second's job, and an unknown worker names the third's.
    let second = HeldLease {
        job_id: held[1].1.job_id,
        attempt: held[1].1.attempt,
    };
    let third = HeldLease {
        job_id: held[2].1.job_id,
        attempt: held[2].1.attempt,
    };
    let (s1, s2) = (queue.clone(), queue.clone());
    calls.spawn(async move { (1000, s1.heartbeat_many(thief, &[second], LONG).await) });
    calls.spawn(async move { (1001, s2.heartbeat_many(stranger, &[third], LONG).await) });
    while let Some(done) = calls.join_next().await {
        let (k, outcome) = done.unwrap();
        match k {
            1000 => assert_eq!(outcome.unwrap()[0].status, LeaseStatus::Lost),
            1001 => assert!(
                matches!(outcome, Err(StoreError::NotFound(_))),
                "{outcome:?}"
            ),
            k => {
                let outcome = outcome.unwrap_or_else(|e| panic!("heartbeat {k}: {e}"));
                assert_eq!(outcome[0].status, LeaseStatus::Held, "heartbeat {k}");
            }
        }
    }
    // Past the leases as first taken, but not as renewed: a new worker finds nothing to take.
    store.clock().advance(LONG / 2 + LONG / 10);
    let late = worker(&*store, "late").await;
    let taken = queue
        .lease_jobs(late, 50, LONG, MAX_ATTEMPTS)
        .await
        .unwrap();
    assert!(taken.is_empty(), "renewed leases were taken: {taken:?}");
}

/// The table's sums stay exact when a result and the baseline's at its position are stored
/// at the same moment by different coordinators: each transaction inserting one half of a
/// pair cannot see the other's uncommitted half, so without the per-position locks of
/// `result_sums_add` the pair would be counted by neither. Four coordinators on one
/// database; per position, every build's job uploaded at once, spread over them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pairs_stored_at_once_by_several_coordinators_are_each_counted() {
    use sweep_domain::spec::DEFAULT_BASELINE;
    use sweep_domain::table::sums_of;
    let db = PgDb::new().await;
    let mut coordinators: Vec<Database> = Vec::new();
    for _ in 0..4 {
        coordinators.push(sweep_coordinator::database::connect(&db.url).await.unwrap());
    }
    let stores: Vec<Arc<dyn Store>> = coordinators.iter().map(|c| c.store.clone()).collect();
    let w = worker(&*stores[0], "w").await;
    for round in 0..4 {
        // Eight builds x five one-position jobs, measured again (not taken from the rounds
        // before).
        let mut spec = spec(&format!("pairs {round}"), &[1, 2, 3, 4, 5, 6, 7], 1);
        spec.recompute = true;
        let (id, jobs) = create_sweep_of(&*stores[0], spec, &suite()).await;
        let leases = coordinators[0]
            .queue
            .lease_jobs(w, 100, LONG, MAX_ATTEMPTS)
            .await
            .unwrap();
        assert_eq!(leases.len() as u64, jobs);
        for index in 0..5 {
            let mut calls = tokio::task::JoinSet::new();
            for (k, lease) in leases
                .iter()
                .filter(|l| l.positions[0].index == index)
                .enumerate()
            {
                let queue = coordinators[k % coordinators.len()].queue.clone();
                let report = job_report(lease, good_results(lease), true);
                calls.spawn(async move {
                    queue
                        .report_many(w, [report].into(), LONG, MAX_ATTEMPTS)
                        .await
                        .unwrap()
                });
            }
            while let Some(done) = calls.join_next().await {
                done.unwrap();
            }
        }
        let rows = stores[1].results(id).await.unwrap();
        assert_eq!(rows.len(), 40);
        let sums = stores[2].table_sums(id).await.unwrap();
        assert_eq!(sums, sums_of(&rows, DEFAULT_BASELINE), "round {round}");
        assert!(sums.values().all(|s| s.compared == s.done), "{sums:?}");
    }
}

/// Advisory locks of `pool`'s database (not of tests running beside) held (`granted`) or
/// waited for, by backend `pid` or by any.
async fn advisory_locks(pool: &sqlx::PgPool, pid: Option<i32>, granted: bool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks
         WHERE locktype = 'advisory' AND ($1::int4 IS NULL OR pid = $1) AND granted = $2
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind(pid)
    .bind(granted)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Returns once backend `pid` (or any) waits for an advisory lock; fails with `never` if
/// none does within a minute.
async fn until_an_advisory_lock_waits(pool: &sqlx::PgPool, pid: Option<i32>, never: &str) {
    let started = std::time::Instant::now();
    while advisory_locks(pool, pid, false).await == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{never}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// An upload whose transaction the database rolls back to break a deadlock is stored all the
/// same: the round runs again and its worker gets its answer, not an error. The deadlock is
/// made on purpose: another transaction holds the advisory lock of the job's position (the
/// one the sums trigger takes) and then asks for the lease row the upload has locked. The
/// worker's mark as seen, rolled back with the first try, is made again by the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upload_chosen_as_a_deadlocks_victim_is_stored_on_its_retry() {
    use sqlx::Connection;
    use sweep_coordinator::store::postgres::PgStore;

    let db = PgDb::new().await;
    let store = Arc::new(PgStore::connect(&db.url).await.unwrap());
    let queue = Database::from(PgStore::clone(&store)).queue;
    let (id, _) = create_sweep(&*store, "victim", &[1], 1).await;
    let w = worker(&*store, "w").await;
    let lease = lease_one(&*queue, w, LONG).await;
    // Uploads renewing for 30 s mark their worker seen unless it was marked within the last
    // 3 s: the store's clock moves past that since the lease call, so the first try marks
    // it, and its retry comes well within it (after the 1 s deadlock check).
    const RENEW: std::time::Duration = std::time::Duration::from_secs(30);
    store
        .clock()
        .advance(RENEW / 10 + std::time::Duration::from_millis(300));
    let mut blocker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut tx = blocker.begin().await.unwrap();
    // The upload starts waiting first, so its own deadlock check (after 1 s) finds the
    // cycle and it is the victim, not this transaction (checking only after 30 s).
    sqlx::query("SET LOCAL deadlock_timeout = '30s'")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(17, hashtext(concat_ws(':', sweep_id, suite_id,
                first_index, depth, nodes_limit)))
         FROM jobs WHERE id = $1",
    )
    .bind(lease.job_id)
    .execute(&mut *tx)
    .await
    .unwrap();
    let sent = store.clock().now();
    let upload = {
        let queue = queue.clone();
        let lease = lease.clone();
        tokio::spawn(async move {
            queue
                .report_many(
                    w,
                    [job_report(&lease, good_results(&lease), true)].into(),
                    RENEW,
                    MAX_ATTEMPTS,
                )
                .await
        })
    };
    // Until the upload waits for the position's lock (holding its lease row).
    let pool = store.pool().clone();
    until_an_advisory_lock_waits(
        &pool,
        None,
        "the upload never waited for the position's lock",
    )
    .await;
    // Closes the cycle; granted once the upload's first try is rolled back.
    sqlx::query("SELECT id FROM leases FOR UPDATE")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let outcome = upload
        .await
        .unwrap()
        .expect("the deadlock's victim is stored on its retry");
    assert_eq!(outcome.len(), 1);
    assert_eq!(outcome[0].status, LeaseStatus::Held);
    assert_eq!((outcome[0].accepted, outcome[0].duplicates), (1, 0));
    assert_eq!(done(&*store, id).await, 1, "one result stored, once");
    let seen: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT last_seen_at FROM workers WHERE id = $1")
            .bind(w)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        seen >= sent,
        "the worker's last sight ({seen}) is older than its upload ({sent}): the retry \
         took the rolled-back mark for made"
    );
}

/// The sums trigger takes its positions' advisory locks in key order whatever its plan
/// (migration 0020), so concurrent inserts never deadlock on them: an insert of 2,000
/// results, the first on its connection (the trigger's statements are planned for that
/// size), waiting for the lowest of its keys holds none of the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sums_trigger_takes_its_locks_in_key_order() {
    use sqlx::Connection;
    use sweep_coordinator::store::postgres::PgStore;
    use sweep_domain::spec::{SweepSpec, DEFAULT_BASELINE};
    use sweep_domain::table::sums_of;

    const POSITIONS: usize = 1_000;
    const INSERT_ALL: &str = "
        INSERT INTO results (build_id, suite_id, position_index, depth, sweep_id, job_id,
                             attempt, worker_id, position_id, nodes, bestmove, solved,
                             reached_depth, time_ms, nodes_limit)
        SELECT build_id, suite_id, first_index, depth, sweep_id, id, 1, 0, 'p',
               1 + first_index, 'e2e4', first_index % 3 = 0, 6, 1, nodes_limit
        FROM jobs WHERE sweep_id = $1 AND kind = 'work'";
    let db = PgDb::new().await;
    let store = PgStore::connect(&db.url).await.unwrap();
    let suite = generated_suite("many", POSITIONS);
    let spec = SweepSpec {
        search: None,
        priority: Default::default(),
        speed: None,
        suites: vec!["many".into()],
        ..support::spec("order", &[1], 1)
    };
    let (id, jobs) = create_sweep_of(&store, spec, &suite).await;
    assert_eq!(jobs, 2 * POSITIONS as u64);
    let pool = store.pool().clone();
    let lowest: i32 = sqlx::query_scalar(
        "SELECT min(hashtext(concat_ws(':', sweep_id, suite_id, first_index, depth,
                                        nodes_limit)))
         FROM jobs WHERE sweep_id = $1 AND kind = 'work'",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let mut blocker = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let mut tx = blocker.begin().await.unwrap();
    sqlx::query("SELECT pg_advisory_xact_lock(17, $1)")
        .bind(lowest)
        .execute(&mut *tx)
        .await
        .unwrap();
    let mut inserter = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut inserter)
        .await
        .unwrap();
    let insert = tokio::spawn(async move {
        sqlx::query(INSERT_ALL)
            .bind(id)
            .execute(&mut inserter)
            .await
            .map(|done| done.rows_affected())
    });
    until_an_advisory_lock_waits(
        &pool,
        Some(pid),
        "the insert never waited for its lowest key",
    )
    .await;
    let held = advisory_locks(&pool, Some(pid), true).await;
    tx.commit().await.unwrap();
    assert_eq!(insert.await.unwrap().unwrap(), 2 * POSITIONS as u64);
    assert_eq!(
        held, 0,
        "waiting for the lowest key, the insert held {held} others: not taken in key order"
    );
    // And the sums are right.
    let rows = store.results(id).await.unwrap();
    assert_eq!(
        store.table_sums(id).await.unwrap(),
        sums_of(&rows, DEFAULT_BASELINE)
    );
}
