//! [`App`]: the store and configuration every use case runs against, one module per resource.

use crate::config::AppConfig;
use crate::error::AppResult;
use crate::limits::{CredentialLimits, SignInFailures};
use crate::password::Passwords;
use tauros_store::{DynStore, Tx};

/// The application: the store plus configuration; cheap to clone (one shared handle).
#[derive(Clone)]
pub struct App(std::sync::Arc<Parts>);

/// What an [`App`] shares between its clones.
pub struct Parts {
    pub(crate) store: DynStore,
    pub(crate) config: AppConfig,
    pub(crate) passwords: Passwords,
    pub(crate) credentials: CredentialLimits,
    pub(crate) sign_ins: SignInFailures,
}

impl std::ops::Deref for App {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// Restarts of a unit whose locked rows changed under it (each follows a concurrent commit).
pub(crate) const LOCK_ATTEMPTS: usize = 8;

/// Ends a unit with its answer: committed on `Ok`, abandoned on `Err`, returning once what the
/// answer was decided on is durable (else the error; a retry is safe). A unit dropped unended
/// is rolled back and its answer never given.
pub(crate) async fn finish<T>(tx: Box<dyn Tx>, answer: AppResult<T>) -> AppResult<T> {
    match answer {
        Ok(answer) => {
            tx.commit().await?;
            Ok(answer)
        }
        Err(refused) => {
            tx.abandon().await?;
            Err(refused)
        }
    }
}

/// Sign-in attempts one address may have in flight: half the password pool's places, at least one.
fn sign_in_in_flight_per_address(config: &AppConfig) -> u32 {
    let pool = config.password_threads.max(1) + config.password_queue;
    u32::try_from(pool / 2).unwrap_or(u32::MAX).max(1)
}

impl App {
    /// Builds the application over a store.
    pub fn new(store: DynStore, config: AppConfig) -> App {
        let passwords = Passwords::start(config.password_threads, config.password_queue);
        let credentials =
            CredentialLimits::new(config.rate_limit_per_second, config.rate_limit_burst);
        let sign_ins = SignInFailures::new(
            config.sign_in_failures,
            config.sign_in_address_failures,
            config.sign_in_window,
            config.sign_in_record_entries,
            sign_in_in_flight_per_address(&config),
        );
        App(std::sync::Arc::new(Parts {
            store,
            config,
            passwords,
            credentials,
            sign_ins,
        }))
    }

    /// The store (for readiness checks and tests).
    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// Entries the failed-sign-in record holds now (at most `sign_in_record_entries`).
    pub fn sign_in_record_entries(&self) -> usize {
        self.sign_ins.entries()
    }
}
