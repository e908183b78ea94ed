//! The port for settlement: payments, their reported events, and matching to invoices.

use crate::error::StoreResult;
use crate::parties::Scope;

use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::resolution::ResolveAction;
use tauros_domain::settlement::{PaymentState, PaymentStatus, Unmatched};
use uuid::Uuid;

/// One payment as its source identifies it, with the reconciliation's answer.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PaymentRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub source: String,
    pub source_payment_id: String,
    /// Digits of the amount in minor units.
    pub amount_minor: String,
    pub currency: String,
    /// The invoice as the source named it: exactly one of the two.
    pub invoice_ref_id: Option<Uuid>,
    pub invoice_ref_number: Option<String>,
    /// The earliest event, whose facts the payment carries.
    pub first_at: DateTime<Utc>,
    pub first_event_id: String,
    /// The furthest state any event reported.
    #[sqlx(try_from = "crate::sql::Stored<PaymentState>")]
    pub state: PaymentState,
    pub conflict: bool,
    pub confirmed_at: Option<DateTime<Utc>>,
    /// The invoice it is matched to, once known.
    pub invoice_id: Option<Uuid>,
    /// Whose humans see it.
    pub agent_id: Uuid,
    /// What reconciliation made of it.
    #[sqlx(try_from = "crate::sql::Stored<PaymentStatus>")]
    pub status: PaymentStatus,
    #[sqlx(try_from = "crate::sql::StoredOpt<Unmatched>")]
    pub unmatched_reason: Option<Unmatched>,
    /// Digits of the part that counts toward the invoice.
    pub allocated_minor: String,
    pub event_count: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The resolution in force, if an approver resolved it (`payment_resolutions` keeps each).
    #[sqlx(try_from = "crate::sql::StoredOpt<ResolveAction>")]
    pub resolution: Option<ResolveAction>,
    /// Digits of the amount an `accept` or `allocate` counts it at.
    pub resolved_amount_minor: Option<String>,
}

/// One resolution an approver asked for (append-only but its decision), applied or proposed.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PaymentResolutionRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub payment_id: Uuid,
    #[sqlx(try_from = "crate::sql::Stored<ResolveAction>")]
    pub action: ResolveAction,
    /// `allocate`: the invoice.
    pub invoice_id: Option<Uuid>,
    /// `accept`, `allocate`: digits of the amount that counts.
    pub amount_minor: Option<String>,
    pub reason: String,
    pub requested_by: Uuid,
    pub idempotency_key: String,
    pub fingerprint: String,
    /// `applied`, `proposed` or `rejected`.
    pub state: String,
    pub change_id: Option<Uuid>,
    pub decided_by: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// One event as a source sent it (append-only).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SettlementEventRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub payment_id: Uuid,
    pub agent_id: Uuid,
    pub source: String,
    pub source_event_id: String,
    /// What a redelivery must match.
    pub fingerprint: String,
    #[sqlx(try_from = "crate::sql::Stored<PaymentState>")]
    pub status: PaymentState,
    pub amount_minor: String,
    pub currency: String,
    pub invoice_ref_id: Option<Uuid>,
    pub invoice_ref_number: Option<String>,
    pub occurred_at: DateTime<Utc>,
    pub raw: Option<String>,
    pub received_at: DateTime<Utc>,
}

/// Which payments a list returns, newest first.
#[derive(Clone, Debug)]
pub struct PaymentFilter {
    /// Whose payments (by the agent whose humans see them).
    pub scope: Scope,
    pub status: Option<PaymentStatus>,
}

/// Reads of payments and their events, scoped by org.
#[async_trait]
pub trait SettlementRead: Send {
    async fn payment_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<PaymentRow>>;
    async fn payment_by_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        source_payment_id: &str,
    ) -> StoreResult<Option<PaymentRow>>;
    async fn payments(
        &mut self,
        org_id: Uuid,
        filter: &PaymentFilter,
        page: Page,
    ) -> StoreResult<Vec<PaymentRow>>;
    /// Every payment matched to the invoice, oldest first.
    async fn payments_of_invoice(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
    ) -> StoreResult<Vec<PaymentRow>>;
    async fn settlement_event_by_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        source_event_id: &str,
    ) -> StoreResult<Option<SettlementEventRow>>;
    /// A page of the payment's events, in arrival order; `page.after` is an event's id.
    async fn settlement_events(
        &mut self,
        org_id: Uuid,
        payment_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<SettlementEventRow>>;
    /// The resolution that holds a human's idempotency key.
    async fn payment_resolution_by_key(
        &mut self,
        org_id: Uuid,
        requested_by: Uuid,
        key: &str,
    ) -> StoreResult<Option<PaymentResolutionRow>>;
    async fn payment_resolution_by_id(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<PaymentResolutionRow>>;
    /// Every resolution asked for on the payment, oldest first.
    async fn payment_resolutions(
        &mut self,
        org_id: Uuid,
        payment_id: Uuid,
    ) -> StoreResult<Vec<PaymentResolutionRow>>;
    /// The agent that owns a settlement source (the first to report under it), if any.
    async fn settlement_source_owner(
        &mut self,
        org_id: Uuid,
        source: &str,
    ) -> StoreResult<Option<Uuid>>;
}

/// Writes and locking reads; only in a write unit of work.
#[async_trait]
pub trait SettlementWrite: SettlementRead {
    /// Inserts the payment unless (org, source, source payment id) exists; false when it did.
    async fn insert_payment(&mut self, payment: &PaymentRow) -> StoreResult<bool>;
    /// Reads the payment and locks it until the transaction ends.
    async fn lock_payment(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<PaymentRow>>;
    async fn update_payment(&mut self, payment: &PaymentRow) -> StoreResult<()>;
    /// Locks the unmatched payments naming an invoice by `number`, oldest first.
    async fn lock_unmatched_by_number(
        &mut self,
        org_id: Uuid,
        number: &str,
    ) -> StoreResult<Vec<PaymentRow>>;
    /// Inserts the event unless (org, source, event id) exists; false when it did (key decides).
    async fn insert_settlement_event(&mut self, event: &SettlementEventRow) -> StoreResult<bool>;
    /// Inserts the resolution unless (org, requester, key) exists; false when it did.
    async fn insert_payment_resolution(&mut self, r: &PaymentResolutionRow) -> StoreResult<bool>;
    /// Records the decision on a proposed resolution (`state`, `decided_by`, `decided_at`).
    async fn decide_payment_resolution(&mut self, r: &PaymentResolutionRow) -> StoreResult<()>;
    /// Makes `agent_id` the source's owner unless it has one (the primary key decides); the owner.
    async fn claim_settlement_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        agent_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<Uuid>;
}
