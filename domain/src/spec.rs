//! Sweep configs as submitted (TOML or JSON) and their validation into a [`SweepSpec`].
//!
//! Unknown fields are rejected so that a typo (`depht = 9`) is an error rather than a silently
//! ignored setting; every error names the field.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::bounds::{
    check_name, check_text, Lines, MAX_BUILD_NAME, MAX_DESCRIPTION, MAX_REF_NAME, MAX_SWEEP_NAME,
};
use crate::crosscheck::share::{self as cross_check, Share};
use crate::decode::{deserialize_json, deserialize_toml};
use crate::engine::{DeclaredKnob, EngineDef, Protocol};
use crate::limit::{Limit, MAX_NODES};
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
/// e.g. a depth-banded ceiling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VariantConfig {
    /// Row name in tables.
    pub name: String,
    /// Knob settings on top of the baseline's.
    pub defines: BTreeMap<String, i64>,
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
    /// Suites to run (file stems under `suites/`).
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

/// Longest `source.git` accepted.
pub const MAX_GIT_URL: usize = 1000;

impl SourceConfig {
    /// Checks the table's shape and bounds (not whether the source exists): one of `sha256`
    /// or `git`; `rev` only with `git`; neither `git` nor `rev` may look like an option.
    pub fn check(&self) -> Result<(), FieldError> {
        match (&self.sha256, &self.git) {
            (Some(_), Some(_)) => Err(FieldError::new(
                "source",
                "give either sha256 (an uploaded snapshot) or git (with rev), not both",
            )),
            (None, None) => Err(FieldError::new(
                "source",
                "give sha256 (an uploaded snapshot) or git (with rev)",
            )),
            (Some(sha), None) => {
                if self.rev.is_some() {
                    return Err(FieldError::new("source.rev", "rev goes with git only"));
                }
                if !crate::source::is_sha256(sha) {
                    return Err(FieldError::new(
                        "source.sha256",
                        "must be 64 lowercase hex digits",
                    ));
                }
                Ok(())
            }
            (None, Some(git)) => {
                check_text("source.git", git, MAX_GIT_URL, Lines::One)?;
                if git.is_empty() || git.starts_with('-') {
                    return Err(FieldError::new(
                        "source.git",
                        "must be a URL or path (not empty, not starting with `-`)",
                    ));
                }
                if let Some(rev) = &self.rev {
                    check_text("source.rev", rev, MAX_REF_NAME, Lines::One)?;
                    if rev.is_empty()
                        || rev.starts_with('-')
                        || rev.chars().any(|c| c.is_whitespace())
                    {
                        return Err(FieldError::new(
                            "source.rev",
                            "must be a branch, tag or commit (not empty, no spaces, not starting with `-`)",
                        ));
                    }
                }
                Ok(())
            }
        }
    }
}

fn default_chunk() -> i64 {
    DEFAULT_CHUNK
}

/// One validated variant: its row name and the knob settings the sweep gives it (the
/// baseline's defines are added when it is planned, see [`crate::plan::builds`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Variant {
    /// Row name.
    pub name: String,
    /// Settings of the swept knobs.
    pub defines: BTreeMap<String, i64>,
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
    /// Search limits, in table order.
    pub limits: Vec<Limit>,
    /// Suite names, in submission order.
    pub suites: Vec<String>,
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
}

/// A spec as stored, also accepting the single-knob, single-depth shape that sweeps stored
/// before several knobs and limits existed (`knob`, `values`, `depth`), so old databases stay
/// readable.
#[derive(Deserialize)]
struct StoredSpec {
    name: String,
    engine: String,
    #[serde(default)]
    knobs: Vec<String>,
    #[serde(default)]
    variants: Vec<Variant>,
    #[serde(default)]
    limits: Vec<Limit>,
    suites: Vec<String>,
    chunk_size: u32,
    baseline: BaselineConfig,
    #[serde(default)]
    description: String,
    #[serde(default)]
    counters: Vec<String>,
    #[serde(default)]
    recompute: bool,
    #[serde(default)]
    cross_check: Share,
    #[serde(default = "crate::crosscheck::share::default_min")]
    cross_check_min: u32,
    #[serde(default)]
    knob: Option<String>,
    #[serde(default)]
    values: Vec<i64>,
    #[serde(default)]
    depth: Option<u32>,
}

impl From<StoredSpec> for SweepSpec {
    fn from(s: StoredSpec) -> Self {
        let mut knobs = s.knobs;
        let mut variants = s.variants;
        if let Some(knob) = s.knob {
            variants = s
                .values
                .iter()
                .map(|v| Variant {
                    name: format!("{knob}={v}"),
                    defines: BTreeMap::from([(knob.clone(), *v)]),
                })
                .collect();
            knobs = vec![knob];
        }
        let mut limits = s.limits;
        if let Some(d) = s.depth {
            limits = vec![Limit::Depth(d)];
        }
        SweepSpec {
            name: s.name,
            engine: s.engine,
            knobs,
            variants,
            limits,
            suites: s.suites,
            chunk_size: s.chunk_size,
            baseline: s.baseline,
            description: s.description,
            counters: s.counters,
            recompute: s.recompute,
            cross_check: s.cross_check,
            cross_check_min: s.cross_check_min,
        }
    }
}

impl SweepSpec {
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

/// Most counters a sweep may show as table columns.
pub const MAX_COUNTER_COLUMNS: usize = 16;

impl SweepConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, FieldError> {
        deserialize_toml(text)
    }

    /// Parses JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, FieldError> {
        deserialize_json(bytes)
    }

    /// Validates against the registered engines and the loaded suites (name -> positions).
    pub fn validate(
        self,
        engines: &BTreeMap<String, EngineDef>,
        suite_sizes: &BTreeMap<String, usize>,
    ) -> Result<SweepSpec, FieldError> {
        Ok(self.validate_with_engine(engines, suite_sizes)?.0)
    }

    /// [`SweepConfig::validate`], also returning the engine definition the sweep runs: the
    /// registered one with the config's declared knobs (`[[knobs]]`) added, which is what
    /// the sweep stores.
    pub fn validate_with_engine(
        self,
        engines: &BTreeMap<String, EngineDef>,
        suite_sizes: &BTreeMap<String, usize>,
    ) -> Result<(SweepSpec, EngineDef), FieldError> {
        self.check_text_fields()?;
        let name = check_sweep_name(&self.name)?;
        let engine = &self
            .registered_engine(engines)?
            .with_declared_knobs(&self.knobs)?;
        let (knobs, variants) = self.variants_of(engine)?;
        let limits = self.limits()?;
        check_protocol_limits(engine, &limits)?;
        check_suites(&self.suites, suite_sizes)?;
        if !(1..=MAX_CHUNK).contains(&self.chunk_size) {
            return Err(FieldError::new(
                "chunk_size",
                format!("{} is out of range (1 to {MAX_CHUNK})", self.chunk_size),
            ));
        }
        check_baseline(&self.baseline, engine)?;
        let (share, min) = self.cross_check()?;
        self.check_job_count(1 + variants.len(), limits.len(), suite_sizes, share, min)?;
        let spec = SweepSpec {
            name,
            engine: self.engine,
            knobs,
            variants,
            limits,
            suites: self.suites,
            chunk_size: self.chunk_size as u32,
            baseline: self.baseline,
            description: self.description,
            counters: self.counters,
            recompute: self.recompute,
            cross_check: share,
            cross_check_min: min,
        };
        Ok((spec, engine.clone()))
    }

    /// The registered engine the config names.
    fn registered_engine<'a>(
        &self,
        engines: &'a BTreeMap<String, EngineDef>,
    ) -> Result<&'a EngineDef, FieldError> {
        engines.get(&self.engine).ok_or_else(|| {
            let known: Vec<&str> = engines.keys().map(String::as_str).collect();
            FieldError::new(
                "engine",
                format!(
                    "unknown engine `{}` (registered: {})",
                    self.engine,
                    known.join(", ")
                ),
            )
        })
    }

    /// Refuses a sweep of more than [`MAX_JOBS`] jobs, cross-checks included, for `builds`
    /// builds at `limits` limits over the config's (known) suites in its chunk size.
    fn check_job_count(
        &self,
        builds: usize,
        limits: usize,
        suite_sizes: &BTreeMap<String, usize>,
        share: Share,
        min: u32,
    ) -> Result<(), FieldError> {
        let chunk = self.chunk_size as usize;
        let chunks: usize = self
            .suites
            .iter()
            .map(|s| suite_sizes[s].div_ceil(chunk))
            .sum();
        let jobs = chunks * builds * limits;
        if jobs > MAX_JOBS {
            let positions: usize = self.suites.iter().map(|s| suite_sizes[s]).sum();
            return Err(FieldError::new(
                "suites",
                format!(
                    "the sweep would make {jobs} jobs ({builds} builds x {limits} limits x {positions} positions in chunks of {chunk}); at most {MAX_JOBS}"
                ),
            ));
        }
        let sizes: Vec<usize> = self.suites.iter().map(|s| suite_sizes[s]).collect();
        let checks = cross_check::planned(share.0, min, builds, &sizes, limits);
        if jobs + checks > MAX_JOBS {
            return Err(FieldError::new(
                "cross_check",
                format!(
                    "the sweep would make {jobs} jobs and {checks} cross-checks; at most {MAX_JOBS} in all: check a smaller share"
                ),
            ));
        }
        Ok(())
    }

    /// Bounds every string of the config (see [`crate::bounds`]) before anything else looks
    /// at it, so no later error echoes a megabyte of text or a NUL byte.
    fn check_text_fields(&self) -> Result<(), FieldError> {
        check_text("name", &self.name, MAX_SWEEP_NAME, Lines::One)?;
        check_text(
            "description",
            &self.description,
            MAX_DESCRIPTION,
            Lines::Many,
        )?;
        check_name("engine", &self.engine, MAX_REF_NAME)?;
        if let Some(source) = &self.source {
            source.check()?;
        }
        if let Some(knob) = &self.knob {
            check_name("knob", knob, MAX_REF_NAME)?;
        }
        for (i, knob) in self.knobs.iter().enumerate() {
            check_name(&format!("knobs[{i}].name"), &knob.name, MAX_REF_NAME)?;
        }
        for knob in self.grid.keys() {
            check_name("grid", knob, MAX_REF_NAME)?;
        }
        for (i, v) in self.variants.iter().enumerate() {
            check_text(
                &format!("variants[{i}].name"),
                &v.name,
                MAX_BUILD_NAME,
                Lines::One,
            )?;
            for knob in v.defines.keys() {
                check_name(&format!("variants[{i}].defines"), knob, MAX_REF_NAME)?;
            }
        }
        for (i, suite) in self.suites.iter().enumerate() {
            check_name(&format!("suites[{i}]"), suite, MAX_REF_NAME)?;
        }
        check_text(
            "baseline.name",
            &self.baseline.name,
            MAX_BUILD_NAME,
            Lines::One,
        )?;
        for knob in self.baseline.defines.keys() {
            check_name("baseline.defines", knob, MAX_REF_NAME)?;
        }
        self.check_counters()
    }

    /// The cross-check share and minimum, in range (a NaN share is out of range).
    fn cross_check(&self) -> Result<(Share, u32), FieldError> {
        let share = self.cross_check.0;
        if !(0.0..=1.0).contains(&share) {
            return Err(FieldError::new(
                "cross_check",
                format!("{share} is out of range (0 to 1; 0 turns cross-checks off)"),
            ));
        }
        if self.cross_check_min > cross_check::MAX_MIN {
            return Err(FieldError::new(
                "cross_check_min",
                format!(
                    "{} is out of range (0 to {})",
                    self.cross_check_min,
                    cross_check::MAX_MIN
                ),
            ));
        }
        Ok((Share(share), self.cross_check_min))
    }

    /// Counter columns: a few, well-formed, each once. Whether the engine prints them is
    /// known only from its output, so a name it never prints shows an empty column.
    fn check_counters(&self) -> Result<(), FieldError> {
        if self.counters.len() > MAX_COUNTER_COLUMNS {
            return Err(FieldError::new(
                "counters",
                format!(
                    "{} counters named; at most {MAX_COUNTER_COLUMNS} columns",
                    self.counters.len()
                ),
            ));
        }
        for (i, name) in self.counters.iter().enumerate() {
            if !crate::bounds::counter_name_ok(name) {
                return Err(FieldError::new(
                    format!("counters[{i}]"),
                    format!(
                        "is not a counter name: 1 to {} ASCII letters, digits, `_`, `.` or `-`",
                        crate::bounds::MAX_COUNTER_NAME
                    ),
                ));
            }
            if self.counters[..i].contains(name) {
                return Err(FieldError::new(
                    format!("counters[{i}]"),
                    format!("`{name}` is named twice"),
                ));
            }
        }
        Ok(())
    }

    /// The swept knobs (table columns) and the variants, from whichever of `knob`/`values`,
    /// `[grid]` or `[[variants]]` the config uses; none of them is a baseline-only sweep.
    fn variants_of(&self, engine: &EngineDef) -> Result<(Vec<String>, Vec<Variant>), FieldError> {
        let given: Vec<&str> = [
            ("knob", self.knob.is_some() || self.values.is_some()),
            ("grid", !self.grid.is_empty()),
            ("variants", !self.variants.is_empty()),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
        if given.len() > 1 {
            return Err(FieldError::new(
                given[1],
                "give only one of knob + values, [grid] or [[variants]]",
            ));
        }
        let (knobs, variants) = match (&self.knob, &self.values) {
            (Some(knob), Some(values)) => single_knob(engine, knob, values)?,
            (Some(knob), None) => {
                return Err(FieldError::new(
                    "values",
                    format!("give the values of `{knob}`"),
                ))
            }
            (None, Some(_)) => {
                return Err(FieldError::new("knob", "`values` needs a `knob` to vary"))
            }
            (None, None) if !self.grid.is_empty() => grid(engine, &self.grid)?,
            (None, None) => explicit_variants(engine, &self.variants, &self.baseline.name)?,
        };
        if variants.len() > MAX_VALUES {
            return Err(FieldError::new(
                given[0],
                format!(
                    "{} variants; at most {MAX_VALUES} per sweep",
                    variants.len()
                ),
            ));
        }
        Ok((knobs, variants))
    }

    /// The search limits, from whichever of `depth`, `depths` or `nodes` the config uses.
    fn limits(&self) -> Result<Vec<Limit>, FieldError> {
        let depth = |field: String, d: i64| {
            if (1..=MAX_DEPTH).contains(&d) {
                Ok(Limit::Depth(d as u32))
            } else {
                Err(FieldError::new(
                    field,
                    format!("{d} is out of range (1 to {MAX_DEPTH})"),
                ))
            }
        };
        match (self.depth, self.depths.is_empty(), self.nodes) {
            (Some(d), true, None) => Ok(vec![depth("depth".into(), d)?]),
            (None, false, None) => {
                if self.depths.len() > MAX_LIMITS {
                    return Err(FieldError::new(
                        "depths",
                        format!("at most {MAX_LIMITS} depths"),
                    ));
                }
                let mut out = Vec::new();
                for (i, d) in self.depths.iter().enumerate() {
                    let limit = depth(format!("depths[{i}]"), *d)?;
                    if out.contains(&limit) {
                        return Err(FieldError::new(
                            format!("depths[{i}]"),
                            format!("{d} is given twice"),
                        ));
                    }
                    out.push(limit);
                }
                Ok(out)
            }
            (None, true, Some(n)) if (1..=MAX_NODES).contains(&n) => {
                Ok(vec![Limit::Nodes(n as u64)])
            }
            (None, true, Some(n)) => Err(FieldError::new(
                "nodes",
                format!("{n} is out of range (1 to {MAX_NODES})"),
            )),
            (None, true, None) => Err(FieldError::new(
                "depth",
                "give a search limit: depth = N, depths = [N, ...] or nodes = N",
            )),
            _ => Err(FieldError::new(
                if self.nodes.is_some() {
                    "nodes"
                } else {
                    "depths"
                },
                "give only one of depth, depths or nodes",
            )),
        }
    }
}

fn check_sweep_name(name: &str) -> Result<String, FieldError> {
    let name = name.trim().to_string();
    if name.is_empty() || name.len() > MAX_SWEEP_NAME {
        return Err(FieldError::new(
            "name",
            format!("must be 1 to {MAX_SWEEP_NAME} bytes"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(FieldError::new(
            "name",
            "must not contain control characters",
        ));
    }
    Ok(name)
}

/// Checks a variant's row name: it appears in tables (Markdown, CSV) and URLs.
fn check_build_name(field: &str, name: &str) -> Result<(), FieldError> {
    if name.is_empty()
        || name.len() > MAX_BUILD_NAME
        || name.trim() != name
        || name.chars().any(|c| c.is_control() || c == '|' || c == '"')
    {
        return Err(FieldError::new(
            field,
            "must be 1 to 64 characters, without control characters, '|', '\"' or surrounding spaces",
        ));
    }
    Ok(())
}

/// `knob` + `values`: one variant per value, named `KNOB=VALUE`.
fn single_knob(
    engine: &EngineDef,
    knob: &str,
    values: &[i64],
) -> Result<(Vec<String>, Vec<Variant>), FieldError> {
    engine.check_knob_value("knob", knob, engine.knob(knob).map_or(0, |k| k.default))?;
    if values.is_empty() {
        return Err(FieldError::new("values", "give at least one value"));
    }
    let variants = checked_values(engine, "values", knob, values)?
        .into_iter()
        .map(|v| Variant {
            name: format!("{knob}={v}"),
            defines: BTreeMap::from([(knob.to_string(), v)]),
        })
        .collect();
    Ok((vec![knob.to_string()], variants))
}

/// Checks a list of values of one knob: at least one, each in range, none twice.
fn checked_values(
    engine: &EngineDef,
    field: &str,
    knob: &str,
    values: &[i64],
) -> Result<Vec<i64>, FieldError> {
    if values.is_empty() {
        return Err(FieldError::new(field, "give at least one value"));
    }
    if values.len() > MAX_VALUES {
        return Err(FieldError::new(
            field,
            format!("{} values; at most {MAX_VALUES} per sweep", values.len()),
        ));
    }
    for (i, v) in values.iter().enumerate() {
        engine.check_knob_value(&format!("{field}[{i}]"), knob, *v)?;
        if values[..i].contains(v) {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!("{v} is given twice"),
            ));
        }
    }
    Ok(values.to_vec())
}

/// `[grid]`: one variant per combination, knobs in name order, named `A=1,B=2`.
fn grid(
    engine: &EngineDef,
    grid: &BTreeMap<String, Vec<i64>>,
) -> Result<(Vec<String>, Vec<Variant>), FieldError> {
    let mut combos: Vec<BTreeMap<String, i64>> = vec![BTreeMap::new()];
    for (knob, values) in grid {
        let field = format!("grid.{knob}");
        engine.check_knob_value(&field, knob, engine.knob(knob).map_or(0, |k| k.default))?;
        let values = checked_values(engine, &field, knob, values)?;
        if combos.len() * values.len() > MAX_VALUES {
            return Err(FieldError::new(
                "grid",
                format!("more than {MAX_VALUES} combinations"),
            ));
        }
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(knob.clone(), *v);
                    c
                })
            })
            .collect();
    }
    let variants = combos
        .into_iter()
        .map(|defines| Variant {
            name: defines
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            defines,
        })
        .collect();
    Ok((grid.keys().cloned().collect(), variants))
}

/// `[[variants]]`: named variants; the knob columns are every knob any of them sets, in order
/// of first appearance.
fn explicit_variants(
    engine: &EngineDef,
    configs: &[VariantConfig],
    baseline: &str,
) -> Result<(Vec<String>, Vec<Variant>), FieldError> {
    let mut knobs: Vec<String> = Vec::new();
    let mut out: Vec<Variant> = Vec::new();
    for (i, v) in configs.iter().enumerate() {
        let field = format!("variants[{i}]");
        check_build_name(&format!("{field}.name"), &v.name)?;
        if v.name == baseline {
            return Err(FieldError::new(
                format!("{field}.name"),
                format!("`{}` is the baseline's name", v.name),
            ));
        }
        if v.defines.is_empty() {
            return Err(FieldError::new(
                format!("{field}.defines"),
                "set at least one knob",
            ));
        }
        for (k, value) in &v.defines {
            engine.check_knob_value(&format!("{field}.defines.{k}"), k, *value)?;
            if !knobs.contains(k) {
                knobs.push(k.clone());
            }
        }
        if let Some(j) = out.iter().position(|o| o.name == v.name) {
            return Err(FieldError::new(
                format!("{field}.name"),
                format!("`{}` is also the name of variants[{j}]", v.name),
            ));
        }
        if let Some(j) = out.iter().position(|o| o.defines == v.defines) {
            return Err(FieldError::new(
                format!("{field}.defines"),
                format!("the same settings as variants[{j}]"),
            ));
        }
        out.push(Variant {
            name: v.name.clone(),
            defines: v.defines.clone(),
        });
    }
    Ok((knobs, out))
}

/// Refuses node limits for an xboard engine: the protocol has no node limit.
fn check_protocol_limits(engine: &EngineDef, limits: &[Limit]) -> Result<(), FieldError> {
    if engine.protocol == Protocol::Xboard && limits.iter().any(|l| l.depth().is_none()) {
        return Err(FieldError::new(
            "nodes",
            format!(
                "engine `{}` speaks xboard, which has no node limit: use depth or depths",
                engine.name
            ),
        ));
    }
    Ok(())
}

/// At least one suite, each loaded, none twice.
fn check_suites(
    suites: &[String],
    suite_sizes: &BTreeMap<String, usize>,
) -> Result<(), FieldError> {
    if suites.is_empty() {
        return Err(FieldError::new("suites", "give at least one suite"));
    }
    for (i, s) in suites.iter().enumerate() {
        if !suite_sizes.contains_key(s) {
            let known: Vec<&str> = suite_sizes.keys().map(String::as_str).collect();
            return Err(FieldError::new(
                format!("suites[{i}]"),
                format!("unknown suite `{s}` (loaded: {})", known.join(", ")),
            ));
        }
        if suites[..i].contains(s) {
            return Err(FieldError::new(
                format!("suites[{i}]"),
                format!("`{s}` is listed twice"),
            ));
        }
    }
    Ok(())
}

fn check_baseline(base: &BaselineConfig, engine: &EngineDef) -> Result<(), FieldError> {
    if base.name.is_empty()
        || base.name.len() > MAX_BUILD_NAME
        || !base
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        return Err(FieldError::new(
            "baseline.name",
            "must be 1 to 64 letters, digits, '_', '-' or '.'",
        ));
    }
    for (k, v) in &base.defines {
        engine.check_knob_value(&format!("baseline.defines.{k}"), k, *v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engines() -> BTreeMap<String, EngineDef> {
        let def = EngineDef::from_toml(
            r#"
name = "minnow"
protocol = "uci"
binary = "minnow"
[source]
path = "."
[build]
command = ["make", "OUT={out}"]
[[knobs]]
name = "CEIL"
min = 0
max = 3000
default = 0
[[knobs]]
name = "R"
min = 1
max = 6
default = 3
"#,
        )
        .unwrap();
        BTreeMap::from([("minnow".to_string(), def)])
    }

    fn suites() -> BTreeMap<String, usize> {
        BTreeMap::from([("a".to_string(), 90), ("b".to_string(), 25)])
    }

    const OK: &str = r#"
name = "demo"
engine = "minnow"
knob = "CEIL"
values = [0, 300, 3000]
suites = ["a", "b"]
depth = 6
chunk_size = 10
"#;

    fn check(text: &str) -> Result<SweepSpec, FieldError> {
        SweepConfig::from_toml(text)?.validate(&engines(), &suites())
    }

    #[test]
    fn accepts_a_good_config() {
        let spec = check(OK).unwrap();
        assert_eq!(spec.baseline.name, "head_reference");
        assert_eq!(spec.limits, vec![Limit::Depth(6)]);
        assert_eq!(spec.knobs, vec!["CEIL".to_string()]);
        assert_eq!(spec.variants[1].name, "CEIL=300");
        let json = serde_json::to_vec(&SweepConfig::from_toml(OK).unwrap()).unwrap();
        assert_eq!(
            SweepConfig::from_json(&json)
                .unwrap()
                .validate(&engines(), &suites())
                .unwrap(),
            spec
        );
    }

    #[test]
    fn counter_columns_are_checked_and_kept_out_of_old_identities() {
        let with = |list: &str| {
            check(&OK.replace(
                "chunk_size = 10",
                &format!("chunk_size = 10\ncounters = {list}"),
            ))
        };
        let spec = with(r#"["null_skipped", "tt.hits"]"#).unwrap();
        assert_eq!(
            spec.counters,
            vec!["null_skipped".to_string(), "tt.hits".to_string()]
        );
        for (list, field, problem) in [
            (r#"["a b"]"#, "counters[0]", "not a counter name"),
            (r#"["x", "x"]"#, "counters[1]", "named twice"),
            (r#"[""]"#, "counters[0]", "not a counter name"),
        ] {
            let err = with(list).unwrap_err();
            assert_eq!(err.field, field, "{list}: {err}");
            assert!(err.problem.contains(problem), "{list}: {err}");
        }
        let many: Vec<String> = (0..=MAX_COUNTER_COLUMNS)
            .map(|i| format!("\"c{i}\""))
            .collect();
        let err = with(&format!("[{}]", many.join(", "))).unwrap_err();
        assert_eq!(err.field, "counters");
        // A spec without counters serializes as before, so sweeps stored earlier keep their
        // identity (an identical resubmission still finds them).
        let plain = check(OK).unwrap();
        assert!(!serde_json::to_string(&plain).unwrap().contains("counters"));
    }

    #[test]
    fn each_bad_field_is_named() {
        // (what OK says, what the bad config says instead, the field named, the problem).
        let edits = [
            (
                r#"engine = "minnow""#,
                r#"engine = "nope""#,
                "engine",
                "unknown engine",
            ),
            (
                r#"knob = "CEIL""#,
                r#"knob = "OTHER""#,
                "knob",
                "not a declared",
            ),
            ("3000]", "3001]", "values[2]", "out of range"),
            (r#""b"]"#, r#""zz"]"#, "suites[1]", "unknown suite"),
            ("depth = 6", "depth = 0", "depth", "out of range"),
            ("depth = 6", "depth = 1000", "depth", "out of range"),
            ("depth = 6", "depht = 6", "depht", "unknown field"),
            ("depth = 6", r#"depth = "six""#, "depth", "invalid type"),
            (
                "chunk_size = 10",
                "chunk_size = -1",
                "chunk_size",
                "out of range",
            ),
            ("[0, 300", "[300, 300", "values[1]", "twice"),
            (
                "depth = 6",
                "depth = 6\ndepths = [6, 8]",
                "depths",
                "only one of",
            ),
            ("depth = 6", "depths = [6, 6]", "depths[1]", "twice"),
            ("depth = 6", "nodes = 0", "nodes", "out of range"),
            ("depth = 6", "", "depth", "give a search limit"),
            ("values = [0, 300, 3000]", "", "values", "give the values"),
            (r#"knob = "CEIL""#, "", "knob", "needs a `knob`"),
        ];
        assert_each_bad_field_named(OK, &edits);
        let grid = check(&format!("{OK}\n[grid]\nCEIL = [1]\n")).unwrap_err();
        assert_eq!(grid.field, "grid", "{grid}");
        assert!(grid.problem.contains("only one of"), "{grid}");
    }

    /// Checks each edit of `base`, (what `base` says, what the bad config says instead, the
    /// field the error names, words of its problem): the edited config is refused, naming
    /// that field and that problem.
    fn assert_each_bad_field_named(base: &str, edits: &[(&str, &str, &str, &str)]) {
        for (from, to, field, words) in edits {
            assert!(base.contains(from), "{from:?} is not in the config");
            let err = check(&base.replace(from, to)).unwrap_err();
            assert_eq!(err.field, *field, "{err}");
            assert!(err.problem.contains(words), "{err}");
        }
    }

    const BASE: &str = r#"
name = "demo"
engine = "minnow"
suites = ["a", "b"]
depths = [6, 8]
"#;

    #[test]
    fn grid_is_a_cartesian_product() {
        let spec = check(&format!("{BASE}[grid]\nCEIL = [0, 300]\nR = [2, 3]\n")).unwrap();
        assert_eq!(spec.knobs, vec!["CEIL".to_string(), "R".to_string()]);
        let names: Vec<&str> = spec.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["CEIL=0,R=2", "CEIL=0,R=3", "CEIL=300,R=2", "CEIL=300,R=3"]
        );
        assert_eq!(
            spec.variants[2].defines,
            BTreeMap::from([("CEIL".into(), 300), ("R".into(), 2)])
        );
        assert_eq!(spec.limits, vec![Limit::Depth(6), Limit::Depth(8)]);
        let err = check(&format!("{BASE}[grid]\nCEIL = [0, 99999]\n")).unwrap_err();
        assert_eq!(err.field, "grid.CEIL[1]", "{err}");
        let err = check(&format!("{BASE}[grid]\nNOPE = [1]\n")).unwrap_err();
        assert_eq!(err.field, "grid.NOPE", "{err}");
    }

    #[test]
    fn explicit_variants_move_knobs_together() {
        let text = format!(
            "{BASE}[[variants]]\nname = \"band-a\"\ndefines = {{ CEIL = 10, R = 2 }}\n\
             [[variants]]\nname = \"band-b\"\ndefines = {{ CEIL = 30 }}\n"
        );
        let spec = check(&text).unwrap();
        assert_eq!(spec.knobs, vec!["CEIL".to_string(), "R".to_string()]);
        assert_eq!(spec.variants[0].name, "band-a");
        assert_eq!(
            spec.variants[1].defines,
            BTreeMap::from([("CEIL".into(), 30)])
        );
        let dup = text.replace("CEIL = 30 ", "CEIL = 10, R = 2 ");
        assert_eq!(check(&dup).unwrap_err().field, "variants[1].defines");
        let clash = text.replace("band-b", "head_reference");
        assert_eq!(check(&clash).unwrap_err().field, "variants[1].name");
        let bad = text.replace("band-b", "a|b");
        assert_eq!(check(&bad).unwrap_err().field, "variants[1].name");
        let unknown = text.replace("CEIL = 30", "ZZ = 30");
        assert_eq!(check(&unknown).unwrap_err().field, "variants[1].defines.ZZ");
    }

    #[test]
    fn baseline_alone_and_node_limits() {
        let spec = check(&BASE.replace("depths = [6, 8]", "nodes = 20000")).unwrap();
        assert!(spec.variants.is_empty());
        assert!(spec.knobs.is_empty());
        assert_eq!(spec.limits, vec![Limit::Nodes(20_000)]);
    }

    #[test]
    fn specs_stored_before_several_knobs_still_decode() {
        let old = r#"{"name":"s","engine":"minnow","knob":"CEIL","values":[0,300],"suites":["a"],
                      "depth":7,"chunk_size":10,"baseline":{"name":"head_reference","defines":{}},
                      "description":""}"#;
        let spec: SweepSpec = serde_json::from_str(old).unwrap();
        assert_eq!(spec.limits, vec![Limit::Depth(7)]);
        assert_eq!(spec.knobs, vec!["CEIL".to_string()]);
        assert_eq!(spec.variants[1].name, "CEIL=300");
        let again: SweepSpec =
            serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn limits_jobs() {
        let many: Vec<String> = (0..=255).map(|v| v.to_string()).collect();
        let seed = OK
            .replace("[0, 300, 3000]", &format!("[{}]", many.join(",")))
            .replace("chunk_size = 10", "chunk_size = 1");
        let big = BTreeMap::from([("a".to_string(), 879), ("b".to_string(), 1000)]);
        // The seed plan's scale: 256 values on the 879-position suite, one position per job.
        let one = seed.replace(r#"suites = ["a", "b"]"#, r#"suites = ["a"]"#);
        let config = SweepConfig::from_toml(&one).unwrap();
        assert!(config.validate(&engines(), &big).is_ok());
        // Twice the suites and twice the depths: 965,806 jobs, over the bound.
        let config = SweepConfig::from_toml(&seed.replace("depth = 6", "depths = [6, 7]")).unwrap();
        let err = config.validate(&engines(), &big).unwrap_err();
        assert!(err.problem.contains("jobs"), "{err}");
    }

    #[test]
    fn free_text_is_bounded_and_free_of_control_characters() {
        let huge = "x".repeat(3_900_000);
        let err = check(&format!("{OK}description = \"{huge}\"\n")).unwrap_err();
        assert_eq!(err.field, "description", "{err}");
        assert!(
            err.problem
                .contains(&format!("at most {MAX_DESCRIPTION} bytes")),
            "{err}"
        );
        let spec = check(&format!(
            "{OK}description = \"\"\"\nline one\n\tline two\"\"\"\n"
        ))
        .unwrap();
        assert!(spec.description.contains("\tline two"));
        let cases = [
            (
                OK.replace("name = \"demo\"", "name = \"de\\u0000mo\""),
                "name",
            ),
            (format!("{OK}description = \"a\\u0000b\"\n"), "description"),
            (
                OK.replace(
                    "engine = \"minnow\"",
                    &format!("engine = \"{}\"", "e".repeat(300)),
                ),
                "engine",
            ),
            (
                OK.replace("knob = \"CEIL\"", "knob = \"CE\\u0007IL\""),
                "knob",
            ),
            (OK.replace("\"b\"]", "\"b\\u0000\"]"), "suites[1]"),
            (
                format!("{BASE}[[variants]]\nname = \"v\\u001b\"\ndefines = {{ CEIL = 1 }}\n"),
                "variants[0].name",
            ),
            (
                format!("{BASE}[[variants]]\nname = \"v\"\ndefines = {{ \"C\\u0000\" = 1 }}\n"),
                "variants[0].defines",
            ),
            (
                format!("{BASE}[grid]\n\"{}\" = [1]\n", "K".repeat(300)),
                "grid",
            ),
            (
                format!("{OK}[baseline]\nname = \"{}\"\n", "b".repeat(65)),
                "baseline.name",
            ),
        ];
        for (text, field) in cases {
            let err = check(&text).unwrap_err();
            assert_eq!(err.field, field, "{err}");
            assert!(err.problem.len() < 200, "the text is not echoed: {err}");
        }
    }

    #[test]
    fn cross_checks_are_checked_and_kept_out_of_old_identities() {
        let with = |extra: &str| {
            check(&OK.replace("chunk_size = 10", &format!("chunk_size = 10\n{extra}")))
        };
        // Defaults: 2 %, at least 3, and left out of the stored spec (old identities stay).
        let plain = check(OK).unwrap();
        assert_eq!(plain.cross_check, Share(0.02));
        assert_eq!(plain.cross_check_min, 3);
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("cross_check"), "{json}");
        let stored: SweepSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(stored, plain);
        // Written out when not the default, and read back.
        let off = with("cross_check = 0\ncross_check_min = 5").unwrap();
        assert_eq!((off.cross_check, off.cross_check_min), (Share(0.0), 5));
        let json = serde_json::to_string(&off).unwrap();
        assert!(json.contains("\"cross_check\":0.0"), "{json}");
        assert_eq!(serde_json::from_str::<SweepSpec>(&json).unwrap(), off);
        assert_ne!(off.identity(None), plain.identity(None));
        for (extra, field) in [
            ("cross_check = 1.5", "cross_check"),
            ("cross_check = -0.1", "cross_check"),
            ("cross_check = nan", "cross_check"),
            ("cross_check_min = 10001", "cross_check_min"),
            ("cross_check = \"lots\"", "cross_check"),
        ] {
            let err = with(extra).unwrap_err();
            assert_eq!(err.field, field, "{extra}: {err}");
        }
    }

    #[test]
    fn identity_is_engine_source_and_spec() {
        let spec = check(OK).unwrap();
        let id = spec.identity(Some("abc"));
        assert_eq!(id.len(), 64);
        // Field order in the config does not matter; the spec's content does.
        let reordered = OK
            .replace("depth = 6\n", "")
            .replace("engine", "depth = 6\nengine");
        assert_eq!(check(&reordered).unwrap().identity(Some("abc")), id);
        assert_ne!(spec.identity(Some("abd")), id);
        assert_ne!(spec.identity(None), id);
        let other = check(&OK.replace("depth = 6", "depth = 7")).unwrap();
        assert_ne!(other.identity(Some("abc")), id);
    }

    #[test]
    fn declared_knobs_join_the_engine_for_this_sweep() {
        let declare = "[[knobs]]\nname = \"NEW\"\nmin = 0\nmax = 9\ndefault = 3\n";
        let text = format!(
            "{}{declare}",
            OK.replace("knob = \"CEIL\"", "knob = \"NEW\"")
                .replace("[0, 300, 3000]", "[1, 9]")
        );
        let (spec, def) = SweepConfig::from_toml(&text)
            .unwrap()
            .validate_with_engine(&engines(), &suites())
            .unwrap();
        assert_eq!(spec.knobs, ["NEW"]);
        assert_eq!(def.knob("NEW").map(|k| k.max), Some(9));
        assert_eq!(def.knobs.len(), engines()["minnow"].knobs.len() + 1);
        // The declaration survives the JSON the CLI sends.
        let json = serde_json::to_vec(&SweepConfig::from_toml(&text).unwrap()).unwrap();
        assert_eq!(
            SweepConfig::from_json(&json).unwrap(),
            SweepConfig::from_toml(&text).unwrap()
        );
        let edits = [
            ("[1, 9]", "[1, 10]", "values[1]", "out of range"),
            (
                r#"name = "NEW""#,
                r#"name = "R""#,
                "knobs[0].name",
                "already declares",
            ),
            (
                "default = 3\n",
                "default = 3\nkind = \"option\"\n",
                "knobs[0].kind",
                "unknown field",
            ),
            (
                r#"name = "NEW""#,
                r#"name = "N\u0000""#,
                "knobs[0].name",
                "control character",
            ),
        ];
        assert_each_bad_field_named(&text, &edits);
        // Without the declaration the knob is unknown, and the error says how to declare it.
        let err = check(&text.replace(declare, "")).unwrap_err();
        assert_eq!(err.field, "knob");
        assert!(err.problem.contains("[[knobs]]"), "{err}");
    }

    #[test]
    fn toml_errors_give_line_column_and_a_suggestion() {
        let text = "name = \"x\"\nengine = \"minnow\"\nknob = \"K\"\nvalues = [1, 2\n";
        let err = SweepConfig::from_toml(text).unwrap_err();
        assert_eq!(err.field, "body");
        // Where the parser noticed the missing `]`: the end of the text.
        assert!(
            err.problem.starts_with("line 5, column 1: invalid array"),
            "{err}"
        );
        assert!(!err.problem.contains('\n'), "one line: {err}");
        let text = "name = \"x\"\nengine = \"minnow\"\nknob = \"K\"\nvaluez = [1]\n";
        let err = SweepConfig::from_toml(text).unwrap_err();
        assert_eq!(err.field, "valuez");
        assert!(err.problem.contains("did you mean `values`?"), "{err}");
    }

    #[test]
    fn json_errors_name_the_field() {
        let err = SweepConfig::from_json(br#"{"name":"x","engine":"minnow","knob":"CEIL","values":[1],"suites":["a"],"depth":3,"extra":1}"#).unwrap_err();
        assert_eq!(err.field, "extra");
        let err = SweepConfig::from_json(b"{not json").unwrap_err();
        assert_eq!(err.field, "body");
        assert!(err.problem.contains("key must be a string"), "{err}");
        let err = SweepConfig::from_json(br#"{"name":"x"}"#).unwrap_err();
        assert_eq!(err.field, "engine", "{err}");
    }
}
