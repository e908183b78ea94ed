//! Use cases: one function per command. Each opens a unit of work on the store, loads what it
//! needs, asks `domain` for the decision, writes rows and the audit event in that one
//! transaction, and commits. The app knows the database only through the `store` port.

/// `failpoint!(org_id, Point);`: a failpoint (tests only, feature `failpoints`; see
/// `failpoints.rs`). It fails the use case right there (503, retryable) when a test armed
/// `Point` for the organisation `org_id`; without the feature it expands to nothing. Defined
/// before the modules below, so every one of them sees it.
macro_rules! failpoint {
    ($org_id:expr, $point:ident) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoints::hit($org_id, $crate::failpoints::Failpoint::$point)?;
    };
}

mod agents;
mod auth;
mod bootstrap;
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
mod org;
mod password;
mod proposals;
pub mod runtime;
mod settlement;
mod users;
mod webhooks;

use tauros_domain::identity::{ActorKind, Capabilities, Capability, Interface, Role};
use tauros_store::{AuditRow, DynStore, Lock, Page, Tx};

use chrono::{DateTime, Duration, DurationRound, Utc};
/// The reaper's claim counts, as `/metrics` reports them.
pub use tauros_store::ClaimCounts;
use uuid::Uuid;

pub use agents::{AgentView, NewAgent};
pub use auth::{Me, SignedIn};
pub use bootstrap::BootstrapOutcome;
pub use customers::{CustomerChange, CustomerView, NewCustomer};
#[cfg(feature = "demo")]
pub use demo::DemoCredentials;
pub use destinations::{DestinationView, NewDestination};
pub use error::{AppError, AppResult, FieldError, KeyHolder};
pub use governance::Resolved;
pub use invoices::{
    DecisionView, DraftInput, EventView, ISSUE_JOB, InvoiceQuery, InvoiceView, IssueClaim,
    IssueRequest, IssueStart, LatestDecision, RevisionView, VerifyReport,
};
pub use jobs::{
    ClaimedJob, Enqueued, JobFailure, JobQuery, JobStats, JobView, NewJob, Rescued, Retention,
    complete_in, enqueue,
};
pub use org::{AuditEventView, OrgSettingsChange, OrgUpdate, OrgView};
pub use proposals::ChangeView;
pub use settlement::{InvoiceStanding, PaymentView, Recorded, SettlementEventView};
pub use users::{Invitation, Invited, UserView};
pub use webhooks::{
    Delivery, DeliveryArgs, DeliveryRefused, NewWebhookEndpoint, WebhookAttemptView, WebhookConfig,
    WebhookEndpointView, WithSecret,
};

/// A command's answer: the record as it is now, and whether the command had already been
/// applied before (a replay: nothing was written, no event recorded).
#[derive(Clone, Debug)]
pub struct Replayed<T> {
    pub value: T,
    pub replayed: bool,
}

impl<T> Replayed<T> {
    /// The command wrote this just now.
    pub fn fresh(value: T) -> Replayed<T> {
        Replayed {
            value,
            replayed: false,
        }
    }

    /// The command's goal already held; nothing was written.
    pub fn replay(value: T) -> Replayed<T> {
        Replayed {
            value,
            replayed: true,
        }
    }
}

/// One page of a list: keyset pagination over time-ordered (v7) ids.
#[derive(Clone, Copy, Debug)]
pub struct PageRequest {
    /// Continue after this id (the last id of the previous page), in the list's order.
    pub after: Option<Uuid>,
    /// How many rows at most; the caller asks for one more than it shows, to learn whether a
    /// next page exists.
    pub limit: i64,
}

impl From<PageRequest> for Page {
    fn from(p: PageRequest) -> Page {
        Page {
            after: p.after,
            limit: p.limit,
        }
    }
}

/// Lifetimes and costs the operator may tune.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// How long a human's session token lives.
    pub session_ttl: Duration,
    /// How long a newly issued API key lives.
    pub api_key_ttl: Duration,
    /// How long an invitation may be accepted.
    pub invitation_ttl: Duration,
    /// Threads that hash passwords (each hash maps 19 MiB of working memory and returns it).
    pub password_threads: usize,
    /// Password hashing jobs that may wait; beyond that a sign-in hears 503 at once.
    pub password_queue: usize,
    /// Requests a second per credential (0: no limit), and the burst above that rate.
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// Failed sign-ins per email and client address within `sign_in_window` (0: no limit).
    pub sign_in_failures: u32,
    pub sign_in_window: std::time::Duration,
    /// Whether an issuer is configured: approving then enqueues the issue job.
    pub issuer_configured: bool,
    /// How long a completed effect claim is kept (with the peer's stored response, for operators).
    pub claim_retention: Duration,
    /// Where deliveries may go, and the key that seals signing secrets.
    pub webhooks: WebhookConfig,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            session_ttl: Duration::hours(12),
            api_key_ttl: Duration::days(365),
            invitation_ttl: Duration::days(7),
            password_threads: default_password_threads(),
            password_queue: 16,
            rate_limit_per_second: 100,
            rate_limit_burst: 200,
            sign_in_failures: 10,
            sign_in_window: std::time::Duration::from_secs(15 * 60),
            issuer_configured: false,
            claim_retention: Duration::days(tauros_domain::effect::DEFAULT_RETENTION_DAYS),
            webhooks: WebhookConfig::default(),
        }
    }
}

/// Half the machine's cores (at least one, at most four): sign-ins never take every core
/// from the API.
pub fn default_password_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() / 2)
        .clamp(1, 4)
}

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

/// A signed-in human, as established by their session token.
#[derive(Clone, Debug)]
pub struct Human {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    pub role: Role,
    /// The session this request came with (ended by sign-out).
    pub session_id: Uuid,
    /// The entry point the request came through, recorded in the audit trail.
    pub interface: Interface,
}

/// An agent, as established by its API key.
#[derive(Clone, Debug)]
pub struct Agent {
    pub id: Uuid,
    pub org_id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub capabilities: Capabilities,
    /// The entry point the request came through, recorded in the audit trail.
    pub interface: Interface,
}

/// Whoever is calling.
#[derive(Clone, Debug)]
pub enum Actor {
    /// A human with a session.
    Human(Human),
    /// An agent with a key.
    Agent(Agent),
}

impl Actor {
    /// The caller's organisation.
    pub fn org_id(&self) -> Uuid {
        match self {
            Actor::Human(h) => h.org_id,
            Actor::Agent(a) => a.org_id,
        }
    }

    /// The caller's own id (the agent's or the human's).
    pub fn id(&self) -> Uuid {
        match self {
            Actor::Human(h) => h.id,
            Actor::Agent(a) => a.id,
        }
    }

    /// The entry point the caller came through (`api`, `mcp`, …): set by Tauros when it
    /// authenticated the request, never by the caller, and never used for authorisation.
    pub fn interface(&self) -> Interface {
        match self {
            Actor::Human(h) => h.interface,
            Actor::Agent(a) => a.interface,
        }
    }

    /// Routes on customers, destinations and invoices need `invoicing`, settlement routes
    /// `settlement` (docs/contract/domain.md §1). Only agents' keys carry capabilities; a human's
    /// role decides for them. Checked right after authentication, before any record is looked up.
    pub fn require(&self, capability: Capability) -> AppResult<()> {
        match self {
            Actor::Agent(a) if !a.capabilities.has(capability) => {
                Err(AppError::MissingCapability(capability.as_str()))
            }
            _ => Ok(()),
        }
    }

    /// The human, or 403 for an agent.
    pub fn human(&self) -> AppResult<&Human> {
        match self {
            Actor::Human(h) => Ok(h),
            Actor::Agent(_) => Err(AppError::Forbidden(
                "this route is for humans; agents may not call it",
            )),
        }
    }
}

impl Agent {
    /// Share-locks this agent's row for the rest of the transaction, so it cannot be deleted
    /// before what the agent writes commits. An agent deleted since its key was checked gets
    /// what a request after the delete gets: 401.
    pub(crate) async fn hold(&self, tx: &mut dyn Tx) -> AppResult<()> {
        match tx.lock_agent(self.org_id, self.id, Lock::Share).await? {
            Some(_) => {
                failpoint!(self.org_id, AgentHeld);
                Ok(())
            }
            None => Err(AppError::Unauthorized),
        }
    }
}

impl Human {
    /// The human if an approver, else 403.
    pub fn approver(&self) -> AppResult<&Human> {
        match self.role {
            Role::Approver => Ok(self),
            Role::Operator => Err(AppError::Forbidden("only an approver may do this")),
        }
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

/// The current time at the database's precision (microseconds), so both backends round-trip it.
pub(crate) fn now() -> DateTime<Utc> {
    let t = Utc::now();
    t.duration_trunc(Duration::microseconds(1)).unwrap_or(t)
}

/// 32 bytes from the operating system's CSPRNG.
pub(crate) fn random_32() -> [u8; 32] {
    use rand_core::{OsRng, RngCore};
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    bytes
}

/// A list's optional filter by one of `all` (named by `name`): the value, or `None` with an
/// `invalid_value` error that lists every accepted name.
pub(crate) fn list_filter<T: Copy>(
    field: &str,
    sent: Option<&str>,
    all: &[T],
    name: fn(T) -> &'static str,
    errors: &mut Vec<FieldError>,
) -> Option<T> {
    let sent = sent?;
    let found = all.iter().copied().find(|v| name(*v) == sent);
    if found.is_none() {
        let names: Vec<&str> = all.iter().map(|v| name(*v)).collect();
        errors.push(FieldError::plain(
            field,
            "invalid_value",
            format!("{field} must be one of {}", names.join(", ")),
        ));
    }
    found
}

/// Who did something, for the audit trail.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AuditActor {
    pub(crate) kind: ActorKind,
    pub(crate) id: Option<Uuid>,
    pub(crate) interface: Interface,
}

impl AuditActor {
    pub(crate) fn human(h: &Human) -> AuditActor {
        AuditActor {
            kind: ActorKind::Human,
            id: Some(h.id),
            interface: h.interface,
        }
    }

    pub(crate) fn agent(a: &Agent) -> AuditActor {
        AuditActor {
            kind: ActorKind::Agent,
            id: Some(a.id),
            interface: a.interface,
        }
    }

    pub(crate) fn of(actor: &Actor) -> AuditActor {
        match actor {
            Actor::Human(h) => AuditActor::human(h),
            Actor::Agent(a) => AuditActor::agent(a),
        }
    }

    pub(crate) fn job() -> AuditActor {
        AuditActor {
            kind: ActorKind::System,
            id: None,
            interface: Interface::Job,
        }
    }

    pub(crate) fn cli() -> AuditActor {
        AuditActor {
            kind: ActorKind::System,
            id: None,
            interface: Interface::Cli,
        }
    }
}

/// Appends one row to the org's audit trail, inside the caller's transaction.
pub(crate) async fn audit(
    tx: &mut dyn Tx,
    org_id: Uuid,
    actor: AuditActor,
    action: &str,
    subject: (&str, Uuid),
    detail: serde_json::Value,
) -> AppResult<()> {
    tx.insert_audit(&AuditRow {
        id: Uuid::now_v7(),
        org_id,
        actor_kind: actor.kind.as_str().to_owned(),
        actor_id: actor.id,
        interface: actor.interface.as_str().to_owned(),
        action: action.to_owned(),
        subject_type: subject.0.to_owned(),
        subject_id: subject.1,
        detail: detail.to_string(),
        occurred_at: now(),
    })
    .await?;
    Ok(())
}

/// Runs one request's work and holds its answer back until everything the answer was decided
/// on is durable (see [`tauros_store::when_durable`]); `Err` when that failed: the answer must
/// not be sent, and a retry is safe.
pub async fn when_durable<F: std::future::Future>(work: F) -> (F::Output, AppResult<()>) {
    let (output, durable) = tauros_store::when_durable(work).await;
    (output, durable.map_err(AppError::from))
}
