//! Sweep worker: leases jobs from a coordinator, builds engine variants once, runs their
//! positions on engine processes, and uploads results in batches.
//!
//! Layout: [`client`] makes the worker protocol's calls (over `sweep_client`, which the CLI
//! shares: TLS trust, retries, error classification); [`source`] and [`build`] produce binaries (each build in
//! its own copy of the source, made by `tree`, and only with a program [`allow`] lets it run),
//! `process` starts children in process groups that die with the worker, [`binaries`] finds prebuilt ones and checks
//! variants' options, [`bench`] runs an engine's own benchmark; [`engine`] drives engine processes; `runner` executes one job; `speed`
//! times a speed job's variant against its baseline; `slots`
//! runs each leased job on a free slot (a speed job on all of them, alone); `leasing` leases jobs for all slots; `leases` keeps
//! them with one heartbeat; `report` uploads every slot's results in batches; [`Worker`] ties
//! them together.
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
use sweep_client::{with_retry, ClientError};
use sweep_domain::wire::{HeldLease, RegisterWorker, Registered};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

pub mod allow;
pub mod bench;
pub mod binaries;
pub mod build;
pub mod client;
pub mod config;
pub mod engine;
mod leases;
mod leasing;
mod process;
pub mod provenance;
mod report;
mod runner;
pub mod sandbox;
mod slots;
pub mod source;
mod speed;
mod stop;
#[cfg(test)]
mod test_support;
mod tree;

pub use config::WorkerConfig;
pub use engine::session::run_positions_direct;
pub use engine::EngineSettings;

use client::CoordinatorClient;
use leases::{heartbeat_loop, HeldLeases};
use leasing::{Assigned, LeaseLoop, LeasePolicy};
use report::{UploadMsg, UploadPolicy, Uploader};
use runner::JobEnv;
use slots::Slots;

/// A worker process: registers, then runs `cores` job slots until shut down.
#[derive(Debug, Clone)]
pub struct Worker {
    config: WorkerConfig,
}

/// What runs in the background while the slots work, and is wound down after them.
struct Background {
    /// The lease loop and the heartbeat.
    loops: JoinSet<()>,
    /// The uploader, ended by closing its channel.
    uploader: JoinHandle<()>,
    /// Makes the uploader drop what it could not deliver.
    give_up: CancellationToken,
}

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
        // Before registering: a worker that cannot contain contributors' code takes no job.
        let sandbox = sandbox::Sandbox::resolve(c.sandbox, &c.sandbox_read_only)?;
        let client = self.connect()?;
        let engine_binaries = allow::EngineBinaries::new(c.engine_binaries.clone());
        let Some(registered) = self.register(&client, &engine_binaries, &shutdown).await? else {
            return Ok(());
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
                .with_programs(allow::BuildPrograms::new(c.build_programs.clone()))
                .with_sandbox(sandbox.clone()),
            engine_binaries,
            option_checks: binaries::OptionChecks::default(),
            held: held.clone(),
            records: provenance::BuildRecorder::new(&c.host, &sandbox),
            sandbox,
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
        let (mut jobs, loops) = self.start_leasing(&client, &registered, &held, &shutdown, &span);
        let background = Background {
            loops,
            uploader,
            give_up,
        };

        let mut slots = Slots::new(env, upload_tx, c.cores, span.clone());
        slots.dispatch(&mut jobs, &shutdown).await;
        span.in_scope(|| tracing::info!("shutting down"));
        self.wind_down(slots, background, &span).await;
        release_leases(&client, worker_id, &held)
            .instrument(span)
            .await;
        Ok(())
    }

    /// Checks the settings, creates the cache directory and makes the coordinator's client.
    fn connect(&self) -> anyhow::Result<CoordinatorClient> {
        let c = &self.config;
        anyhow::ensure!(c.cores >= 1, "cores must be at least 1");
        anyhow::ensure!(
            c.upload_batch_max >= 1,
            "upload_batch_max must be at least 1"
        );
        std::fs::create_dir_all(&c.cache_dir)
            .with_context(|| format!("creating cache directory {}", c.cache_dir.display()))?;
        CoordinatorClient::connect(
            &c.coordinator,
            c.request_timeout,
            c.token.as_deref(),
            c.ca_cert.as_deref(),
        )
        .with_context(|| format!("coordinator URL {}", c.coordinator))
    }

    /// Registers with the binary-only engines this worker can run, retrying while the
    /// coordinator is unreachable. `None`: `shutdown` fired first.
    async fn register(
        &self,
        client: &CoordinatorClient,
        engine_binaries: &allow::EngineBinaries,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<Option<Registered>> {
        let c = &self.config;
        // Jobs of a binary-only engine go only to workers that have its binary (and allow it).
        let engines = match with_retry("engine list", shutdown, || client.engines()).await {
            Ok(list) => binaries::available_engines(&list, engine_binaries),
            Err(ClientError::Cancelled) => return Ok(None),
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
        match with_retry("registration", shutdown, || client.register(&request)).await {
            Ok(r) => Ok(Some(r)),
            Err(ClientError::Cancelled) => Ok(None),
            Err(e) => {
                Err(e).with_context(|| format!("registering with coordinator {}", c.coordinator))
            }
        }
    }

    /// Starts the lease loop and the heartbeat; returns the channel the lease loop hands
    /// leased jobs over. The permits bound the jobs held at once, so the channel never holds
    /// more than its capacity.
    fn start_leasing(
        &self,
        client: &CoordinatorClient,
        registered: &Registered,
        held: &Arc<HeldLeases>,
        shutdown: &CancellationToken,
        span: &Span,
    ) -> (mpsc::Receiver<Assigned>, JoinSet<()>) {
        let c = &self.config;
        let mut policy = LeasePolicy::new(c.cores, c.poll_interval, c.poll_interval_max);
        policy.max_jobs = c.max_jobs;
        policy.exit_when_idle = c.exit_when_idle;
        let permits = Arc::new(Semaphore::new(policy.capacity()));
        let (jobs_tx, jobs_rx) = mpsc::channel::<Assigned>(policy.capacity());
        let mut loops = JoinSet::new();
        let lease_loop = LeaseLoop {
            client: client.clone(),
            worker_id: registered.worker_id,
            policy,
            permits,
            held: held.clone(),
            jobs: jobs_tx,
            shutdown: shutdown.clone(),
        };
        loops.spawn(lease_loop.run().instrument(span.clone()));
        loops.spawn(
            heartbeat_loop(
                client.clone(),
                registered.worker_id,
                Duration::from_secs(registered.heartbeat_secs.max(1)),
                held.clone(),
                shutdown.clone(),
            )
            .instrument(span.clone()),
        );
        (jobs_rx, loops)
    }

    /// After shutdown: stops the slots and the loops (aborting them if they take longer than
    /// `shutdown_grace` and a bit), then lets the uploader deliver what is left until the
    /// grace is over (at least half a second).
    async fn wind_down(&self, mut slots: Slots, mut background: Background, span: &Span) {
        let grace = self.config.shutdown_grace;
        let deadline = tokio::time::Instant::now() + grace;
        // Slots only kill their engines now; the lease loop and heartbeat stop at once.
        let drain = async {
            slots.stop().await;
            while background.loops.join_next().await.is_some() {}
        };
        if tokio::time::timeout(grace + Duration::from_secs(2), drain)
            .await
            .is_err()
        {
            span.in_scope(|| tracing::warn!("slots did not stop in time; aborting them"));
            slots.abort().await;
            background.loops.abort_all();
            while background.loops.join_next().await.is_some() {}
        }
        // Every sender gone: the uploader delivers what is left, then ends.
        drop(slots);
        let flush_until = deadline.max(tokio::time::Instant::now() + Duration::from_millis(500));
        if tokio::time::timeout_at(flush_until, &mut background.uploader)
            .await
            .is_err()
        {
            background.give_up.cancel();
            let _ = background.uploader.await;
        }
    }
}

/// Gives back the leases still held on the way out (jobs interrupted before they finished),
/// so they are queued again at once instead of waiting out their lease, and tells the
/// coordinator this worker is stopping (one call with no leases when it holds none), so it
/// stops counting as live: a lone worker started next need not wait a lease to check its own
/// results. Best effort: one try per call, bounded in time; a lease not released simply
/// expires, and a worker not heard from stops counting as live after a lease.
async fn release_leases(client: &CoordinatorClient, worker_id: i64, held: &HeldLeases) {
    let leases = held.leases();
    let chunks: Vec<&[HeldLease]> = if leases.is_empty() {
        vec![&[]]
    } else {
        leases
            .chunks(sweep_domain::wire::MAX_JOBS_PER_CALL)
            .collect()
    };
    for chunk in chunks {
        let call = client.release(worker_id, chunk.to_vec());
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(_)) if chunk.is_empty() => {
                tracing::debug!("told the coordinator this worker is stopping")
            }
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
