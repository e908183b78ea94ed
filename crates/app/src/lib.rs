//! Use cases: one function per command. Each opens a unit of work on the store, loads what it
//! needs, asks `domain` for the decision, writes rows and the audit event in that one
//! transaction, and commits. The app knows the database only through the `store` port.

#[macro_use]
mod macros;

mod actor;
mod agents;
mod audit;
mod auth;
mod bootstrap;
mod clock;
mod config;
mod customers;
#[cfg(feature = "demo")]
mod demo;
mod destinations;
mod durable;
mod error;
#[cfg(feature = "failpoints")]
pub mod failpoints;
mod governance;
mod idempotency;
mod invoices;
pub mod issuing;
mod jobs;
mod limits;
mod lists;
mod org;
mod password;
mod proposals;
mod random;
pub mod runtime;
mod settlement;
mod users;
mod webhooks;

use tauros_store::DynStore;

/// The reaper's claim counts, as `/metrics` reports them.
pub use tauros_store::ClaimCounts;

pub use actor::{Actor, Agent, Human};
pub use agents::{AgentView, NewAgent};
pub(crate) use audit::{AuditActor, audit};
pub use auth::{Caller, Me, SignedIn};
pub use bootstrap::BootstrapOutcome;
pub(crate) use clock::now;
pub use config::{AppConfig, default_password_threads};
pub use customers::{CustomerChange, CustomerView, NewCustomer};
#[cfg(feature = "demo")]
pub use demo::DemoCredentials;
pub use destinations::{DestinationView, NewDestination};
pub use durable::when_durable;
pub use error::{AppError, AppResult, FieldError, KeyHolder};
pub use governance::Resolved;
pub use idempotency::Replayed;
pub use invoices::{
    DecisionView, DraftInput, EventView, ISSUE_JOB, InvoiceQuery, InvoiceView, IssueClaim,
    IssueRequest, IssueStart, LatestDecision, RevisionView, VerifyReport,
};
pub use jobs::{
    ClaimedJob, Enqueued, JobFailure, JobQuery, JobStats, JobView, NewJob, Rescued, Retention,
    complete_in, enqueue,
};
pub use lists::PageRequest;
pub(crate) use lists::list_filter;
pub use org::{AuditEventView, OrgSettingsChange, OrgUpdate, OrgView};
pub use proposals::ChangeView;
pub(crate) use random::random_32;
pub use settlement::{InvoiceStanding, PaymentView, Recorded, SettlementEventView};
pub use users::{Invitation, Invited, UserView};
pub use webhooks::{
    Delivery, DeliveryArgs, DeliveryRefused, NewWebhookEndpoint, WebhookAttemptView, WebhookConfig,
    WebhookEndpointView, WithSecret,
};

/// The application: the store plus configuration. Cheap to clone (one shared handle: the
/// HTTP layer clones it for every request).
#[derive(Clone)]
pub struct App(std::sync::Arc<Parts>);

/// What an [`App`] shares between its clones.
pub struct Parts {
    store: DynStore,
    config: AppConfig,
    passwords: password::Passwords,
    credentials: limits::CredentialLimits,
    sign_ins: limits::SignInFailures,
}

impl std::ops::Deref for App {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

impl App {
    /// Builds the application over a store.
    pub fn new(store: DynStore, config: AppConfig) -> App {
        let passwords = password::Passwords::start(config.password_threads, config.password_queue);
        let credentials =
            limits::CredentialLimits::new(config.rate_limit_per_second, config.rate_limit_burst);
        let sign_ins = limits::SignInFailures::new(config.sign_in_failures, config.sign_in_window);
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
}
