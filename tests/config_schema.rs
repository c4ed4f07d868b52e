//! The JSON Schemas of sweep config files (`configs/sweep.schema.json`) and engine definitions
//! (`configs/engine.schema.json`): each is the one the types generate (`sweep schema
//! [--engine]`), every shipped file satisfies it, and files the parser refuses for their shape
//! (unknown field, wrong type, missing field) fail it too.

mod common;

use serde_json::Value;
use sweep_domain::engine::EngineDef;
use sweep_domain::schema::{engine_definition_schema_text, sweep_config_schema_text};
use sweep_domain::spec::SweepConfig;

use common::{cli, repo};

const REGENERATE: &str = "cargo run -q -- schema > configs/sweep.schema.json";

fn committed() -> String {
    std::fs::read_to_string(repo().join("configs/sweep.schema.json"))
        .unwrap_or_else(|e| panic!("configs/sweep.schema.json: {e}; make it with `{REGENERATE}`"))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_str(&committed()).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

/// What `validator` finds wrong with the TOML `text`, each error with where it is.
fn schema_errors(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    validator
        .iter_errors(&as_json(text))
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// A TOML config as the JSON the schema describes.
fn as_json(toml_text: &str) -> Value {
    let value: toml::Value = toml::from_str(toml_text).expect("TOML");
    serde_json::to_value(value).expect("TOML converts to JSON")
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let generated = sweep_config_schema_text();
    assert!(
        committed() == generated,
        "configs/sweep.schema.json differs from what the config types generate: \
         regenerate it with `{REGENERATE}`"
    );
    let (code, stdout, stderr) = cli(&["schema"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, generated, "`sweep schema` prints the schema");
}

#[test]
fn every_shipped_config_satisfies_the_schema() {
    let validator = validator();
    let mut seen = 0;
    for entry in std::fs::read_dir(repo().join("configs/sweeps")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        SweepConfig::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        seen += 1;
    }
    assert!(seen >= 5, "the shipped configs were found ({seen})");
}

#[test]
fn configs_of_the_wrong_shape_fail_the_schema_and_the_parser() {
    let validator = validator();
    let good = r#"
name = "shape"
engine = "minnow"
knob = "NULLMOVE_SKIP_FH_CEILING_THOUSANDTHS"
values = [300, 3000]
suites = ["bk"]
depth = 6
"#;
    assert!(validator.is_valid(&as_json(good)));
    for (why, bad) in [
        ("an unknown field", format!("{good}depht = 9\n")),
        (
            "an unknown field in a table",
            format!("{good}[baseline]\nnmae = \"b\"\n"),
        ),
        (
            "a string for a number",
            good.replace("depth = 6", "depth = \"six\""),
        ),
        (
            "a number for a list",
            good.replace("suites = [\"bk\"]", "suites = 3"),
        ),
        (
            "a string in the values",
            good.replace("[300, 3000]", "[300, \"x\"]"),
        ),
        ("no name", good.replace("name = \"shape\"", "")),
        (
            "a variant without a name",
            format!("{good}[[variants]]\ndefines = {{ NULLMOVE_R_BASE = 2 }}\n"),
        ),
    ] {
        assert!(
            !validator.is_valid(&as_json(&bad)),
            "{why} fails the schema"
        );
        assert!(
            SweepConfig::from_toml(&bad).is_err(),
            "{why} fails the parser"
        );
    }
}

const REGENERATE_ENGINE: &str = "cargo run -q -- schema --engine > configs/engine.schema.json";

fn engine_validator() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(repo().join("configs/engine.schema.json")).unwrap_or_else(|e| {
            panic!("configs/engine.schema.json: {e}; make it with `{REGENERATE_ENGINE}`")
        });
    assert!(
        text == engine_definition_schema_text(),
        "configs/engine.schema.json differs from what the definition types generate: \
         regenerate it with `{REGENERATE_ENGINE}`"
    );
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

#[test]
fn engine_definitions_satisfy_their_schema_and_bad_shapes_fail_both() {
    let validator = engine_validator();
    let (code, stdout, stderr) = cli(&["schema", "--engine"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, engine_definition_schema_text());
    let mut seen = 0;
    for entry in std::fs::read_dir(repo().join("configs/engines")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        EngineDef::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        seen += 1;
    }
    assert!(seen >= 5, "the shipped definitions were found ({seen})");
    let good = r#"
name = "summary"
protocol = "xboard"
binary = "/usr/games/engine"
bench = { argv = ["bench"], nodes = 'total (?P<nodes>\d+)' }
[report]
nodes = 'saw (?P<nodes>\d+) nodes'
wait_ms = 300
"#;
    assert!(validator.is_valid(&as_json(good)));
    EngineDef::from_toml(good).unwrap();
    for (why, bad) in [
        ("an unknown report field", good.replace("wait_ms", "wait")),
        (
            "a number for a pattern",
            good.replace("'saw (?P<nodes>\\d+) nodes'", "3"),
        ),
        (
            "a bench without a pattern",
            good.replace(", nodes = 'total (?P<nodes>\\d+)'", ""),
        ),
        ("a string for the wait", good.replace("300", "\"soon\"")),
    ] {
        assert_ne!(bad, good, "{why}");
        assert!(
            !validator.is_valid(&as_json(&bad)),
            "{why} fails the schema"
        );
        assert!(
            EngineDef::from_toml(&bad).is_err(),
            "{why} fails the parser"
        );
    }
}
