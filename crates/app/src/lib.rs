//! Use cases, one per command, each one transaction on the store port deciding via `domain`.

#![forbid(unsafe_code)]

#[macro_use]
mod macros;

mod actor;
mod agents;
mod app;
mod audit;
mod auth;
mod bootstrap;
mod clock;
mod config;
mod customers;
#[cfg(feature = "demo")]
mod demo;
mod destinations;
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
mod payments;
mod proposals;
mod queue;
mod random;
mod resolutions;
pub mod runtime;
pub mod schema;
mod settlement;
mod users;
mod webhooks;

/// The reaper's claim counts, as `/metrics` reports them.
pub use tauros_store::ClaimCounts;

pub use actor::{Actor, Agent, Human};
pub use agents::{AgentCreated, AgentView, NewAgent};
pub use app::{App, Parts};
pub use auth::{Caller, Me, SignedIn};
pub use bootstrap::BootstrapOutcome;
pub use config::{
    AppConfig, DEFAULT_SIGN_IN_ADDRESS_FAILURES, DEFAULT_SIGN_IN_RECORD_ENTRIES, WebhookConfig,
    default_password_threads,
};
pub use customers::{CustomerChange, CustomerView, NewCustomer};
#[cfg(feature = "demo")]
pub use demo::DemoCredentials;
pub use destinations::{DestinationView, NewDestination};
pub use error::{AppError, AppResult, FieldError, KeyHolder, Limit, OtherKind};
pub use governance::Resolved;
pub use idempotency::Replayed;
pub use invoices::{
    DecisionView, DraftInput, EventView, ISSUE_JOB, InvoiceQuery, InvoiceView, IssueAnswer,
    IssueClaim, IssueRequest, IssueStart, IssueStop, IssuingView, LatestDecision, PreviewView,
    RevisionView, VerifyReport, WarningView, issue_business_key,
};
pub use jobs::{
    ClaimedJob, JobFailure, JobQuery, JobStats, MAIN_POOL, Pool, Redriven, Rescued, Retention,
    complete_in,
};
pub use lists::PageRequest;
pub use org::{AuditEventView, OrgSettingsChange, OrgUpdate, OrgView};
pub use proposals::ChangeView;
pub use queue::{Enqueued, JobView, NewJob, enqueue};
pub use resolutions::{PaymentResolutionView, ResolveOutcome};
pub use settlement::{InvoiceStanding, PaymentView, Recorded, SettlementEventView};
pub use users::{Deactivated, Invitation, Invited, UserView};
pub use webhooks::{
    AttemptRecorded, Delivery, DeliveryArgs, DeliveryRefused, NewWebhookEndpoint,
    WebhookAttemptView, WebhookDeliveryView, WebhookEndpointView, WithSecret,
};
