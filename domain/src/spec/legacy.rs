//! Decoding of specs as older versions stored them. Kept apart so the current [`SweepSpec`]
//! stays the one shape the rest of the code sees, and so what is kept only for old databases
//! is in one place (with the `serde(from)` on [`SweepSpec`] that routes decoding here).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::config::BaselineConfig;
use super::{SweepSpec, Variant};
use crate::crosscheck::share::Share;
use crate::limit::Limit;

/// A spec as stored, also accepting the single-knob, single-depth shape that sweeps stored
/// before several knobs and limits existed (`knob`, `values`, `depth`), so old databases stay
/// readable.
#[derive(Deserialize)]
pub(super) struct StoredSpec {
    name: String,
    engine: String,
    #[serde(default)]
    knobs: Vec<String>,
    #[serde(default)]
    variants: Vec<Variant>,
    #[serde(default)]
    limits: Vec<Limit>,
    suites: Vec<String>,
    chunk_size: u32,
    baseline: BaselineConfig,
    #[serde(default)]
    description: String,
    #[serde(default)]
    counters: Vec<String>,
    #[serde(default)]
    recompute: bool,
    #[serde(default)]
    cross_check: Share,
    #[serde(default = "crate::crosscheck::share::default_min")]
    cross_check_min: u32,
    #[serde(default)]
    priority: super::Priority,
    #[serde(default)]
    speed: Option<super::SpeedSpec>,
    #[serde(default)]
    stages: Vec<super::Stage>,
    #[serde(default)]
    search: Option<super::Search>,
    #[serde(default)]
    knob: Option<String>,
    #[serde(default)]
    values: Vec<i64>,
    #[serde(default)]
    depth: Option<u32>,
}

impl From<StoredSpec> for SweepSpec {
    fn from(s: StoredSpec) -> Self {
        let mut knobs = s.knobs;
        let mut variants = s.variants;
        if let Some(knob) = s.knob {
            variants = s
                .values
                .iter()
                .map(|v| Variant {
                    name: format!("{knob}={v}"),
                    defines: BTreeMap::from([(knob.clone(), *v)]),
                    source: None,
                })
                .collect();
            knobs = vec![knob];
        }
        let mut limits = s.limits;
        if let Some(d) = s.depth {
            limits = vec![Limit::Depth(d)];
        }
        SweepSpec {
            name: s.name,
            engine: s.engine,
            knobs,
            variants,
            limits,
            suites: s.suites,
            stages: s.stages,
            search: s.search,
            chunk_size: s.chunk_size,
            baseline: s.baseline,
            description: s.description,
            counters: s.counters,
            recompute: s.recompute,
            cross_check: s.cross_check,
            cross_check_min: s.cross_check_min,
            priority: s.priority,
            speed: s.speed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_stored_before_several_knobs_still_decode() {
        let old = r#"{"name":"s","engine":"minnow","knob":"CEIL","values":[0,300],"suites":["a"],
                      "depth":7,"chunk_size":10,"baseline":{"name":"head_reference","defines":{}},
                      "description":""}"#;
        let spec: SweepSpec = serde_json::from_str(old).unwrap();
        assert_eq!(spec.limits, vec![Limit::Depth(7)]);
        assert_eq!(spec.knobs, vec!["CEIL".to_string()]);
        assert_eq!(spec.variants[1].name, "CEIL=300");
        let again: SweepSpec =
            serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(again, spec);
    }
}
