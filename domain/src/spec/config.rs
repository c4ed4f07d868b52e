//! The sweep config's schema: the types a config file deserializes into, their defaults and
//! bounds, and parsing. `configs/sweep.schema.json` is generated from these derives, so this
//! file is kept to what a user writes; what a config must satisfy beyond its shape is in
//! `validate`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::crosscheck::share::Share;
use crate::decode::{deserialize_json, deserialize_toml};
use crate::engine::DeclaredKnob;
use crate::FieldError;

/// The name of the baseline build unless a config says otherwise.
pub const DEFAULT_BASELINE: &str = "head_reference";
pub use crate::limit::MAX_DEPTH;
/// Most variants (builds besides the baseline) in one sweep.
pub const MAX_VALUES: usize = 256;
/// Most search limits in one sweep.
pub const MAX_LIMITS: usize = 16;
/// Most jobs one sweep may expand into (a guard against a sweep that floods the queue).
pub const MAX_JOBS: usize = 500_000;
/// Largest chunk of positions in one job.
pub const MAX_CHUNK: i64 = 1_000;
/// Chunk size when a config gives none.
pub const DEFAULT_CHUNK: i64 = 10;

/// The baseline build of a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// Name of the baseline row in tables.
    #[serde(default = "default_baseline_name")]
    pub name: String,
    /// Defines for the baseline; empty means the source's defaults.
    #[serde(default)]
    pub defines: BTreeMap<String, i64>,
}

fn default_baseline_name() -> String {
    DEFAULT_BASELINE.to_string()
}

impl Default for BaselineConfig {
    fn default() -> Self {
        Self {
            name: default_baseline_name(),
            defines: BTreeMap::new(),
        }
    }
}

/// One explicitly named variant of a sweep (`[[variants]]`): several knobs moving together,
/// e.g. a depth-banded ceiling, or other code (a patch): another revision of the sweep's git
/// repository, or another uploaded snapshot, alone or with defines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VariantConfig {
    /// Row name in tables.
    pub name: String,
    /// Knob settings on top of the baseline's (may be empty when `rev` or `sha256` is set).
    #[serde(default)]
    pub defines: BTreeMap<String, i64>,
    /// Another revision (branch, tag or commit) of the sweep's `[source] git` repository for
    /// this variant; the baseline stays on `[source] rev`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    /// An uploaded snapshot (sha256) this variant builds instead of the sweep's source
    /// (`sweep submit --variant-source NAME=DIR` sets it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// A sweep config as a user writes it. The variants come from exactly one of `knob` +
/// `values`, `[grid]` or `[[variants]]` (or none: the baseline alone); the limit from exactly
/// one of `depth`, `depths` or `nodes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    /// Human name of the sweep.
    pub name: String,
    /// Registered engine to sweep.
    pub engine: String,
    /// The knob that varies (with `values`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob: Option<String>,
    /// Values of `knob`, one build each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<i64>>,
    /// Several knobs, each with its values: one build per combination (cartesian product).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grid: BTreeMap<String, Vec<i64>>,
    /// Explicit variants, each a name and its knob settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<VariantConfig>,
    /// Suites to run (file stems under `suites/`). A staged sweep gives them per stage
    /// instead (see [`StageConfig`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suites: Vec<String>,
    /// Depth limit of every search (`go depth N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 40)]
    pub depth: Option<i64>,
    /// Several depth limits: every build runs every suite at each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depths: Vec<i64>,
    /// Node limit of every search (`go nodes N`), instead of a depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10_000_000_000_u64)]
    pub nodes: Option<i64>,
    /// Stages (`[[stages]]`), instead of top-level `suites` and limit: the first runs every
    /// variant; each later one runs the baseline and the `promote` best variants of the
    /// stage before it (see [`StageConfig`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageConfig>,
    /// Search the `[grid]` instead of measuring every cell of it (see [`SearchConfig`]); in
    /// a staged sweep the search runs in the first stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchConfig>,
    /// Positions per job.
    #[serde(default = "default_chunk")]
    #[schema(minimum = 1, maximum = 1000)]
    pub chunk_size: i64,
    /// The build every other is compared with.
    #[serde(default)]
    pub baseline: BaselineConfig,
    /// Free text shown with the sweep.
    #[serde(default)]
    pub description: String,
    /// Knobs the registered engine does not list but its source defines (`[[knobs]]`): they
    /// join the engine's knobs for this sweep only. The coordinator checks the source
    /// snapshot for each (see [`crate::engine::KnobRule`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<DeclaredKnob>,
    /// Where the engine source comes from, when not the directory registered with the engine:
    /// an uploaded snapshot or a git commit (see [`SourceConfig`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceConfig>,
    /// Search counters (`info string counters k=v ...`) to show as table columns, e.g.
    /// `["null_skipped"]`. The JSON table carries every counter the engine printed anyway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    /// Run every position again even where an earlier sweep already measured the same build
    /// (same source, defines, recipe and options) on the same position and limit. By default
    /// a sweep takes those results instead of running them (`sweep run --force` sets this).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recompute: bool,
    /// Share of positions measured a second time, on another worker and in a fresh engine
    /// process, to catch nondeterministic engines and bad machines (0 to 1; 0 turns
    /// cross-checks off). Default 0.02.
    #[serde(default, skip_serializing_if = "Share::is_default")]
    #[schema(value_type = f64, minimum = 0, maximum = 1)]
    pub cross_check: Share,
    /// Least number of positions cross-checked per build and suite when `cross_check` is not
    /// 0 (capped at the suite's size). Default 3.
    #[serde(
        default = "crate::crosscheck::share::default_min",
        skip_serializing_if = "crate::crosscheck::share::is_default_min"
    )]
    #[schema(minimum = 0, maximum = 10000)]
    pub cross_check_min: u32,
    /// How much of the workers the sweep gets while others run too: `low`, `normal` (the
    /// default) or `high` (admins, or the roles the operator allows with
    /// `--high-priority-for`). Its share weighs 0.5, 1 or 2, divided among its submitter's
    /// sweeps with work.
    #[serde(default, skip_serializing_if = "Priority::is_normal")]
    pub priority: Priority,
    /// Time every variant against the baseline as well as count its nodes (see
    /// [`SpeedConfig`]); off without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedConfig>,
}

/// `[speed]`: one speed job per variant, timing it against the baseline on one worker that
/// runs nothing else meanwhile, pairs of fresh engine processes (baseline, variant,
/// baseline, variant, ...) over the same positions at the sweep's first depth: fewer nodes is
/// not faster when each node costs more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedConfig {
    /// The positions each run searches: the first `count` of `suite`. Default: the first 16
    /// of the sweep's first suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<SpeedPositions>,
    /// Pairs of runs per variant (2 to 100). Default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 2, maximum = 100)]
    pub repeats: Option<u32>,
}

/// Which positions a speed run searches (see [`SpeedConfig::positions`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpeedPositions {
    /// One of the sweep's suites (of its first stage). Default: the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// How many of its first positions (1 to 1000, at most the suite's size). Default 16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub count: Option<u32>,
}

/// A sweep's priority (see [`SweepConfig::priority`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Half a normal sweep's share.
    Low,
    /// The default.
    #[default]
    Normal,
    /// Twice a normal sweep's share.
    High,
}

impl Priority {
    /// Whether it is the default (left out of specs, so older sweeps keep their identity).
    pub fn is_normal(&self) -> bool {
        *self == Priority::Normal
    }

    /// As stored and written in configs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
        }
    }
}

/// Most stages in one sweep.
pub const MAX_STAGES: usize = 8;

/// One stage of a staged sweep (`[[stages]]`): its suites and search limit (exactly one of
/// `depth`, `depths` or `nodes`), and, from the second stage on, how many variants of the
/// stage before it run it.
///
/// The variants promoted are the `promote` with the lowest geometric-mean node ratio
/// against the baseline over every position of the stage before (all its suites and
/// limits), among those whose solved count there is not below the baseline's by more
/// than `max_solved_loss`; ties go to more solved, then to the name. The baseline runs
/// every stage. A stage may not measure a suite at a limit an earlier stage measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// Suites this stage runs.
    pub suites: Vec<String>,
    /// Depth limit of this stage's searches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 40)]
    pub depth: Option<i64>,
    /// Several depth limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depths: Vec<i64>,
    /// Node limit instead of a depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10_000_000_000_u64)]
    pub nodes: Option<i64>,
    /// How many variants of the stage before run this one (required from the second stage
    /// on; the first runs every variant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub promote: Option<i64>,
    /// Most positions a variant may solve fewer than the baseline in the stage before and
    /// still be promoted (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub max_solved_loss: Option<i64>,
}

/// Most rounds a coordinate search may be given.
pub const MAX_SEARCH_ROUNDS: i64 = 10;

/// `[search]`: how the cells of a `[grid]` are chosen for measuring.
///
/// `strategy = "coordinate"` starts from every knob's default (the baseline's setting); in
/// each round, for each knob in turn (in name order), it measures that knob's values with
/// the other knobs held at the current best and keeps the best of them: the lowest
/// geometric-mean node ratio against the baseline among the cells that solve no more than
/// `max_solved_loss` fewer positions than it (ties keep the current setting, then go to
/// more solved, then to the name). It stops after a round that changes nothing, or after
/// `max_rounds`. A cell measured once is never measured again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// `coordinate` (the only strategy so far).
    pub strategy: String,
    /// Most rounds over the knobs (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10)]
    pub max_rounds: Option<i64>,
    /// Most positions the chosen cell may solve fewer than the baseline (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub max_solved_loss: Option<i64>,
}

/// `[source]` of a sweep config: exactly one of `sha256` (a snapshot uploaded with
/// `PUT /api/v1/sources/{sha256}`, which `sweep submit --source DIR` does) or `git` (with
/// `rev`, default `HEAD`), which the coordinator resolves to a commit and archives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// sha256 of an uploaded snapshot (64 lowercase hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A git repository the coordinator may fetch: a URL under a prefix its operator lists
    /// with `--git-allow` (none by default: git sources are then refused), without
    /// credentials; a local path only under a listed `file:///` prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
    /// Branch, tag or commit of `git` (default `HEAD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
}

fn default_chunk() -> i64 {
    DEFAULT_CHUNK
}

impl SweepConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, FieldError> {
        deserialize_toml(text)
    }

    /// Parses JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, FieldError> {
        deserialize_json(bytes)
    }
}
