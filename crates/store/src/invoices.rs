//! The port for invoices, their revisions, decisions and events.

use crate::error::StoreResult;
use crate::parties::Scope;

use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use tauros_domain::effect::IssuingStatus;
use tauros_domain::identity::{ActorKind, Interface};
use tauros_domain::invoice::{Action, DecisionKind, InvoiceState, OrgSettings};
use tauros_domain::job::JobState;
use uuid::Uuid;

/// An invoice's identity and lifecycle (all money lives on revisions).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct InvoiceRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub idempotency_key: String,
    #[sqlx(try_from = "crate::sql::Stored<InvoiceState>")]
    pub state: InvoiceState,
    /// Which command cancelled it (`withdraw` or `cancel`), once `cancelled`.
    #[sqlx(try_from = "crate::sql::StoredOpt<Action>")]
    pub cancelled_by: Option<Action>,
    pub number: Option<String>,
    pub current_revision_id: Uuid,
    pub revision_count: i32,
    pub first_payload_hash: String,
    pub event_count: i32,
    pub last_event_hash: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The latest decision on any of its revisions.
    pub last_decision_id: Option<Uuid>,
    /// Digits of how much of the total confirmed payments cover (settlement writes it).
    pub amount_paid_minor: String,
    /// Where issuing stands while it is not simply done (`null`: not issuing).
    #[sqlx(try_from = "crate::sql::StoredOpt<IssuingStatus>")]
    pub issuing_status: Option<IssuingStatus>,
    /// Why issuing stopped (the peer's reason, both values of a conflict, …).
    pub issuing_reason: Option<String>,
    /// The issue job of the current operation version, once one was enqueued.
    pub issuing_job_id: Option<Uuid>,
    /// The operation version issuing runs under (1, then 2, … after each issue-again).
    pub issue_version: i32,
    /// How many payments are matched to it (reconciliation keeps it; `set_settlement_figures`).
    pub payment_count: i32,
    /// Digits of the sum each matched payment would count alone; `None` until first reconciled.
    pub counted_minor: Option<String>,
}

/// One immutable revision: the financial content and its seal.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RevisionRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub invoice_id: Uuid,
    pub number: i32,
    pub customer_id: Uuid,
    pub payment_destination_id: Uuid,
    pub destination_network: String,
    pub destination_address: String,
    pub currency: String,
    pub due_date: NaiveDate,
    /// Digits of the total in minor units.
    pub total_minor: String,
    pub reasoning: String,
    /// The sealed content, stored once (`domain::payload::decode` reads it back); the columns
    /// above are copies SQL filters and sums, and `verify` checks.
    pub canonical_payload: String,
    pub payload_hash: String,
    pub created_at: DateTime<Utc>,
}

/// An invoice with its current revision and visibility facts, read by position in one statement.
#[derive(Clone, Debug)]
pub struct InvoiceJoined {
    pub revision: RevisionRow,
    pub agent_id: Uuid,
    pub idempotency_key: String,
    pub state: InvoiceState,
    /// Which command cancelled it (`withdraw` or `cancel`), once `cancelled`.
    pub cancelled_by: Option<Action>,
    pub invoice_number: Option<String>,
    pub revision_count: i32,
    pub first_payload_hash: String,
    pub invoice_created_at: DateTime<Utc>,
    pub invoice_updated_at: DateTime<Utc>,
    /// Digits of how much of the total confirmed payments cover.
    pub amount_paid_minor: String,
    /// Where issuing stands (see [`InvoiceRow::issuing_status`]).
    pub issuing_status: Option<IssuingStatus>,
    pub issuing_reason: Option<String>,
    pub issuing_job_id: Option<Uuid>,
    pub agent_owner_id: Uuid,
    pub last_decision: Option<DecisionKind>,
    pub last_decision_reason: Option<String>,
    pub last_decision_revision_id: Option<Uuid>,
    pub last_decided_at: Option<DateTime<Utc>>,
    pub issuing_attempts: Option<i32>,
    pub issuing_job_state: Option<JobState>,
    pub issuing_job_error: Option<String>,
    /// The org's settings; `None` where the statement skipped the org (a key's own reads).
    pub settings: Option<OrgSettings>,
}

/// A human's decision on one revision.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DecisionRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub invoice_id: Uuid,
    pub revision_id: Uuid,
    pub approver_id: Uuid,
    #[sqlx(try_from = "crate::sql::Stored<DecisionKind>")]
    pub decision: DecisionKind,
    pub payload_hash: String,
    pub reason: Option<String>,
    pub decided_at: DateTime<Utc>,
}

/// One link of an invoice's hash-chained audit trail.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EventRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub invoice_id: Uuid,
    pub seq: i32,
    #[sqlx(try_from = "crate::sql::Stored<Action>")]
    pub action: Action,
    #[sqlx(try_from = "crate::sql::StoredOpt<InvoiceState>")]
    pub from_state: Option<InvoiceState>,
    #[sqlx(try_from = "crate::sql::Stored<InvoiceState>")]
    pub to_state: InvoiceState,
    #[sqlx(try_from = "crate::sql::Stored<ActorKind>")]
    pub actor_kind: ActorKind,
    pub actor_id: Option<Uuid>,
    #[sqlx(try_from = "crate::sql::Stored<Interface>")]
    pub interface: Interface,
    pub revision_id: Option<Uuid>,
    pub payload_hash: Option<String>,
    pub idempotency_key: Option<String>,
    pub note: Option<String>,
    pub occurred_at: DateTime<Utc>,
    pub prev_hash: String,
    pub hash: String,
    /// Decisions only: the org's settings the decision was made under.
    pub four_eyes: Option<bool>,
    pub shared_review: Option<bool>,
}

/// Which invoices a list returns.
#[derive(Clone, Debug)]
pub struct InvoiceFilter {
    pub scope: Scope,
    pub state: Option<InvoiceState>,
    pub customer_id: Option<Uuid>,
    pub agent_id: Option<Uuid>,
    /// Only invoices whose latest decision, on the current revision, is this one.
    pub decision: Option<DecisionKind>,
    pub idempotency_key: Option<String>,
    /// Oldest first (the approver's inbox) instead of newest first.
    pub oldest_first: bool,
    /// Only overdue invoices (`true`) or only the others (`false`), as of `today`.
    pub overdue: Option<bool>,
    /// Today (UTC), for `overdue`.
    pub today: NaiveDate,
    pub issuing: Option<IssuingStatus>,
}

/// Reads of invoices' records, scoped by org.
#[async_trait]
pub trait InvoiceRead: Send {
    async fn invoice_joined(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<InvoiceJoined>>;
    async fn invoice_joined_by_key(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<InvoiceJoined>>;
    async fn invoices(
        &mut self,
        org_id: Uuid,
        filter: &InvoiceFilter,
        page: Page,
    ) -> StoreResult<Vec<InvoiceJoined>>;
    /// Whether the organisation has this invoice (a plain indexed read, no join).
    async fn invoice_exists(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool>;
    /// The invoice's state, if the organisation has it (a plain indexed read, no join).
    async fn invoice_state(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<InvoiceState>>;
    /// Up to `limit` invoices in `state` after `after`, every org: the issuing redrive's walk.
    async fn invoices_in_state(
        &mut self,
        state: InvoiceState,
        after: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Vec<(Uuid, Uuid, i32)>>;
    /// The invoice issued under `number`, if any.
    async fn invoice_id_by_number(
        &mut self,
        org_id: Uuid,
        number: &str,
    ) -> StoreResult<Option<Uuid>>;
    async fn revision_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<RevisionRow>>;
    /// A page of the invoice's revisions, oldest first; `page.after` is a revision's id.
    async fn revisions(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<RevisionRow>>;
    async fn decision_for_revision(
        &mut self,
        org_id: Uuid,
        revision_id: Uuid,
    ) -> StoreResult<Option<DecisionRow>>;
    async fn decisions(&mut self, org_id: Uuid, invoice_id: Uuid) -> StoreResult<Vec<DecisionRow>>;
    /// A page of the invoice's audit trail in `seq` order; `page.after` is an event's id.
    async fn events(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<EventRow>>;
    /// One event, by its id (a webhook delivery's `webhook-id`).
    async fn event_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<EventRow>>;
}

/// Writes and locking reads; only in a write unit of work.
#[async_trait]
pub trait InvoiceWrite: InvoiceRead {
    /// Inserts the invoice unless (org, agent, key) exists; false when it did.
    async fn insert_invoice(&mut self, invoice: &InvoiceRow) -> StoreResult<bool>;
    async fn update_invoice(&mut self, invoice: &InvoiceRow) -> StoreResult<()>;
    /// Writes the invoice's running settlement figures (`payment_count`, `counted_minor`).
    async fn set_settlement_figures(&mut self, invoice: &InvoiceRow) -> StoreResult<()>;
    /// Reads and locks the invoice row (`FOR UPDATE` on PostgreSQL).
    async fn lock_invoice(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<InvoiceRow>>;
    /// Inserts a revision; its failure may surface at the unit's next call or commit (SQLite).
    async fn insert_revision(&mut self, revision: &RevisionRow) -> StoreResult<()>;
    async fn insert_decision(&mut self, decision: &DecisionRow) -> StoreResult<()>;
    /// Inserts an audit event; reported like [`InvoiceWrite::insert_revision`].
    async fn insert_event(&mut self, event: &EventRow) -> StoreResult<()>;
}
