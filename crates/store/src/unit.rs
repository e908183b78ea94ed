//! The units of work the store hands out: a [`Reader`] or a [`Tx`].

use crate::claims::{ClaimRead, ClaimWrite};
use crate::error::StoreResult;
use crate::governance::{GovernanceRead, GovernanceWrite};
use crate::identity::{IdentityRead, IdentityWrite};
use crate::invoices::{InvoiceRead, InvoiceWrite};
use crate::jobs::{Claim, JobRead, JobRow, JobWrite};
use crate::parties::{PartyRead, PartyWrite};
use crate::presented::PresentedRead;
use crate::settlement::{SettlementRead, SettlementWrite};
use crate::turns::Lane;
use crate::webhooks::{WebhookRead, WebhookWrite};
use async_trait::async_trait;
use std::sync::Arc;

/// A database backend: hands out transactions and plain connections.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a write transaction (`BEGIN IMMEDIATE` on SQLite) for `lane`'s work, in its turn
    /// ([`crate::turns`]).
    async fn begin(&self, lane: Lane) -> StoreResult<Box<dyn Tx>>;
    /// A connection for reads outside a transaction, for `lane`'s work; it cannot write.
    async fn reader(&self, lane: Lane) -> StoreResult<Box<dyn Reader>>;
    /// Applies the embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Whether the database answers and every embedded migration is applied.
    async fn readiness(&self) -> StoreResult<bool>;
    /// Which backend this is (`postgres` or `sqlite`).
    fn backend(&self) -> &'static str;
    /// Claims the next due job of `claim.kinds` under a fresh lease, committed before its handler
    /// runs (`FOR UPDATE SKIP LOCKED` on PostgreSQL, the single writer on SQLite).
    async fn claim_job(&self, claim: &Claim<'_>) -> StoreResult<Option<JobRow>>;
    /// Returns when a committed enqueue may have made work available, or after `timeout`; a hint.
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

    /// Ends the unit writing nothing, once everything it read is durable. `Err`: something it read
    /// was lost (SQLite's shared commit failed), so its answer must not be given; a retry is safe.
    async fn abandon(self: Box<Self>) -> StoreResult<()>;
}
