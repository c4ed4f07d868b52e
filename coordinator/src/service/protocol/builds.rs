//! What a worker fetches and reports to build a job's variant: the source snapshot, a build
//! that failed, and how it got the binary (with its bench total, checked against others').

use sweep_domain::provenance::BuildReport;
use sweep_domain::wire::{BatchAck, BuildFailure};

use super::{Protocol, ProtocolError};
use crate::service::auth::{Caller, Need};

impl Protocol {
    /// Records that a job's build failed on the reporting worker.
    pub async fn build_failed(
        &self,
        caller: &Caller,
        job_id: i64,
        failure: &BuildFailure,
    ) -> Result<BatchAck, ProtocolError> {
        let shared = &self.shared;
        shared
            .auth
            .check_worker::<ProtocolError>(shared.store.as_ref(), caller, failure.worker_id)
            .await?;
        let failure = failure.bounded()?;
        tracing::warn!(job_id, worker_id = failure.worker_id, "build failed");
        let (lease, max_attempts) = (self.leases.lease, self.leases.max_attempts);
        let ack = self
            .queue
            .build_failed(job_id, &failure, lease, max_attempts)
            .await?;
        shared.metrics.build_failures.inc();
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
    ) -> Result<Option<String>, ProtocolError> {
        let shared = &self.shared;
        shared
            .auth
            .check_worker::<ProtocolError>(shared.store.as_ref(), caller, report.worker_id)
            .await?;
        report.record.check()?;
        tracing::debug!(job_id, worker_id = report.worker_id, binary = %report.record.binary_sha256, bench = ?report.record.bench_nodes, "build recorded");
        let (lease, max_attempts) = (self.leases.lease, self.leases.max_attempts);
        let mismatch = self
            .queue
            .record_build(job_id, report, lease, max_attempts)
            .await?;
        if let Some(why) = &mismatch {
            tracing::warn!(job_id, worker_id = report.worker_id, %why, "bench mismatch");
            shared.metrics.build_failures.inc();
        }
        Ok(mismatch)
    }

    /// A source snapshot by its sha256 (64 hex digits), to a caller that may read it (see
    /// `Auth::may_read_source`); `NotFound` otherwise, whether it is stored or not, so that
    /// nobody else learns it exists.
    pub async fn source(&self, caller: &Caller, sha256: &str) -> Result<Vec<u8>, ProtocolError> {
        let shared = &self.shared;
        shared.auth.require(caller, Need::Source)?;
        let not_found = || ProtocolError::NotFound(format!("source {sha256}"));
        if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_found());
        }
        let store = shared.store.as_ref();
        if !shared.auth.may_read_source(store, caller, sha256).await? {
            return Err(not_found());
        }
        store.snapshot(sha256).await?.ok_or_else(not_found)
    }
}
