//! The OpenAPI document (`GET /api/v1/openapi.json`) without a server: it describes every
//! route the router registers, with its method, and it is a valid OpenAPI 3.1 document.
//!
//! `fixtures/openapi-3.1.schema.json` is the official OpenAPI 3.1 schema
//! (`https://spec.openapis.org/oas/3.1/schema/2022-10-07`, published by the OpenAPI
//! Initiative under the Apache License 2.0), as shipped in the PyPI package
//! `openapi-spec-validator` 0.9.0 (Apache-2.0) at
//! `openapi_spec_validator/resources/schemas/v3.1/schema.json`, unchanged.

use std::collections::BTreeSet;

use serde_json::{json, Value};
use sweep_coordinator::http::openapi::{document, BEARER};

fn doc() -> Value {
    serde_json::to_value(document()).expect("the document serializes")
}

/// (method, path, operationId) of every operation in the document.
fn operations(doc: &Value) -> Vec<(String, String, String)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let id = op["operationId"].as_str().unwrap_or_default().to_string();
            ops.push((method.clone(), path.clone(), id));
        }
    }
    ops
}

/// The handlers `router()` registers, by function name, read from `src/http/mod.rs`: every
/// route goes through a `routes!(...)` call there, which takes each handler's path and
/// method from its `#[utoipa::path]` (so they cannot differ from the document's); this
/// checks that nothing is registered any other way, and that each handler named is in the
/// document.
fn routed_handlers() -> BTreeSet<String> {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/mod.rs"))
        .expect("read src/http/mod.rs");
    let code: String = source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    for bypass in [".route(", ".route_service(", ".nest(", ".nest_service("] {
        assert!(
            !code.contains(bypass),
            "src/http/mod.rs registers a route with `{bypass}`: use `.routes(routes!(handler))` \
             with a `#[utoipa::path]` on the handler, so the OpenAPI document describes it"
        );
    }
    let mut handlers = BTreeSet::new();
    for call in code.split("routes!(").skip(1) {
        let args = call.split(')').next().expect("a closing parenthesis");
        for handler in args.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            let name = handler.rsplit("::").next().expect("a handler name");
            handlers.insert(name.to_string());
        }
    }
    handlers
}

#[test]
fn every_route_of_the_router_is_in_the_document() {
    let doc = doc();
    let documented: BTreeSet<String> = operations(&doc).into_iter().map(|(_, _, id)| id).collect();
    let routed = routed_handlers();
    assert!(
        routed.len() >= 20,
        "the router's handlers were found: {routed:?}"
    );
    assert_eq!(
        routed, documented,
        "the handlers in router() and the document's operations differ"
    );
    // The routes the README and the clients rely on, with their methods.
    let ops: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(method, path, _)| (method, path))
        .collect();
    for (method, path) in [
        ("get", "/"),
        ("get", "/healthz"),
        ("get", "/api/v1/openapi.json"),
        ("post", "/api/v1/sweeps"),
        ("get", "/api/v1/sweeps"),
        ("get", "/api/v1/sweeps/{id}/table"),
        ("put", "/api/v1/engines/{name}"),
        ("post", "/api/v1/workers/{id}/lease"),
        ("post", "/api/v1/jobs/{id}/build-failed"),
        ("get", "/api/v1/sources/{sha256}"),
        ("head", "/api/v1/sources/{sha256}"),
        ("put", "/api/v1/sources/{sha256}"),
    ] {
        assert!(
            ops.contains(&(method.to_string(), path.to_string())),
            "{method} {path}"
        );
    }
}

#[test]
fn the_document_is_valid_openapi_3_1() {
    let doc = doc();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    let schema: Value = serde_json::from_str(include_str!("fixtures/openapi-3.1.schema.json"))
        .expect("the vendored schema is JSON");
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the OpenAPI 3.1 schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    // That schema leaves Schema Objects to the JSON Schema dialect: check each against
    // the draft 2020-12 meta-schema.
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    assert!(schemas.contains_key("ErrorBody") && schemas.contains_key("SweepConfig"));
    for (name, schema) in schemas {
        let mut schema = schema.clone();
        schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!("components.schemas.{name} is not a valid JSON Schema: {e}");
        }
    }

    // A broken document fails, so the check above can fail.
    let mut broken = doc.clone();
    broken["paths"]["/healthz"]["get"]["responses"] = json!({"200": {"content": {}}});
    assert!(
        !validator.is_valid(&broken),
        "a response without description"
    );
}

/// Every `$ref` string under `value`, with where it is.
fn refs(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::String(s) if key == "$ref" => out.push((at.to_string(), s.clone())),
                    _ => refs(v, &format!("{at}/{key}"), out),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                refs(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_ref_resolves() {
    let doc = doc();
    let mut found = Vec::new();
    refs(&doc, "", &mut found);
    assert!(
        found.len() > 50,
        "the document uses references: {}",
        found.len()
    );
    let unresolved: Vec<_> = found
        .iter()
        .filter(|(_, r)| {
            r.strip_prefix('#')
                .is_none_or(|pointer| doc.pointer(pointer).is_none())
        })
        .collect();
    assert!(unresolved.is_empty(), "unresolved: {unresolved:#?}");
}

#[test]
fn operations_say_who_may_call_them() {
    let doc = doc();
    let scheme = &doc["components"]["securitySchemes"][BEARER];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");
    let roles = ["admin", "submitter", "reader", "worker"];
    // The dashboard's files, the health check and this document need no token.
    let open = [
        "/",
        "/app.css",
        "/app.js",
        "/plot.js",
        "/sweep.js",
        "/healthz",
        "/api/v1/openapi.json",
    ];
    for (method, path, _) in operations(&doc) {
        let op = &doc["paths"][&path][&method];
        let security = op["security"].as_array();
        if open.contains(&path.as_str()) {
            assert!(security.is_none(), "{method} {path} needs no token");
            continue;
        }
        let security = security.unwrap_or_else(|| panic!("{method} {path} names its roles"));
        assert_eq!(security.len(), 1, "{method} {path}");
        let named = security[0][BEARER]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} uses the bearer scheme"));
        assert!(!named.is_empty(), "{method} {path} names its roles");
        for role in named {
            assert!(
                roles.contains(&role.as_str().unwrap()),
                "{method} {path}: {role}"
            );
        }
        let responses = op["responses"].as_object().expect("responses");
        assert!(responses.contains_key("401"), "{method} {path} answers 401");
        assert!(responses.contains_key("503"), "{method} {path} answers 503");
        if named.len() < roles.len() {
            assert!(responses.contains_key("403"), "{method} {path} answers 403");
        }
        if path.contains("{id}") {
            assert!(responses.contains_key("404"), "{method} {path} answers 404");
        }
    }
}

#[test]
fn the_derive_parameters_are_the_parsers() {
    let doc = doc();
    let params: BTreeSet<&str> = doc["paths"]["/api/v1/sweeps/{id}/derive"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .filter(|p| p["in"] == "query")
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let parsed: BTreeSet<&str> = sweep_domain::derive::QUERY_PARAMETERS.into_iter().collect();
    assert_eq!(params, parsed);
}
