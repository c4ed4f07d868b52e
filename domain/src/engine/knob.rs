//! Knobs: what a sweep may vary, as a compile-time define or a UCI option, and the naming
//! rules that keep either from reaching anything but a `-DNAME=INTEGER` word or a
//! `setoption` line.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::EngineDef;
use crate::FieldError;

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

/// Is `name` a plain C identifier in upper case (the only shape a define may take)?
pub fn is_knob_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// Is `name` usable as the name of an option knob (letters, digits, `_`, `-`; 1 to 64)?
pub fn is_option_knob_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Checks a UCI option name: one line, no control characters, no leading or trailing blank,
/// and without the words `name` and `value`, which would make `setoption name X value V`
/// ambiguous.
pub fn check_option_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 128 {
        return Err("the option name must be 1 to 128 characters".into());
    }
    if name.chars().any(char::is_control) {
        return Err(format!(
            "option name `{}` must be a single line without control characters",
            name.escape_debug()
        ));
    }
    if name.trim() != name || name.contains("  ") {
        return Err(format!(
            "option name `{name}` must not start or end with a blank or hold two in a row"
        ));
    }
    if name.split(' ').any(|w| w == "name" || w == "value") {
        return Err(format!(
            "option name `{name}` must not contain the words `name` or `value`"
        ));
    }
    Ok(())
}

impl EngineDef {
    /// Checks knob `i`: its name and range for its kind, where it may be used, and that no
    /// two knobs set the same define or option.
    pub(super) fn validate_knob(&self, i: usize, knob: &Knob) -> Result<(), FieldError> {
        self.check_knob(&format!("knobs[{i}]"), knob, &self.knobs[..i])
    }

    /// Checks `knob`, reported as `field` (`knobs[i]` of the definition or of a sweep
    /// config), against the engine's kind and options and against `earlier`, the knobs
    /// declared before it in the same list (named `knobs[j]` in errors).
    pub(super) fn check_knob(
        &self,
        field: &str,
        knob: &Knob,
        earlier: &[Knob],
    ) -> Result<(), FieldError> {
        match knob.kind {
            KnobKind::Define => {
                if self.is_binary_only() {
                    return Err(FieldError::new(
                        format!("{field}.kind"),
                        "a binary-only engine cannot be compiled, so its knobs must be kind = \"option\"",
                    ));
                }
                if !is_knob_name(&knob.name) {
                    return Err(FieldError::new(
                        format!("{field}.name"),
                        "must be an upper-case C identifier",
                    ));
                }
                if knob.option.is_some() {
                    return Err(FieldError::new(
                        format!("{field}.option"),
                        "only a knob of kind = \"option\" names a UCI option",
                    ));
                }
            }
            KnobKind::Option => {
                if !is_option_knob_name(&knob.name) {
                    return Err(FieldError::new(
                        format!("{field}.name"),
                        "must be 1 to 64 letters, digits, '_' or '-'",
                    ));
                }
                let field = if knob.option.is_some() {
                    format!("{field}.option")
                } else {
                    format!("{field}.name")
                };
                check_option_name(knob.option_name()).map_err(|p| FieldError::new(&field, p))?;
                if self.options.contains_key(knob.option_name()) {
                    return Err(FieldError::new(
                        field,
                        format!(
                            "`{}` is also a fixed option in [options]; a knob and a fixed value cannot both set it",
                            knob.option_name()
                        ),
                    ));
                }
            }
        }
        if knob.min > knob.max || knob.default < knob.min || knob.default > knob.max {
            return Err(FieldError::new(field, "needs min <= default <= max"));
        }
        for (j, other) in earlier.iter().enumerate() {
            if other.name == knob.name {
                return Err(FieldError::new(
                    format!("{field}.name"),
                    format!("`{}` is already declared by knobs[{j}]", knob.name),
                ));
            }
            if other.kind == KnobKind::Option
                && knob.kind == KnobKind::Option
                && other.option_name() == knob.option_name()
            {
                return Err(FieldError::new(
                    format!("{field}.option"),
                    format!(
                        "option `{}` is already set by knobs[{j}]",
                        knob.option_name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_names() {
        assert!(is_knob_name("NULLMOVE_R_BASE"));
        assert!(!is_knob_name("lower"));
        assert!(!is_knob_name("A-B"));
        assert!(!is_knob_name("9X"));
        assert!(!is_knob_name(""));
    }

    #[test]
    fn option_names() {
        assert!(check_option_name("Skill Level").is_ok());
        assert!(check_option_name("UCI_Elo").is_ok());
        assert!(check_option_name("a\rb").is_err());
        assert!(check_option_name("Use  NNUE").is_err());
        assert!(check_option_name("name").is_err());
        assert!(check_option_name(&"x".repeat(129)).is_err());
        assert!(is_option_knob_name("Hash"));
        assert!(is_option_knob_name("skill-level_2"));
        assert!(!is_option_knob_name("Skill Level"));
        assert!(!is_option_knob_name(""));
    }
}
