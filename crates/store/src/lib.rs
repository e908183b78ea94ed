//! The storage port and one adapter per backend; SQL lives here and nowhere else, and no
//! business decision is made here. One file per area holds its rows and a `…Read`/`…Write`
//! trait pair; [`Reader`] has no write method (on SQLite it runs on the read pool, bypassing
//! the single writer). `sql/` implements each area once for every backend's unit.

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
mod turns;
mod unit;
mod webhooks;

use std::sync::Arc;

pub use claims::{ClaimCounts, ClaimRead, ClaimRow, ClaimWrite};
pub use error::{Constraint, StoreError, StoreResult};
pub use governance::{GovernanceRead, GovernanceWrite, OrgChangeRow};
pub use identity::{
    AgentRow, ApiKeyRow, AuditRow, DeviceTokenRow, IdentityRead, IdentityWrite, InvitationRow,
    KeyWithAgent, OrgRow, SessionRow, UserRow,
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
pub use turns::Lane;
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
