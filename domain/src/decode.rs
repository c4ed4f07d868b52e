//! Decoding TOML and JSON documents with errors that name the field (`values[1]`,
//! `grid.NOPE`), shared by sweep configs and engine definitions.

use serde::de::DeserializeOwned;

use crate::FieldError;

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
