//! Free-text fields (docs/contract/api.md Conventions, text hygiene): unclean text is refused,
//! never cleaned silently: the approver reads exactly what the agent sent and what is sealed.

use crate::error::{FieldError, required};
use std::borrow::Cow;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// `text` in Unicode NFC, borrowed when it already is (ASCII, or proven by the quick check):
/// requests are mostly ASCII, so most sealed strings skip a full normalization.
pub fn nfc(text: &str) -> Cow<'_, str> {
    if text.is_ascii() || is_nfc_quick(text.chars()) == IsNormalized::Yes {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.nfc().collect())
    }
}

/// [`checked_text`] of a required member: `None` when it is missing (with a `required` error).
pub fn required_text(
    field: &str,
    value: Option<&str>,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    required(field, value, errors).map(|v| checked_text(field, v, max, errors))
}

/// Whether a text may hold line breaks and tabs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lines {
    One,
    Many,
}

/// The first character a field of this kind may not hold, and its 0-based character position.
pub fn unclean(value: &str, lines: Lines) -> Option<(usize, char)> {
    value.chars().enumerate().find(|(_, c)| match c {
        '\n' | '\r' | '\t' => lines == Lines::One,
        c => is_hidden(*c),
    })
}

/// Control, bidirectional and invisible formatting characters.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// The error for a value [`unclean`] refused.
pub fn unclean_error(field: &str, (position, c): (usize, char)) -> FieldError {
    FieldError::plain(
        field,
        "invalid_characters",
        format!(
            "`{field}` holds an invisible or control character (U+{:04X} at position {position}); \
             send plain text: an approver must see exactly what is stored",
            u32::from(c)
        ),
    )
}

/// The longest name or label (organisation, agent, customer, destination), in characters.
pub const MAX_NAME_CHARS: usize = 160;

/// Trims a single-line text field and checks it; the error is pushed so every field is reported.
pub fn checked_text(field: &str, value: &str, max: usize, errors: &mut Vec<FieldError>) -> String {
    checked(field, value, max, Lines::One, errors)
}

/// [`checked_text`] for a field that may span lines (`reasoning`).
pub fn checked_multiline_text(
    field: &str,
    value: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> String {
    checked(field, value, max, Lines::Many, errors)
}

fn checked(
    field: &str,
    value: &str,
    max: usize,
    lines: Lines,
    errors: &mut Vec<FieldError>,
) -> String {
    errors.extend(text_error(field, value, max, lines));
    value.trim().to_owned()
}

/// What is wrong with a text field's value, if anything: the one definition of the rule, used
/// by the domain on invoice content and by the wire's `validator` rules on request types.
pub fn text_error(field: &str, value: &str, max: usize, lines: Lines) -> Option<FieldError> {
    let trimmed = value.trim();
    let len = trimmed.chars().count();
    if let Some(found) = unclean(trimmed, lines) {
        Some(unclean_error(field, found))
    } else if len == 0 {
        Some(FieldError::plain(
            field,
            "required",
            format!("`{field}` must not be empty"),
        ))
    } else if len > max {
        Some(FieldError::plain(
            field,
            "too_long",
            format!("`{field}` must be at most {max} characters (got {len})"),
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nfc_borrows_what_is_normalized_and_normalizes_the_rest() {
        assert!(matches!(nfc("Invoice 42"), Cow::Borrowed("Invoice 42")));
        assert!(matches!(nfc("Caf\u{e9}"), Cow::Borrowed("Caf\u{e9}")));
        // A combining accent after its letter: composed.
        assert_eq!(nfc("Cafe\u{301}"), "Caf\u{e9}");
        // Hangul jamo: composed into one syllable.
        assert_eq!(nfc("\u{1100}\u{1161}"), "\u{ac00}");
        // A singleton (the ohm sign) becomes its canonical equivalent (omega).
        assert_eq!(nfc("\u{2126}"), "\u{3a9}");
    }

    proptest! {
        /// The fast path never changes what is sealed: the same text as full normalization.
        #[test]
        fn nfc_is_the_full_normalization(
            text in "([a-zA-Z0-9 ]|[\u{300}-\u{36f}]|[\u{1100}-\u{1175}]|[\u{ac00}-\u{ac20}]|\\PC){0,24}"
        ) {
            let full: String = text.nfc().collect();
            let fast = nfc(&text);
            prop_assert_eq!(fast.as_ref(), full.as_str());
        }
    }

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

    #[test]
    fn hidden_characters_are_refused_with_their_code_point() {
        for bad in [
            "Acme\u{0}Inc",
            "Acme\u{7}",
            "\u{202E}cmA",
            "Ac\u{200B}me",
            "Acme\u{2066}x\u{2069}",
            "\u{FEFF}Acme",
            "Ac\u{AD}me",
            "Ac\u{85}me",
        ] {
            let mut errors = Vec::new();
            checked_text("name", bad, 160, &mut errors);
            assert_eq!(errors.len(), 1, "{bad:?}");
            assert_eq!(errors[0].code, "invalid_characters", "{bad:?}");
            assert!(errors[0].detail.contains("U+"), "{bad:?}");
        }
    }

    #[test]
    fn line_breaks_belong_only_to_multiline_fields() {
        let text = "First line.\n\tSecond line.";
        let mut errors = Vec::new();
        checked_multiline_text("reasoning", text, 4000, &mut errors);
        assert!(errors.is_empty());
        checked_text("name", "Acme\nInc", 160, &mut errors);
        assert_eq!(errors[0].code, "invalid_characters");
        // Letters of every script, accents and emoji without joiners are plain text.
        let mut errors = Vec::new();
        checked_text("name", "Zoë Ünal 山田 Ω 🚀", 160, &mut errors);
        assert!(errors.is_empty());
    }
}
