//! Idempotency's pure rules (docs/contract/domain.md §7).

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 of the fields, length-prefixed so no two field lists share one.
pub fn fingerprint(fields: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    crate::hex::lower(&hasher.finalize())
}

/// Checks an idempotency key: 1–200 characters, no surrounding spaces, no control characters.
pub fn key_is_valid(key: &str) -> bool {
    (1..=MAX_KEY_CHARS).contains(&key.chars().count())
        && key.trim() == key
        && !key.chars().any(char::is_control)
}

/// The longest idempotency key, in characters.
pub const MAX_KEY_CHARS: usize = 200;

/// The key's name in use-case errors; each surface presents it its own way (header, argument).
pub const KEY_FIELD: &str = "idempotency_key";

/// The code of the error [`key_error`] builds.
pub const INVALID_KEY: &str = "invalid_idempotency_key";

/// The error for a key [`key_is_valid`] refused, on [`KEY_FIELD`].
pub fn key_error() -> crate::error::FieldError {
    crate::error::FieldError::plain(
        KEY_FIELD,
        INVALID_KEY,
        "send an idempotency key of 1–200 characters, without surrounding spaces or control \
         characters",
    )
}

/// Whether a request replays the record holding its key: both fingerprints exist and are equal.
/// A missing one never matches, so the request is a conflict, never a silent replay.
pub fn same_payload(stored: Option<&str>, requested: Option<&str>) -> bool {
    matches!((stored, requested), (Some(stored), Some(requested)) if stored == requested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(fingerprint(&["ab", "c"]), fingerprint(&["a", "bc"]));
        assert_eq!(fingerprint(&["a", "b"]), fingerprint(&["a", "b"]));
        assert_eq!(fingerprint(&[]).len(), 64);
    }

    #[test]
    fn only_the_same_fingerprint_replays() {
        assert!(same_payload(Some("a"), Some("a")));
        assert!(!same_payload(Some("a"), Some("b")));
        assert!(!same_payload(None, Some("a")));
        assert!(!same_payload(Some("a"), None));
        assert!(!same_payload(None, None));
    }

    #[test]
    fn keys_are_printable_and_bounded() {
        assert!(key_is_valid("inv-42"));
        assert!(!key_is_valid(""));
        assert!(key_is_valid("has space"));
        assert!(!key_is_valid(" padded"));
        assert!(!key_is_valid("line\nbreak"));
        assert!(!key_is_valid(&"k".repeat(201)));
    }
}
