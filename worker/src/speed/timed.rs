//! One timed run of a speed job: a fresh engine process (or one per position, when the build
//! asks for that) searching every position of the job in order, timed from its start until it
//! was reaped, by the wall clock and by the CPU time of the worker's reaped children.

use std::path::Path;
use std::time::Instant;

use sweep_domain::limit::Limit;
use sweep_domain::wire::{JobPosition, SpeedSide};

use super::cpu::reaped_children_cpu_us;
use crate::engine::session::to_result;
use crate::engine::{Engine, EngineError, EngineSettings};
use crate::stop::JobStop;

/// Why a timed run has no figures.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The job was told to stop: nothing is reported.
    #[error("stopped")]
    Stopped,
    /// The engine did not start, or did not exit when asked to.
    #[error("{0}")]
    Engine(EngineError),
    /// A search failed, as it would make a job's result of the position an error (see
    /// [`to_result`]).
    #[error("position {id} (index {index}): {error}")]
    Position {
        /// Suite index of the position.
        index: u32,
        /// Its EPD id.
        id: String,
        /// Why the search has no result.
        error: String,
    },
    /// The clock could not be read, or counted nothing.
    #[error("CPU time: {0}")]
    Cpu(String),
}

/// One side of a speed job: a binary run as its build says, over the job's positions.
pub(crate) struct TimedRun<'a> {
    binary: &'a Path,
    settings: EngineSettings,
    positions: &'a [JobPosition],
    limit: Limit,
}

impl<'a> TimedRun<'a> {
    /// Runs of `binary` with `settings` over `positions` at `limit`. The engine runs as its
    /// sandbox's first process, so its CPU time reaches the worker (see
    /// [`Sandbox::timed`](crate::sandbox::Sandbox::timed)); nothing else differs from a job's
    /// engine (options, protocol, `ucinewgame` before each search, timeouts).
    pub(crate) fn new(
        binary: &'a Path,
        settings: &EngineSettings,
        positions: &'a [JobPosition],
        limit: Limit,
    ) -> Self {
        let mut settings = settings.clone();
        settings.confinement.sandbox = settings.confinement.sandbox.timed();
        TimedRun {
            binary,
            settings,
            positions,
            limit,
        }
    }

    /// Runs once: CPU time is the growth of the worker's reaped children's CPU time from
    /// just before the engine starts to just after it was reaped (the caller makes sure no
    /// other child of the worker ends meanwhile), wall time the time between, nodes the sum
    /// of what each search reported. Every process it started has ended when it returns
    /// (reaped, or after a failure or a stop, killed).
    pub(crate) async fn time(&self, stop: &JobStop) -> Result<SpeedSide, RunError> {
        let cpu = || reaped_children_cpu_us().map_err(|e| RunError::Cpu(e.to_string()));
        let cpu_before = cpu()?;
        let started = Instant::now();
        let nodes = self.search_all(stop).await?;
        let wall_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let cpu_us = cpu()?.saturating_sub(cpu_before);
        if cpu_us == 0 || wall_us == 0 {
            return Err(RunError::Cpu(format!(
                "nothing counted ({cpu_us} µs of CPU in {wall_us} µs)"
            )));
        }
        tracing::debug!(cpu_us, wall_us, nodes, binary = %self.binary.display(), "timed run");
        Ok(SpeedSide {
            cpu_us,
            wall_us,
            nodes,
        })
    }

    /// Searches every position, each on the live engine (started when there is none), and
    /// ends every engine it started: asked to quit and reaped after a run that went well
    /// (and after each position when the build wants a fresh process per position), killed
    /// after one that did not. Returns the nodes, summed.
    async fn search_all(&self, stop: &JobStop) -> Result<u64, RunError> {
        let mut live: Option<Engine> = None;
        let mut nodes = 0u64;
        for pos in self.positions {
            let engine = match live.as_mut() {
                Some(e) => e,
                None => live.insert(self.start(stop).await?),
            };
            match self.search(engine, pos, stop).await {
                Ok(n) => nodes = nodes.saturating_add(n),
                Err(e) => {
                    engine.kill().await;
                    return Err(e);
                }
            }
            if self.settings.fresh_process_per_position {
                end(live.take()).await?;
            }
        }
        end(live.take()).await?;
        Ok(nodes)
    }

    /// Starts an engine as a job's would start (handshake, options).
    async fn start(&self, stop: &JobStop) -> Result<Engine, RunError> {
        tokio::select! {
            biased;
            _ = stop.token().cancelled() => Err(RunError::Stopped),
            r = Engine::start(self.binary, &self.settings) => r.map_err(RunError::Engine),
        }
    }

    /// Searches `pos` on `engine`: its node count, or why the search counts as failed.
    async fn search(
        &self,
        engine: &mut Engine,
        pos: &JobPosition,
        stop: &JobStop,
    ) -> Result<u64, RunError> {
        let started = std::time::Instant::now();
        let timeout = self.settings.position_timeout;
        let outcome = tokio::select! {
            biased;
            _ = stop.token().cancelled() => return Err(RunError::Stopped),
            r = engine.search(&pos.fen, self.limit, timeout) => r,
        };
        let result = to_result(pos, outcome, started);
        match result.error {
            None => Ok(result.nodes),
            Some(error) => Err(RunError::Position {
                index: pos.index,
                id: pos.id.clone(),
                error,
            }),
        }
    }
}

/// Asks `engine` (if any) to quit and waits until it was reaped.
async fn end(engine: Option<Engine>) -> Result<(), RunError> {
    match engine {
        Some(e) => e.quit_reaped().await.map_err(RunError::Engine),
        None => Ok(()),
    }
}
