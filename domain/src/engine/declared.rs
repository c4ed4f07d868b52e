//! Knobs a sweep declares (`[[knobs]]` in a sweep config) for a define its source has but the
//! registered engine definition does not list: an author's new `#define` is swept without an
//! operator's edit. They join the engine's knobs for that one sweep; whether the source really
//! defines them is checked against the snapshot by [`super::KnobRule`].

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::def::{EngineDef, Knob, KnobKind};
use crate::FieldError;

/// Most knobs one sweep may declare.
pub const MAX_DECLARED_KNOBS: usize = 64;

/// A knob declared in a sweep config: always a compile-time define of a source engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeclaredKnob {
    /// The C preprocessor name, e.g. `NEW_KNOB`.
    pub name: String,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// The source's default, used where the sweep does not set it.
    pub default: i64,
}

impl DeclaredKnob {
    /// The definition's form of this knob.
    pub fn to_knob(&self) -> Knob {
        Knob {
            name: self.name.clone(),
            min: self.min,
            max: self.max,
            default: self.default,
            description: "declared by the sweep".to_string(),
            kind: KnobKind::Define,
            option: None,
        }
    }
}

impl EngineDef {
    /// This definition with `declared` added to its knobs, each checked by the rules of a
    /// definition's own knobs (errors name `knobs[i]` of the sweep config). A name the
    /// engine already declares is refused, and a binary-only engine, which is never compiled,
    /// cannot take any (`knobs`).
    pub fn with_declared_knobs(&self, declared: &[DeclaredKnob]) -> Result<EngineDef, FieldError> {
        if declared.is_empty() {
            return Ok(self.clone());
        }
        if self.is_binary_only() {
            return Err(FieldError::new(
                "knobs",
                format!(
                    "engine `{}` is binary-only: it is never compiled, so a sweep cannot declare knobs for it (sweep its declared option knobs instead)",
                    self.name
                ),
            ));
        }
        if declared.len() > MAX_DECLARED_KNOBS {
            return Err(FieldError::new(
                "knobs",
                format!("at most {MAX_DECLARED_KNOBS} declared knobs"),
            ));
        }
        let mut added: Vec<Knob> = Vec::new();
        for (i, d) in declared.iter().enumerate() {
            if let Some(known) = self.knob(&d.name) {
                return Err(FieldError::new(
                    format!("knobs[{i}].name"),
                    format!(
                        "engine `{}` already declares `{}` (min {}, max {}): set it without declaring it",
                        self.name, d.name, known.min, known.max
                    ),
                ));
            }
            let knob = d.to_knob();
            self.check_knob(&format!("knobs[{i}]"), &knob, &added)?;
            added.push(knob);
        }
        let mut out = self.clone();
        out.knobs.extend(added);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fixtures::{BINARY, MINNOW};

    fn knob(name: &str, min: i64, max: i64, default: i64) -> DeclaredKnob {
        DeclaredKnob {
            name: name.into(),
            min,
            max,
            default,
        }
    }

    #[test]
    fn declared_knobs_join_the_engine_for_one_sweep() {
        let def = EngineDef::from_toml(MINNOW).unwrap();
        let out = def
            .with_declared_knobs(&[knob("NEW_KNOB", 0, 9, 3)])
            .unwrap();
        assert_eq!(out.knobs.len(), def.knobs.len() + 1);
        assert!(out.check_knob_value("v", "NEW_KNOB", 9).is_ok());
        assert!(out.check_knob_value("v", "NEW_KNOB", 10).is_err());
        assert!(
            def.knob("NEW_KNOB").is_none(),
            "the definition is unchanged"
        );
        assert_eq!(def.with_declared_knobs(&[]).unwrap(), def);
    }

    #[test]
    fn bad_declarations_name_the_field() {
        let def = EngineDef::from_toml(MINNOW).unwrap();
        let cases = [
            (
                vec![knob("NULLMOVE_R_BASE", 1, 6, 3)],
                "knobs[0].name",
                "already declares",
            ),
            (
                vec![knob("A", 0, 1, 0), knob("lower", 0, 1, 0)],
                "knobs[1].name",
                "upper-case",
            ),
            (
                vec![knob("A", 0, 1, 0), knob("A", 0, 1, 0)],
                "knobs[1].name",
                "already declared by knobs[0]",
            ),
            (vec![knob("A", 5, 1, 3)], "knobs[0]", "min <= default"),
            (vec![knob("A", 0, 4, 5)], "knobs[0]", "min <= default"),
        ];
        for (declared, field, words) in cases {
            let e = def.with_declared_knobs(&declared).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.problem.contains(words), "{e}");
        }
        let binary = EngineDef::from_toml(BINARY).unwrap();
        let e = binary
            .with_declared_knobs(&[knob("A", 0, 1, 0)])
            .unwrap_err();
        assert_eq!(e.field, "knobs", "{e}");
        assert!(e.problem.contains("binary-only"), "{e}");
    }
}
