//! Sweep configs as submitted (TOML or JSON) and their validation into a [`SweepSpec`].
//!
//! Unknown fields are rejected so that a typo (`depht = 9`) is an error rather than a silently
//! ignored setting; every error names the field.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::EngineDef;
use crate::FieldError;

/// The name of the baseline build unless a config says otherwise.
pub const DEFAULT_BASELINE: &str = "head_reference";
/// Deepest search a sweep may ask for; deeper is surely a mistake at sweep scale.
pub const MAX_DEPTH: i64 = 40;
/// Most knob values in one sweep.
pub const MAX_VALUES: usize = 256;
/// Most jobs one sweep may expand into (a guard against a sweep that floods the queue).
pub const MAX_JOBS: usize = 20_000;
/// Largest chunk of positions in one job.
pub const MAX_CHUNK: i64 = 1_000;
/// Chunk size when a config gives none.
pub const DEFAULT_CHUNK: i64 = 10;

/// The baseline build of a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// Name of the baseline row in tables.
    #[serde(default = "default_baseline_name")]
    pub name: String,
    /// Defines for the baseline; empty means the source's defaults.
    #[serde(default)]
    pub defines: BTreeMap<String, i64>,
}

fn default_baseline_name() -> String {
    DEFAULT_BASELINE.to_string()
}

impl Default for BaselineConfig {
    fn default() -> Self {
        Self {
            name: default_baseline_name(),
            defines: BTreeMap::new(),
        }
    }
}

/// A sweep config as a user writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    /// Human name of the sweep.
    pub name: String,
    /// Registered engine to sweep.
    pub engine: String,
    /// The knob that varies.
    pub knob: String,
    /// Values of the knob, one build each.
    pub values: Vec<i64>,
    /// Suites to run (file stems under `suites/`).
    pub suites: Vec<String>,
    /// Depth limit of every search (`go depth N`).
    pub depth: i64,
    /// Positions per job.
    #[serde(default = "default_chunk")]
    pub chunk_size: i64,
    /// The build every other is compared with.
    #[serde(default)]
    pub baseline: BaselineConfig,
    /// Free text shown with the sweep.
    #[serde(default)]
    pub description: String,
}

fn default_chunk() -> i64 {
    DEFAULT_CHUNK
}

/// A validated sweep: what the coordinator stores and plans from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSpec {
    /// Human name.
    pub name: String,
    /// Engine name.
    pub engine: String,
    /// Varied knob.
    pub knob: String,
    /// Its values, in submission order.
    pub values: Vec<i64>,
    /// Suite names, in submission order.
    pub suites: Vec<String>,
    /// Depth limit.
    pub depth: u32,
    /// Positions per job.
    pub chunk_size: u32,
    /// Baseline build.
    pub baseline: BaselineConfig,
    /// Free text.
    pub description: String,
}

/// Parses a TOML document, naming the field on error.
pub fn deserialize_toml<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = field_of(e.path().to_string(), e.inner().message());
        FieldError::new(field, e.inner().message().trim().to_string())
    })
}

/// Parses a JSON document, naming the field on error.
pub fn deserialize_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, FieldError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let msg = e.inner().to_string();
        let field = field_of(e.path().to_string(), &msg);
        FieldError::new(field, msg)
    })
}

/// serde reports unknown and missing fields at their parent's path; name the field itself, and
/// call a syntax error at the top level an error of the `body`.
fn field_of(path: String, message: &str) -> String {
    let path = if path == "." || path == "?" {
        String::new()
    } else {
        path
    };
    let named = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| message.trim_start().strip_prefix(p))
        .and_then(|rest| rest.split('`').next());
    match named {
        Some(name) if path.is_empty() => name.to_string(),
        Some(name) if !path.ends_with(name) => format!("{path}.{name}"),
        _ if path.is_empty() => "body".to_string(),
        _ => path,
    }
}

impl SweepConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, FieldError> {
        deserialize_toml(text)
    }

    /// Parses JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, FieldError> {
        deserialize_json(bytes)
    }

    /// Validates against the registered engines and the loaded suites (name -> positions).
    pub fn validate(
        self,
        engines: &BTreeMap<String, EngineDef>,
        suite_sizes: &BTreeMap<String, usize>,
    ) -> Result<SweepSpec, FieldError> {
        let name = self.name.trim().to_string();
        if name.is_empty() || name.len() > 200 {
            return Err(FieldError::new("name", "must be 1 to 200 characters"));
        }
        if name.chars().any(char::is_control) {
            return Err(FieldError::new(
                "name",
                "must not contain control characters",
            ));
        }
        let engine = engines.get(&self.engine).ok_or_else(|| {
            let known: Vec<&str> = engines.keys().map(String::as_str).collect();
            FieldError::new(
                "engine",
                format!(
                    "unknown engine `{}` (registered: {})",
                    self.engine,
                    known.join(", ")
                ),
            )
        })?;
        engine.check_knob_value(
            "knob",
            &self.knob,
            engine.knob(&self.knob).map_or(0, |k| k.default),
        )?;
        if self.values.is_empty() {
            return Err(FieldError::new("values", "give at least one value"));
        }
        if self.values.len() > MAX_VALUES {
            return Err(FieldError::new(
                "values",
                format!(
                    "{} values; at most {MAX_VALUES} per sweep",
                    self.values.len()
                ),
            ));
        }
        for (i, v) in self.values.iter().enumerate() {
            engine.check_knob_value(&format!("values[{i}]"), &self.knob, *v)?;
            if self.values[..i].contains(v) {
                return Err(FieldError::new(
                    format!("values[{i}]"),
                    format!("{v} is given twice"),
                ));
            }
        }
        if self.suites.is_empty() {
            return Err(FieldError::new("suites", "give at least one suite"));
        }
        let mut positions = 0usize;
        for (i, s) in self.suites.iter().enumerate() {
            let size = suite_sizes.get(s).ok_or_else(|| {
                let known: Vec<&str> = suite_sizes.keys().map(String::as_str).collect();
                FieldError::new(
                    format!("suites[{i}]"),
                    format!("unknown suite `{s}` (loaded: {})", known.join(", ")),
                )
            })?;
            if self.suites[..i].contains(s) {
                return Err(FieldError::new(
                    format!("suites[{i}]"),
                    format!("`{s}` is listed twice"),
                ));
            }
            positions += size;
        }
        if !(1..=MAX_DEPTH).contains(&self.depth) {
            return Err(FieldError::new(
                "depth",
                format!("{} is out of range (1 to {MAX_DEPTH})", self.depth),
            ));
        }
        if !(1..=MAX_CHUNK).contains(&self.chunk_size) {
            return Err(FieldError::new(
                "chunk_size",
                format!("{} is out of range (1 to {MAX_CHUNK})", self.chunk_size),
            ));
        }
        let base = &self.baseline;
        if base.name.is_empty()
            || base.name.len() > 64
            || !base
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(FieldError::new(
                "baseline.name",
                "must be 1 to 64 letters, digits, '_', '-' or '.'",
            ));
        }
        for (k, v) in &base.defines {
            engine.check_knob_value(&format!("baseline.defines.{k}"), k, *v)?;
        }
        let builds = 1 + self.values.len();
        let chunk = self.chunk_size as usize;
        let jobs: usize = self
            .suites
            .iter()
            .map(|s| suite_sizes[s].div_ceil(chunk))
            .sum::<usize>()
            * builds;
        if jobs > MAX_JOBS {
            return Err(FieldError::new(
                "values",
                format!(
                    "the sweep would make {jobs} jobs ({builds} builds x {positions} positions in chunks of {chunk}); at most {MAX_JOBS}"
                ),
            ));
        }
        Ok(SweepSpec {
            name,
            engine: self.engine,
            knob: self.knob,
            values: self.values,
            suites: self.suites,
            depth: self.depth as u32,
            chunk_size: self.chunk_size as u32,
            baseline: self.baseline,
            description: self.description,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engines() -> BTreeMap<String, EngineDef> {
        let def = EngineDef::from_toml(
            r#"
name = "minnow"
protocol = "uci"
binary = "minnow"
[source]
path = "."
[build]
command = ["make", "OUT={out}"]
[[knobs]]
name = "CEIL"
min = 0
max = 3000
default = 0
"#,
        )
        .unwrap();
        BTreeMap::from([("minnow".to_string(), def)])
    }

    fn suites() -> BTreeMap<String, usize> {
        BTreeMap::from([("a".to_string(), 90), ("b".to_string(), 25)])
    }

    const OK: &str = r#"
name = "demo"
engine = "minnow"
knob = "CEIL"
values = [0, 300, 3000]
suites = ["a", "b"]
depth = 6
chunk_size = 10
"#;

    fn check(text: &str) -> Result<SweepSpec, FieldError> {
        SweepConfig::from_toml(text)?.validate(&engines(), &suites())
    }

    #[test]
    fn accepts_a_good_config() {
        let spec = check(OK).unwrap();
        assert_eq!(spec.baseline.name, "head_reference");
        assert_eq!(spec.depth, 6);
        let json = serde_json::to_vec(&SweepConfig::from_toml(OK).unwrap()).unwrap();
        assert_eq!(
            SweepConfig::from_json(&json)
                .unwrap()
                .validate(&engines(), &suites())
                .unwrap(),
            spec
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (
                OK.replace("engine = \"minnow\"", "engine = \"nope\""),
                "engine",
                "unknown engine",
            ),
            (
                OK.replace("knob = \"CEIL\"", "knob = \"OTHER\""),
                "knob",
                "not a declared",
            ),
            (OK.replace("3000]", "3001]"), "values[2]", "out of range"),
            (
                OK.replace("\"b\"]", "\"zz\"]"),
                "suites[1]",
                "unknown suite",
            ),
            (
                OK.replace("depth = 6", "depth = 0"),
                "depth",
                "out of range",
            ),
            (
                OK.replace("depth = 6", "depth = 1000"),
                "depth",
                "out of range",
            ),
            (
                OK.replace("depth = 6", "depht = 6"),
                "depht",
                "unknown field",
            ),
            (
                OK.replace("depth = 6", "depth = \"six\""),
                "depth",
                "invalid type",
            ),
            (
                OK.replace("chunk_size = 10", "chunk_size = -1"),
                "chunk_size",
                "out of range",
            ),
            (OK.replace("[0, 300", "[300, 300"), "values[1]", "twice"),
        ];
        for (text, field, words) in cases {
            let err = check(&text).unwrap_err();
            assert_eq!(err.field, field, "{err}");
            assert!(err.problem.contains(words), "{err}");
        }
    }

    #[test]
    fn limits_jobs() {
        let many: Vec<String> = (0..=255).map(|v| v.to_string()).collect();
        let text = OK
            .replace("[0, 300, 3000]", &format!("[{}]", many.join(",")))
            .replace("chunk_size = 10", "chunk_size = 1");
        let err = check(&text).unwrap_err();
        assert!(err.problem.contains("jobs"), "{err}");
    }

    #[test]
    fn json_errors_name_the_field() {
        let err = SweepConfig::from_json(br#"{"name":"x","engine":"minnow","knob":"CEIL","values":[1],"suites":["a"],"depth":3,"extra":1}"#).unwrap_err();
        assert_eq!(err.field, "extra");
        let err = SweepConfig::from_json(b"{not json").unwrap_err();
        assert_eq!(err.field, "body");
        assert!(err.problem.contains("key must be a string"), "{err}");
        let err = SweepConfig::from_json(br#"{"name":"x"}"#).unwrap_err();
        assert_eq!(err.field, "engine", "{err}");
    }
}
