//! [`App`]: the store and the configuration every use case runs against. The use cases are its
//! methods, one module per resource.

use crate::config::AppConfig;
use crate::error::AppResult;
use crate::limits::{CredentialLimits, SignInFailures};
use crate::password::Passwords;
use tauros_store::{DynStore, Tx};

/// The application: the store plus configuration. Cheap to clone (one shared handle: the
/// HTTP layer clones it for every request).
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

/// How often a command starts its unit of work again when rows it must lock changed under it
/// (each retry follows a concurrent commit, so this is never reached in practice).
pub(crate) const LOCK_ATTEMPTS: usize = 8;

/// Ends a unit of work (one transaction) with the answer decided in it: committed when the
/// answer is `Ok`, abandoned when it is `Err`. Either way it returns once everything the answer
/// was decided on is durable; if that failed, the error says so instead (a retry is safe).
/// Every unit ends here: a unit dropped unended is rolled back, and its answer is not to be
/// given (a request cancelled, a panic).
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

/// Sign-in attempts one client address may have in flight: half of what the password pool
/// holds (its threads and waiting places), at least one, so one address always leaves the other
/// half to everyone else (17 or 18 places by default: 8 or 9 per address).
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

    /// Entries the failed-sign-in record holds now (emails and addresses), for tests and
    /// operators: it never exceeds `sign_in_record_entries`.
    pub fn sign_in_record_entries(&self) -> usize {
        self.sign_ins.entries()
    }
}
