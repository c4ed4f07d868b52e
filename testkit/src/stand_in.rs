//! A stand-in coordinator for worker tests: the worker protocol served from memory on a free
//! port, handing out what a test queued and keeping what the worker reported, with switches
//! to fail uploads, cancel jobs and take leases away. The worker's own tests (in process) and
//! the end-to-end tests (a `sweep worker` process) share it, so both speak to one fake.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sweep_domain::wire::{
    BatchAck, BuildFailure, EngineList, JobAck, JobLease, JobStatus, LeaseRequest, LeaseResponse,
    LeaseStatus, PositionResult, RegisterWorker, Registered, WorkerHeartbeat, WorkerHeartbeatAck,
    WorkerReport, WorkerReportAck,
};

/// What the stand-in hands out, what it was told, and how it misbehaves.
#[derive(Debug)]
pub struct StandIn {
    /// The id the registered worker gets; every per-worker call must name it.
    pub worker_id: i64,
    /// Lease length the registration announces.
    pub lease_secs: u64,
    /// Heartbeat interval the registration announces.
    pub heartbeat_secs: u64,
    /// Leases not handed out yet, in order.
    pub queue: VecDeque<JobLease>,
    /// The source archive every `GET /api/v1/sources/{sha}` answers.
    pub source: Vec<u8>,
    /// Source downloads so far.
    pub source_gets: u32,
    /// Stored results per job, by position index.
    pub results: BTreeMap<i64, BTreeMap<u32, PositionResult>>,
    /// Jobs reported finished, in order.
    pub finished: Vec<i64>,
    /// (job id, output) of every build-failed report.
    pub build_failures: Vec<(i64, String)>,
    /// Upload calls still to answer with a 503.
    pub fail_uploads: u32,
    /// Upload calls so far (failed ones too).
    pub upload_calls: u32,
    /// Jobs per stored upload call, in order.
    pub upload_jobs: Vec<usize>,
    /// `max_jobs` of every lease call.
    pub lease_asks: Vec<u32>,
    /// Jobs whose sweep was cancelled.
    pub cancelled: Vec<i64>,
    /// Jobs whose lease the worker lost.
    pub lost: Vec<i64>,
    /// Heartbeat calls (one per worker and beat, however many leases).
    pub heartbeats: u32,
    /// How long a lease call takes to answer (the jobs are taken when it answers).
    pub lease_delay: std::time::Duration,
    /// Jobs whose lease the worker gave back, in order.
    pub released: Vec<i64>,
}

impl Default for StandIn {
    /// Worker 7 with 30-second leases and a heartbeat every second; nothing queued.
    fn default() -> Self {
        Self {
            worker_id: 7,
            lease_secs: 30,
            heartbeat_secs: 1,
            queue: VecDeque::new(),
            source: Vec::new(),
            source_gets: 0,
            results: BTreeMap::new(),
            finished: Vec::new(),
            build_failures: Vec::new(),
            fail_uploads: 0,
            upload_calls: 0,
            upload_jobs: Vec::new(),
            lease_asks: Vec::new(),
            cancelled: Vec::new(),
            lost: Vec::new(),
            heartbeats: 0,
            lease_delay: std::time::Duration::ZERO,
            released: Vec::new(),
        }
    }
}

impl StandIn {
    /// How the lease of `job_id` stands: lost, cancelled, or (by default) held.
    pub fn status(&self, job_id: i64) -> LeaseStatus {
        if self.lost.contains(&job_id) {
            LeaseStatus::Lost
        } else if self.cancelled.contains(&job_id) {
            LeaseStatus::Cancelled
        } else {
            LeaseStatus::Held
        }
    }

    /// Stores an upload's reports (except on lost leases) and acks each job.
    fn store(&mut self, upload: WorkerReport) -> WorkerReportAck {
        self.upload_jobs.push(upload.reports.len());
        let mut jobs = Vec::new();
        for report in upload.reports {
            let status = self.status(report.job_id);
            let mut accepted = 0;
            if status != LeaseStatus::Lost {
                accepted = report.results.len() as u32;
                let stored = self.results.entry(report.job_id).or_default();
                for r in report.results {
                    stored.insert(r.index, r);
                }
                if report.finished {
                    self.finished.push(report.job_id);
                }
            }
            jobs.push(JobAck {
                job_id: report.job_id,
                status,
                accepted,
                duplicates: 0,
                rejected: Vec::new(),
            });
        }
        WorkerReportAck { jobs }
    }
}

/// A stand-in shared between the test and the server.
pub type Shared = Arc<Mutex<StandIn>>;

/// Serves the worker protocol of `state` on a free port of 127.0.0.1; returns its base URL.
pub async fn serve(state: Shared) -> String {
    let app = Router::new()
        .route(
            "/api/v1/engines",
            get(|| async { Json(EngineList { engines: vec![] }) }),
        )
        .route("/api/v1/workers", post(register))
        .route("/api/v1/workers/{id}/lease", post(lease))
        .route("/api/v1/workers/{id}/heartbeat", post(heartbeat))
        .route("/api/v1/workers/{id}/results", post(results))
        .route("/api/v1/jobs/{id}/build-failed", post(build_failed))
        .route("/api/v1/sources/{sha}", get(source))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding the stand-in coordinator");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serving") });
    format!("http://{addr}")
}

async fn register(State(s): State<Shared>, Json(_): Json<RegisterWorker>) -> Json<Registered> {
    let s = s.lock().unwrap();
    Json(Registered {
        worker_id: s.worker_id,
        lease_secs: s.lease_secs,
        heartbeat_secs: s.heartbeat_secs,
    })
}

async fn lease(
    State(s): State<Shared>,
    Path(id): Path<i64>,
    Json(r): Json<LeaseRequest>,
) -> Json<LeaseResponse> {
    let delay = {
        let mut s = s.lock().unwrap();
        assert_eq!(id, s.worker_id);
        s.lease_asks.push(r.max_jobs);
        s.lease_delay
    };
    tokio::time::sleep(delay).await;
    let mut s = s.lock().unwrap();
    let n = (r.max_jobs as usize).min(s.queue.len());
    let jobs = s.queue.drain(..n).collect();
    Json(LeaseResponse { jobs })
}

async fn heartbeat(
    State(s): State<Shared>,
    Path(id): Path<i64>,
    Json(b): Json<WorkerHeartbeat>,
) -> Json<WorkerHeartbeatAck> {
    let mut s = s.lock().unwrap();
    assert_eq!(id, s.worker_id);
    if b.release {
        s.released.extend(b.leases.iter().map(|l| l.job_id));
    } else {
        s.heartbeats += 1;
    }
    let jobs = b
        .leases
        .iter()
        .map(|l| JobStatus {
            job_id: l.job_id,
            status: s.status(l.job_id),
        })
        .collect();
    Json(WorkerHeartbeatAck { jobs })
}

async fn results(
    State(s): State<Shared>,
    Path(id): Path<i64>,
    Json(upload): Json<WorkerReport>,
) -> Response {
    let mut s = s.lock().unwrap();
    assert_eq!(id, s.worker_id);
    s.upload_calls += 1;
    if s.fail_uploads > 0 {
        s.fail_uploads -= 1;
        return (StatusCode::SERVICE_UNAVAILABLE, "database down").into_response();
    }
    Json(s.store(upload)).into_response()
}

async fn build_failed(
    State(s): State<Shared>,
    Path(id): Path<i64>,
    Json(f): Json<BuildFailure>,
) -> Json<BatchAck> {
    s.lock().unwrap().build_failures.push((id, f.output));
    Json(BatchAck {
        accepted: 0,
        duplicates: 0,
        cancelled: false,
    })
}

async fn source(State(s): State<Shared>) -> Vec<u8> {
    let mut s = s.lock().unwrap();
    s.source_gets += 1;
    s.source.clone()
}
