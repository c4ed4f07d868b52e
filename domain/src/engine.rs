//! Engine definitions: what the coordinator's operator registers about an engine, and the rules
//! that keep submitters from ever reaching a shell on a worker.
//!
//! A submitter only chooses knob values; those are validated against the declared knobs, and
//! the build command is a fixed argv template whose placeholders are filled with validated
//! values only. Nothing is ever run through a shell.
//!
//! An engine is either built from source (`[source]` and `[build]`, `binary` a file name) or
//! binary-only (neither, `binary` an absolute path on the workers). A knob is either a
//! compile-time define (`kind = "define"`, source engines only) or a UCI option set with
//! `setoption` (`kind = "option"`), so binary-only engines can be swept too.

use std::collections::BTreeMap;

use crate::FieldError;

mod declared;
mod def;
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures;
mod knob;
mod report;
mod search;

pub use declared::{DeclaredKnob, MAX_DECLARED_KNOBS};
pub(crate) use def::default_build_timeout;
pub use def::{BuildDef, EngineDef, EngineKind, Knob, KnobKind, OptionValue, Protocol, SourceDef};
pub use knob::{check_option_name, is_knob_name, is_option_knob_name};
pub use report::{BenchDef, BenchPattern, ReportDef, ReportPatterns};
pub use search::{
    KnobRule, KnobSearch, DEFAULT_KNOB_EXTENSIONS, DEFAULT_KNOB_PATTERN, MAX_KNOB_EXTENSIONS,
    MAX_KNOB_PATTERN, MAX_SCANNED_FILE, PLACEHOLDER_NAME,
};

/// Placeholder for the directory holding the unpacked engine source.
pub const PLACEHOLDER_SOURCE: &str = "{source}";
/// Placeholder for the full path of the binary the build must write.
pub const PLACEHOLDER_OUT: &str = "{out}";
/// Placeholder for the compiler defines, rendered as `-DNAME=VALUE` words joined by spaces.
pub const PLACEHOLDER_DEFINES: &str = "{defines}";

impl EngineDef {
    /// Parses and validates a definition from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, FieldError> {
        let def: EngineDef = crate::decode::deserialize_toml(text)?;
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
        match (&self.source, &self.build) {
            (Some(source), Some(build)) => {
                if self.binary.is_empty()
                    || self.binary.contains('/')
                    || self.binary.starts_with('.')
                {
                    return Err(FieldError::new(
                        "binary",
                        "must be a plain file name for an engine built from [source]",
                    ));
                }
                validate_build(build)?;
                search::validate_rule(source)?;
            }
            (None, None) => {
                if !self.binary.starts_with('/') {
                    return Err(FieldError::new(
                        "binary",
                        "must be an absolute path for a binary-only engine (one without [source] and [build])",
                    ));
                }
                if self.binary.chars().any(char::is_control) || self.binary.len() > 4096 {
                    return Err(FieldError::new(
                        "binary",
                        "must be a path of at most 4096 characters without control characters",
                    ));
                }
            }
            (Some(_), None) => {
                return Err(FieldError::new(
                    "build",
                    "an engine with [source] needs [build] (or drop [source] and give `binary` as an absolute path for a binary-only engine)",
                ))
            }
            (None, Some(_)) => {
                return Err(FieldError::new(
                    "source",
                    "an engine with [build] needs [source] (or drop [build] and give `binary` as an absolute path for a binary-only engine)",
                ))
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
            self.validate_knob(i, knob)?;
        }
        if let Some(report) = &self.report {
            ReportPatterns::compile(report)?;
        }
        if let Some(bench) = &self.bench {
            BenchPattern::compile(bench)?;
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

    /// Source engine or binary-only engine.
    pub fn kind(&self) -> EngineKind {
        if self.is_binary_only() {
            EngineKind::Binary
        } else {
            EngineKind::Source
        }
    }

    /// Is this an engine run from a prebuilt binary (no `[source]`, no `[build]`)?
    pub fn is_binary_only(&self) -> bool {
        self.source.is_none() && self.build.is_none()
    }

    /// The declared knob called `name`, if any.
    pub fn knob(&self, name: &str) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.name == name)
    }

    /// Checks that `name = value` may be set; `field` names the place in the submission.
    pub fn check_knob_value(&self, field: &str, name: &str, value: i64) -> Result<(), FieldError> {
        let knob = self.knob(name).ok_or_else(|| {
            let declared: Vec<&str> = self.knobs.iter().map(|k| k.name.as_str()).collect();
            // An author's new define is declared in the sweep config, not here.
            let hint = if self.is_binary_only() {
                ""
            } else {
                "; a define the source has can be declared in the sweep config with [[knobs]]"
            };
            FieldError::new(
                field,
                format!(
                    "`{name}` is not a declared knob of engine `{}` (declared: {}){hint}",
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

/// Checks a build recipe: a real program, `{out}` somewhere, known placeholders only.
fn validate_build(build: &BuildDef) -> Result<(), FieldError> {
    let Some(program) = build.command.first() else {
        return Err(FieldError::new("build.command", "must name a program"));
    };
    if program.contains('{') {
        return Err(FieldError::new(
            "build.command[0]",
            "the program itself cannot be a placeholder",
        ));
    }
    if !build.command.iter().any(|a| a.contains(PLACEHOLDER_OUT)) {
        return Err(FieldError::new(
            "build.command",
            "must contain {out} so the build writes where the worker expects",
        ));
    }
    for (i, arg) in build.command.iter().enumerate() {
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
    Ok(())
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
    use super::fixtures::{BINARY, MINNOW};
    use super::*;

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
        let build = def.build.expect("a source engine has a build");
        let mut d = BTreeMap::new();
        d.insert("B_KNOB".to_string(), -2);
        d.insert("A_KNOB".to_string(), 300);
        let argv = render_build_command(&build.command, "/src", "/out/minnow", &d).unwrap();
        assert_eq!(argv[3], "/src");
        assert_eq!(argv[4], "DEFINES=-DA_KNOB=300 -DB_KNOB=-2");
        assert_eq!(argv[5], "OUT=/out/minnow");
        d.insert("X; rm -rf /".to_string(), 1);
        assert!(render_build_command(&build.command, "/s", "/o", &d).is_err());
    }

    #[test]
    fn rejects_bad_templates() {
        let bad = MINNOW.replace("OUT={out}", "OUT={output}");
        assert!(EngineDef::from_toml(&bad).is_err());
        let unknown = format!("{MINNOW}\nshell = \"sh\"\n");
        let err = EngineDef::from_toml(&unknown).unwrap_err();
        assert!(err.problem.contains("shell"), "{err}");
    }

    fn err(text: &str) -> FieldError {
        EngineDef::from_toml(text).unwrap_err()
    }

    #[test]
    fn xboard_definitions() {
        let def = EngineDef::from_toml(&MINNOW.replace("\"uci\"", "\"xboard\"")).unwrap();
        assert_eq!(def.protocol, Protocol::Xboard);
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
    fn binary_only_engines_parse() {
        let def = EngineDef::from_toml(BINARY).unwrap();
        assert_eq!(def.kind(), EngineKind::Binary);
        assert!(def.source.is_none() && def.build.is_none());
        assert_eq!(def.knobs[0].kind, KnobKind::Option);
        assert_eq!(def.knobs[0].option_name(), "Hash");
        assert_eq!(def.knobs[1].option_name(), "Skill Level");
        assert_eq!(
            EngineDef::from_toml(MINNOW).unwrap().kind(),
            EngineKind::Source
        );
        assert_eq!(
            EngineDef::from_toml(MINNOW).unwrap().knobs[0].kind,
            KnobKind::Define
        );
    }

    #[test]
    fn engine_shape_errors_name_the_field() {
        let relative = BINARY.replace("/usr/games/stockfish", "stockfish");
        let e = err(&relative);
        assert_eq!(e.field, "binary", "{e}");
        assert!(e.problem.contains("absolute path"), "{e}");

        let absolute_with_source =
            MINNOW.replace("binary = \"minnow\"", "binary = \"/bin/minnow\"");
        let e = err(&absolute_with_source);
        assert_eq!(e.field, "binary", "{e}");
        assert!(e.problem.contains("plain file name"), "{e}");

        let no_build = MINNOW.replace(
            "[build]\ncommand = [\"make\", \"-s\", \"-C\", \"{source}\", \"DEFINES={defines}\", \"OUT={out}\"]\n",
            "",
        );
        assert_ne!(no_build, MINNOW);
        let e = err(&no_build);
        assert_eq!(e.field, "build", "{e}");
        assert!(e.problem.contains("needs [build]"), "{e}");

        let no_source = MINNOW.replace("[source]\npath = \"../../engines/minnow\"\n", "");
        assert_ne!(no_source, MINNOW);
        let e = err(&no_source);
        assert_eq!(e.field, "source", "{e}");

        let control = BINARY.replace("/usr/games/stockfish", "/usr/games/sto\\tckfish");
        assert_eq!(err(&control).field, "binary");
    }

    #[test]
    fn knob_kind_errors_name_the_field() {
        // A define knob on an engine that cannot be compiled.
        let define = BINARY.replacen("kind = \"option\"\n", "", 1);
        let e = err(&define);
        assert_eq!(e.field, "knobs[0].kind", "{e}");
        assert!(e.problem.contains("cannot be compiled"), "{e}");
        let explicit = BINARY.replacen("kind = \"option\"", "kind = \"define\"", 1);
        assert_eq!(err(&explicit).field, "knobs[0].kind");
        let unknown = BINARY.replacen("kind = \"option\"", "kind = \"env\"", 1);
        let e = err(&unknown);
        assert!(e.field.starts_with("knobs[0].kind"), "{e}");
        assert!(e.problem.contains("unknown variant"), "{e}");

        // `option` belongs to option knobs only.
        let on_define = MINNOW.replace("default = 3\n", "default = 3\noption = \"R\"\n");
        assert_eq!(err(&on_define).field, "knobs[0].option");

        // Option names: one line, unambiguous in `setoption`.
        for bad in ["Skill\\nLevel", "Skill value", " Skill", "Skill\\u0007", ""] {
            let text = BINARY.replace("option = \"Skill Level\"", &format!("option = \"{bad}\""));
            let e = err(&text);
            assert_eq!(e.field, "knobs[1].option", "{bad}: {e}");
        }
        // A knob name is checked by its kind's rule.
        let bad_name = BINARY.replace("name = \"Hash\"", "name = \"Ha sh\"");
        assert_eq!(err(&bad_name).field, "knobs[0].name");
        let dup = BINARY.replace("name = \"Skill\"", "name = \"Hash\"");
        let e = err(&dup);
        assert_eq!(e.field, "knobs[1].name", "{e}");
        assert!(e.problem.contains("already declared"), "{e}");
        let same_option = BINARY.replace("option = \"Skill Level\"", "option = \"Hash\"");
        let e = err(&same_option);
        assert_eq!(e.field, "knobs[1].option", "{e}");
        // A knob cannot fight a fixed option over the same setting.
        let fixed = BINARY.replace("{ Threads = 1 }", "{ Threads = 1, Hash = 16 }");
        let e = err(&fixed);
        assert_eq!(e.field, "knobs[0].name", "{e}");
        assert!(e.problem.contains("fixed option"), "{e}");
        let range = BINARY.replace("default = 16", "default = 99");
        assert_eq!(err(&range).field, "knobs[0]");
    }
}
