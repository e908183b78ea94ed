//! Signing secrets and signatures (Standard Webhooks, symmetric scheme), and how a secret is
//! kept at rest. A secret must stay usable for HMAC, so it cannot be hashed: with
//! `TAUROS_SECRET_KEY` it is sealed (ChaCha20-Poly1305, bound to its organisation and endpoint);
//! without one it is stored `plain:`, and the service says so when it starts.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

/// How a secret is recognised.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret (the convention asks for 24 to 64).
pub const SECRET_BYTES: usize = 32;

/// An endpoint's signing secret, `whsec_…`. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(…)")
    }
}

impl SigningSecret {
    /// A new secret from 32 random bytes.
    pub fn from_random(bytes: [u8; SECRET_BYTES]) -> SigningSecret {
        SigningSecret(format!("{SECRET_PREFIX}{}", BASE64.encode(bytes)))
    }

    /// A stored secret: `whsec_` and the base64 of 24 to 64 bytes.
    pub fn parse(text: &str) -> Option<SigningSecret> {
        let key = BASE64.decode(text.strip_prefix(SECRET_PREFIX)?).ok()?;
        (24..=64)
            .contains(&key.len())
            .then(|| SigningSecret(text.to_owned()))
    }

    /// The secret as the endpoint's owner is shown it, once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The HMAC key: the decoded bytes after the prefix.
    pub fn key(&self) -> Vec<u8> {
        self.0
            .strip_prefix(SECRET_PREFIX)
            .and_then(|b| BASE64.decode(b).ok())
            .unwrap_or_default()
    }
}

/// The `webhook-signature` of one attempt: `v1,` + base64(HMAC-SHA256(`{id}.{timestamp}.{body}`)).
pub fn signature(secret: &SigningSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes keys of any length.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&secret.key()) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// The operator's key that seals secrets at rest (`TAUROS_SECRET_KEY`); `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; 32]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(…)")
    }
}

impl SecretKey {
    /// Parses the base64 (standard alphabet, padded) of exactly 32 bytes.
    pub fn parse(text: &str) -> Result<SecretKey, String> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| "TAUROS_SECRET_KEY must be base64 (e.g. `openssl rand -base64 32`)")?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "TAUROS_SECRET_KEY must decode to exactly 32 bytes")?;
        Ok(SecretKey(key))
    }
}

const SEALED: &str = "v1:";
const PLAIN: &str = "plain:";

/// Why a stored secret cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("the secret is sealed but TAUROS_SECRET_KEY is not set")]
    KeyMissing,
    #[error(
        "the secret does not open with TAUROS_SECRET_KEY (another key, or another endpoint's \
         row); rotate the endpoint's secret"
    )]
    WrongKey,
    #[error("the stored secret is malformed")]
    Malformed,
}

/// The stored form of `secret`: `v1:` sealed under `key` with `nonce` (never reused with one
/// key), bound to `context` (the organisation and endpoint ids); `plain:` when there is no key.
pub fn seal_secret(
    secret: &SigningSecret,
    key: Option<&SecretKey>,
    nonce: [u8; 12],
    context: &[u8],
) -> String {
    let Some(key) = key else {
        return format!("{PLAIN}{}", secret.0);
    };
    let cipher = ChaCha20Poly1305::new(&key.0.into());
    let payload = Payload {
        msg: secret.0.as_bytes(),
        aad: context,
    };
    match cipher.encrypt(Nonce::from_slice(&nonce), payload) {
        Ok(sealed) => {
            let mut bytes = nonce.to_vec();
            bytes.extend(sealed);
            format!("{SEALED}{}", BASE64.encode(bytes))
        }
        // Encryption fails only for messages beyond 256 GiB.
        Err(_) => format!("{PLAIN}{}", secret.0),
    }
}

/// Reads a stored secret (a `plain:` one also while a key is set: stored before the key was).
pub fn open_secret(
    stored: &str,
    key: Option<&SecretKey>,
    context: &[u8],
) -> Result<SigningSecret, SealError> {
    if let Some(plain) = stored.strip_prefix(PLAIN) {
        return SigningSecret::parse(plain).ok_or(SealError::Malformed);
    }
    let sealed = stored.strip_prefix(SEALED).ok_or(SealError::Malformed)?;
    let key = key.ok_or(SealError::KeyMissing)?;
    let bytes = BASE64.decode(sealed).map_err(|_| SealError::Malformed)?;
    if bytes.len() < 12 {
        return Err(SealError::Malformed);
    }
    let (nonce, ciphertext) = bytes.split_at(12);
    let cipher = ChaCha20Poly1305::new(&key.0.into());
    let payload = Payload {
        msg: ciphertext,
        aad: context,
    };
    let plain = cipher
        .decrypt(Nonce::from_slice(nonce), payload)
        .map_err(|_| SealError::WrongKey)?;
    let text = String::from_utf8(plain).map_err(|_| SealError::Malformed)?;
    SigningSecret::parse(&text).ok_or(SealError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks reference libraries' own vector.
    #[test]
    fn signatures_match_the_published_vector() {
        let secret = SigningSecret::parse("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            signature(
                &secret,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1_649_367_553,
                br#"{"email":"test@example.com","username":"test_user"}"#,
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn secrets_are_whsec_base64_of_32_bytes_and_never_debug_printed() {
        let secret = SigningSecret::from_random([7; 32]);
        assert!(secret.expose().starts_with("whsec_"));
        assert_eq!(secret.key(), [7; 32]);
        assert_eq!(SigningSecret::parse(secret.expose()), Some(secret.clone()));
        assert_eq!(format!("{secret:?}"), "SigningSecret(…)");
        assert!(SigningSecret::parse("whsec_short").is_none());
        assert!(SigningSecret::parse("C2FVsBQIhrscChlQIMV+b5sSYspob7oD").is_none());
        let key = SecretKey::parse(&BASE64.encode([1u8; 32])).unwrap();
        assert_eq!(format!("{key:?}"), "SecretKey(…)");
        assert!(SecretKey::parse(&BASE64.encode([1u8; 16])).is_err());
        assert!(SecretKey::parse("not base64!").is_err());
    }

    #[test]
    fn sealed_secrets_open_only_with_their_key_and_context() {
        let secret = SigningSecret::from_random([9; 32]);
        let key = SecretKey([3; 32]);
        let stored = seal_secret(&secret, Some(&key), [5; 12], b"org/endpoint");
        assert!(stored.starts_with("v1:"));
        assert!(!stored.contains(secret.expose()));
        assert_eq!(
            open_secret(&stored, Some(&key), b"org/endpoint"),
            Ok(secret.clone())
        );
        assert_eq!(
            open_secret(&stored, Some(&SecretKey([4; 32])), b"org/endpoint"),
            Err(SealError::WrongKey)
        );
        assert_eq!(
            open_secret(&stored, Some(&key), b"org/other"),
            Err(SealError::WrongKey)
        );
        assert_eq!(
            open_secret(&stored, None, b"org/endpoint"),
            Err(SealError::KeyMissing)
        );
        let plain = seal_secret(&secret, None, [5; 12], b"org/endpoint");
        assert_eq!(plain, format!("plain:{}", secret.expose()));
        assert_eq!(open_secret(&plain, Some(&key), b"x"), Ok(secret));
        assert_eq!(open_secret("v2:abc", None, b"x"), Err(SealError::Malformed));
        assert_eq!(
            open_secret("v1:AAAA", Some(&key), b"x"),
            Err(SealError::Malformed)
        );
    }
}
