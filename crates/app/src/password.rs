//! Argon2id hashing, deliberately slow, on a pool of dedicated threads ([`Passwords`]).
//!
//! Each hash maps its own 19 MiB and unmaps it when done, so an idle server holds none: the
//! reservation exceeds the 32 MiB glibc would keep resident in an arena ([`working_memory`]).
//! The queue is bounded: when full, a sign-in is answered 503 at once, not queued behind guesses.

use crate::error::{AppError, AppResult};
use argon2::password_hash::{
    self, Output, ParamsString, PasswordHash, PasswordHasher, Salt, SaltString,
};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The password hashing pool: `threads` workers behind `queue` places; stops with its last clone.
#[derive(Clone)]
pub(crate) struct Passwords {
    jobs: mpsc::SyncSender<Job>,
}

impl Passwords {
    pub(crate) fn start(threads: usize, queue: usize) -> Passwords {
        let (jobs, waiting) = mpsc::sync_channel::<Job>(queue);
        let waiting = Arc::new(Mutex::new(waiting));
        for n in 0..threads.max(1) {
            let waiting = Arc::clone(&waiting);
            let spawned = std::thread::Builder::new()
                .name(format!("tauros-argon2-{n}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take a job, never while running one.
                        let job = match waiting.lock() {
                            Ok(receiver) => receiver.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start a password hashing thread");
            }
        }
        Passwords { jobs }
    }

    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err(AppError::Busy),
            Err(TrySendError::Disconnected(_)) => {
                return Err(AppError::Internal(
                    "password hashing threads are gone".into(),
                ));
            }
        }
        rx.await
            .map_err(|_| AppError::Internal("password hashing job was dropped".into()))
    }

    /// A PHC string of a new Argon2id hash of `password`.
    pub(crate) async fn hash(&self, password: String) -> AppResult<String> {
        self.run(move || hash_now(&password)).await?
    }

    /// Whether `password` matches `stored`; with none stored, a dummy hash takes as long (`false`).
    pub(crate) async fn verify(&self, password: String, stored: Option<String>) -> AppResult<bool> {
        self.run(move || {
            let has_real = stored.is_some();
            let encoded = stored.unwrap_or_else(|| dummy_hash().to_owned());
            matches(password.as_bytes(), &encoded) && has_real
        })
        .await
    }
}

fn params() -> Params {
    Params::default()
}

/// Stored hashes whose memory cost exceeds this are refused rather than allocated.
const MAX_MEMORY_KIB: u32 = 64 * 1024;

/// glibc's `DEFAULT_MMAP_THRESHOLD_MAX` (64-bit): its mapping threshold's ceiling (mallopt(3)).
const GLIBC_MMAP_THRESHOLD_MAX: usize = 32 * 1024 * 1024;

/// Zeroed Argon2 working memory of `blocks` blocks, allocated larger than glibc ever keeps in an
/// arena so freeing it returns it; the unwritten extra capacity never becomes resident.
fn working_memory(blocks: usize) -> Vec<Block> {
    let reserve = (GLIBC_MMAP_THRESHOLD_MAX / std::mem::size_of::<Block>() + 1).max(blocks);
    let mut memory = Vec::with_capacity(reserve);
    memory.resize(blocks, Block::default());
    memory
}

/// The Argon2 output of `password` for `salt`, in working memory of its own.
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
    let mut memory = working_memory(params.block_count());
    Output::init_with(len, |out| {
        argon
            .hash_password_into_with_memory(password, salt, out, &mut memory[..])
            .map_err(|_| password_hash::Error::Password)
    })
    .ok()
}

/// Hashes a password; the PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`) is what is stored.
fn hash_now(password: &str) -> AppResult<String> {
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
}

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

/// The fixed hash `verify` checks against when nothing is stored, so both answers take as long.
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
        let pool = Passwords::start(1, 4);
        let ours = pool
            .hash("correct horse battery staple".into())
            .await
            .unwrap();
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
            pool.verify("another password!".into(), Some(theirs.clone()))
                .await
                .unwrap()
        );
        assert!(
            !pool
                .verify("another password?".into(), Some(theirs))
                .await
                .unwrap()
        );
        assert!(
            !pool
                .verify("correct horse battery staple".into(), None)
                .await
                .unwrap()
        );
        assert!(
            !pool
                .verify("x".into(), Some("not a phc string".into()))
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn a_full_queue_answers_busy_at_once_and_the_pool_recovers() {
        let pool = Passwords::start(1, 2);
        let floods: Vec<_> = (0..12)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move { pool.verify("guess".into(), None).await })
            })
            .collect();
        let mut busy = 0;
        for flood in floods {
            match flood.await.unwrap() {
                Ok(false) => {}
                Err(AppError::Busy) => busy += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        // One running and two waiting at most: the rest were turned away.
        assert!(busy >= 8, "only {busy} of 12 were turned away");
        assert!(pool.verify("guess".into(), None).await.is_ok());
    }
}
