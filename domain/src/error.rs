//! The one validation error shape: which field, and what is wrong with it.

use serde::{Deserialize, Serialize};

/// A rejected input, naming the offending field (a dotted path such as `values[2]`) and the
/// problem in words. The coordinator turns it into an HTTP 4xx JSON body, the CLI into a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub struct FieldError {
    /// Path of the field in the submitted document (`""` for the document as a whole).
    pub field: String,
    /// What is wrong, in a sentence a user can act on.
    pub problem: String,
}

impl FieldError {
    /// Builds an error for `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    /// `field: problem`; just the problem when it is about the document as a whole (no field,
    /// or `body`, the name the HTTP API gives a document that does not parse).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.field.as_str() {
            "" | "body" => f.write_str(&self.problem),
            field => write!(f, "{field}: {}", self.problem),
        }
    }
}
