//! `[search]`: validated into a [`Search`] that knows the cell it starts from.

use super::config::{SweepConfig, MAX_SEARCH_ROUNDS};
use super::{Search, Variant};
use crate::engine::EngineDef;
use crate::FieldError;

/// The strategies a `[search]` may name.
const STRATEGIES: [&str; 1] = ["coordinate"];

impl SweepConfig {
    /// The config's `[search]`, validated against its `[grid]` expanded into `variants`;
    /// `None` without one.
    pub(super) fn search_of(
        &self,
        engine: &EngineDef,
        variants: &[Variant],
    ) -> Result<Option<Search>, FieldError> {
        let Some(search) = &self.search else {
            return Ok(None);
        };
        if !STRATEGIES.contains(&search.strategy.as_str()) {
            return Err(FieldError::new(
                "search.strategy",
                format!(
                    "unknown strategy `{}` (known: {})",
                    search.strategy,
                    STRATEGIES.join(", ")
                ),
            ));
        }
        if self.grid.is_empty() {
            return Err(FieldError::new(
                "search",
                "a search needs a [grid] of candidate values for each knob",
            ));
        }
        if self
            .stages
            .get(1)
            .is_some_and(|s| s.max_solved_loss.is_some())
        {
            return Err(FieldError::new(
                "stages[1].max_solved_loss",
                "after a search, the search's own max_solved_loss decides who is promoted: set it in [search]",
            ));
        }
        let max_rounds = match search.max_rounds.unwrap_or(3) {
            n if (1..=MAX_SEARCH_ROUNDS).contains(&n) => n as u32,
            n => {
                return Err(FieldError::new(
                    "search.max_rounds",
                    format!("{n} is out of range (1 to {MAX_SEARCH_ROUNDS})"),
                ))
            }
        };
        let max_solved_loss = match search.max_solved_loss.unwrap_or(0) {
            n if (0..=i64::from(u32::MAX)).contains(&n) => n as u32,
            n => {
                return Err(FieldError::new(
                    "search.max_solved_loss",
                    format!("{n} is out of range (0 or more positions)"),
                ))
            }
        };
        Ok(Some(Search {
            strategy: search.strategy.clone(),
            max_rounds,
            max_solved_loss,
            start: self.start_cell(engine, variants)?,
        }))
    }

    /// The grid cell with every knob at the baseline's setting (its define, else the
    /// engine's default): where a coordinate search starts, so it must be in the grid.
    fn start_cell(&self, engine: &EngineDef, variants: &[Variant]) -> Result<String, FieldError> {
        let mut start = std::collections::BTreeMap::new();
        for (knob, values) in &self.grid {
            let at = match self.baseline.defines.get(knob) {
                Some(v) => *v,
                None => engine.knob(knob).map_or(0, |k| k.default),
            };
            if !values.contains(&at) {
                return Err(FieldError::new(
                    format!("grid.{knob}"),
                    format!(
                        "a coordinate search starts at the baseline's setting of each knob: give {at} (`{knob}` of the baseline) among its values"
                    ),
                ));
            }
            start.insert(knob.clone(), at);
        }
        variants
            .iter()
            .find(|v| v.defines == start)
            .map(|v| v.name.clone())
            .ok_or_else(|| {
                FieldError::new("grid", "the grid has no cell at the baseline's settings")
            })
    }
}
