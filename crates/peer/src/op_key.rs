//! The peer's operation key, the `Idempotency-Key` its clients send: what a valid one is.

/// An operation key: 1–255 visible ASCII characters (0x21–0x7E).
pub fn is_op_key(key: &[u8]) -> bool {
    (1..=255).contains(&key.len()) && key.iter().all(|b| (0x21..=0x7e).contains(b))
}
