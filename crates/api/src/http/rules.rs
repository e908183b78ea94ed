//! The value rules of a request body, checked at the wire once its shape is read
//! (docs/contract/api.md Errors, "One answer lists every mistake"). Every request type, REST
//! body or MCP tool arguments, implements [`BodyRules`]: its own field rules (`validator`
//! derives), always, and the domain invariants it carries (an invoice's content, a payee,
//! capabilities, a webhook URL), which the use case checks with the rules that need state and
//! the wire adds only to an answer it refuses anyway. Text and email rules are the domain's
//! ([`text_error`], [`identity::email_is_valid`]), applied here by custom rules
//! (docs/DECISIONS.md, "Where each value rule lives").
//!
//! [`crate::body_rules!`] implements the trait for types with `validator` rules only.

use tauros_app::FieldError;
use tauros_domain::identity;
use tauros_domain::text::{Lines, MAX_NAME_CHARS, text_error};
use tauros_domain::webhook;
use validator::{ValidationError, ValidationErrors, ValidationErrorsKind};

/// The value rules of a request body (see the module documentation).
pub trait BodyRules {
    /// Whether the type's `Deserialize` refuses a member sent twice at every depth, as serde's
    /// derive does for a `deny_unknown_fields` struct (a map or a hand-written visitor may not).
    /// Such a type is first read in one pass (docs/DECISIONS.md, "A right body of an invoice
    /// command is read in one pass"); `http/invoices/body_tests.rs` holds it to that.
    const READ_IN_ONE_PASS: bool = false;

    /// The field rules of the body alone (`validator`), checked on every body.
    fn field_rules(&self) -> Result<(), ValidationErrors>;

    /// The use case's own rules, to complete a refused answer; paths are the request's own.
    fn completing_rules(&self) -> Vec<FieldError> {
        Vec::new()
    }
}

/// Implements [`BodyRules`] by the `validator` derive; `one_pass:` marks one-pass types.
#[macro_export]
macro_rules! body_rules {
    (one_pass: $($ty:ty),* $(,)?) => {$(
        impl $crate::http::rules::BodyRules for $ty {
            const READ_IN_ONE_PASS: bool = true;

            fn field_rules(&self) -> Result<(), ::validator::ValidationErrors> {
                ::validator::Validate::validate(self)
            }
        }
    )*};
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::http::rules::BodyRules for $ty {
            fn field_rules(&self) -> Result<(), ::validator::ValidationErrors> {
                ::validator::Validate::validate(self)
            }
        }
    )*};
}

/// `validator`'s errors as ours, at the request's own paths (`lines[2].quantity`), sorted.
pub fn field_errors(errors: &ValidationErrors) -> Vec<FieldError> {
    let mut out = Vec::new();
    collect(errors, "", &mut out);
    out.sort_by(|a, b| a.field.cmp(&b.field));
    out
}

fn collect(errors: &ValidationErrors, prefix: &str, out: &mut Vec<FieldError>) {
    for (name, kind) in &errors.0 {
        // A list's own errors come under a placeholder name (validator's `_tmp_validator`);
        // struct-level rules under `__all__`: both belong to the enclosing path.
        let path = if name.starts_with('_') {
            prefix.to_owned()
        } else if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        match kind {
            ValidationErrorsKind::Field(list) => {
                out.extend(list.iter().map(|e| field_error(&path, e)));
            }
            ValidationErrorsKind::Struct(inner) => collect(inner, &path, out),
            ValidationErrorsKind::List(items) => {
                for (index, inner) in items {
                    collect(inner, &format!("{path}[{index}]"), out);
                }
            }
        }
    }
}

/// One `validator` error as ours: its code mapped to our stable codes, its sentence ours.
fn field_error(path: &str, error: &ValidationError) -> FieldError {
    let field = if path.is_empty() { "body" } else { path };
    let code = match error.code.as_ref() {
        "required" => "required",
        "length" => "invalid_length",
        "range" => "out_of_range",
        "regex" | "email" | "url" => "invalid_format",
        other => CODES
            .iter()
            .find(|c| **c == other)
            .copied()
            .unwrap_or("invalid_value"),
    };
    let detail = match (&error.message, error.code.as_ref()) {
        (Some(message), _) => message.replace(FIELD, field),
        (None, "required") => format!("`{field}` is required"),
        (None, "length") => bounds(field, "characters or items", error),
        (None, "range") => bounds(field, "", error),
        (None, _) => format!("`{field}` is not valid"),
    };
    FieldError::plain(field, code, detail)
}

/// Our codes a request type's rule carries as its `validator` code (`code = "…"`); any other
/// code a rule might carry is answered `invalid_value`.
const CODES: &[&str] = &[
    "email_too_long",
    "password_too_long",
    "password_too_short",
    "organisation_too_long",
    "too_long",
    "invalid_characters",
    "invalid_email",
    "too_many_capabilities",
];

/// Stands for the member's path in a rule's message; [`field_error`] puts the path in (a
/// `validator` custom rule does not know which member it checks).
const FIELD: &str = "{field}";

/// A domain rule's error as `validator`'s (with [`FIELD`] for the member's path).
fn rule_error(error: FieldError) -> ValidationError {
    ValidationError::new(error.code).with_message(error.detail.into())
}

/// A text member's rule, the domain's ([`text_error`]): trimmed, clean, 1 to `max` characters.
fn text(value: &str, max: usize, lines: Lines) -> Result<(), ValidationError> {
    text_error(FIELD, value, max, lines).map_or(Ok(()), |e| Err(rule_error(e)))
}

/// A name or label: one line of clean text, 1–[`MAX_NAME_CHARS`] characters once trimmed.
pub fn name_or_label(value: &str) -> Result<(), ValidationError> {
    text(value, MAX_NAME_CHARS, Lines::One)
}

/// A webhook endpoint's description: one line of clean text, 1–200 characters once trimmed.
pub fn webhook_description(value: &str) -> Result<(), ValidationError> {
    text(value, webhook::MAX_DESCRIPTION_CHARS, Lines::One)
}

/// An email address as a contact or an invitation takes it ([`identity::email_is_valid`]).
pub fn email_address(value: &str) -> Result<(), ValidationError> {
    if identity::email_is_valid(value.trim()) {
        return Ok(());
    }
    Err(ValidationError::new("invalid_email").with_message(
        "send an email address like name@example.com (1–254 characters, one @, no spaces)".into(),
    ))
}

fn bounds(field: &str, unit: &str, error: &ValidationError) -> String {
    let min = error.params.get("min").map(ToString::to_string);
    let max = error.params.get("max").map(ToString::to_string);
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    match (min, max) {
        (Some(min), Some(max)) => format!("`{field}` must be {min}–{max}{unit}"),
        (Some(min), None) => format!("`{field}` must be at least {min}{unit}"),
        (None, Some(max)) => format!("`{field}` must be at most {max}{unit}"),
        (None, None) => format!("`{field}` is out of bounds"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use validator::Validate;

    #[derive(Validate)]
    struct Inner {
        #[validate(length(min = 1, max = 3))]
        label: Option<String>,
    }

    #[derive(Validate)]
    struct Outer {
        #[validate(required)]
        name: Option<String>,
        #[validate(range(min = 1, max = 10))]
        count: Option<u32>,
        #[validate(nested)]
        items: Option<Vec<Inner>>,
    }

    #[test]
    fn paths_are_the_requests_own_and_codes_ours() {
        let body = Outer {
            name: None,
            count: Some(11),
            items: Some(vec![
                Inner {
                    label: Some("ok".into()),
                },
                Inner {
                    label: Some("toolong".into()),
                },
            ]),
        };
        let errors = field_errors(&body.validate().unwrap_err());
        let got: Vec<(&str, &str)> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert_eq!(
            got,
            [
                ("count", "out_of_range"),
                ("items[1].label", "invalid_length"),
                ("name", "required"),
            ]
        );
        assert_eq!(errors[0].detail, "`count` must be 1–10");
    }

    #[derive(Validate)]
    struct Named {
        #[validate(custom(function = name_or_label))]
        name: Option<String>,
        #[validate(custom(function = email_address))]
        email: Option<String>,
    }

    #[test]
    fn the_domains_text_and_email_rules_answer_with_the_members_path() {
        let errors = field_errors(
            &Named {
                name: Some("Ac\u{200B}me".into()),
                email: Some(" a@b ".into()),
            }
            .validate()
            .unwrap_err(),
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].code, "invalid_characters");
        assert!(
            errors[0].detail.starts_with("`name` holds"),
            "{}",
            errors[0].detail
        );
        let errors = field_errors(
            &Named {
                name: Some(format!(" {} ", "n".repeat(161))),
                email: Some("a@b@c".into()),
            }
            .validate()
            .unwrap_err(),
        );
        let got: Vec<(&str, &str)> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert_eq!(got, [("email", "invalid_email"), ("name", "too_long")]);
        assert_eq!(
            errors[1].detail,
            "`name` must be at most 160 characters (got 161)"
        );
        // Trimmed first: surrounding spaces neither count nor make a blank name valid.
        let blank = Named {
            name: Some("   ".into()),
            email: None,
        };
        let errors = field_errors(&blank.validate().unwrap_err());
        assert_eq!(errors[0].code, "required");
        assert_eq!(errors[0].detail, "`name` must not be empty");
    }
}
