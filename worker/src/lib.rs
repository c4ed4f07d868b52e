//! Sweep worker: leases jobs from a coordinator, builds engine variants once, runs their
//! positions on engine processes, and uploads results in batches.
//!
//! Layout: [`client`] speaks HTTP, to coordinators [`trust`] says to trust; [`source`] and [`build`] produce binaries (each build in
//! its own copy of the source, made by `tree`, and only with a program [`allow`] lets it run),
//! `process` starts children in process groups that die with the worker, [`binaries`] finds prebuilt ones and checks
//! variants' options; [`engine`] drives engine processes; `runner` executes one job; `leases`
//! leases jobs for all slots and keeps them with one heartbeat; `report` uploads every slot's
//! results in batches; [`Worker`] ties the slots together.
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
use sweep_domain::wire::RegisterWorker;
use tokio::sync::{mpsc, Mutex, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub mod allow;
pub mod binaries;
pub mod build;
pub mod client;
pub mod config;
pub mod engine;
mod leases;
mod process;
pub mod provenance;
mod report;
mod runner;
pub mod source;
mod stop;
mod tree;
pub mod trust;

pub use config::WorkerConfig;
pub use engine::session::run_positions_direct;
pub use engine::EngineSettings;

use client::{with_retry, ClientError, CoordinatorClient};
use engine::session::EngineSession;
use leases::{heartbeat_loop, lease_loop, Assigned, HeldLeases, LeasePolicy};
use report::{UploadMsg, UploadPolicy, Uploader};
use runner::{run_job, JobEnv};

/// A worker process: registers, then runs `cores` job slots until shut down.
#[derive(Debug, Clone)]
pub struct Worker {
    config: WorkerConfig,
}

/// The slots' shared end of the job channel: whichever slot is free takes the next job.
type JobQueue = Arc<Mutex<mpsc::Receiver<Assigned>>>;

impl Worker {
    /// A worker with `config` (nothing happens until [`Worker::run`]).
    pub fn new(config: WorkerConfig) -> Self {
        Worker { config }
    }

    /// Reads the coordinator's engine list and registers with the binary-only engines whose
    /// binary is allowed (`engine_binaries`) and executable here (retrying while the coordinator is unreachable), then leases
    /// and runs jobs on `cores` slots until `shutdown` fires. Talks to the coordinator per worker, not per job:
    /// one lease loop feeds every slot, one heartbeat renews every held lease, one uploader
    /// sends every slot's results in batches. On shutdown it stops leasing, kills engines,
    /// delivers results already computed (best effort, bounded by `shutdown_grace`), gives
    /// back the leases of jobs it did not finish, and returns. It also returns, the same way,
    /// once `max_jobs` jobs have ended or it was idle for `exit_when_idle`. Errors only for problems waiting cannot fix (bad URL, cache directory not
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
        let client = CoordinatorClient::connect(
            &c.coordinator,
            c.request_timeout,
            c.token.as_deref(),
            c.ca_cert.as_deref(),
        )
        .with_context(|| format!("coordinator URL {}", c.coordinator))?;
        let engine_binaries = allow::EngineBinaries::new(c.engine_binaries.clone());
        // Jobs of a binary-only engine go only to workers that have its binary (and allow it).
        let engines = match with_retry("engine list", &shutdown, || client.engines()).await {
            Ok(list) => binaries::available_engines(&list, &engine_binaries),
            Err(ClientError::Cancelled) => return Ok(()),
            Err(e @ ClientError::Untrusted(_)) => {
                return Err(e).with_context(|| format!("coordinator {}", c.coordinator))
            }
            // A coordinator that will not list its engines still has source engines to run.
            Err(e) => {
                tracing::warn!(error = %e, "no engine list; registering without binary-only engines");
                Vec::new()
            }
        };
        let request = RegisterWorker {
            name: c.name.clone(),
            host: c.host.clone(),
            cores: u32::try_from(c.cores).unwrap_or(u32::MAX),
            engines,
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
        let worker_id = registered.worker_id;
        let span = tracing::info_span!("worker", worker_id);
        span.in_scope(|| {
            tracing::info!(
                cores = c.cores,
                lease_secs = registered.lease_secs,
                heartbeat_secs = registered.heartbeat_secs,
                "registered"
            )
        });
        // Everything below stops on this token: the caller's shutdown, or the lease loop's
        // own decision to end (`max_jobs` reached, `exit_when_idle`).
        let shutdown = shutdown.child_token();
        let held = Arc::new(HeldLeases::default());
        let env = Arc::new(JobEnv {
            client: client.clone(),
            worker_id,
            host: c.host.clone(),
            sources: source::SourceStore::new(&c.cache_dir),
            builds: build::BuildCache::new(&c.cache_dir)
                .with_programs(allow::BuildPrograms::new(c.build_programs.clone())),
            engine_binaries,
            option_checks: binaries::OptionChecks::default(),
            held: held.clone(),
            records: provenance::BuildRecorder::new(&c.host),
        });

        // Results: every slot -> one uploader. Bounded, so a coordinator outage holds the
        // engines back instead of growing memory.
        let (upload_tx, upload_rx) = mpsc::channel::<UploadMsg>(c.upload_batch_max * 2);
        let give_up = CancellationToken::new();
        let uploader = Uploader {
            client: client.clone(),
            worker_id,
            policy: UploadPolicy {
                batch_max: c.upload_batch_max,
                interval: c.upload_interval,
            },
            held: held.clone(),
            give_up: give_up.clone(),
        };
        let uploader = tokio::spawn(uploader.run(upload_rx).instrument(span.clone()));

        // Jobs: one lease loop -> the slots. The permits bound the jobs held at once, so the
        // channel never holds more than its capacity.
        let mut policy = LeasePolicy::new(c.cores, c.poll_interval, c.poll_interval_max);
        policy.max_jobs = c.max_jobs;
        policy.exit_when_idle = c.exit_when_idle;
        let permits = Arc::new(Semaphore::new(policy.capacity()));
        let (jobs_tx, jobs_rx) = mpsc::channel::<Assigned>(policy.capacity());
        let jobs: JobQueue = Arc::new(Mutex::new(jobs_rx));
        let mut background = JoinSet::new();
        background.spawn(
            lease_loop(
                client.clone(),
                worker_id,
                policy,
                permits,
                held.clone(),
                jobs_tx,
                shutdown.clone(),
            )
            .instrument(span.clone()),
        );
        background.spawn(
            heartbeat_loop(
                client.clone(),
                worker_id,
                Duration::from_secs(registered.heartbeat_secs.max(1)),
                held.clone(),
                shutdown.clone(),
            )
            .instrument(span.clone()),
        );

        let mut slots = JoinSet::new();
        let spawn = |slots: &mut JoinSet<()>, slot: usize| {
            let fut = slot_loop(
                env.clone(),
                jobs.clone(),
                upload_tx.clone(),
                slot,
                shutdown.clone(),
            );
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
        let deadline = tokio::time::Instant::now() + c.shutdown_grace;
        // Slots only kill their engines now; the lease loop and heartbeat stop at once.
        let drain = async {
            while slots.join_next().await.is_some() {}
            while background.join_next().await.is_some() {}
        };
        if tokio::time::timeout(c.shutdown_grace + Duration::from_secs(2), drain)
            .await
            .is_err()
        {
            span.in_scope(|| tracing::warn!("slots did not stop in time; aborting them"));
            slots.abort_all();
            background.abort_all();
            while slots.join_next().await.is_some() {}
            while background.join_next().await.is_some() {}
        }
        // Every sender gone: the uploader delivers what is left, then ends.
        drop(upload_tx);
        let mut uploader = uploader;
        let flush_until = deadline.max(tokio::time::Instant::now() + Duration::from_millis(500));
        if tokio::time::timeout_at(flush_until, &mut uploader)
            .await
            .is_err()
        {
            give_up.cancel();
            let _ = uploader.await;
        }
        release_leases(&client, worker_id, &held)
            .instrument(span)
            .await;
        Ok(())
    }
}

/// Gives back the leases still held on the way out (jobs interrupted before they finished),
/// so they are queued again at once instead of waiting out their lease. Best effort: one
/// try per call, bounded in time; a lease not released simply expires.
async fn release_leases(client: &CoordinatorClient, worker_id: i64, held: &HeldLeases) {
    let leases = held.leases();
    if leases.is_empty() {
        return;
    }
    for chunk in leases.chunks(sweep_domain::wire::MAX_JOBS_PER_CALL) {
        let call = client.release(worker_id, chunk.to_vec());
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(ack)) => {
                let released = ack
                    .jobs
                    .iter()
                    .filter(|j| j.status == sweep_domain::wire::LeaseStatus::Held)
                    .count();
                tracing::info!(released, held = chunk.len(), "leases released");
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, leases = chunk.len(), "releasing leases failed; they expire on their own")
            }
            Err(_) => {
                tracing::warn!(
                    leases = chunk.len(),
                    "releasing leases timed out; they expire on their own"
                )
            }
        }
    }
}

/// One job slot: takes the next leased job, runs it, repeats; keeps its engine between jobs.
async fn slot_loop(
    env: Arc<JobEnv>,
    jobs: JobQueue,
    uploads: mpsc::Sender<UploadMsg>,
    slot: usize,
    shutdown: CancellationToken,
) {
    let mut session: Option<EngineSession> = None;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => break,
            next = async { jobs.lock().await.recv().await } => next,
        };
        let Some(assigned) = next else { break };
        if shutdown.is_cancelled() {
            // The lease expires on its own and the job goes to someone else.
            break;
        }
        let outcome = run_job(&env, &mut session, assigned.lease, assigned.stop, &uploads).await;
        tracing::debug!(slot, ?outcome, "slot free");
        drop(assigned.permit);
    }
    if let Some(mut s) = session {
        s.kill().await;
    }
}
