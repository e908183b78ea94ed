//! Field-level validation errors shared by every domain check: a list of [`FieldError`] becomes
//! problem+json `errors[]` without the HTTP layer knowing any domain type.

use serde::Serialize;

/// A domain error with a stable machine-readable code.
pub trait Coded: std::fmt::Display {
    /// Stable snake_case code, part of the API contract.
    fn code(&self) -> &'static str;
}

/// One offending request field: `lines[1].unit_amount`, `too_many_decimals`, a sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// Path in the request's own names, 0-based for arrays (`lines[1].quantity`).
    pub field: String,
    /// Stable snake_case code.
    pub code: &'static str,
    /// A sentence an API client (or an LLM agent) can act on.
    pub detail: String,
}

impl FieldError {
    /// Builds a field error from any coded domain error.
    pub fn new(field: impl Into<String>, error: &impl Coded) -> Self {
        Self {
            field: field.into(),
            code: error.code(),
            detail: error.to_string(),
        }
    }

    /// Builds a field error from a code and a sentence (rules that have no error type).
    pub fn plain(field: impl Into<String>, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            code,
            detail: detail.into(),
        }
    }
}

/// A required member: its value, or `None` with a `required` error pushed, so a route lists
/// every missing member with every broken rule (docs/contract/api.md Conventions).
pub fn required<T>(field: &str, value: Option<T>, errors: &mut Vec<FieldError>) -> Option<T> {
    if value.is_none() {
        errors.push(missing(field));
    }
    value
}

/// The error of a required member that was not sent.
pub fn missing(field: &str) -> FieldError {
    FieldError::plain(field, "required", format!("`{field}` is required"))
}

/// Shortens a client-supplied value for an error sentence (a body may be 1 MiB).
pub fn echo(value: &str) -> String {
    const MAX: usize = 40;
    match value.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}
