//! Randomness from the operating system, for secrets and tokens.

/// 32 bytes from the operating system's CSPRNG.
pub(crate) fn random_32() -> [u8; 32] {
    use rand_core::{OsRng, RngCore};
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    bytes
}
