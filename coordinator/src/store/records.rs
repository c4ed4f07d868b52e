//! The values the store's interface takes and gives: a sweep to write, what became of a
//! worker's upload, tokens, engines, a sweep as read back, gauges and the per-token cap.

use std::collections::BTreeMap;
use std::time::Duration;

use sweep_domain::auth::Role;
use sweep_domain::engine::EngineDef;
use sweep_domain::plan::{BuildPlan, ChunkPlan};
use sweep_domain::source::SourceOrigin;
use sweep_domain::spec::SweepSpec;
use sweep_domain::wire::{BuildStatus, SweepSummary};

/// A sweep ready to be written: the validated spec and its plan.
#[derive(Debug, Clone)]
pub struct NewSweep {
    /// Validated spec.
    pub spec: SweepSpec,
    /// Engine definition as it was at submission (later edits do not affect the sweep).
    pub engine_def: EngineDef,
    /// Source snapshot hash (the snapshot must already be stored); `None` for a binary-only
    /// engine.
    pub source_sha256: Option<String>,
    /// Where the source came from (registered, uploaded, git).
    pub origin: SourceOrigin,
    /// Suite ids (stored versions) of every stage's suites, in the order of
    /// [`SweepSpec::all_suites`](sweep_domain::spec::SweepSpec::all_suites).
    pub suite_ids: Vec<i64>,
    /// Builds, baseline first.
    pub builds: Vec<BuildPlan>,
    /// Chunks of every suite of its first stage (a later stage's are planned when it is
    /// added).
    pub chunks: Vec<ChunkPlan>,
    /// The token that submitted it (`None` for a local run's in-process submit).
    pub submitter: Option<Owner>,
    /// Why it must wait for an admin's approval before any job is handed out (`None`: it
    /// runs at once).
    pub hold: Option<String>,
    /// Where its search over the grid starts (`[search]`): only the baseline and the cells
    /// this plans get jobs at submission (`None`: every build does).
    pub search: Option<sweep_domain::table::SearchReport>,
}

/// A later stage of a staged sweep, as a coordinator adds it once the stage before has
/// finished (see [`Store::add_stage`](super::Store::add_stage)).
#[derive(Debug, Clone)]
pub struct NewStage {
    /// The stages the sweep had left when the decision was made: the claim (the call that
    /// still finds this many adds the stage).
    pub stages_left: u32,
    /// The stage decided (from 0): the one that finished.
    pub decided: u32,
    /// What it decided.
    pub decision: sweep_domain::table::Promotion,
    /// The builds that run the added stage: the baseline and the promoted, by name.
    pub builds: Vec<String>,
    /// Its chunks of positions.
    pub chunks: Vec<sweep_domain::plan::ChunkPlan>,
    /// Its search limits.
    pub limits: Vec<sweep_domain::limit::Limit>,
    /// Measure every position even where an earlier sweep measured the same build.
    pub recompute: bool,
}

/// A step of a sweep's search over its grid, as a coordinator adds it once the cells
/// before have all finished (see [`Store::add_search_step`](super::Store::add_search_step)).
#[derive(Debug, Clone)]
pub struct NewSearchStep {
    /// How many cells the search had given jobs when it was replayed: the claim (the call
    /// that still finds this many adds the step).
    pub planned_before: u32,
    /// Where the search stands now: its `next` cells get jobs; once it has ended, none do
    /// and the sweep goes on to its next stage, or ends.
    pub report: sweep_domain::table::SearchReport,
    /// The first stage's chunks of positions.
    pub chunks: Vec<sweep_domain::plan::ChunkPlan>,
    /// The first stage's search limits.
    pub limits: Vec<sweep_domain::limit::Limit>,
    /// Measure every position even where an earlier sweep measured the same build.
    pub recompute: bool,
}

/// A token as the owner of something (a sweep it submitted, a worker it registered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Token id (negative for a local run's in-memory token).
    pub token_id: i64,
    /// Token name.
    pub name: String,
}

/// A live (not revoked) token, as a request presenting it is authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredToken {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// Role.
    pub role: Role,
}

/// An audit log entry to write (the store stamps id and time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAudit {
    /// Token name, or `local`.
    pub actor: String,
    /// The actor's role.
    pub role: String,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub target: String,
    /// More about it.
    pub detail: String,
}

impl NewSweep {
    /// Whether build `name` gets jobs at submission: every build, or with a search the
    /// baseline and the cells it plans first.
    pub fn plans_build(&self, name: &str) -> bool {
        self.search
            .as_ref()
            .is_none_or(|r| name == self.spec.baseline.name || r.planned.iter().any(|c| c == name))
    }

    /// The sweep's identity (see [`SweepSpec::identity`]): same engine, source and spec.
    pub fn identity(&self) -> String {
        self.spec.identity(self.source_sha256.as_deref())
    }
}

/// An engine definition added over the API, as stored (see `migrations/*/0009_engines.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEngine {
    /// Engine name (the definition's `name`).
    pub name: String,
    /// The definition's TOML text as the admin sent it.
    pub definition: String,
    /// When it was last added or updated.
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// The token name (or `local`) that last added or updated it.
    pub updated_by: String,
}

/// What [`Store::create_sweep_unless_running`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The sweep: the new one, or the identical one already queued or running.
    pub id: i64,
    /// Its jobs.
    pub jobs: u64,
    /// `id` is an identical sweep that was still queued or running; nothing was written.
    pub existing: bool,
    /// Results the new sweep took from earlier sweeps instead of running them (0 for an
    /// existing sweep, and when the spec says `recompute`).
    pub reused: u64,
}

/// A stored sweep, as the read side needs it.
#[derive(Debug, Clone)]
pub struct SweepRecord {
    /// Summary (state derived from its jobs).
    pub summary: SweepSummary,
    /// Spec.
    pub spec: SweepSpec,
    /// Engine definition at submission.
    pub engine_def: EngineDef,
    /// Snapshot hash; `None` for a binary-only engine.
    pub source_sha256: Option<String>,
    /// Where the source came from (registered, uploaded, git).
    pub origin: SourceOrigin,
    /// Builds in order, with build errors.
    pub builds: Vec<BuildStatus>,
    /// (suite name, number of positions), in the spec's order.
    pub suites: Vec<(String, usize)>,
    /// The sha256 of each suite version the sweep ran, by suite name.
    pub suite_sha256: BTreeMap<String, String>,
    /// Id of the token that submitted it, if one did.
    pub submitter_token: Option<i64>,
    /// What each finished stage of a staged sweep decided, by stage (from 0).
    pub stages: Vec<(u32, sweep_domain::table::Promotion)>,
    /// Where its search over the grid stands (`None` without a `[search]`).
    pub search: Option<sweep_domain::table::SearchReport>,
    /// Where it was measured, when it was imported (`sweeps.imported_from`).
    pub imported_from: Option<sweep_domain::wire::ImportedFrom>,
}

/// What `/metrics` reads from the store at each scrape (see [`Store::gauges`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreGauges {
    /// (job state, jobs in it), for the states that have jobs.
    pub jobs_by_state: Vec<(String, i64)>,
    /// Workers seen within the window asked for that have not stopped since.
    pub workers_alive: i64,
    /// Cross-checks stored that disagreed with their result, over all sweeps.
    pub cross_check_mismatches: i64,
    /// The store's connection pools.
    pub pools: Vec<PoolGauge>,
}

/// One connection pool's occupancy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolGauge {
    /// Which pool (`main` for Postgres; `writer` and `reader` for SQLite).
    pub name: &'static str,
    /// Connections open (in use or idle).
    pub size: u32,
    /// Connections open and idle.
    pub idle: u32,
    /// Connections the pool may open at most.
    pub max: u32,
}

impl PoolGauge {
    /// The occupancy of `pool` now.
    pub(crate) fn of<DB: sqlx::Database>(name: &'static str, pool: &sqlx::Pool<DB>) -> Self {
        Self {
            name,
            size: pool.size(),
            idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
            max: pool.options().get_max_connections(),
        }
    }
}

/// How many live workers one token may hold (see [`BackendCalls::register_worker_capped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerCap {
    /// Live workers a token may hold at once.
    pub max_live: u32,
    /// A worker is live while seen within this (a lease) and not stopped since, the rule
    /// every liveness question asks (`store::workers::live`): a worker that went away frees
    /// its place a lease after it was last seen, one that stopped at once.
    pub lease: Duration,
}
