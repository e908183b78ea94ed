//! The storage port: what the app layer may ask of a database, and one adapter per backend.
//! SQL lives in this module tree and nowhere else; no business decision is made here.
//!
//! - `identity`, `parties`, `invoices`, `jobs`, `webhooks`, `claims` (the claim protocol's
//!   effect claims), `settlement`: the port, one file per area: its rows and a pair of traits,
//!   `…Read` (plain reads) and `…Write` (writes and locking reads).
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

#![forbid(unsafe_code)]

mod claims;
mod error;
mod formation;
mod governance;
mod identity;
mod invoices;
mod jobs;
mod parties;
mod postgres;
pub mod presented;
mod query;
mod settlement;
mod sql;
mod sqlite;
mod unit;
mod webhooks;

use std::sync::Arc;

pub use claims::{ClaimCounts, ClaimRead, ClaimRow, ClaimWrite};
pub use error::{Constraint, StoreError, StoreResult};
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
pub use parties::{
    CustomerRow, DestinationRow, DraftParties, DraftReads, PartyRead, PartyWrite, Proposer, Scope,
};
pub use postgres::{PgStore, PoolSettings};
pub use presented::{Presented, PresentedRead, Presenter};
pub use query::{Lock, Page};
pub use settlement::{
    PaymentFilter, PaymentResolutionRow, PaymentRow, SettlementEventRow, SettlementRead,
    SettlementWrite,
};
pub use sqlite::SqliteStore;
pub use unit::{DynStore, Reader, Store, Tx};
pub use webhooks::{
    EndpointHealth, WebhookAttemptListed, WebhookAttemptRow, WebhookDeliveryListed,
    WebhookDeliveryRow, WebhookEndpointRow, WebhookRead, WebhookWrite,
};

/// Opens the store named by a `DATABASE_URL` (`sqlite:…` or `postgres://…`).
pub async fn connect(url: &str, settings: PoolSettings) -> anyhow::Result<DynStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url, settings).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(
            SqliteStore::connect(url, settings.max_connections).await?,
        ))
    } else {
        anyhow::bail!("DATABASE_URL must start with sqlite: or postgres://")
    }
}
