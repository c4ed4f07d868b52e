//! `sweep-loadgen`: many simulated workers against one coordinator, speaking the real worker
//! protocol, with per-call rates, latencies and errors at the end.
//!
//! ```text
//! sweep-loadgen --url http://127.0.0.1:8080 --workers 1000 --duration 20 [--json]
//! sweep-loadgen --url http://127.0.0.1:8080 --workers 1000 --work-ms 2000
//! sweep-loadgen --url http://127.0.0.1:8080 --workers 1000 --work-ms 1000 --timed-heartbeats
//! sweep-loadgen --url http://127.0.0.1:8080 --workers 10000 --heartbeat-only
//! ```
//!
//! Every simulated worker is a task (not a thread) and all share one HTTP client, so 10,000
//! workers cost a few tens of MB. It prints `loadgen: measuring` and `loadgen: done measuring`
//! on stderr around the measured run (after registration), so a script can sample CPU use of
//! the coordinator and Postgres over exactly that window.

mod sim;
mod stats;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use sweep_domain::wire::MAX_JOBS_PER_LEASE;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

use sim::Api;
use stats::{Settings, Stats};

/// Load generator for a sweep coordinator: simulated workers lease jobs and report fabricated
/// results through the real worker endpoints.
#[derive(Debug, Parser)]
#[command(name = "sweep-loadgen", version, about)]
struct Args {
    /// Coordinator base URL.
    #[arg(
        long,
        env = "SWEEP_COORDINATOR",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// Worker token the simulated workers register with (`sweep token create --role worker`).
    #[arg(long, env = "SWEEP_TOKEN", hide_env_values = true)]
    token: String,
    /// Simulated workers.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    workers: u32,
    /// Seconds to run (after registration).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    duration: u64,
    /// Jobs each lease call asks for.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=MAX_JOBS_PER_LEASE as i64))]
    jobs_per_lease: u32,
    /// Milliseconds each simulated worker spends "running" its jobs, between its heartbeat and
    /// its upload, on average (each time drawn from half to one and a half times it, as engine
    /// times vary; 0: none, saturation). Real workers spend seconds in engines between calls,
    /// so this sets the offered load: about `workers * 1000 / work_ms` lease calls/s at most.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    work_ms: u64,
    /// Idle workers: lease nothing, only heartbeat (with no leases) every --heartbeat-secs.
    #[arg(long)]
    heartbeat_only: bool,
    /// Seconds between heartbeats in --heartbeat-only mode and with --timed-heartbeats (the
    /// coordinator's default).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    heartbeat_secs: u64,
    /// Lease mode: heartbeat at most every --heartbeat-secs, as the real worker's timer does,
    /// instead of once per lease (the default, the most heartbeats a worker sends).
    #[arg(long)]
    timed_heartbeats: bool,
    /// Seconds before one request times out.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Seconds workers may take after the run to finish the jobs they hold; then they are
    /// stopped (and their jobs left to expire).
    #[arg(long, default_value_t = 30)]
    grace: u64,
    /// Registrations in flight at once. Below the coordinator's default in-flight bound (128),
    /// so the registrations before a run are not shed by a burst the generator itself makes
    /// (a run's table would count those as errors of the run).
    #[arg(long, default_value_t = 64)]
    register_concurrency: usize,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let n = args.workers as usize;
    let stats = Arc::new(Stats::default());
    let timeout = Duration::from_secs(args.timeout.max(1));
    let api = Arc::new(Api::new(&args.url, &args.token, n, timeout, stats.clone())?);

    let ids = register_all(&api, n, args.register_concurrency).await;
    if ids.is_empty() {
        bail!(
            "no worker could register with {} (is the coordinator up?)",
            args.url
        );
    }
    if ids.len() < n {
        eprintln!(
            "loadgen: only {} of {n} workers registered; running with those",
            ids.len()
        );
    }

    eprintln!("loadgen: measuring");
    let cpu_start = stats::own_cpu_secs();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.duration);
    // Starts spread over the first second, or over one cycle of work, or over one heartbeat
    // interval, so the workers do not call in lockstep.
    let spread = if args.heartbeat_only {
        Duration::from_secs(args.heartbeat_secs)
    } else {
        Duration::from_millis(args.work_ms).max(Duration::from_secs(1))
    };
    let beats = if args.timed_heartbeats {
        sim::Beats::Every(Duration::from_secs(args.heartbeat_secs))
    } else {
        sim::Beats::PerLease
    };
    let mut tasks = JoinSet::new();
    for (i, &id) in ids.iter().enumerate() {
        let at = start + spread.mul_f64(i as f64 / ids.len() as f64);
        let api = api.clone();
        if args.heartbeat_only {
            let every = Duration::from_secs(args.heartbeat_secs);
            tasks.spawn(sim::heartbeat_worker(api, id, every, at, deadline));
        } else {
            tasks.spawn(sim::lease_worker(
                api,
                id,
                args.jobs_per_lease,
                Duration::from_millis(args.work_ms),
                beats,
                at,
                deadline,
            ));
        }
    }
    let hard_stop = deadline + Duration::from_secs(args.grace);
    let finished = tokio::time::timeout_at(hard_stop, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        eprintln!(
            "loadgen: {} workers still busy {} s after the run; stopped (their jobs stay leased until they expire)",
            tasks.len(),
            args.grace
        );
        tasks.abort_all();
    }
    let elapsed = start.elapsed();
    let cpu = cpu_start.zip(stats::own_cpu_secs()).map(|(a, b)| b - a);
    eprintln!("loadgen: done measuring");

    let settings = Settings {
        workers: ids.len(),
        mode: if args.heartbeat_only {
            "heartbeat-only"
        } else {
            "lease"
        },
        jobs_per_lease: if args.heartbeat_only {
            0
        } else {
            args.jobs_per_lease
        },
        duration_secs: args.duration,
        work_ms: if args.heartbeat_only { 0 } else { args.work_ms },
    };
    let report = stats.report(settings, elapsed, cpu);
    if args.json {
        let text = serde_json::to_string_pretty(&report).context("encoding the report")?;
        println!("{text}");
    } else {
        print!("{report}");
    }
    Ok(())
}

/// Registers `n` workers, at most `concurrency` at a time; returns the ids of those that
/// registered.
async fn register_all(api: &Arc<Api>, n: usize, concurrency: usize) -> Vec<i64> {
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let api = api.clone();
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.ok()?;
            api.register(i).await.map(|r| r.worker_id)
        });
    }
    let mut ids = Vec::with_capacity(n);
    while let Some(joined) = tasks.join_next().await {
        if let Ok(Some(id)) = joined {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    ids
}
