//! Sweep configs as submitted (TOML or JSON) and their validation into a [`SweepSpec`].
//!
//! Unknown fields are rejected so that a typo (`depht = 9`) is an error rather than a silently
//! ignored setting; every error names the field.
//!
//! The parts change for different reasons, so each has its own file: `config` is the schema
//! users write (and `configs/sweep.schema.json` is generated from), `validate` the rules a
//! config must pass, `expand` how its knobs become variants, and `legacy` the shapes of specs
//! stored by older versions, kept only so old databases stay readable. The validated
//! [`SweepSpec`] lives here because every part builds on it; every public item is re-exported
//! here, so `spec::X` is the one path to each.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::crosscheck::share::Share;
use crate::limit::Limit;

mod config;
mod expand;
mod legacy;
mod search;
#[cfg(test)]
mod tests;
mod validate;

pub use config::{
    BaselineConfig, Priority, SearchConfig, SourceConfig, SpeedConfig, SpeedPositions, StageConfig,
    SweepConfig, VariantConfig, DEFAULT_BASELINE, DEFAULT_CHUNK, MAX_CHUNK, MAX_DEPTH, MAX_JOBS,
    MAX_LIMITS, MAX_SEARCH_ROUNDS, MAX_STAGES, MAX_VALUES,
};
use legacy::StoredSpec;
pub use validate::{MAX_COUNTER_COLUMNS, MAX_GIT_URL};

/// One validated variant: its row name and the knob settings the sweep gives it (the
/// baseline's defines are added when it is planned, see [`crate::plan::builds`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Variant {
    /// Row name.
    pub name: String,
    /// Settings of the swept knobs.
    pub defines: BTreeMap<String, i64>,
    /// Code of its own (`[[variants]]` with `rev` or `sha256`): the snapshot it builds and
    /// where it came from. Validation fills in what the config asked (the sha256 empty for a
    /// `rev`); the coordinator resolves it at submission, so a stored spec names the very
    /// snapshot. `None`: the sweep's source, as the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::source::SourceProvenance>,
}

/// A validated sweep: what the coordinator stores and plans from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(from = "StoredSpec")]
pub struct SweepSpec {
    /// Human name.
    pub name: String,
    /// Engine name.
    pub engine: String,
    /// The knobs the variants set, in column order (empty for a baseline-only sweep).
    pub knobs: Vec<String>,
    /// The variants besides the baseline, in table order.
    pub variants: Vec<Variant>,
    /// Search limits, in table order (of the first stage, in a staged sweep).
    pub limits: Vec<Limit>,
    /// Suite names, in submission order (of the first stage, in a staged sweep).
    pub suites: Vec<String>,
    /// The stages after the first (which is `suites` at `limits`, every variant), in order;
    /// empty for a sweep without stages. Left out of the JSON when empty, so specs stored
    /// before stages existed keep their identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<Stage>,
    /// A search over the grid in the first stage instead of every cell of it; left out of
    /// the JSON when there is none, so specs stored before searches keep their identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<Search>,
    /// Positions per job.
    pub chunk_size: u32,
    /// Baseline build.
    pub baseline: BaselineConfig,
    /// Free text.
    pub description: String,
    /// Search counters shown as table columns (see [`SweepConfig::counters`]). Left out of
    /// the JSON when empty, so specs stored before counters existed keep their identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<String>,
    /// Measure every position even where an earlier sweep's result could be reused (see
    /// [`SweepConfig::recompute`]). Left out of the JSON when false, so specs stored before it
    /// existed keep their identity.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recompute: bool,
    /// Share of positions cross-checked (see [`SweepConfig::cross_check`]). Left out of the
    /// JSON when it is the default, so specs stored before cross-checks keep their identity.
    #[serde(default, skip_serializing_if = "Share::is_default")]
    #[schema(value_type = f64)]
    pub cross_check: Share,
    /// Least positions cross-checked per build and suite (see
    /// [`SweepConfig::cross_check_min`]); left out of the JSON when it is the default.
    #[serde(
        default = "crate::crosscheck::share::default_min",
        skip_serializing_if = "crate::crosscheck::share::is_default_min"
    )]
    pub cross_check_min: u32,
    /// Its priority (see [`SweepConfig::priority`]); left out of the JSON when normal.
    #[serde(default, skip_serializing_if = "Priority::is_normal")]
    pub priority: Priority,
    /// Speed jobs (see [`SpeedConfig`]); left out of the JSON when there are none, so specs
    /// stored before them keep their identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<SpeedSpec>,
}

/// A validated `[speed]` (see [`SpeedConfig`]): every variant of the first stage (a search's
/// cells: those it measured at submission) gets one speed job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SpeedSpec {
    /// Suite of the positions.
    pub suite: String,
    /// Its first `count` positions.
    pub count: u32,
    /// Pairs of runs.
    pub repeats: u32,
    /// The depth limit of every run (the sweep's first).
    pub limit: Limit,
}

/// A stage after the first of a staged sweep, validated (see [`StageConfig`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Stage {
    /// Suites it runs.
    pub suites: Vec<String>,
    /// Its search limits.
    pub limits: Vec<Limit>,
    /// How many variants of the stage before it run it.
    pub promote: u32,
    /// Most positions a promoted variant may have solved fewer than the baseline in the
    /// stage before.
    pub max_solved_loss: u32,
}

/// A validated `[search]` (see [`SearchConfig`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Search {
    /// The strategy: `coordinate`.
    pub strategy: String,
    /// Most rounds over the knobs.
    pub max_rounds: u32,
    /// Most positions the chosen cell may solve fewer than the baseline.
    pub max_solved_loss: u32,
    /// The cell it starts from: every knob at the baseline's setting.
    pub start: String,
}

/// What one stage of a sweep measures (the first stage of any sweep is its `suites` at its
/// `limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageView<'a> {
    /// Suites.
    pub suites: &'a [String],
    /// Search limits.
    pub limits: &'a [Limit],
    /// The rule that picked its variants; `None` for the first stage (every variant).
    pub promotion: Option<&'a Stage>,
}

impl SweepSpec {
    /// How many stages the sweep has (1 for a sweep without stages).
    pub fn stage_count(&self) -> usize {
        1 + self.stages.len()
    }

    /// Stage `k` (0 is the first), if the sweep has it.
    pub fn stage(&self, k: usize) -> Option<StageView<'_>> {
        match k {
            0 => Some(StageView {
                suites: &self.suites,
                limits: &self.limits,
                promotion: None,
            }),
            _ => self.stages.get(k - 1).map(|s| StageView {
                suites: &s.suites,
                limits: &s.limits,
                promotion: Some(s),
            }),
        }
    }

    /// Every search limit any stage uses, each once, in stage order.
    pub fn all_limits(&self) -> Vec<Limit> {
        let mut out = self.limits.clone();
        for l in self.stages.iter().flat_map(|s| &s.limits) {
            if !out.contains(l) {
                out.push(*l);
            }
        }
        out
    }

    /// Every suite any stage runs, each once: the first stage's, then the new ones of each
    /// later stage in order (the suite versions a sweep keeps are fixed when it is stored).
    pub fn all_suites(&self) -> Vec<String> {
        let mut out = self.suites.clone();
        for stage in &self.stages {
            for s in &stage.suites {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        }
        out
    }

    /// What makes two submissions the same sweep: the sha256 (hex) of the spec and the
    /// source snapshot it runs (`None` for a binary-only engine), in a canonical JSON form
    /// (object keys sorted, so the same spec always hashes alike). The spec names the engine.
    pub fn identity(&self, source_sha256: Option<&str>) -> String {
        use sha2::{Digest, Sha256};
        // serde_json's map keeps keys sorted (no `preserve_order`), and every map in a spec
        // is a BTreeMap: the text is canonical.
        let canonical = serde_json::json!({ "source_sha256": source_sha256, "spec": self });
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }
}
