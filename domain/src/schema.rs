//! The JSON Schemas (draft 2020-12) of a sweep config file and of an engine definition, made
//! from the same `ToSchema` derives that describe them in the coordinator's OpenAPI document,
//! so the two cannot drift apart. `configs/sweep.schema.json` and `configs/engine.schema.json`
//! are these schemas, committed for editors (a TOML file starting with
//! `#:schema ../sweep.schema.json` is checked as it is typed, e.g. by taplo).

use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::engine::EngineDef;
use crate::spec::SweepConfig;

/// The dialect of the schema.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Where OpenAPI keeps named schemas; a standalone schema keeps them in `$defs`.
const COMPONENTS_PREFIX: &str = "#/components/schemas/";

/// The JSON Schema of a sweep config ([`SweepConfig`]): the config object at the root, the
/// types it contains under `$defs`.
pub fn sweep_config_schema() -> Value {
    standalone::<SweepConfig>("Sweep config")
}

/// The schema as committed: pretty JSON with a final newline.
pub fn sweep_config_schema_text() -> String {
    text(&sweep_config_schema())
}

/// The JSON Schema of an engine definition ([`EngineDef`], `configs/engines/*.toml`): the
/// definition at the root, the types it contains under `$defs`.
pub fn engine_definition_schema() -> Value {
    standalone::<EngineDef>("Sweep engine definition")
}

/// The engine definition's schema as committed: pretty JSON with a final newline.
pub fn engine_definition_schema_text() -> String {
    text(&engine_definition_schema())
}

fn text(schema: &Value) -> String {
    serde_json::to_string_pretty(schema).expect("JSON serializes") + "\n"
}

/// `T`'s schema at the root, with `title` and the types it contains under `$defs`.
fn standalone<T: ToSchema>(title: &str) -> Value {
    let mut named = Vec::new();
    T::schemas(&mut named);
    let defs: Map<String, Value> = named
        .into_iter()
        .map(|(name, schema)| (name, to_value(&schema)))
        .collect();
    let mut root = match to_value(&T::schema()) {
        Value::Object(map) => map,
        other => unreachable!("a struct's schema is an object, not {other}"),
    };
    let mut schema = Map::new();
    schema.insert("$schema".into(), json!(DIALECT));
    schema.insert("title".into(), json!(title));
    schema.append(&mut root);
    if !defs.is_empty() {
        schema.insert("$defs".into(), Value::Object(defs));
    }
    let mut schema = Value::Object(schema);
    rewrite_refs(&mut schema);
    schema
}

fn to_value<T: serde::Serialize>(schema: &T) -> Value {
    serde_json::to_value(schema).expect("a schema serializes")
}

/// Points OpenAPI's component references (`#/components/schemas/X`) at `#/$defs/X`.
fn rewrite_refs(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "$ref" => {
                        if let Some(name) = s.strip_prefix(COMPONENTS_PREFIX) {
                            *s = format!("#/$defs/{name}");
                        }
                    }
                    _ => rewrite_refs(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` string in `value`.
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    match v {
                        Value::String(s) if key == "$ref" => out.push(s.clone()),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn the_bounds_are_the_validators() {
        // `#[schema(...)]` takes only literals: these tie them to the constants.
        let schema = sweep_config_schema();
        let bounds = |field: &str| {
            let p = &schema["properties"][field];
            (p["minimum"].as_i64(), p["maximum"].as_i64())
        };
        assert_eq!(bounds("depth"), (Some(1), Some(crate::spec::MAX_DEPTH)));
        assert_eq!(bounds("nodes"), (Some(1), Some(crate::limit::MAX_NODES)));
        assert_eq!(
            bounds("chunk_size"),
            (Some(1), Some(crate::spec::MAX_CHUNK))
        );
    }

    #[test]
    fn the_engine_schema_describes_reports_and_benches() {
        let schema = engine_definition_schema();
        assert_eq!(schema["additionalProperties"], false);
        let props = &schema["properties"];
        for field in ["name", "protocol", "binary", "report", "bench", "knobs"] {
            assert!(props.get(field).is_some(), "{field}: {schema}");
        }
        let mut found = Vec::new();
        refs(&schema, &mut found);
        for r in found {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(schema.pointer(pointer).is_some(), "{r} resolves");
        }
    }

    #[test]
    fn the_schema_is_standalone() {
        let schema = sweep_config_schema();
        assert_eq!(schema["$schema"], DIALECT);
        assert_eq!(schema["type"], "object");
        // Unknown fields are refused, as the parser refuses them.
        assert_eq!(schema["additionalProperties"], false);
        let required = schema["required"].as_array().expect("required fields");
        for field in ["name", "engine"] {
            assert!(required.contains(&json!(field)), "{field} is required");
        }
        // Suites are given at the top or per stage, so neither is required by the schema.
        assert!(!required.contains(&json!("suites")));
        assert!(schema["properties"]["stages"].is_object(), "{schema}");
        let mut found = Vec::new();
        refs(&schema, &mut found);
        assert!(!found.is_empty(), "nested types are referenced");
        for r in found {
            let pointer = r.strip_prefix('#').expect("a local reference");
            assert!(schema.pointer(pointer).is_some(), "{r} resolves");
        }
    }
}
