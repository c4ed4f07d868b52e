//! Expansion of a config's `knob` + `values`, `[grid]` or `[[variants]]` into the sweep's
//! knob columns and [`Variant`]s. Apart from validation because this is where a config's
//! shorthand becomes the builds a sweep runs: the names and order of table rows are decided
//! here.

use std::collections::BTreeMap;

use super::config::{SweepConfig, VariantConfig, MAX_VALUES};
use super::validate::check_rev;
use super::Variant;
use crate::bounds::MAX_BUILD_NAME;
use crate::engine::EngineDef;
use crate::source::{SourceKind, SourceOrigin, SourceProvenance};
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
            (None, None) => {
                let git = self.source.as_ref().and_then(|s| s.git.as_deref());
                explicit_variants(engine, &self.variants, &self.baseline.name, git)?
            }
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
            source: None,
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
            source: None,
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
    git: Option<&str>,
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
        let source = variant_source(engine, &field, v, git)?;
        if v.defines.is_empty() && source.is_none() {
            return Err(FieldError::new(
                format!("{field}.defines"),
                "set at least one knob (or `rev` / `sha256` for other code)",
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
        if let Some(j) = out
            .iter()
            .position(|o| o.defines == v.defines && o.source == source)
        {
            return Err(FieldError::new(
                format!("{field}.defines"),
                format!("the same settings as variants[{j}]"),
            ));
        }
        out.push(Variant {
            name: v.name.clone(),
            defines: v.defines.clone(),
            source,
        });
    }
    Ok((knobs, out))
}

/// The code of its own variant `v` (at `field`) asks for, as far as a config can say it: a
/// `rev` of the sweep's git repository `git` (resolved at submission) or an uploaded
/// snapshot's sha256.
fn variant_source(
    engine: &EngineDef,
    field: &str,
    v: &VariantConfig,
    git: Option<&str>,
) -> Result<Option<SourceProvenance>, FieldError> {
    let (key, origin, sha256) = match (&v.rev, &v.sha256) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(FieldError::new(field, "give `rev` or `sha256`, not both"))
        }
        (Some(rev), None) => {
            let key = format!("{field}.rev");
            let Some(url) = git else {
                return Err(FieldError::new(
                    key,
                    "a variant's `rev` is a revision of the sweep's git repository: set `[source] git`",
                ));
            };
            check_rev(&key, rev)?;
            let origin = SourceOrigin {
                kind: SourceKind::Git,
                git_url: Some(url.to_string()),
                git_rev: Some(rev.clone()),
                ..SourceOrigin::default()
            };
            (key, origin, String::new())
        }
        (None, Some(sha)) => {
            let key = format!("{field}.sha256");
            if !crate::source::is_sha256(sha) {
                return Err(FieldError::new(key, "must be 64 lowercase hex digits"));
            }
            let origin = SourceOrigin {
                kind: SourceKind::Uploaded,
                ..SourceOrigin::default()
            };
            (key, origin, sha.clone())
        }
    };
    if engine.is_binary_only() {
        return Err(FieldError::new(
            key,
            format!(
                "engine `{}` is binary-only: it has no source to replace",
                engine.name
            ),
        ));
    }
    Ok(Some(SourceProvenance { sha256, origin }))
}
