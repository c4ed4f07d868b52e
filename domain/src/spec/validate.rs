//! Validation of a [`SweepConfig`] into a [`SweepSpec`]: every rule a config must pass beyond
//! its shape, each error naming the field. Kept apart from the schema so that a new rule
//! never touches the types the JSON Schema is generated from.

use std::collections::BTreeMap;

use super::config::{
    BaselineConfig, SourceConfig, SpeedPositions, StageConfig, SweepConfig, MAX_CHUNK, MAX_JOBS,
    MAX_LIMITS, MAX_STAGES,
};
use super::{SpeedSpec, Stage, SweepSpec};
use crate::bounds::{
    check_name, check_text, Lines, MAX_BUILD_NAME, MAX_DESCRIPTION, MAX_REF_NAME, MAX_SWEEP_NAME,
};
use crate::crosscheck::share::{self as cross_check, Share};
use crate::engine::{EngineDef, Protocol};
use crate::limit::{Limit, MAX_DEPTH, MAX_NODES};
use crate::wire::MAX_SPEED_REPEATS;
use crate::FieldError;

/// Longest `source.git` accepted.
pub const MAX_GIT_URL: usize = 1000;

/// Checks a git revision as a config gives it (`source.rev`, `variants[i].rev`): a branch,
/// tag or commit that cannot be taken for an option.
pub(super) fn check_rev(field: &str, rev: &str) -> Result<(), FieldError> {
    check_text(field, rev, MAX_REF_NAME, Lines::One)?;
    if rev.is_empty() || rev.starts_with('-') || rev.chars().any(|c| c.is_whitespace()) {
        return Err(FieldError::new(
            field,
            "must be a branch, tag or commit (not empty, no spaces, not starting with `-`)",
        ));
    }
    Ok(())
}

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
                    check_rev("source.rev", rev)?;
                }
                Ok(())
            }
        }
    }
}

/// Most counters a sweep may show as table columns.
pub const MAX_COUNTER_COLUMNS: usize = 16;

impl SweepConfig {
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
        let search = self.search_of(engine, &variants)?;
        let (suites, limits, stages) = self.stages_of(variants.len(), suite_sizes)?;
        check_protocol_limits(engine, &limits)?;
        for stage in &stages {
            check_protocol_limits(engine, &stage.limits)?;
        }
        if !(1..=MAX_CHUNK).contains(&self.chunk_size) {
            return Err(FieldError::new(
                "chunk_size",
                format!("{} is out of range (1 to {MAX_CHUNK})", self.chunk_size),
            ));
        }
        check_baseline(&self.baseline, engine)?;
        let (share, min) = self.cross_check()?;
        let mut parts = vec![(1 + variants.len(), suites.as_slice(), limits.len())];
        for stage in &stages {
            parts.push((
                1 + stage.promote as usize,
                stage.suites.as_slice(),
                stage.limits.len(),
            ));
        }
        self.check_job_count(&parts, suite_sizes, share, min)?;
        let speed = self.speed_of(&suites, &limits, suite_sizes)?;
        let spec = SweepSpec {
            name,
            engine: self.engine,
            knobs,
            variants,
            limits,
            suites,
            stages,
            search,
            chunk_size: self.chunk_size as u32,
            baseline: self.baseline,
            description: self.description,
            counters: self.counters,
            recompute: self.recompute,
            cross_check: share,
            cross_check_min: min,
            priority: self.priority,
            speed,
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

    /// Refuses a sweep of more than [`MAX_JOBS`] jobs, cross-checks included, over its
    /// `parts` (builds, suites, limits): one per stage, counted as if each stage promoted
    /// as many variants as it may.
    fn check_job_count(
        &self,
        parts: &[(usize, &[String], usize)],
        suite_sizes: &BTreeMap<String, usize>,
        share: Share,
        min: u32,
    ) -> Result<(), FieldError> {
        let chunk = self.chunk_size as usize;
        let (mut jobs, mut checks, mut positions) = (0, 0, 0);
        for &(builds, suites, limits) in parts {
            let chunks: usize = suites.iter().map(|s| suite_sizes[s].div_ceil(chunk)).sum();
            jobs += chunks * builds * limits;
            let sizes: Vec<usize> = suites.iter().map(|s| suite_sizes[s]).collect();
            positions += sizes.iter().sum::<usize>() * builds * limits;
            checks += cross_check::planned(share.0, min, builds, &sizes, limits);
        }
        if jobs > MAX_JOBS {
            return Err(FieldError::new(
                "suites",
                format!(
                    "the sweep would make {jobs} jobs ({positions} searches of builds x limits x positions, in chunks of {chunk}); at most {MAX_JOBS}"
                ),
            ));
        }
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
        for (k, stage) in self.stages.iter().enumerate() {
            for (i, suite) in stage.suites.iter().enumerate() {
                check_name(&format!("stages[{k}].suites[{i}]"), suite, MAX_REF_NAME)?;
            }
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

    /// `[speed]` with its defaults filled in, over the first stage's `suites` and `limits`:
    /// a suite of the sweep, a count within it, repeats in range, a depth limit.
    fn speed_of(
        &self,
        suites: &[String],
        limits: &[Limit],
        suite_sizes: &BTreeMap<String, usize>,
    ) -> Result<Option<SpeedSpec>, FieldError> {
        let Some(speed) = &self.speed else {
            return Ok(None);
        };
        let positions = speed.positions.clone().unwrap_or(SpeedPositions {
            suite: None,
            count: None,
        });
        let suite = match positions.suite {
            Some(s) if suites.contains(&s) => s,
            Some(s) => {
                return Err(FieldError::new(
                    "speed.positions.suite",
                    format!(
                        "`{s}` is not one of the sweep's suites ({})",
                        suites.join(", ")
                    ),
                ))
            }
            None => suites.first().cloned().ok_or_else(|| {
                FieldError::new("speed.positions.suite", "the sweep has no suite")
            })?,
        };
        let size = suite_sizes.get(&suite).copied().unwrap_or(0);
        let count = positions.count.unwrap_or(16.min(size as u32));
        if count == 0 || count as usize > size.min(MAX_CHUNK as usize) {
            return Err(FieldError::new(
                "speed.positions.count",
                format!(
                    "{count} is out of range (1 to {}, the size of `{suite}`)",
                    size.min(MAX_CHUNK as usize)
                ),
            ));
        }
        let repeats = speed.repeats.unwrap_or(10);
        if !(2..=MAX_SPEED_REPEATS).contains(&repeats) {
            return Err(FieldError::new(
                "speed.repeats",
                format!("{repeats} is out of range (2 to {MAX_SPEED_REPEATS})"),
            ));
        }
        let limit = limits[0];
        if limit.depth().is_none() {
            return Err(FieldError::new(
                "speed",
                "speed is timed at a fixed depth: the sweep needs `depth` or `depths`, not `nodes`",
            ));
        }
        Ok(Some(SpeedSpec {
            suite,
            count,
            repeats,
            limit,
        }))
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

    /// The first stage's suites and limits and the later stages: the top-level `suites` and
    /// limit, or `[[stages]]`, never both.
    fn stages_of(
        &self,
        variants: usize,
        suite_sizes: &BTreeMap<String, usize>,
    ) -> Result<Staged, FieldError> {
        let Some((first, later)) = self.stages.split_first() else {
            let limits = limits_of("", self.depth, &self.depths, self.nodes)?;
            check_suites("suites", &self.suites, suite_sizes)?;
            return Ok((self.suites.clone(), limits, Vec::new()));
        };
        if !self.suites.is_empty() {
            return Err(FieldError::new(
                "suites",
                "a staged sweep gives its suites in each [[stages]], not at the top",
            ));
        }
        if self.depth.is_some() || !self.depths.is_empty() || self.nodes.is_some() {
            return Err(FieldError::new(
                "depth",
                "a staged sweep gives its search limit in each [[stages]], not at the top",
            ));
        }
        if self.stages.len() > MAX_STAGES {
            return Err(FieldError::new(
                "stages",
                format!("{} stages; at most {MAX_STAGES}", self.stages.len()),
            ));
        }
        if !later.is_empty() && variants == 0 {
            return Err(FieldError::new(
                "stages",
                "a sweep without variants has nothing to promote: give knob values, a grid or variants",
            ));
        }
        let (suites, limits) = stage_measures(0, first, suite_sizes)?;
        if first.promote.is_some() || first.max_solved_loss.is_some() {
            return Err(FieldError::new(
                if first.promote.is_some() { "stages[0].promote" } else { "stages[0].max_solved_loss" },
                "the first stage runs every variant; promote and max_solved_loss go on later stages",
            ));
        }
        let mut measured = pairs(0, &suites, &limits);
        let mut before = variants;
        let mut out = Vec::new();
        for (i, stage) in later.iter().enumerate() {
            let stage = later_stage(i + 1, stage, before, suite_sizes, &mut measured)?;
            before = stage.promote as usize;
            out.push(stage);
        }
        Ok((suites, limits, out))
    }
}

/// A config's stages: the first stage's suites and limits, and the later stages.
type Staged = (Vec<String>, Vec<Limit>, Vec<Stage>);

/// Stage `k` (from 1), whose stage before has `before` variants; `measured` holds what
/// the stages before it measure, and gains what it does.
fn later_stage(
    k: usize,
    stage: &StageConfig,
    before: usize,
    suite_sizes: &BTreeMap<String, usize>,
    measured: &mut Vec<(usize, String, Limit)>,
) -> Result<Stage, FieldError> {
    let (suites, limits) = stage_measures(k, stage, suite_sizes)?;
    let new = pairs(k, &suites, &limits);
    for (_, suite, limit) in &new {
        if let Some((j, _, _)) = measured.iter().find(|(_, x, y)| x == suite && y == limit) {
            return Err(FieldError::new(
                format!("stages[{k}].suites"),
                format!(
                    "`{suite}` at {limit} is already measured by stages[{j}]: a stage measures something new"
                ),
            ));
        }
    }
    measured.extend(new);
    let promote = match stage.promote {
        None => {
            return Err(FieldError::new(
                format!("stages[{k}].promote"),
                format!(
                    "required: how many variants of stages[{}] run this stage",
                    k - 1
                ),
            ))
        }
        Some(n) if n < 1 || n as usize > before => {
            return Err(FieldError::new(
                format!("stages[{k}].promote"),
                format!(
                    "{n} is out of range (1 to the {before} variants of stages[{}])",
                    k - 1
                ),
            ))
        }
        Some(n) => n as u32,
    };
    let max_solved_loss = match stage.max_solved_loss.unwrap_or(0) {
        n if (0..=i64::from(u32::MAX)).contains(&n) => n as u32,
        n => {
            return Err(FieldError::new(
                format!("stages[{k}].max_solved_loss"),
                format!("{n} is out of range (0 or more positions)"),
            ))
        }
    };
    Ok(Stage {
        suites,
        limits,
        promote,
        max_solved_loss,
    })
}

/// Stage `k`'s suites (checked) and limits.
fn stage_measures(
    k: usize,
    stage: &StageConfig,
    suite_sizes: &BTreeMap<String, usize>,
) -> Result<(Vec<String>, Vec<Limit>), FieldError> {
    let prefix = format!("stages[{k}].");
    check_suites(&format!("{prefix}suites"), &stage.suites, suite_sizes)?;
    let limits = limits_of(&prefix, stage.depth, &stage.depths, stage.nodes)?;
    Ok((stage.suites.clone(), limits))
}

/// Every (stage, suite, limit) a stage measures.
fn pairs(k: usize, suites: &[String], limits: &[Limit]) -> Vec<(usize, String, Limit)> {
    suites
        .iter()
        .flat_map(|s| limits.iter().map(move |l| (k, s.clone(), *l)))
        .collect()
}

/// The search limits, from whichever of `depth`, `depths` or `nodes` is given; fields are
/// named under `prefix` (`""` at the top, `stages[1].` in a stage).
fn limits_of(
    prefix: &str,
    depth: Option<i64>,
    depths: &[i64],
    nodes: Option<i64>,
) -> Result<Vec<Limit>, FieldError> {
    let field = |name: &str| format!("{prefix}{name}");
    let one_depth = |f: String, d: i64| {
        if (1..=MAX_DEPTH).contains(&d) {
            Ok(Limit::Depth(d as u32))
        } else {
            Err(FieldError::new(
                f,
                format!("{d} is out of range (1 to {MAX_DEPTH})"),
            ))
        }
    };
    match (depth, depths.is_empty(), nodes) {
        (Some(d), true, None) => Ok(vec![one_depth(field("depth"), d)?]),
        (None, false, None) => {
            if depths.len() > MAX_LIMITS {
                return Err(FieldError::new(
                    field("depths"),
                    format!("at most {MAX_LIMITS} depths"),
                ));
            }
            let mut out = Vec::new();
            for (i, d) in depths.iter().enumerate() {
                let limit = one_depth(field(&format!("depths[{i}]")), *d)?;
                if out.contains(&limit) {
                    return Err(FieldError::new(
                        field(&format!("depths[{i}]")),
                        format!("{d} is given twice"),
                    ));
                }
                out.push(limit);
            }
            Ok(out)
        }
        (None, true, Some(n)) if (1..=MAX_NODES).contains(&n) => Ok(vec![Limit::Nodes(n as u64)]),
        (None, true, Some(n)) => Err(FieldError::new(
            field("nodes"),
            format!("{n} is out of range (1 to {MAX_NODES})"),
        )),
        (None, true, None) => Err(FieldError::new(
            field("depth"),
            "give a search limit: depth = N, depths = [N, ...] or nodes = N",
        )),
        _ => Err(FieldError::new(
            field(if nodes.is_some() { "nodes" } else { "depths" }),
            "give only one of depth, depths or nodes",
        )),
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
    field: &str,
    suites: &[String],
    suite_sizes: &BTreeMap<String, usize>,
) -> Result<(), FieldError> {
    if suites.is_empty() {
        return Err(FieldError::new(field, "give at least one suite"));
    }
    for (i, s) in suites.iter().enumerate() {
        if !suite_sizes.contains_key(s) {
            let known: Vec<&str> = suite_sizes.keys().map(String::as_str).collect();
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!("unknown suite `{s}` (loaded: {})", known.join(", ")),
            ));
        }
        if suites[..i].contains(s) {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
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
