//! Idempotency's pure rules (docs/contract/domain.md §7): the key's syntax, the comparison of a
//! stored fingerprint with a request's, and fingerprints of request bodies for creates whose
//! payload has no seal of its own (payment destinations).

use sha2::{Digest, Sha256};

/// Lowercase hex SHA-256 over the fields, each length-prefixed so that no two different field
/// lists share a fingerprint.
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
    (1..=200).contains(&key.chars().count())
        && key.trim() == key
        && !key.chars().any(char::is_control)
}

/// The name of the key wherever a use case reports on it; each surface presents it in its own
/// way (a header, a body member, a tool argument).
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

/// Whether a request is a replay of the record that already holds its key: the record's stored
/// fingerprint equals the request's. A record stored without one, or a request whose
/// fingerprint cannot be made against that record, never matches: another key is a conflict.
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
