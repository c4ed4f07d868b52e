//! What a worker is told to build: a [`BuildSpec`], made from an engine definition and a
//! variant's knob values. Never a shell command, only the definition's validated argv template
//! and validated defines.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::engine::{default_build_timeout, BenchDef, EngineDef, KnobKind, Protocol, ReportDef};

/// What a worker needs to build a variant: never a shell command, only a validated argv template
/// and validated defines.
///
/// A binary-only engine's variant has `binary_path` set: nothing is downloaded or built
/// (`source_sha256` is empty and `build_command` is empty), the worker runs that file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BuildSpec {
    /// Build row name (`head_reference`, `KNOB=VALUE`).
    pub name: String,
    /// Engine name.
    pub engine: String,
    /// sha256 of the source snapshot to download; empty for a binary-only engine.
    #[serde(default)]
    pub source_sha256: String,
    /// Compile-time defines of this variant (define knobs only).
    pub defines: BTreeMap<String, i64>,
    /// Argv template with `{source}`, `{out}`, `{defines}`; empty for a binary-only engine.
    pub build_command: Vec<String>,
    /// Seconds the build may take.
    pub build_timeout_secs: u64,
    /// File name of the binary (for a binary-only engine, the last part of `binary_path`).
    pub binary: String,
    /// Absolute path of a binary-only engine's binary on the worker; `None` for an engine
    /// built from source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_path: Option<String>,
    /// Engine protocol.
    pub protocol: Protocol,
    /// Options set before searching, in order: the definition's fixed options, then the
    /// variant's option knobs (by UCI option name).
    pub options: Vec<(String, String)>,
    /// Names of the options in `options` set by the variant's option knobs: the worker checks
    /// each against what the engine announces in its `uci` answer before running positions.
    #[serde(default)]
    pub checked_options: Vec<String>,
    /// One engine process per position.
    pub fresh_process_per_position: bool,
    /// Seconds a position may take.
    pub position_timeout_secs: u64,
    /// Seconds the engine may take to answer `uciok`/`readyok` after starting.
    #[serde(default = "default_init_timeout_secs")]
    pub init_timeout_secs: u64,
    /// The engine definition's `[report]` patterns: where the worker reads the node count
    /// (and counters) of a search when the engine's protocol lines do not carry them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportDef>,
    /// The engine definition's bench: run once per binary on each worker, its node total
    /// reported with the build's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bench: Option<BenchDef>,
}

impl EngineDef {
    /// What a worker needs to build and run the variant `name` with the knob values `knobs`
    /// (by knob name, both kinds) from the source snapshot `source_sha256` (ignored for a
    /// binary-only engine, whose spec carries its `binary_path` instead): the fixed recipe and
    /// options of this definition, never anything the submitter wrote. Define knobs become the
    /// build's `defines`; option knobs become `setoption`s after the fixed `[options]`, by
    /// option name, and are listed in `checked_options` for the worker to check against the
    /// engine's `uci` answer. A name that is no declared knob stays a define, as it always
    /// was (the submission was validated against the knobs, and the build command re-checks
    /// define names).
    pub fn build_spec(
        &self,
        name: &str,
        knobs: BTreeMap<String, i64>,
        source_sha256: &str,
    ) -> BuildSpec {
        let mut defines = BTreeMap::new();
        let mut options: Vec<(String, String)> = self
            .options
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        let mut checked_options = Vec::new();
        for (knob_name, value) in knobs {
            match self.knob(&knob_name) {
                Some(knob) if knob.kind == KnobKind::Option => {
                    options.push((knob.option_name().to_string(), value.to_string()));
                    checked_options.push(knob.option_name().to_string());
                }
                _ => {
                    defines.insert(knob_name, value);
                }
            }
        }
        let binary_only = self.is_binary_only();
        BuildSpec {
            name: name.to_string(),
            engine: self.name.clone(),
            source_sha256: if binary_only {
                String::new()
            } else {
                source_sha256.to_string()
            },
            defines,
            build_command: self
                .build
                .as_ref()
                .map(|b| b.command.clone())
                .unwrap_or_default(),
            build_timeout_secs: self
                .build
                .as_ref()
                .map_or_else(default_build_timeout, |b| b.timeout_secs),
            binary: if binary_only {
                binary_file_name(&self.binary).to_string()
            } else {
                self.binary.clone()
            },
            binary_path: binary_only.then(|| self.binary.clone()),
            protocol: self.protocol,
            options,
            checked_options,
            fresh_process_per_position: self.fresh_process_per_position,
            position_timeout_secs: self.position_timeout_secs,
            init_timeout_secs: self.init_timeout_secs,
            report: self.report.clone(),
            bench: self.bench.clone(),
        }
    }
}

/// The last component of an absolute binary path (for logs and build names).
fn binary_file_name(path: &str) -> &str {
    path.rsplit('/').find(|p| !p.is_empty()).unwrap_or(path)
}

/// How long a worker waits for `uciok` when a spec does not say (specs stored before the
/// field existed).
fn default_init_timeout_secs() -> u64 {
    10
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{BINARY, MINNOW};
    use crate::engine::render_build_command;

    #[test]
    fn xboard_definitions_build_xboard_specs() {
        let def = EngineDef::from_toml(&MINNOW.replace("\"uci\"", "\"xboard\"")).unwrap();
        assert_eq!(
            def.build_spec("b", BTreeMap::new(), "00").protocol,
            Protocol::Xboard
        );
    }

    #[test]
    fn build_spec_splits_defines_from_options() {
        let text = format!(
            "{MINNOW}\n[[knobs]]\nname = \"Hash\"\nkind = \"option\"\nmin = 1\nmax = 64\ndefault = 16\n"
        )
        .replace("options = { Hash = 16, Threads = 1 }", "options = { Threads = 1 }");
        let def = EngineDef::from_toml(&text).unwrap();
        let knobs = BTreeMap::from([("NULLMOVE_R_BASE".to_string(), 4), ("Hash".to_string(), 32)]);
        let spec = def.build_spec("v", knobs, "abc");
        assert_eq!(
            spec.defines,
            BTreeMap::from([("NULLMOVE_R_BASE".to_string(), 4)])
        );
        assert_eq!(
            spec.options,
            vec![
                ("Threads".to_string(), "1".to_string()),
                ("Hash".to_string(), "32".to_string())
            ]
        );
        assert_eq!(spec.checked_options, vec!["Hash".to_string()]);
        assert_eq!(spec.source_sha256, "abc");
        assert_eq!(spec.binary_path, None);
        assert_eq!(spec.binary, "minnow");
        // The split keeps the argv guarantees: only the define reaches the build command.
        let argv = render_build_command(&spec.build_command, "/s", "/o", &spec.defines).unwrap();
        assert_eq!(argv[4], "DEFINES=-DNULLMOVE_R_BASE=4");

        let fish = EngineDef::from_toml(BINARY).unwrap();
        let spec = fish.build_spec(
            "Skill=3",
            BTreeMap::from([("Skill".to_string(), 3)]),
            "ignored",
        );
        assert!(spec.defines.is_empty());
        assert!(spec.build_command.is_empty());
        assert_eq!(spec.source_sha256, "");
        assert_eq!(spec.binary_path.as_deref(), Some("/usr/games/stockfish"));
        assert_eq!(spec.binary, "stockfish");
        assert_eq!(
            spec.options,
            vec![
                ("Threads".to_string(), "1".to_string()),
                ("Skill Level".to_string(), "3".to_string())
            ]
        );
        assert_eq!(spec.checked_options, vec!["Skill Level".to_string()]);
    }
}
