//! The coordinator's worker protocol as typed calls (register, lease, heartbeat, upload,
//! build reports, source downloads), over `sweep_client`'s requests, error classification
//! and TLS trust.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use sweep_client::{
    bearer_headers, classify_response, send_json, transport_error, trust, ClientError,
};
use sweep_domain::provenance::{BuildRecorded, BuildReport};
use sweep_domain::wire::{
    BatchAck, BuildFailure, EngineList, HeldLease, LeaseRequest, LeaseResponse, RegisterWorker,
    Registered, WorkerHeartbeat, WorkerHeartbeatAck, WorkerReport, WorkerReportAck,
};

/// Largest engine source snapshot accepted (the archive's own bound on compressed input), so
/// a confused or hostile server cannot fill memory with a download the unpacker would refuse.
pub const MAX_SOURCE_BYTES: usize = sweep_archive::MAX_COMPRESSED_BYTES;

/// Source downloads may be large and slow; ordinary calls use the configured timeout.
const SOURCE_TIMEOUT: Duration = Duration::from_secs(300);

/// Client for the `/api/v1` worker endpoints of one coordinator.
#[derive(Debug, Clone)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
}

impl CoordinatorClient {
    /// A client for the coordinator at `base` (e.g. `http://127.0.0.1:8080`); each request
    /// times out after `timeout`. An `https://` coordinator is checked against the system's
    /// roots.
    pub fn new(base: &str, timeout: Duration) -> Result<Self, ClientError> {
        Self::with_ca_cert(base, timeout, None)
    }

    /// As [`CoordinatorClient::new`], trusting the CA certificates in the PEM file `ca_cert`
    /// instead of the system's roots (see [`sweep_client::trust`]).
    pub fn with_ca_cert(
        base: &str,
        timeout: Duration,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, ClientError> {
        Self::connect(base, timeout, None, ca_cert)
    }

    /// As [`CoordinatorClient::with_ca_cert`], sending `token` (a worker token) as
    /// `Authorization: Bearer` with every request.
    pub fn connect(
        base: &str,
        timeout: Duration,
        token: Option<&str>,
        ca_cert: Option<&std::path::Path>,
    ) -> Result<Self, ClientError> {
        let headers = bearer_headers(token).map_err(|e| ClientError::Fatal {
            status: 0,
            code: "bad_token".to_string(),
            message: e.to_string(),
        })?;
        let http = trust::client_builder(ca_cert)
            .map_err(|e| ClientError::Fatal {
                status: 0,
                code: "bad_request".to_string(),
                message: e.to_string(),
            })?
            .default_headers(headers)
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            // Below the coordinator's idle timeout (30 s by default), so a pooled connection
            // is not reused just as the coordinator closes it.
            .pool_idle_timeout(Duration::from_secs(20))
            .build()
            .map_err(|e| transport_error("building the HTTP client", e))?;
        Ok(CoordinatorClient {
            http,
            base: format!("{}/api/v1", base.trim_end_matches('/')),
        })
    }

    /// `POST /workers`: introduces the worker.
    pub async fn register(&self, req: &RegisterWorker) -> Result<Registered, ClientError> {
        self.post("/workers".to_string(), req).await
    }

    /// `GET /engines`: the registered engines (a worker looks for the binary-only ones).
    pub async fn engines(&self) -> Result<EngineList, ClientError> {
        let request = self.http.get(format!("{}/engines", self.base));
        send_json("GET /engines", request).await
    }

    /// `POST /workers/{id}/lease`: asks for up to `max_jobs` jobs (possibly none).
    pub async fn lease(&self, worker_id: i64, max_jobs: u32) -> Result<LeaseResponse, ClientError> {
        self.post(
            format!("/workers/{worker_id}/lease"),
            &LeaseRequest { max_jobs },
        )
        .await
    }

    /// `POST /workers/{id}/heartbeat`: renews every lease named; the ack gives each job's
    /// status (held, cancelled, lost) in the same order.
    pub async fn heartbeat(
        &self,
        worker_id: i64,
        hb: &WorkerHeartbeat,
    ) -> Result<WorkerHeartbeatAck, ClientError> {
        self.post(format!("/workers/{worker_id}/heartbeat"), hb)
            .await
    }

    /// `POST /workers/{id}/heartbeat` with `release`: gives the named leases back (the worker
    /// is stopping), so their jobs are queued again at once.
    pub async fn release(
        &self,
        worker_id: i64,
        leases: Vec<HeldLease>,
    ) -> Result<WorkerHeartbeatAck, ClientError> {
        let hb = WorkerHeartbeat {
            leases,
            release: true,
        };
        self.post(format!("/workers/{worker_id}/heartbeat"), &hb)
            .await
    }

    /// `POST /workers/{id}/results`: uploads the results of several jobs at once
    /// (idempotent: re-sent results are duplicates); the ack gives each job's status.
    pub async fn report(
        &self,
        worker_id: i64,
        report: &WorkerReport,
    ) -> Result<WorkerReportAck, ClientError> {
        self.post(format!("/workers/{worker_id}/results"), report)
            .await
    }

    /// `POST /jobs/{id}/build-failed`: reports that the job's build cannot be built.
    pub async fn build_failed(
        &self,
        job_id: i64,
        failure: &BuildFailure,
    ) -> Result<BatchAck, ClientError> {
        self.post(format!("/jobs/{job_id}/build-failed"), failure)
            .await
    }

    /// `POST /jobs/{id}/built`: how this worker got the binary of the job's build.
    pub async fn record_build(
        &self,
        job_id: i64,
        report: &BuildReport,
    ) -> Result<BuildRecorded, ClientError> {
        self.post(format!("/jobs/{job_id}/built"), report).await
    }

    /// `GET /sources/{sha256}`: the raw gzip'ed tar snapshot (not yet verified).
    pub async fn fetch_source(&self, sha256: &str) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}/sources/{sha256}", self.base);
        let mut resp = self
            .http
            .get(&url)
            .timeout(SOURCE_TIMEOUT)
            .send()
            .await
            .map_err(|e| transport_error("GET source", e))?;
        let status = resp.status();
        if !status.is_success() {
            let headers = resp.headers().clone();
            let body = resp.bytes().await.unwrap_or_default();
            return Err(classify_response(status.as_u16(), &headers, &body));
        }
        let mut out = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| transport_error("reading source", e))?
        {
            if out.len() + chunk.len() > MAX_SOURCE_BYTES {
                return Err(ClientError::Fatal {
                    status: status.as_u16(),
                    code: "too_large".to_string(),
                    message: format!("source snapshot exceeds {MAX_SOURCE_BYTES} bytes"),
                });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: String,
        body: &B,
    ) -> Result<R, ClientError> {
        let request = self.http.post(format!("{}{path}", self.base)).json(body);
        send_json(&format!("POST {path}"), request).await
    }
}
