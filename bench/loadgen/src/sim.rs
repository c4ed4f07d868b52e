//! Simulated workers: the real worker protocol (register, lease, heartbeat, results) with
//! fabricated results instead of engines.
//!
//! Like the real worker, each simulated worker talks to the coordinator per worker, not per
//! job: one heartbeat names every lease it holds and one upload carries every job's report.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sweep_domain::wire::{
    HeldLease, JobLease, JobReport, LeaseRequest, LeaseResponse, LeaseStatus, PositionResult,
    RegisterWorker, Registered, WorkerHeartbeat, WorkerHeartbeatAck, WorkerReport, WorkerReportAck,
};
use tokio::time::{sleep, sleep_until, Instant};

use crate::stats::{Call, Stats};

/// First pause after an empty lease, as the real worker's `poll_interval`.
const IDLE_MIN: Duration = Duration::from_millis(750);
/// Longest pause between lease polls while idle, as the real worker's `poll_interval_max`.
const IDLE_MAX: Duration = Duration::from_secs(5);
/// First pause after a failed call; doubles up to [`ERROR_MAX`].
const ERROR_MIN: Duration = Duration::from_millis(100);
/// Longest pause after failed calls.
const ERROR_MAX: Duration = Duration::from_secs(5);
/// Attempts of one results upload before its jobs are given up (left to expire).
const UPLOAD_ATTEMPTS: u32 = 3;

/// One HTTP client for every simulated worker (a shared connection pool), recording each call
/// into [`Stats`].
#[derive(Debug)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    stats: Arc<Stats>,
}

impl Api {
    /// A client for the coordinator at `base` keeping up to `connections` idle connections,
    /// each request timing out after `timeout`.
    pub fn new(
        base: &str,
        token: &str,
        connections: usize,
        timeout: Duration,
        stats: Arc<Stats>,
    ) -> anyhow::Result<Self> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .context("the token holds characters a header cannot carry")?,
        );
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .pool_max_idle_per_host(connections)
            .pool_idle_timeout(Duration::from_secs(300))
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .build()
            .context("building the HTTP client")?;
        Ok(Api {
            http,
            base: format!("{}/api/v1", base.trim_end_matches('/')),
            stats,
        })
    }

    /// POSTs `body` as JSON; records the call and returns the parsed answer, or `None` after
    /// recording why not (HTTP status, `timeout`, `connect`, `transport` or `bad_body`).
    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        call: Call,
        path: &str,
        body: &B,
    ) -> Option<R> {
        let start = std::time::Instant::now();
        // Like a real worker: an answer with Retry-After (the coordinator shedding load) is
        // waited out (plus up to half again, at random) and sent again, a few times at most;
        // each one is counted as `shed`.
        let mut tries = 0;
        let (status, bytes) = loop {
            let sent = self
                .http
                .post(format!("{}{path}", self.base))
                .json(body)
                .send()
                .await;
            let resp = match sent {
                Ok(resp) => resp,
                Err(e) => {
                    self.stats.error(call, transport_kind(&e));
                    return None;
                }
            };
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let bytes = match resp.bytes().await {
                Ok(b) => b,
                Err(e) => {
                    self.stats.error(call, transport_kind(&e));
                    return None;
                }
            };
            match retry_after {
                Some(secs) if !status.is_success() && tries < 5 => {
                    tries += 1;
                    self.stats.error(call, "shed");
                    let wait = Duration::from_secs(secs.max(1));
                    let spread = rand::random::<f64>() * 0.5;
                    tokio::time::sleep(wait.mul_f64(1.0 + spread)).await;
                }
                _ => break (status, bytes),
            }
        };
        if !status.is_success() {
            self.stats.error(call, status.as_str());
            return None;
        }
        match serde_json::from_slice(&bytes) {
            Ok(r) => {
                self.stats.ok(call, start.elapsed());
                Some(r)
            }
            Err(_) => {
                self.stats.error(call, "bad_body");
                None
            }
        }
    }

    /// Registers simulated worker number `n`; `None` when the coordinator refused or failed.
    pub async fn register(&self, n: usize) -> Option<Registered> {
        let req = RegisterWorker {
            name: format!("loadgen-{n}"),
            host: "loadgen".to_string(),
            cores: 8,
            engines: Vec::new(),
        };
        self.post(Call::Register, "/workers", &req).await
    }
}

fn transport_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else {
        "transport"
    }
}

/// Sleeps `d`, but never past `deadline`.
async fn pause(d: Duration, deadline: Instant) {
    sleep_until((Instant::now() + d).min(deadline)).await;
}

/// When a simulated worker in lease mode heartbeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beats {
    /// Once per lease, between the lease and the upload: a worker whose engines take about a
    /// heartbeat interval per lease (and the most heartbeats any worker sends per lease).
    PerLease,
    /// At most once per this interval, as the real worker's timer (`heartbeat_secs` of its
    /// registration): a worker whose leases take less than the interval skips the heartbeat
    /// of most of them.
    Every(Duration),
}

impl Beats {
    /// Whether a worker that last heartbeated at `last` (never: `None`) heartbeats the lease it
    /// has just taken at `now`.
    pub fn due(self, last: Option<Instant>, now: Instant) -> bool {
        match self {
            Beats::PerLease => true,
            Beats::Every(every) => last.is_none_or(|at| now.duration_since(at) >= every),
        }
    }
}

/// One simulated worker in lease mode: from `start`, leases up to `jobs_per_lease` jobs,
/// heartbeats them (each time, or when `beats` says one is due), spends about `work` as if
/// running them, uploads a finished report for each, and again, until `deadline`; pauses like
/// the real worker when the queue is empty or a call fails. Leases nothing after the deadline,
/// but finishes the jobs it holds.
pub async fn lease_worker(
    api: Arc<Api>,
    worker_id: i64,
    jobs_per_lease: u32,
    work: Duration,
    beats: Beats,
    start: Instant,
    deadline: Instant,
) {
    sleep_until(start).await;
    let stats = &api.stats;
    // When this worker last heartbeated: a timed worker's first lease is beaten at once, as
    // the real worker's timer may fire at any moment of its first lease.
    let mut last_beat: Option<Instant> = None;
    let mut idle = IDLE_MIN;
    let mut backoff = ERROR_MIN;
    let request = LeaseRequest {
        max_jobs: jobs_per_lease,
    };
    let lease_path = format!("/workers/{worker_id}/lease");
    while Instant::now() < deadline {
        let Some(LeaseResponse { jobs }) = api.post(Call::Lease, &lease_path, &request).await
        else {
            pause(backoff, deadline).await;
            backoff = (backoff * 2).min(ERROR_MAX);
            continue;
        };
        backoff = ERROR_MIN;
        if jobs.is_empty() {
            stats.empty_leases.fetch_add(1, Relaxed);
            pause(idle, deadline).await;
            idle = idle.mul_f64(1.5).min(IDLE_MAX);
            continue;
        }
        idle = IDLE_MIN;
        stats.jobs_leased.fetch_add(jobs.len() as u64, Relaxed);
        let now = Instant::now();
        let beat = beats.due(last_beat, now);
        if beat {
            last_beat = Some(now);
        }
        run(&api, worker_id, &jobs, beat, work).await;
    }
}

/// Heartbeats the leased `jobs` in one call if `beat`, waits about `work` (the engines' time),
/// then reports all their positions, finished, in one upload (retried a few times; jobs of an
/// upload that never succeeds are abandoned).
async fn run(api: &Api, worker_id: i64, jobs: &[JobLease], beat: bool, work: Duration) {
    let stats = &api.stats;
    if beat {
        heartbeat(api, worker_id, jobs).await;
    }
    if !work.is_zero() {
        // Engine times vary; a fixed pause would keep workers that started together in step,
        // calling in waves.
        sleep(work.mul_f64(0.5 + rand::random::<f64>())).await;
    }
    let upload = WorkerReport {
        reports: jobs.iter().map(report_of).collect(),
    };
    let path = format!("/workers/{worker_id}/results");
    let mut backoff = ERROR_MIN;
    for attempt in 1..=UPLOAD_ATTEMPTS {
        if let Some(ack) = api
            .post::<_, WorkerReportAck>(Call::Results, &path, &upload)
            .await
        {
            for j in &ack.jobs {
                stats.results_stored.fetch_add(j.accepted.into(), Relaxed);
                stats.duplicates.fetch_add(j.duplicates.into(), Relaxed);
                if j.status == LeaseStatus::Lost {
                    stats.lost.fetch_add(1, Relaxed);
                }
            }
            return;
        }
        if attempt < UPLOAD_ATTEMPTS {
            sleep(backoff).await;
            backoff *= 2;
        }
    }
    stats.abandoned.fetch_add(jobs.len() as u64, Relaxed);
}

/// Renews the leases of `jobs` in one heartbeat call, counting those the coordinator no
/// longer holds for this worker as lost.
async fn heartbeat(api: &Api, worker_id: i64, jobs: &[JobLease]) {
    let beat = WorkerHeartbeat {
        leases: jobs
            .iter()
            .map(|j| HeldLease {
                job_id: j.job_id,
                attempt: j.attempt,
            })
            .collect(),
        release: false,
    };
    let path = format!("/workers/{worker_id}/heartbeat");
    if let Some(ack) = api
        .post::<_, WorkerHeartbeatAck>(Call::Heartbeat, &path, &beat)
        .await
    {
        let gone = ack.jobs.iter().filter(|j| j.status != LeaseStatus::Held);
        api.stats.lost.fetch_add(gone.count() as u64, Relaxed);
    }
}

/// A finished report of every position of `job`, with plausible made-up numbers: the first
/// best move of the position (or `e2e4`), so about as many are solved as with a strong engine.
fn report_of(job: &JobLease) -> JobReport {
    let depth = job.limit.depth().unwrap_or(12);
    let results = job
        .positions
        .iter()
        .map(|p| {
            let seed = (job.job_id as u64).wrapping_mul(2_654_435_761) ^ u64::from(p.index);
            let nodes = 20_000 + seed % 480_000;
            PositionResult {
                counters: Default::default(),
                index: p.index,
                nodes,
                bestmove: p.bm.first().cloned().unwrap_or_else(|| "e2e4".to_string()),
                solved: !p.bm.is_empty(),
                score_cp: Some((seed % 200) as i32 - 100),
                score_mate: None,
                depth,
                time_ms: nodes / 2_000,
                error: None,
            }
        })
        .collect();
    JobReport {
        job_id: job.job_id,
        attempt: job.attempt,
        results,
        finished: true,
        speed: None,
    }
}

/// One simulated idle worker: from `start`, heartbeats with no leases every `every` until
/// `deadline`, as a worker with nothing to do keeps itself seen.
pub async fn heartbeat_worker(
    api: Arc<Api>,
    worker_id: i64,
    every: Duration,
    start: Instant,
    deadline: Instant,
) {
    let beat = WorkerHeartbeat {
        leases: Vec::new(),
        release: false,
    };
    let path = format!("/workers/{worker_id}/heartbeat");
    let mut next = start;
    while next < deadline {
        sleep_until(next).await;
        let _ = api
            .post::<_, WorkerHeartbeatAck>(Call::Heartbeat, &path, &beat)
            .await;
        next += every;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_beats_come_once_per_interval_and_per_lease_beats_always() {
        let t0 = Instant::now();
        let every = Beats::Every(Duration::from_secs(5));
        assert!(every.due(None, t0), "the first lease is heartbeated");
        assert!(!every.due(Some(t0), t0 + Duration::from_millis(4_999)));
        assert!(every.due(Some(t0), t0 + Duration::from_secs(5)));
        assert!(Beats::PerLease.due(Some(t0), t0));
        assert!(Beats::PerLease.due(None, t0));
    }
}
