//! Expansion of a config's `knob` + `values`, `[grid]` or `[[variants]]` into the sweep's
//! knob columns and [`Variant`]s. Apart from validation because this is where a config's
//! shorthand becomes the builds a sweep runs: the names and order of table rows are decided
//! here.

use std::collections::BTreeMap;

use super::config::{SweepConfig, VariantConfig, MAX_VALUES};
use super::Variant;
use crate::bounds::MAX_BUILD_NAME;
use crate::engine::EngineDef;
use crate::FieldError;

impl SweepConfig {
    /// The swept knobs (table columns) and the variants, from whichever of `knob`/`values`,
    /// `[grid]` or `[[variants]]` the config uses; none of them is a baseline-only sweep.
    pub(super) fn variants_of(
        &self,
        engine: &EngineDef,
    ) -> Result<(Vec<String>, Vec<Variant>), FieldError> {
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
