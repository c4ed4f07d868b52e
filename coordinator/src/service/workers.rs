//! The worker protocol's use cases: register, lease, heartbeat, results, build failures and
//! sources. Requests are bounded here (by the domain's rules for registrations and build
//! failures, and jobs per call); the store does the rest.

use sweep_domain::wire::{
    BatchAck, BuildFailure, HeldLease, JobLease, JobReport, RegisterWorker, Registered,
    MAX_JOBS_PER_CALL, MAX_JOBS_PER_LEASE,
};
use sweep_domain::FieldError;

use super::auth::Need;
use super::{Caller, Service, ServiceError};
use crate::store::{JobOutcome, StoreError};

impl Service {
    /// Registers a worker (with the binary-only engines it has) and hands it the lease timing.
    /// The worker belongs to the caller's token: only that token may speak for it.
    pub async fn register_worker(
        &self,
        caller: &Caller,
        req: &RegisterWorker,
    ) -> Result<Registered, ServiceError> {
        let token_id = self.auth.require(caller, Need::Worker)?.map(|p| p.token_id);
        req.validate()?;
        let worker_id = self.store.register_worker(req, token_id).await?;
        tracing::info!(worker_id, name = %req.name, host = %req.host, cores = req.cores, engines = ?req.engines, "worker registered");
        Ok(Registered {
            worker_id,
            lease_secs: self.leases.lease.as_secs().max(1),
            heartbeat_secs: self.leases.heartbeat.as_secs().max(1),
        })
    }

    /// Leases up to `max_jobs` jobs to the worker.
    pub async fn lease(
        &self,
        caller: &Caller,
        worker_id: i64,
        max_jobs: u32,
    ) -> Result<Vec<JobLease>, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, worker_id)
            .await?;
        if max_jobs == 0 || max_jobs > MAX_JOBS_PER_LEASE {
            return Err(
                FieldError::new("max_jobs", format!("must be 1 to {MAX_JOBS_PER_LEASE}")).into(),
            );
        }
        let jobs = self
            .store
            .lease_jobs(
                worker_id,
                max_jobs,
                self.leases.lease,
                self.leases.max_attempts,
            )
            .await?;
        for j in &jobs {
            tracing::info_span!("job", job_id = j.job_id, sweep_id = j.sweep_id)
                .in_scope(|| tracing::debug!(attempt = j.attempt, "job leased"));
        }
        Ok(jobs)
    }

    /// Renews every lease the worker names; one outcome per lease, in order. Also marks the
    /// worker seen; an unregistered worker is `NotFound`.
    pub async fn heartbeat(
        &self,
        caller: &Caller,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, worker_id)
            .await?;
        check_jobs_per_call("leases", leases.len())?;
        Ok(self
            .store
            .heartbeat_many(worker_id, leases, self.leases.lease)
            .await?)
    }

    /// Gives back the leases the worker names (it is stopping and will not finish them): each
    /// still held is queued again at once (`Held` in its outcome), any other is `Lost`.
    pub async fn release(
        &self,
        caller: &Caller,
        worker_id: i64,
        leases: &[HeldLease],
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, worker_id)
            .await?;
        check_jobs_per_call("leases", leases.len())?;
        Ok(self.store.release_leases(worker_id, leases).await?)
    }

    /// Stores every job report of an upload; one outcome per report, in order. Invalid input
    /// fails the whole call and stores nothing of it.
    pub async fn report(
        &self,
        caller: &Caller,
        worker_id: i64,
        reports: &[JobReport],
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, worker_id)
            .await?;
        check_jobs_per_call("reports", reports.len())?;
        Ok(self
            .store
            .report_many(
                worker_id,
                reports,
                self.leases.lease,
                self.leases.max_attempts,
            )
            .await?)
    }

    /// Records that a job's build failed on the reporting worker.
    pub async fn build_failed(
        &self,
        caller: &Caller,
        job_id: i64,
        failure: &BuildFailure,
    ) -> Result<BatchAck, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, failure.worker_id)
            .await?;
        let failure = failure.bounded()?;
        tracing::warn!(job_id, worker_id = failure.worker_id, "build failed");
        Ok(self
            .store
            .build_failed(
                job_id,
                &failure,
                self.leases.lease,
                self.leases.max_attempts,
            )
            .await?)
    }

    /// A source snapshot by its sha256 (64 hex digits); `NotFound` otherwise.
    pub async fn source(&self, caller: &Caller, sha256: &str) -> Result<Vec<u8>, ServiceError> {
        self.auth.require(caller, Need::Source)?;
        let not_found = || StoreError::NotFound(format!("source {sha256}"));
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_found().into());
        }
        Ok(self.store.snapshot(sha256).await?.ok_or_else(not_found)?)
    }
}

/// Refuses calls naming more jobs than [`MAX_JOBS_PER_CALL`].
fn check_jobs_per_call(field: &str, n: usize) -> Result<(), ServiceError> {
    if n > MAX_JOBS_PER_CALL {
        return Err(
            FieldError::new(field, format!("at most {MAX_JOBS_PER_CALL} jobs per call")).into(),
        );
    }
    Ok(())
}
