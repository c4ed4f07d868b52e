//! Decoding TOML and JSON documents with errors that name the field (`values[1]`,
//! `grid.NOPE`), shared by sweep configs and engine definitions.

use serde::de::DeserializeOwned;

use crate::FieldError;

/// Parses a TOML document, naming the field on error. The message starts with the line and
/// column where the problem is (`line 3, column 10: ...`), and an unknown field's message
/// ends with the closest expected name when one is close (`did you mean `values`?`).
pub fn deserialize_toml<T: DeserializeOwned>(text: &str) -> Result<T, FieldError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let inner = e.inner();
        let field = field_of(e.path().to_string(), inner.message());
        // toml's messages may span lines ("invalid array\nexpected `]`"): one line reads better.
        let mut message = inner
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        if let Some(suggestion) = did_you_mean(&message) {
            message.push_str(&format!("; did you mean `{suggestion}`?"));
        }
        match inner.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                FieldError::new(field, format!("line {line}, column {column}: {message}"))
            }
            None => FieldError::new(field, message),
        }
    })
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// For serde's "unknown field `X`, expected one of `A`, `B`" (or "expected `A`"), the
/// expected name closest to X, when it is close enough to be a likely typo.
fn did_you_mean(message: &str) -> Option<String> {
    let rest = message.trim_start().strip_prefix("unknown field `")?;
    let (unknown, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected")?.1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|name| (strsim::damerau_levenshtein(unknown, name), name))
        .filter(|(distance, name)| *distance <= (name.chars().count() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one() {
        let text = "a = 1\nbé = [1,\nc";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        // Columns count characters, not bytes.
        assert_eq!(line_column(text, text.find('[').unwrap()), (2, 6));
        assert_eq!(line_column(text, text.len()), (3, 2));
    }

    #[test]
    fn suggestions_are_close_expected_names() {
        let msg = "unknown field `valuez`, expected one of `name`, `engine`, `values`, `depth`";
        assert_eq!(did_you_mean(msg).as_deref(), Some("values"));
        let msg = "unknown field `colour`, expected one of `name`, `engine`, `values`";
        assert_eq!(did_you_mean(msg), None, "nothing close: no guess");
        assert_eq!(
            did_you_mean("unknown field `nme`, expected `name`").as_deref(),
            Some("name")
        );
        assert_eq!(did_you_mean("invalid type: string"), None);
    }
}
