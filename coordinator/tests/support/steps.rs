//! The worker-protocol steps the cases repeat (lease, report, finish), each one call that
//! panics on a store error, so a case reads as the story it tells.

use std::sync::Arc;
use std::time::Duration;

use sweep_coordinator::catalog::Catalog;
use sweep_coordinator::database::Database;
use sweep_coordinator::queue::WorkerQueue;
use sweep_coordinator::service::{LeaseSettings, Service};
use sweep_domain::wire::{BatchAck, JobLease, PositionResult};

use super::{batch, failed, good_results, result, OneJob, LONG, MAX_ATTEMPTS};

/// Leases up to `max` jobs for `worker`, each for `lease`, at the default attempt limit.
pub async fn lease(
    queue: &dyn WorkerQueue,
    worker: i64,
    max: u32,
    lease: Duration,
) -> Vec<JobLease> {
    queue
        .lease_jobs(worker, max, lease, MAX_ATTEMPTS)
        .await
        .expect("lease_jobs")
}

/// Leases one job for `worker` for `lease`; panics if there is none to lease.
pub async fn lease_one(queue: &dyn WorkerQueue, worker: i64, lease: Duration) -> JobLease {
    self::lease(queue, worker, 1, lease).await.remove(0)
}

/// Whether `worker` finds nothing to lease (a lease of up to 100 jobs for [`LONG`]).
pub async fn nothing_to_lease(queue: &dyn WorkerQueue, worker: i64) -> bool {
    lease(queue, worker, 100, LONG).await.is_empty()
}

/// Reports `results` on `lease` from `worker`, renewing the lease for `renew`, at the default
/// attempt limit; panics unless the store takes the upload.
pub async fn upload(
    queue: &dyn WorkerQueue,
    worker: i64,
    lease: &JobLease,
    results: Vec<PositionResult>,
    finished: bool,
    renew: Duration,
) -> BatchAck {
    report_with(
        queue,
        worker,
        lease,
        (results, finished),
        renew,
        MAX_ATTEMPTS,
    )
    .await
}

/// Reports `results` on `lease` (for [`LONG`]) with a limit of one attempt, so that every
/// error in them is final at once; panics unless the store takes the upload.
pub async fn upload_once(
    queue: &dyn WorkerQueue,
    worker: i64,
    lease: &JobLease,
    results: Vec<PositionResult>,
    finished: bool,
) -> BatchAck {
    report_with(queue, worker, lease, (results, finished), LONG, 1).await
}

/// The one report call behind [`upload`] and [`upload_once`].
async fn report_with(
    queue: &dyn WorkerQueue,
    worker: i64,
    lease: &JobLease,
    (results, finished): (Vec<PositionResult>, bool),
    renew: Duration,
    max_attempts: u32,
) -> BatchAck {
    queue
        .report(
            lease.job_id,
            &batch(worker, lease, results, finished),
            renew,
            max_attempts,
        )
        .await
        .expect("report")
}

/// Reports `results` on `lease` (for [`LONG`]) and returns the ack's (accepted, duplicates).
pub async fn send(
    queue: &dyn WorkerQueue,
    worker: i64,
    lease: &JobLease,
    results: Vec<PositionResult>,
    finished: bool,
) -> (u32, u32) {
    let ack = upload(queue, worker, lease, results, finished, LONG).await;
    (ack.accepted, ack.duplicates)
}

/// Reports every position of the lease with its good move and closes the job.
pub async fn finish(queue: &dyn WorkerQueue, worker_id: i64, lease: &JobLease) {
    let (accepted, _) = send(queue, worker_id, lease, good_results(lease), true).await;
    assert_eq!(accepted as usize, lease.positions.len());
}

/// Leases one job for `worker` (for [`LONG`]) and finishes it with good moves.
pub async fn lease_and_finish(queue: &dyn WorkerQueue, worker: i64) -> JobLease {
    let lease = lease_one(queue, worker, LONG).await;
    finish(queue, worker, &lease).await;
    lease
}

/// A service over `db` with an empty catalog and the default lease settings.
pub fn service(db: Database) -> Service {
    Service::new(db, Arc::new(Catalog::default()), LeaseSettings::default())
}

/// Results of the five suite positions: castle, WAC.001 and black solved, pawn's search
/// failed ("engine crashed"), avoid played its avoid move (e1c1).
pub fn results_with_a_crash() -> Vec<PositionResult> {
    vec![
        result(0, "e1g1"),
        result(1, "g3g6"),
        failed(2, "engine crashed"),
        result(3, "e1c1"),
        result(4, "e8c8"),
    ]
}
