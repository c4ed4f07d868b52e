//! Engine definitions: what the coordinator's operator registers about an engine, and the rules
//! that keep submitters from ever reaching a shell on a worker.
//!
//! A submitter only chooses knob values; those are validated against the declared knobs, and
//! the build command is a fixed argv template whose placeholders are filled with validated
//! values only. Nothing is ever run through a shell.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::FieldError;

/// Placeholder for the directory holding the unpacked engine source.
pub const PLACEHOLDER_SOURCE: &str = "{source}";
/// Placeholder for the full path of the binary the build must write.
pub const PLACEHOLDER_OUT: &str = "{out}";
/// Placeholder for the compiler defines, rendered as `-DNAME=VALUE` words joined by spaces.
pub const PLACEHOLDER_DEFINES: &str = "{defines}";

/// Protocol spoken by an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The Universal Chess Interface.
    Uci,
    /// The Chess Engine Communication Protocol (xboard/WinBoard), version 2 with a
    /// protocol-1 fallback.
    Xboard,
}

/// A compile-time knob the engine declares; only these can be set by a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Knob {
    /// The C preprocessor name, e.g. `NULLMOVE_R_BASE`.
    pub name: String,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// The value the source uses when the knob is not defined.
    pub default: i64,
    /// What the knob means (shown to users).
    #[serde(default)]
    pub description: String,
}

/// A fixed engine option value (number or string), sent at startup (UCI `setoption`,
/// xboard `option NAME=VALUE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceDef {
    /// Directory with the source; relative paths are resolved against the definition file.
    pub path: String,
    /// Names (files or directories, at any depth) left out of the snapshot, e.g. build outputs.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// How a variant is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildDef {
    /// Argv template: the program and its arguments, with `{source}`, `{out}` and `{defines}`.
    pub command: Vec<String>,
    /// Seconds a build may take before it is killed and reported as failed.
    #[serde(default = "default_build_timeout")]
    pub timeout_secs: u64,
}

fn default_build_timeout() -> u64 {
    300
}

fn default_position_timeout() -> u64 {
    120
}

fn default_init_timeout() -> u64 {
    10
}

/// An engine as registered by whoever runs the coordinator (`configs/engines/*.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineDef {
    /// Name sweeps refer to.
    pub name: String,
    /// Protocol the engine speaks.
    pub protocol: Protocol,
    /// File name of the built binary (written to `{out}`).
    pub binary: String,
    /// Source location.
    pub source: SourceDef,
    /// Build recipe.
    pub build: BuildDef,
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
}

/// Is `name` a plain C identifier in upper case (the only shape a define may take)?
pub fn is_knob_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

impl EngineDef {
    /// Parses and validates a definition from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, FieldError> {
        let def: EngineDef = crate::spec::deserialize_toml(text)?;
        def.validate()?;
        Ok(def)
    }

    /// Checks the definition's own consistency: names, template placeholders, knob ranges.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(FieldError::new(
                "name",
                "must be letters, digits, '-' or '_'",
            ));
        }
        if self.binary.is_empty() || self.binary.contains('/') || self.binary.starts_with('.') {
            return Err(FieldError::new("binary", "must be a plain file name"));
        }
        let Some(program) = self.build.command.first() else {
            return Err(FieldError::new("build.command", "must name a program"));
        };
        if program.contains('{') {
            return Err(FieldError::new(
                "build.command[0]",
                "the program itself cannot be a placeholder",
            ));
        }
        if !self
            .build
            .command
            .iter()
            .any(|a| a.contains(PLACEHOLDER_OUT))
        {
            return Err(FieldError::new(
                "build.command",
                "must contain {out} so the build writes where the worker expects",
            ));
        }
        for (i, arg) in self.build.command.iter().enumerate() {
            let stripped = arg
                .replace(PLACEHOLDER_SOURCE, "")
                .replace(PLACEHOLDER_OUT, "")
                .replace(PLACEHOLDER_DEFINES, "");
            if stripped.contains('{') || stripped.contains('}') {
                return Err(FieldError::new(
                    format!("build.command[{i}]"),
                    "unknown placeholder (known: {source}, {out}, {defines})",
                ));
            }
        }
        self.validate_options()?;
        if self.position_timeout_secs == 0 {
            return Err(FieldError::new(
                "position_timeout_secs",
                "must be at least 1",
            ));
        }
        for (i, knob) in self.knobs.iter().enumerate() {
            if !is_knob_name(&knob.name) {
                return Err(FieldError::new(
                    format!("knobs[{i}].name"),
                    "must be an upper-case C identifier",
                ));
            }
            if knob.min > knob.max || knob.default < knob.min || knob.default > knob.max {
                return Err(FieldError::new(
                    format!("knobs[{i}]"),
                    "needs min <= default <= max",
                ));
            }
        }
        Ok(())
    }

    /// Option names and values travel on one protocol line each; xboard's `option NAME=VALUE`
    /// additionally splits at the first `=`, so a name must not contain one.
    fn validate_options(&self) -> Result<(), FieldError> {
        for (name, value) in &self.options {
            let field = format!("options.{name}");
            if name.trim().is_empty() {
                return Err(FieldError::new("options", "an option name is empty"));
            }
            if name.contains(['\n', '\r']) || value.to_string().contains(['\n', '\r']) {
                return Err(FieldError::new(field, "contains a line break"));
            }
            if self.protocol == Protocol::Xboard && name.contains('=') {
                return Err(FieldError::new(
                    field,
                    "an xboard option name cannot contain `=` (it is sent as `option NAME=VALUE`)",
                ));
            }
        }
        Ok(())
    }

    /// The declared knob called `name`, if any.
    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name == name)
    }

    /// Checks that `name = value` may be set; `field` names the place in the submission.
    pub fn check_knob_value(&self, field: &str, name: &str, value: i64) -> Result<(), FieldError> {
        let knob = self.knob(name).ok_or_else(|| {
            let declared: Vec<&str> = self.knobs.iter().map(|k| k.name.as_str()).collect();
            FieldError::new(
                field,
                format!(
                    "`{name}` is not a declared knob of engine `{}` (declared: {})",
                    self.name,
                    declared.join(", ")
                ),
            )
        })?;
        if value < knob.min || value > knob.max {
            return Err(FieldError::new(
                field,
                format!(
                    "{value} is out of range for {name} (min {}, max {})",
                    knob.min, knob.max
                ),
            ));
        }
        Ok(())
    }
}

impl EngineDef {
    /// What a worker needs to build and run the variant `name` with `defines` from the source
    /// snapshot `source_sha256`: the fixed recipe and options of this definition, never
    /// anything the submitter wrote.
    pub fn build_spec(
        &self,
        name: &str,
        defines: BTreeMap<String, i64>,
        source_sha256: &str,
    ) -> crate::wire::BuildSpec {
        crate::wire::BuildSpec {
            name: name.to_string(),
            engine: self.name.clone(),
            source_sha256: source_sha256.to_string(),
            defines,
            build_command: self.build.command.clone(),
            build_timeout_secs: self.build.timeout_secs,
            binary: self.binary.clone(),
            protocol: self.protocol,
            options: self
                .options
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            fresh_process_per_position: self.fresh_process_per_position,
            position_timeout_secs: self.position_timeout_secs,
            init_timeout_secs: self.init_timeout_secs,
        }
    }
}

/// Renders `-DNAME=VALUE` words for a set of defines, in name order.
pub fn render_defines(defines: &BTreeMap<String, i64>) -> String {
    defines
        .iter()
        .map(|(k, v)| format!("-D{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fills a build template. Every define is re-checked here (the worker calls this too), so a
/// tampered job cannot smuggle anything but `-DNAME=INTEGER` words into the argv.
pub fn render_build_command(
    template: &[String],
    source_dir: &str,
    out: &str,
    defines: &BTreeMap<String, i64>,
) -> Result<Vec<String>, FieldError> {
    for name in defines.keys() {
        if !is_knob_name(name) {
            return Err(FieldError::new(
                "defines",
                format!("`{name}` is not a valid define name"),
            ));
        }
    }
    let defines = render_defines(defines);
    Ok(template
        .iter()
        .map(|arg| {
            arg.replace(PLACEHOLDER_SOURCE, source_dir)
                .replace(PLACEHOLDER_OUT, out)
                .replace(PLACEHOLDER_DEFINES, &defines)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINNOW: &str = r#"
name = "minnow"
protocol = "uci"
binary = "minnow"
options = { Hash = 16, Threads = 1 }
[source]
path = "../../engines/minnow"
[build]
command = ["make", "-s", "-C", "{source}", "DEFINES={defines}", "OUT={out}"]
[[knobs]]
name = "NULLMOVE_R_BASE"
min = 1
max = 6
default = 3
"#;

    #[test]
    fn parses_and_checks_knobs() {
        let def = EngineDef::from_toml(MINNOW).unwrap();
        assert_eq!(def.options["Hash"], OptionValue::Int(16));
        assert!(def.check_knob_value("v", "NULLMOVE_R_BASE", 4).is_ok());
        let err = def
            .check_knob_value("values[0]", "NULLMOVE_R_BASE", 9)
            .unwrap_err();
        assert_eq!(err.field, "values[0]");
        assert!(err.problem.contains("out of range"));
        assert!(def
            .check_knob_value("knob", "CC", 1)
            .unwrap_err()
            .problem
            .contains("not a declared"));
    }

    #[test]
    fn renders_argv_without_shell() {
        let def = EngineDef::from_toml(MINNOW).unwrap();
        let mut d = BTreeMap::new();
        d.insert("B_KNOB".to_string(), -2);
        d.insert("A_KNOB".to_string(), 300);
        let argv = render_build_command(&def.build.command, "/src", "/out/minnow", &d).unwrap();
        assert_eq!(argv[3], "/src");
        assert_eq!(argv[4], "DEFINES=-DA_KNOB=300 -DB_KNOB=-2");
        assert_eq!(argv[5], "OUT=/out/minnow");
        d.insert("X; rm -rf /".to_string(), 1);
        assert!(render_build_command(&def.build.command, "/s", "/o", &d).is_err());
    }

    #[test]
    fn rejects_bad_templates() {
        let bad = MINNOW.replace("OUT={out}", "OUT={output}");
        assert!(EngineDef::from_toml(&bad).is_err());
        let unknown = format!("{MINNOW}\nshell = \"sh\"\n");
        let err = EngineDef::from_toml(&unknown).unwrap_err();
        assert!(err.problem.contains("shell"), "{err}");
    }

    #[test]
    fn xboard_definitions() {
        let def = EngineDef::from_toml(&MINNOW.replace("\"uci\"", "\"xboard\"")).unwrap();
        assert_eq!(def.protocol, Protocol::Xboard);
        assert_eq!(
            def.build_spec("b", BTreeMap::new(), "00").protocol,
            Protocol::Xboard
        );
        let json = serde_json::to_string(&Protocol::Xboard).unwrap();
        assert_eq!(json, "\"xboard\"");

        let spaced = MINNOW
            .replace("\"uci\"", "\"xboard\"")
            .replace("Threads = 1", "\"Multi-PV Margin\" = 0");
        assert!(EngineDef::from_toml(&spaced).is_ok());
        let eq = MINNOW
            .replace("\"uci\"", "\"xboard\"")
            .replace("Threads = 1", "\"a=b\" = 0");
        let err = EngineDef::from_toml(&eq).unwrap_err();
        assert_eq!(err.field, "options.a=b");
        assert!(err.problem.contains("`=`"), "{err}");
        // UCI option names may contain `=`; only xboard splits on it.
        assert!(EngineDef::from_toml(&MINNOW.replace("Threads = 1", "\"a=b\" = 0")).is_ok());
        let broken = MINNOW.replace("Threads = 1", "X = \"1\\nquit\"");
        assert_eq!(
            EngineDef::from_toml(&broken).unwrap_err().field,
            "options.X"
        );
        let unknown = MINNOW.replace("\"uci\"", "\"cecp\"");
        assert!(EngineDef::from_toml(&unknown)
            .unwrap_err()
            .problem
            .contains("cecp"));
    }

    #[test]
    fn knob_names() {
        assert!(is_knob_name("NULLMOVE_R_BASE"));
        assert!(!is_knob_name("lower"));
        assert!(!is_knob_name("A-B"));
        assert!(!is_knob_name("9X"));
        assert!(!is_knob_name(""));
    }
}
