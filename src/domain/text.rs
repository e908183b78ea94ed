//! Free-text fields (names, labels, reasons, reasoning): trimmed, then 1 to `max` characters.

use crate::domain::error::{FieldError, required};

/// [`checked_text`] of a required member: `None` when it is missing (with a `required` error).
pub fn required_text(
    field: &str,
    value: Option<&str>,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    required(field, value, errors).map(|v| checked_text(field, v, max, errors))
}

/// Trims a text field and checks its length in characters; `field` names it in the error,
/// which is pushed onto `errors` so that every field of a request is reported at once.
pub fn checked_text(field: &str, value: &str, max: usize, errors: &mut Vec<FieldError>) -> String {
    let trimmed = value.trim();
    let len = trimmed.chars().count();
    if len == 0 {
        errors.push(FieldError::plain(
            field,
            "required",
            format!("`{field}` must not be empty"),
        ));
    } else if len > max {
        errors.push(FieldError::plain(
            field,
            "too_long",
            format!("`{field}` must be at most {max} characters (got {len})"),
        ));
    }
    trimmed.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_counts_characters_not_bytes() {
        let mut errors = Vec::new();
        assert_eq!(checked_text("name", "  Zoë  ", 3, &mut errors), "Zoë");
        assert!(errors.is_empty());
        checked_text("name", "Zoëy", 3, &mut errors);
        checked_text("label", "   ", 3, &mut errors);
        let codes: Vec<_> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert_eq!(codes, [("name", "too_long"), ("label", "required")]);
    }
}
