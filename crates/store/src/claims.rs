//! The port for the claim protocol's claims and the invoice number sequence.

use crate::error::StoreResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// One effect's claim; `id` is the operation key, `state` `processing`, `complete` or `rejected`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ClaimRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub kind: String,
    pub business_key: String,
    pub fingerprint: String,
    pub state: String,
    pub response: Option<String>,
    pub admitted_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub retain_until: DateTime<Utc>,
}

/// Claims by state across the service, for `/metrics`.
#[derive(Clone, Copy, Debug, Default, sqlx::FromRow)]
pub struct ClaimCounts {
    pub processing: i64,
    pub complete: i64,
    /// Closed as rejected (the peer refused definitively).
    pub rejected: i64,
    /// When the oldest processing claim was admitted.
    pub oldest_processing: Option<DateTime<Utc>>,
}

/// Reads of claims.
#[async_trait]
pub trait ClaimRead: Send {
    async fn claim_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>>;
    /// Whether the org has a `processing` claim of `kind` keyed `key` or starting with `prefix`.
    async fn processing_claim_exists(
        &mut self,
        org_id: Uuid,
        kind: &str,
        key: &str,
        prefix: &str,
    ) -> StoreResult<bool>;
    /// Counts for the operators' gauges (every organisation; never shown to a tenant).
    async fn claim_counts(&mut self) -> StoreResult<ClaimCounts>;
}

/// Writes of claims; only in a write unit of work.
#[async_trait]
pub trait ClaimWrite: ClaimRead {
    /// Inserts a `processing` claim; `false` when its id exists (the unique key decides).
    async fn insert_claim(&mut self, claim: &ClaimRow) -> StoreResult<bool>;
    /// Reads the claim and locks it until the transaction ends.
    async fn lock_claim(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>>;
    /// Marks a `processing` claim complete with its response; `false` if it was not processing.
    async fn complete_claim(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        response: &str,
        completed_at: DateTime<Utc>,
        retain_until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Closes a `processing` claim as `rejected`; `false` if it was not processing.
    async fn reject_claim(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        completed_at: DateTime<Utc>,
        retain_until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Deletes up to `limit` finished claims past retention at `now`, skipping held rows.
    async fn clean_claims(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    /// Deletes up to `limit` processing claims older than `horizon` and past retention (database
    /// clock), inside a sanctioned reap (the delete guard refuses any other), skipping held rows.
    async fn reap_claims(&mut self, horizon: std::time::Duration, limit: i64) -> StoreResult<u64>;
    /// The organisation's next invoice number in `year` (1, 2, …), held by this transaction:
    /// a rollback gives it back, so the sequence has no gaps.
    async fn next_invoice_number(&mut self, org_id: Uuid, year: i32) -> StoreResult<i64>;
    /// Share-locks the org's number sequence of `year` (created at zero if needed): no invoice of
    /// that year is numbered before this commits, so an unused number stays unused meanwhile.
    async fn hold_invoice_numbers(&mut self, org_id: Uuid, year: i32) -> StoreResult<()>;
}
