//! Argon2id password hashing, off the async executor because it is deliberately slow.
//!
//! All hashing runs on one dedicated thread that owns one Argon2 working memory (19 MiB) and
//! reuses it for every hash. Letting the crate allocate it per hash left each allocation
//! resident (measured: every sign-in grew the process by 19 MiB, to 133 MiB after 12). One
//! thread and one buffer bound the process to one working set, and concurrent sign-ins queue,
//! which also bounds how much CPU a burst of sign-in attempts can take from the API.

use super::{AppError, AppResult};
use argon2::password_hash::{
    self, Output, ParamsString, PasswordHash, PasswordHasher, Salt, SaltString,
};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use std::cell::RefCell;
use std::sync::OnceLock;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

fn worker() -> &'static mpsc::Sender<Job> {
    static WORKER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    WORKER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new()
            .name("tauros-argon2".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the password hashing thread");
        }
        tx
    })
}

/// Runs `f` on the hashing thread and waits for its answer without blocking the executor.
async fn on_worker<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    worker()
        .send(Box::new(move || {
            let _ = tx.send(f());
        }))
        .map_err(|_| AppError::Internal("password hashing thread is gone".into()))?;
    rx.await
        .map_err(|_| AppError::Internal("password hashing job was dropped".into()))
}

/// Argon2id with the crate's defaults (19 MiB, 2 passes, 1 lane): the OWASP recommendation.
fn params() -> Params {
    Params::default()
}

/// Stored hashes whose memory cost exceeds this are refused rather than allocated.
const MAX_MEMORY_KIB: u32 = 64 * 1024;

thread_local! {
    /// The hashing thread's reusable Argon2 working memory.
    static MEMORY: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// Computes the Argon2 output of `password` for `salt` in the thread's reusable memory.
fn compute(
    argon: &Argon2<'_>,
    params: &Params,
    password: &[u8],
    salt: Salt<'_>,
    len: usize,
) -> Option<Output> {
    if params.m_cost() > MAX_MEMORY_KIB {
        return None;
    }
    let mut salt_buf = [0u8; 64];
    let salt = salt.decode_b64(&mut salt_buf).ok()?;
    MEMORY.with(|memory| {
        let mut memory = memory.borrow_mut();
        let blocks = params.block_count();
        if memory.len() < blocks {
            memory.resize(blocks, Block::default());
        }
        Output::init_with(len, |out| {
            argon
                .hash_password_into_with_memory(password, salt, out, &mut memory[..blocks])
                .map_err(|_| password_hash::Error::Password)
        })
        .ok()
    })
}

/// Hashes a password; the PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) is what is stored.
pub(crate) async fn hash(password: String) -> AppResult<String> {
    on_worker(move || {
        let params = params();
        let argon = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
        let salt = SaltString::generate(&mut rand_core::OsRng);
        let output = compute(&argon, &params, password.as_bytes(), salt.as_salt(), 32)
            .ok_or_else(|| AppError::Internal("password hashing failed".into()))?;
        let phc = PasswordHash {
            algorithm: Algorithm::Argon2id.ident(),
            version: Some(Version::V0x13.into()),
            params: ParamsString::try_from(&params)
                .map_err(|e| AppError::Internal(format!("password hashing failed: {e}")))?,
            salt: Some(salt.as_salt()),
            hash: Some(output),
        };
        Ok(phc.to_string())
    })
    .await?
}

/// Whether `password` matches the PHC string `encoded`; the output comparison is constant-time.
fn matches(password: &[u8], encoded: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(encoded) else {
        return false;
    };
    let (Ok(algorithm), Ok(params), Some(salt), Some(expected)) = (
        Algorithm::try_from(parsed.algorithm),
        Params::try_from(&parsed),
        parsed.salt,
        parsed.hash,
    ) else {
        return false;
    };
    let version = parsed
        .version
        .and_then(|v| Version::try_from(v).ok())
        .unwrap_or_default();
    let argon = Argon2::new(algorithm, version, params.clone());
    compute(&argon, &params, password, salt, expected.len()).is_some_and(|out| out == expected)
}

/// Verifies a password against a stored hash. With no stored hash (unknown email, or an
/// invitation not yet accepted) it verifies against a fixed dummy hash, so that both answers
/// take the same time and the caller cannot tell which emails exist.
pub(crate) async fn verify(password: String, stored: Option<String>) -> AppResult<bool> {
    on_worker(move || {
        let has_real = stored.is_some();
        let encoded = stored.unwrap_or_else(|| dummy_hash().to_owned());
        matches(password.as_bytes(), &encoded) && has_real
    })
    .await
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

#[cfg(test)]
mod tests {
    use super::*;
    use argon2::PasswordVerifier;

    #[tokio::test]
    async fn hashes_verify_with_the_reference_implementation_and_back() {
        let ours = hash("correct horse battery staple".into()).await.unwrap();
        assert!(ours.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"correct horse battery staple", &parsed)
                .is_ok()
        );
        assert!(
            Argon2::default()
                .verify_password(b"wrong", &parsed)
                .is_err()
        );
        let salt = SaltString::generate(&mut rand_core::OsRng);
        let theirs = Argon2::default()
            .hash_password(b"another password!", &salt)
            .unwrap()
            .to_string();
        assert!(
            verify("another password!".into(), Some(theirs.clone()))
                .await
                .unwrap()
        );
        assert!(
            !verify("another password?".into(), Some(theirs))
                .await
                .unwrap()
        );
        assert!(
            !verify("correct horse battery staple".into(), None)
                .await
                .unwrap()
        );
        assert!(
            !verify("x".into(), Some("not a phc string".into()))
                .await
                .unwrap()
        );
    }
}
