//! Argon2id password hashing, run off the async executor because it is deliberately slow.

use super::{AppError, AppResult};
use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use std::sync::OnceLock;

/// Hashes a password with Argon2id (the crate's defaults: 19 MiB, 2 passes, 1 lane).
pub(crate) async fn hash(password: String) -> AppResult<String> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut rand_core::OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| AppError::Internal(format!("password hashing failed: {e}")))
    })
    .await
    .map_err(|e| AppError::Internal(format!("password hashing task failed: {e}")))?
}

/// Verifies a password against a stored hash. With no stored hash (unknown email, or an
/// invitation not yet accepted) it verifies against a fixed dummy hash, so that both answers
/// take the same time and the caller cannot tell which emails exist.
pub(crate) async fn verify(password: String, stored: Option<String>) -> AppResult<bool> {
    tokio::task::spawn_blocking(move || {
        let has_real = stored.is_some();
        let encoded = stored.unwrap_or_else(|| dummy_hash().to_owned());
        let Ok(parsed) = PasswordHash::new(&encoded) else {
            return false;
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        ok && has_real
    })
    .await
    .map_err(|e| AppError::Internal(format!("password check task failed: {e}")))
}

fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let salt = SaltString::generate(&mut rand_core::OsRng);
        Argon2::default()
            .hash_password(b"tauros dummy password for timing", &salt)
            .map(|h| h.to_string())
            .unwrap_or_default()
    })
}
