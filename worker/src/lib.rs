//! Sweep worker: leases jobs from a coordinator, builds engine variants once, runs their
//! positions on engine processes, and uploads results in batches.
//!
//! Layout: [`client`] speaks HTTP; [`source`] and [`build`] produce binaries; [`engine`] drives
//! engine processes; `runner` executes one job and `report` uploads its results and keeps its
//! lease; [`Worker`] ties the slots together.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use sweep_worker::{Worker, WorkerConfig};
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let config = WorkerConfig::new("http://127.0.0.1:8080", "/var/cache/sweep");
//! Worker::new(config).run(shutdown).await
//! # }
//! ```

#![warn(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::Rng;
use sweep_domain::wire::RegisterWorker;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub mod build;
pub mod client;
pub mod config;
pub mod engine;
mod process;
mod report;
mod runner;
pub mod source;

pub use config::WorkerConfig;
pub use engine::session::run_positions_direct;
pub use engine::EngineSettings;

use client::{sleep_or_cancel, with_retry, Backoff, ClientError, CoordinatorClient};
use engine::session::EngineSession;
use report::UploadPolicy;
use runner::{run_job, JobEnv};

/// A worker process: registers, then runs `cores` job slots until shut down.
#[derive(Debug, Clone)]
pub struct Worker {
    config: WorkerConfig,
}

impl Worker {
    /// A worker with `config` (nothing happens until [`Worker::run`]).
    pub fn new(config: WorkerConfig) -> Self {
        Worker { config }
    }

    /// Registers (retrying while the coordinator is unreachable), then leases and runs jobs on
    /// `cores` slots until `shutdown` fires. On shutdown it stops leasing, kills engines,
    /// delivers results already computed (best effort, bounded by `shutdown_grace`) and
    /// returns. Errors only for problems waiting cannot fix (bad URL, cache directory not
    /// writable, registration rejected).
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let c = &self.config;
        anyhow::ensure!(c.cores >= 1, "cores must be at least 1");
        anyhow::ensure!(
            c.upload_batch_max >= 1,
            "upload_batch_max must be at least 1"
        );
        std::fs::create_dir_all(&c.cache_dir)
            .with_context(|| format!("creating cache directory {}", c.cache_dir.display()))?;
        let client = CoordinatorClient::new(&c.coordinator, c.request_timeout)
            .with_context(|| format!("coordinator URL {}", c.coordinator))?;
        let request = RegisterWorker {
            name: c.name.clone(),
            host: c.host.clone(),
            cores: u32::try_from(c.cores).unwrap_or(u32::MAX),
        };
        let registered =
            match with_retry("registration", &shutdown, || client.register(&request)).await {
                Ok(r) => r,
                Err(ClientError::Cancelled) => return Ok(()),
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("registering with coordinator {}", c.coordinator))
                }
            };
        let span = tracing::info_span!("worker", worker_id = registered.worker_id);
        span.in_scope(|| {
            tracing::info!(
                cores = c.cores,
                lease_secs = registered.lease_secs,
                heartbeat_secs = registered.heartbeat_secs,
                "registered"
            )
        });
        let env = Arc::new(JobEnv {
            client,
            worker_id: registered.worker_id,
            heartbeat_every: Duration::from_secs(registered.heartbeat_secs.max(1)),
            sources: source::SourceStore::new(&c.cache_dir),
            builds: build::BuildCache::new(&c.cache_dir),
            upload: UploadPolicy {
                batch_max: c.upload_batch_max,
                interval: c.upload_interval,
                shutdown_grace: c.shutdown_grace,
            },
        });

        let mut slots = JoinSet::new();
        let spawn = |slots: &mut JoinSet<()>, slot: usize| {
            let fut = slot_loop(env.clone(), self.config.clone(), slot, shutdown.clone());
            slots.spawn(fut.instrument(span.clone()));
        };
        for slot in 0..c.cores {
            spawn(&mut slots, slot);
        }
        let mut next_slot = c.cores;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(joined) = slots.join_next() => {
                    // A slot only ends on shutdown; a panic must not shrink the worker.
                    if let Err(e) = joined {
                        span.in_scope(|| tracing::error!(error = %e, "slot failed; restarting it"));
                        spawn(&mut slots, next_slot);
                        next_slot += 1;
                    }
                }
            }
        }
        span.in_scope(|| tracing::info!("shutting down"));
        // Each slot gets the upload grace plus time to kill its engine.
        let drain = async { while slots.join_next().await.is_some() {} };
        if tokio::time::timeout(c.shutdown_grace + Duration::from_secs(2), drain)
            .await
            .is_err()
        {
            span.in_scope(|| tracing::warn!("slots did not stop in time; aborting them"));
            slots.abort_all();
            while slots.join_next().await.is_some() {}
        }
        Ok(())
    }
}

/// One job slot: lease one job, run it, repeat; idle polls back off with jitter.
async fn slot_loop(
    env: Arc<JobEnv>,
    config: WorkerConfig,
    slot: usize,
    shutdown: CancellationToken,
) {
    let mut session: Option<EngineSession> = None;
    let mut idle = config.poll_interval;
    let mut errors = Backoff::coordinator();
    while !shutdown.is_cancelled() {
        let leased = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = env.client.lease(env.worker_id, 1) => r,
        };
        let pause = match leased {
            Ok(resp) if resp.jobs.is_empty() => {
                errors.reset();
                let pause = jitter(idle);
                idle = idle.mul_f64(1.5).min(config.poll_interval_max);
                pause
            }
            Ok(resp) => {
                errors.reset();
                idle = config.poll_interval;
                for job in resp.jobs {
                    if shutdown.is_cancelled() {
                        // The lease expires on its own and the job goes to someone else.
                        break;
                    }
                    run_job(env.clone(), &mut session, job, &shutdown).await;
                }
                Duration::ZERO
            }
            Err(e) => {
                let pause = errors.next_delay();
                tracing::warn!(slot, error = %e, retry_in_ms = pause.as_millis() as u64, "lease request failed");
                pause
            }
        };
        if !pause.is_zero() && !sleep_or_cancel(pause, &shutdown).await {
            break;
        }
    }
    if let Some(mut s) = session {
        s.kill().await;
    }
}

/// `d` scaled by a random factor in [0.75, 1.25], so idle slots do not poll in lockstep.
fn jitter(d: Duration) -> Duration {
    d.mul_f64(rand::thread_rng().gen_range(0.75..=1.25))
}
