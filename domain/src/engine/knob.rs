//! Knob rules: the naming rules that keep a knob (a compile-time define or a UCI option, see
//! [`Knob`]) from reaching anything but a `-DNAME=INTEGER` word or a `setoption` line, and
//! the checks of an engine's knobs.

use super::def::{EngineDef, Knob, KnobKind};
use crate::FieldError;

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
            KnobKind::Define => self.check_define_knob(field, knob)?,
            KnobKind::Option => self.check_option_knob(field, knob)?,
        }
        if knob.min > knob.max || knob.default < knob.min || knob.default > knob.max {
            return Err(FieldError::new(field, "needs min <= default <= max"));
        }
        check_unique(field, knob, earlier)
    }

    /// The rules of a define knob: a source engine, a C identifier, no option name.
    fn check_define_knob(&self, field: &str, knob: &Knob) -> Result<(), FieldError> {
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
        Ok(())
    }

    /// The rules of an option knob: a plain name, an option name `setoption` can carry, not
    /// also a fixed option.
    fn check_option_knob(&self, field: &str, knob: &Knob) -> Result<(), FieldError> {
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
        Ok(())
    }
}

/// Refuses `knob` when a knob of `earlier` has its name or sets the same option.
fn check_unique(field: &str, knob: &Knob, earlier: &[Knob]) -> Result<(), FieldError> {
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
