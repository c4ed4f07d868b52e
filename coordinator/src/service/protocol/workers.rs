//! A worker's life in the protocol: registering (capped per token), the check that its
//! caller speaks for it, leasing jobs, heartbeats, and giving leases back when it stops.

use sweep_domain::wire::{
    HeldLease, JobLease, JobStatus, RegisterWorker, Registered, MAX_JOBS_PER_CALL,
    MAX_JOBS_PER_LEASE,
};
use sweep_domain::FieldError;

use super::{AuthorizedWorker, Protocol, ProtocolError};
use crate::queue::JobOutcome;
use crate::service::auth::{Caller, Need};
use crate::store::WorkerCap;

impl Protocol {
    /// Registers a worker (with the binary-only engines it has) and hands it the lease timing.
    /// The worker belongs to the caller's token: only that token may speak for it. A token
    /// holding its most live workers already is refused ([`ProtocolError::TooManyWorkers`])
    /// until one stops or goes a lease without being seen.
    pub async fn register_worker(
        &self,
        caller: &Caller,
        req: &RegisterWorker,
    ) -> Result<Registered, ProtocolError> {
        let principal = self.shared.auth.require(caller, Need::Worker)?;
        let token_id = principal.map(|p| p.token_id);
        req.validate()?;
        let cap = WorkerCap {
            max_live: self.max_workers_per_token,
            lease: self.leases.lease,
        };
        let worker_id = self
            .shared
            .store
            .register_worker_capped(req, token_id, Some(cap))
            .await?;
        tracing::info!(worker_id, name = %req.name, host = %req.host, cores = req.cores, engines = ?req.engines, "worker registered");
        Ok(Registered {
            worker_id,
            lease_secs: self.leases.lease.as_secs().max(1),
            heartbeat_secs: self.leases.heartbeat.as_secs().max(1),
        })
    }

    /// Checks that `caller` may speak for worker `worker_id` (the token that registered it,
    /// or a local command): the worker protocol's use cases on one worker take the answer, so
    /// none runs unchecked, and a caller learns it may not before its input is looked at.
    pub async fn authorize_worker(
        &self,
        caller: &Caller,
        worker_id: i64,
    ) -> Result<AuthorizedWorker, ProtocolError> {
        let shared = &self.shared;
        shared
            .auth
            .check_worker::<ProtocolError>(shared.store.as_ref(), caller, worker_id)
            .await?;
        Ok(AuthorizedWorker { id: worker_id })
    }

    /// Leases up to `max_jobs` jobs to the worker.
    pub async fn lease(
        &self,
        worker: &AuthorizedWorker,
        max_jobs: u32,
    ) -> Result<Vec<JobLease>, ProtocolError> {
        let worker_id = worker.id;
        if max_jobs == 0 || max_jobs > MAX_JOBS_PER_LEASE {
            return Err(
                FieldError::new("max_jobs", format!("must be 1 to {MAX_JOBS_PER_LEASE}")).into(),
            );
        }
        let (lease, max_attempts) = (self.leases.lease, self.leases.max_attempts);
        let jobs = self
            .queue
            .lease_jobs(worker_id, max_jobs, lease, max_attempts)
            .await?;
        let metrics = &self.shared.metrics;
        metrics.lease_calls.inc();
        metrics.jobs_leased.inc_by(jobs.len() as u64);
        for j in &jobs {
            tracing::info_span!("job", job_id = j.job_id, sweep_id = j.sweep_id, worker_id)
                .in_scope(|| tracing::debug!(attempt = j.attempt, "job leased"));
        }
        Ok(jobs)
    }

    /// Renews every lease the worker names; each one's status, in order. Also marks the
    /// worker seen; an unregistered worker is `NotFound`.
    pub async fn heartbeat(
        &self,
        worker: &AuthorizedWorker,
        leases: &[HeldLease],
    ) -> Result<Vec<JobStatus>, ProtocolError> {
        check_jobs_per_call("leases", leases.len())?;
        let outcomes = self
            .queue
            .heartbeat_many(worker.id, leases, self.leases.lease)
            .await?;
        self.shared.metrics.heartbeats.inc();
        Ok(job_statuses(leases, outcomes))
    }

    /// Gives back the leases the worker names (it is stopping and will not finish them): each
    /// still held is queued again at once (`Held` in its status), any other is `Lost`.
    pub async fn release(
        &self,
        worker: &AuthorizedWorker,
        leases: &[HeldLease],
    ) -> Result<Vec<JobStatus>, ProtocolError> {
        check_jobs_per_call("leases", leases.len())?;
        let outcomes = self.queue.release_leases(worker.id, leases).await?;
        Ok(job_statuses(leases, outcomes))
    }
}

/// Each named lease's status, in the request's order.
fn job_statuses(leases: &[HeldLease], outcomes: Vec<JobOutcome>) -> Vec<JobStatus> {
    leases
        .iter()
        .zip(outcomes)
        .map(|(held, outcome)| JobStatus {
            job_id: held.job_id,
            status: outcome.status,
        })
        .collect()
}

/// Refuses calls naming more jobs than [`MAX_JOBS_PER_CALL`].
pub(super) fn check_jobs_per_call(field: &str, n: usize) -> Result<(), ProtocolError> {
    if n > MAX_JOBS_PER_CALL {
        return Err(
            FieldError::new(field, format!("at most {MAX_JOBS_PER_CALL} jobs per call")).into(),
        );
    }
    Ok(())
}
