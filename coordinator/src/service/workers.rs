//! The worker protocol's use cases: register, lease, heartbeat, results, build failures and
//! sources. Requests are bounded here (by the domain's rules for registrations and build
//! failures, and jobs per call); the store does the rest.

use std::sync::Arc;
use std::time::Duration;

use sweep_domain::auth::Role;
use sweep_domain::provenance::BuildReport;
use sweep_domain::wire::{
    BatchAck, BuildFailure, HeldLease, JobLease, JobReport, LeaseStatus, RegisterWorker,
    Registered, WorkerList, MAX_JOBS_PER_CALL, MAX_JOBS_PER_LEASE,
};
use sweep_domain::FieldError;

use super::auth::Need;
use super::{Caller, Service, ServiceError};
use crate::store::{JobOutcome, StoreError, WorkerCap};

/// The workers page lists workers seen this recently: a day keeps yesterday's machines in
/// view without every registration ever made.
pub const WORKERS_SEEN_WITHIN: Duration = Duration::from_secs(24 * 3600);

/// Live workers one token may hold by default (`--max-workers-per-token`): a few machines'
/// worth of workers, far below what would let one token outvote the rest in cross-checks or
/// build failures by numbers alone (those count tokens, not workers, anyway).
pub const DEFAULT_MAX_WORKERS_PER_TOKEN: u32 = 64;

/// Workers listed when the caller names no limit, and the most it may name.
pub const DEFAULT_WORKERS_LISTED: u32 = 200;
/// See [`DEFAULT_WORKERS_LISTED`].
pub const MAX_WORKERS_LISTED: u32 = 1000;

/// A worker its caller was checked to speak for: made by [`Service::authorize_worker`] only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthorizedWorker {
    id: i64,
}

impl AuthorizedWorker {
    /// The worker's id.
    pub fn id(&self) -> i64 {
        self.id
    }
}

impl Service {
    /// The workers seen within [`WORKERS_SEEN_WITHIN`], most recently seen first, at most
    /// `limit` (1 to [`MAX_WORKERS_LISTED`]): what each holds now and its results of the last
    /// minute. Anyone who may read sweeps may read this.
    pub async fn workers(&self, caller: &Caller, limit: u32) -> Result<WorkerList, ServiceError> {
        self.auth.require(caller, Need::Read)?;
        if limit == 0 || limit > MAX_WORKERS_LISTED {
            return Err(
                FieldError::new("limit", format!("must be 1 to {MAX_WORKERS_LISTED}")).into(),
            );
        }
        let _turn = self.read_turn().await?;
        let mut workers = self.store.workers(WORKERS_SEEN_WITHIN, limit).await?;
        let ids: Vec<i64> = workers.iter().map(|w| w.id).collect();
        let checks = self.store.worker_checks(&ids).await?;
        for w in &mut workers {
            if let Some(&(n, m)) = checks.get(&w.id) {
                w.checks = n;
                w.mismatches = m;
            }
        }
        Ok(WorkerList {
            workers,
            seen_within_secs: WORKERS_SEEN_WITHIN.as_secs(),
            limit,
        })
    }

    /// Registers a worker (with the binary-only engines it has) and hands it the lease timing.
    /// The worker belongs to the caller's token: only that token may speak for it. A token
    /// holding its most live workers already is refused (`StoreError::TooManyWorkers`) until
    /// one stops or goes a lease without being seen.
    pub async fn register_worker(
        &self,
        caller: &Caller,
        req: &RegisterWorker,
    ) -> Result<Registered, ServiceError> {
        let token_id = self.auth.require(caller, Need::Worker)?.map(|p| p.token_id);
        req.validate()?;
        let cap = WorkerCap {
            max_live: self.max_workers_per_token,
            lease: self.leases.lease,
        };
        let worker_id = self
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
    ) -> Result<AuthorizedWorker, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, worker_id)
            .await?;
        Ok(AuthorizedWorker { id: worker_id })
    }

    /// Leases up to `max_jobs` jobs to the worker.
    pub async fn lease(
        &self,
        worker: &AuthorizedWorker,
        max_jobs: u32,
    ) -> Result<Vec<JobLease>, ServiceError> {
        let worker_id = worker.id;
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
        self.metrics.lease_calls.inc();
        self.metrics.jobs_leased.inc_by(jobs.len() as u64);
        for j in &jobs {
            tracing::info_span!("job", job_id = j.job_id, sweep_id = j.sweep_id, worker_id)
                .in_scope(|| tracing::debug!(attempt = j.attempt, "job leased"));
        }
        Ok(jobs)
    }

    /// Renews every lease the worker names; one outcome per lease, in order. Also marks the
    /// worker seen; an unregistered worker is `NotFound`.
    pub async fn heartbeat(
        &self,
        worker: &AuthorizedWorker,
        leases: &[HeldLease],
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        check_jobs_per_call("leases", leases.len())?;
        let outcomes = self
            .store
            .heartbeat_many(worker.id, leases, self.leases.lease)
            .await?;
        self.metrics.heartbeats.inc();
        Ok(outcomes)
    }

    /// Gives back the leases the worker names (it is stopping and will not finish them): each
    /// still held is queued again at once (`Held` in its outcome), any other is `Lost`.
    pub async fn release(
        &self,
        worker: &AuthorizedWorker,
        leases: &[HeldLease],
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        check_jobs_per_call("leases", leases.len())?;
        Ok(self.store.release_leases(worker.id, leases).await?)
    }

    /// Stores every job report of an upload; one outcome per report, in order. Invalid input
    /// fails the whole call and stores nothing of it.
    pub async fn report(
        &self,
        worker: &AuthorizedWorker,
        reports: Arc<[JobReport]>,
    ) -> Result<Vec<JobOutcome>, ServiceError> {
        check_jobs_per_call("reports", reports.len())?;
        let outcomes = self
            .store
            .report_many(
                worker.id,
                reports.clone(),
                self.leases.lease,
                self.leases.max_attempts,
            )
            .await?;
        self.count_upload(&reports, &outcomes);
        Ok(outcomes)
    }

    /// Counts an upload: results newly stored, and the failed tries of positions among them.
    /// A failed try is recorded once per attempt and counts as accepted then, so a report
    /// counts at most as many failures as it had accepted results: a re-sent upload (accepted
    /// 0) or a lost lease (nothing stored) counts none again.
    fn count_upload(&self, reports: &[JobReport], outcomes: &[JobOutcome]) {
        let m = &self.metrics;
        m.result_uploads.inc();
        let mut accepted = 0u64;
        let mut errors = 0u64;
        for (report, outcome) in reports.iter().zip(outcomes) {
            accepted += u64::from(outcome.accepted);
            if outcome.status != LeaseStatus::Lost {
                let failed = report
                    .results
                    .iter()
                    .filter(|r| r.error.is_some() || r.problem().is_some())
                    .count() as u64;
                errors += failed.min(u64::from(outcome.accepted));
            }
        }
        m.results_accepted.inc_by(accepted);
        m.position_errors.inc_by(errors);
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
        let ack = self
            .store
            .build_failed(
                job_id,
                &failure,
                self.leases.lease,
                self.leases.max_attempts,
            )
            .await?;
        self.metrics.build_failures.inc();
        Ok(ack)
    }

    /// Keeps how a worker got the binary of a job's build (its host, CPU, compiler, build
    /// command, the binary's sha256 and its bench total), under the lease it holds. A bench
    /// total that differs from another worker's for the same binary is returned as the
    /// mismatch: the worker is refused the build and its job goes to the others.
    pub async fn record_build(
        &self,
        caller: &Caller,
        job_id: i64,
        report: &BuildReport,
    ) -> Result<Option<String>, ServiceError> {
        self.auth
            .check_worker(self.store.as_ref(), caller, report.worker_id)
            .await?;
        report.record.check()?;
        tracing::debug!(job_id, worker_id = report.worker_id, binary = %report.record.binary_sha256, bench = ?report.record.bench_nodes, "build recorded");
        let mismatch = self
            .store
            .record_build(job_id, report, self.leases.lease, self.leases.max_attempts)
            .await?;
        if let Some(why) = &mismatch {
            tracing::warn!(job_id, worker_id = report.worker_id, %why, "bench mismatch");
            self.metrics.build_failures.inc();
        }
        Ok(mismatch)
    }

    /// A source snapshot by its sha256 (64 hex digits), to a caller that may read it (see
    /// [`Service::may_read_source`]); `NotFound` otherwise, whether it is stored or not, so
    /// that nobody else learns it exists.
    pub async fn source(&self, caller: &Caller, sha256: &str) -> Result<Vec<u8>, ServiceError> {
        self.auth.require(caller, Need::Source)?;
        let not_found = || StoreError::NotFound(format!("source {sha256}"));
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_found().into());
        }
        if !self.may_read_source(caller, sha256).await? {
            return Err(not_found().into());
        }
        Ok(self.store.snapshot(sha256).await?.ok_or_else(not_found)?)
    }

    /// Whether `caller` may read snapshot `sha256`: admins and local commands always; a token
    /// that uploaded it or submitted a sweep that uses it; a worker token one of whose
    /// workers holds a lease of a job of such a sweep (what a worker fetches a source for).
    pub(super) async fn may_read_source(
        &self,
        caller: &Caller,
        sha256: &str,
    ) -> Result<bool, ServiceError> {
        Ok(match caller {
            Caller::Local => true,
            Caller::Token(p) if p.role == Role::Admin => true,
            Caller::Token(p) => self.store.may_read_snapshot(sha256, p.token_id).await?,
            Caller::Anonymous => false,
        })
    }

    /// Keeps that the caller's token uploaded snapshot `sha256`, so it may read it back.
    pub(super) async fn keep_uploader(
        &self,
        caller: &Caller,
        sha256: &str,
    ) -> Result<(), ServiceError> {
        if let Caller::Token(p) = caller {
            self.store.add_snapshot_uploader(sha256, p.token_id).await?;
        }
        Ok(())
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
