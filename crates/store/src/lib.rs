//! The storage port: what the app layer may ask of a database, and one adapter per backend.
//! SQL lives in this module tree and nowhere else; no business decision is made here.
//!
//! - `identity`, `parties`, `invoices`, `jobs`, `webhooks`, `effects`, `settlement`: the port,
//!   one file per area: its rows and a pair of traits, `…Read` (plain reads) and `…Write` (writes
//!   and locking reads).
//! - [`Reader`] is a unit of work that can only read: on SQLite it runs on the read pool, so a
//!   write through it would bypass the single writer; its type has no write method at all.
//!   [`Tx`] is a write transaction and can also read.
//! - `sql/`: the statements both backends share, written once (`$n` placeholders, `returning`,
//!   `on conflict`): one file per area implements that area's traits once, for every backend's
//!   unit of work (`impl<U: Backend> InvoiceRead for U`), each statement a named function or a
//!   named SQL text.
//! - `postgres.rs`, `sqlite.rs`: the adapters: pools, their unit's `sql::Backend` (how a
//!   statement runs, error classification, lock suffixes), and each one's backend-only
//!   statements (marked as such: the job queue's `FOR UPDATE SKIP LOCKED` and
//!   `LISTEN/NOTIFY` are PostgreSQL-only and belong there).

mod effects;
mod governance;
mod identity;
mod invoices;
mod jobs;
mod parties;
mod postgres;
pub mod presented;
mod settlement;
mod sql;
mod sqlite;
mod webhooks;

use async_trait::async_trait;
use std::sync::Arc;
use uuid::Uuid;

pub use effects::{ClaimCounts, ClaimRead, ClaimRow, ClaimWrite};
pub use governance::{GovernanceRead, GovernanceWrite, OrgChangeRow};
pub use identity::{
    AgentRow, ApiKeyRow, AuditRow, IdentityRead, IdentityWrite, InvitationRow, KeyWithAgent,
    OrgRow, SessionRow, UserRow,
};
pub use invoices::{
    DecisionRow, EventRow, InvoiceFilter, InvoiceJoined, InvoiceRead, InvoiceRow, InvoiceWrite,
    RevisionRow,
};
pub use jobs::{
    Claim, Fence, JobCount, JobFilter, JobRead, JobRow, JobUpdate, JobWrite, SubmissionRow,
    TestExecutionRow,
};
pub use parties::{CustomerRow, DestinationRow, PartyRead, PartyWrite, Scope};
pub use postgres::PgStore;
pub use presented::{Presented, PresentedRead, Presenter};
pub use settlement::{
    PaymentFilter, PaymentRow, SettlementEventRow, SettlementRead, SettlementWrite,
};
pub use sqlite::SqliteStore;
pub use webhooks::{
    WebhookAttemptListed, WebhookAttemptRow, WebhookEndpointRow, WebhookRead, WebhookWrite,
};

/// What can go wrong below the app layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness constraint the app reacts to refused the write.
    #[error("constraint {} refused the write", .0.name())]
    Conflict(Constraint),
    /// A row the write refers to is gone (a foreign-key violation): a concurrent delete won.
    /// The app locks what it checks, so this is a backstop, answered as an unknown record.
    #[error("a referenced row is gone: {0}")]
    ReferenceGone(#[source] sqlx::Error),
    /// The database could not be reached or timed out: safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else: a bug or a broken database.
    #[error("database error: {0}")]
    Other(#[source] sqlx::Error),
}

/// The unique constraints the app layer reacts to (a race's loser, a reused key). Any other
/// violation is a bug and surfaces as [`StoreError::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// One organisation per name.
    OrgName,
    /// One human per email, across organisations.
    UserEmail,
    /// One bootstrap approver per organisation.
    OneBootstrapPerOrg,
    SessionToken,
    InvitationToken,
    /// One destination per (org, agent, idempotency key).
    DestinationKey,
    /// A destination is superseded at most once.
    DestinationSupersedes,
    /// One invoice per (org, agent, idempotency key).
    InvoiceKey,
    /// One decision per revision.
    DecisionPerRevision,
}

impl Constraint {
    /// Every constraint the app reacts to.
    pub const ALL: [Constraint; 9] = [
        Constraint::OrgName,
        Constraint::UserEmail,
        Constraint::OneBootstrapPerOrg,
        Constraint::SessionToken,
        Constraint::InvitationToken,
        Constraint::DestinationKey,
        Constraint::DestinationSupersedes,
        Constraint::InvoiceKey,
        Constraint::DecisionPerRevision,
    ];

    /// The name declared in the migrations (PostgreSQL reports it).
    pub fn name(self) -> &'static str {
        match self {
            Constraint::OrgName => "orgs_name_key",
            Constraint::UserEmail => "users_email_key",
            Constraint::OneBootstrapPerOrg => "users_one_bootstrap_per_org",
            Constraint::SessionToken => "sessions_token_hash_key",
            Constraint::InvitationToken => "invitations_token_hash_key",
            Constraint::DestinationKey => "payment_destinations_idempotency_key",
            Constraint::DestinationSupersedes => "payment_destinations_supersedes_key",
            Constraint::InvoiceKey => "invoices_idempotency_key",
            Constraint::DecisionPerRevision => "decisions_revision_key",
        }
    }

    /// The columns SQLite names instead (`UNIQUE constraint failed: <columns>`).
    pub fn sqlite_columns(self) -> &'static str {
        match self {
            Constraint::OrgName => "orgs.name",
            Constraint::UserEmail => "users.email_normalized",
            Constraint::OneBootstrapPerOrg => "users.org_id",
            Constraint::SessionToken => "sessions.token_hash",
            Constraint::InvitationToken => "invitations.token_hash",
            Constraint::DestinationKey => {
                "payment_destinations.org_id, payment_destinations.agent_id, payment_destinations.idempotency_key"
            }
            Constraint::DestinationSupersedes => "payment_destinations.supersedes_id",
            Constraint::InvoiceKey => {
                "invoices.org_id, invoices.agent_id, invoices.idempotency_key"
            }
            Constraint::DecisionPerRevision => "decisions.revision_id",
        }
    }
}

/// How a locking read holds its row until the transaction ends (PostgreSQL row locks; on
/// SQLite the single writer already serializes write transactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Others may share it too, but nobody may change or delete the row (`FOR SHARE`).
    Share,
    /// Nobody else may lock, change or delete the row (`FOR UPDATE`).
    Update,
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;

/// A page request for keyset pagination over time-ordered (v7) ids.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    /// Return rows after this id in the list's order (below it newest first, above it oldest
    /// first).
    pub after: Option<Uuid>,
    /// How many rows at most (the caller asks for one more to learn whether a next page exists).
    pub limit: i64,
}

/// A database backend: hands out transactions and plain connections.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a write transaction (`BEGIN IMMEDIATE` on SQLite).
    async fn begin(&self) -> StoreResult<Box<dyn Tx>>;
    /// A connection for reads outside a transaction; it cannot write.
    async fn reader(&self) -> StoreResult<Box<dyn Reader>>;
    /// Applies the embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Whether the database answers and every embedded migration is applied.
    async fn readiness(&self) -> StoreResult<bool>;
    /// Which backend this is (`postgres` or `sqlite`).
    fn backend(&self) -> &'static str;
    /// Claims the next due job of one of `claim.kinds` in a short transaction of its own: the
    /// job becomes `running` under the claim's fresh lease, with one more execution. The
    /// handler runs after this has committed. Backend-only: `FOR UPDATE SKIP LOCKED` on
    /// PostgreSQL, the single writer on SQLite.
    async fn claim_job(&self, claim: &Claim<'_>) -> StoreResult<Option<JobRow>>;
    /// Returns when a committed enqueue may have made work available, or after `timeout`
    /// (`LISTEN` on PostgreSQL, an in-process notify on SQLite). Only a hint: workers poll.
    async fn wait_for_jobs(&self, timeout: std::time::Duration);
}

/// Shared handle to a store.
pub type DynStore = Arc<dyn Store>;

/// A unit of work that only reads.
pub trait Reader:
    IdentityRead
    + GovernanceRead
    + PartyRead
    + InvoiceRead
    + JobRead
    + ClaimRead
    + WebhookRead
    + SettlementRead
    + PresentedRead
    + Send
{
}

/// The outcome of a shared commit, as a unit waiting for it sees it: `None` until it is
/// known, then `Ok` or the error's text.
pub(crate) type CommitOutcome = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

tokio::task_local! {
    /// Shared commits the current request's answer depends on (see [`when_durable`]).
    static UNSETTLED: std::cell::RefCell<Vec<CommitOutcome>>;
}

/// Records, for the running request, that its answer depends on a shared commit (a unit read
/// writes that commit will make durable, and ended without committing). Outside
/// [`when_durable`] (a job, a command-line run) there is no answer to hold back.
pub(crate) fn answer_after(outcome: CommitOutcome) {
    let _ = UNSETTLED.try_with(|pending| pending.borrow_mut().push(outcome));
}

/// Runs `answer` (one request's work), then waits until every shared commit whose
/// uncommitted writes a unit of that work read, and then dropped without committing, has
/// ended. `Err`: one of them failed, so the answer was decided on writes that are now lost and
/// must not be sent (the caller answers 503 instead; a retry sees the truth).
///
/// Only SQLite's group commit has such units: a unit sees the units released before it into
/// the same shared transaction, and a replay or a refusal decided on them ends without a
/// commit of its own. A unit that commits waits for its group itself, and PostgreSQL never
/// shows a transaction another's uncommitted writes, so elsewhere this waits for nothing.
pub async fn when_durable<F: std::future::Future>(answer: F) -> (F::Output, StoreResult<()>) {
    let (output, pending) = UNSETTLED
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = answer.await;
            let pending = UNSETTLED.with(|p| std::mem::take(&mut *p.borrow_mut()));
            (output, pending)
        })
        .await;
    for mut outcome in pending {
        let settled = outcome
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|o| o.clone());
        match settled {
            Some(Ok(())) => {}
            Some(Err(message)) => return (output, Err(lost(&message))),
            None => return (output, Err(lost("the shared commit was abandoned"))),
        }
    }
    (output, Ok(()))
}

/// The error of a unit whose shared commit failed: nothing it was part of is durable, and
/// nothing was acknowledged, so a retry is safe.
pub(crate) fn lost(message: &str) -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(format!(
        "the shared commit failed: {message}"
    ))))
}

/// A write transaction. Dropping it without `commit` rolls back.
#[async_trait]
pub trait Tx:
    Reader
    + IdentityWrite
    + GovernanceWrite
    + PartyWrite
    + InvoiceWrite
    + JobWrite
    + ClaimWrite
    + WebhookWrite
    + SettlementWrite
{
    /// Makes every write of this unit durable.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// Opens the store named by a `DATABASE_URL` (`sqlite:…` or `postgres://…`).
pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<DynStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url, max_connections).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url, max_connections).await?))
    } else {
        anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://")
    }
}
