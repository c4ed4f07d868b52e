//! The data of an engine definition, as registered (`configs/engines/*.toml`): protocol,
//! source, build recipe, options and knobs. The rules that check them live in the parent
//! module and its other parts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::report::{BenchDef, ReportDef};

/// Protocol spoken by an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The Universal Chess Interface.
    Uci,
    /// The Chess Engine Communication Protocol (xboard/WinBoard), version 2 with a
    /// protocol-1 fallback.
    Xboard,
}

/// Whether an engine is compiled per variant or run from a fixed binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Built from a source snapshot (`[source]` and `[build]`).
    Source,
    /// A prebuilt binary at an absolute path on the workers.
    Binary,
}

/// A fixed engine option value (number or string), sent at startup (UCI `setoption`,
/// xboard `option NAME=VALUE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum OptionValue {
    /// A numeric option such as `Hash`.
    Int(i64),
    /// A string or check option.
    Text(String),
}

impl std::fmt::Display for OptionValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionValue::Int(v) => write!(f, "{v}"),
            OptionValue::Text(s) => f.write_str(s),
        }
    }
}

/// Where an engine's source lives on the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceDef {
    /// Directory with the source; relative paths are resolved against the definition file.
    pub path: String,
    /// Names (files or directories, at any depth) left out of the snapshot, e.g. build outputs.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// How a knob a sweep declares (`[[knobs]]` in a sweep config) must appear in this
    /// source: a line template with one `{name}` (see [`KnobRule`](crate::engine::KnobRule)); default
    /// `#ifndef {name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob_pattern: Option<String>,
    /// File name endings searched for `knob_pattern`, each with its dot; default `.c`, `.h`,
    /// `.cc`, `.cpp`, `.hpp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knob_extensions: Option<Vec<String>>,
    /// Keep dotfiles and dot-directories (`.git`, `.env`) in snapshots; they are left out
    /// unless this is set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_dotfiles: bool,
}

/// How a variant is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildDef {
    /// Argv template: the program and its arguments, with `{source}`, `{out}` and `{defines}`.
    pub command: Vec<String>,
    /// Seconds a build may take before it is killed and reported as failed.
    #[serde(default = "default_build_timeout")]
    pub timeout_secs: u64,
}

pub(crate) fn default_build_timeout() -> u64 {
    300
}

fn default_position_timeout() -> u64 {
    120
}

fn default_init_timeout() -> u64 {
    10
}

/// An engine as registered by whoever runs the coordinator (`configs/engines/*.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineDef {
    /// Name sweeps refer to.
    pub name: String,
    /// Protocol the engine speaks.
    pub protocol: Protocol,
    /// For a source engine the file name of the built binary (written to `{out}`); for a
    /// binary-only engine the absolute path of the binary on every worker that runs it.
    pub binary: String,
    /// Source location (source engines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceDef>,
    /// Build recipe (source engines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildDef>,
    /// Fixed options set before searching (e.g. `Hash = 16`, `Threads = 1`); an xboard engine
    /// must announce each one with `feature option=...`.
    #[serde(default)]
    pub options: BTreeMap<String, OptionValue>,
    /// Start a new process for every position, for engines whose `ucinewgame` (xboard: `new`)
    /// leaves state.
    #[serde(default)]
    pub fresh_process_per_position: bool,
    /// Seconds one position may take before the engine is killed and the position errors.
    #[serde(default = "default_position_timeout")]
    pub position_timeout_secs: u64,
    /// Seconds the engine may take to answer `uciok` and `readyok` (xboard: `feature done=1`
    /// and `pong`) after it starts.
    #[serde(default = "default_init_timeout")]
    pub init_timeout_secs: u64,
    /// The knobs a sweep may set.
    #[serde(default)]
    pub knobs: Vec<Knob>,
    /// Patterns for the engine's own summary lines (`[report]`): where its true node total
    /// and its counters are when thinking lines or `info` do not carry them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportDef>,
    /// The engine's own benchmark, run once per binary by each worker (`bench = { ... }`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchDef>,
}

/// How a knob's value reaches the engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum KnobKind {
    /// A compile-time `-DNAME=VALUE` define: every value is a build of its own.
    #[default]
    Define,
    /// A UCI option, sent as `setoption name OPTION value V` after the fixed options.
    Option,
}

/// A knob the engine declares; only these can be set by a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Knob {
    /// The name sweeps use: for a define the C preprocessor name (e.g. `NULLMOVE_R_BASE`), for
    /// an option letters, digits, `_` or `-` (e.g. `Hash`).
    pub name: String,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// The value the engine uses when the knob is not set: the source's default for a
    /// define, the engine's announced default for an option.
    pub default: i64,
    /// What the knob means (shown to users).
    #[serde(default)]
    pub description: String,
    /// Define (the default) or UCI option.
    #[serde(default)]
    pub kind: KnobKind,
    /// The engine's option name when it differs from `name` (kind option only), e.g.
    /// `"Skill Level"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
}

impl Knob {
    /// The UCI option this knob sets: `option`, or the knob's name.
    pub fn option_name(&self) -> &str {
        self.option.as_deref().unwrap_or(&self.name)
    }
}
