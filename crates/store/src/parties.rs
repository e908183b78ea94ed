//! The port for customers and payment destinations.

use crate::error::StoreResult;
use crate::identity::AgentRow;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::destination::DestinationState;
pub use tauros_domain::visibility::Scope;
use uuid::Uuid;

/// A customer of an agent.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CustomerRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub name: String,
    pub email: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A payment destination; label, currency, network and address never change.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DestinationRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub label: String,
    pub currency: String,
    pub network: String,
    pub address: String,
    #[sqlx(try_from = "crate::sql::Stored<DestinationState>")]
    pub state: DestinationState,
    pub supersedes_id: Option<Uuid>,
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What [`PartyWrite::lock_draft_parties`] reads: a draft's parties and a create's proposer.
#[derive(Clone, Copy, Debug)]
pub struct DraftReads<'a> {
    pub customer_id: Uuid,
    pub destination_id: Uuid,
    /// A create's proposing agent, held with the parties.
    pub proposer: Option<Proposer<'a>>,
}

/// The agent a create holds with its parties, and the key it would take.
#[derive(Clone, Copy, Debug)]
pub struct Proposer<'a> {
    pub agent_id: Uuid,
    /// The key the create would take (an adapter may look it up with the rows).
    pub key: &'a str,
}

/// The rows a draft is checked against, read and locked together.
#[derive(Debug)]
pub struct DraftParties {
    /// The proposing agent's row, when asked for; `None` also when the agent is gone.
    pub agent: Option<AgentRow>,
    pub customer: Option<CustomerRow>,
    pub destination: Option<DestinationRow>,
    /// Whether an invoice of the agent holds the key (false when not looked up).
    pub key_taken: bool,
}

/// Reads of parties' records, scoped by org.
#[async_trait]
pub trait PartyRead: Send {
    async fn customer_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<CustomerRow>>;
    async fn customers(
        &mut self,
        org_id: Uuid,
        scope: Scope,
        page: Page,
    ) -> StoreResult<Vec<CustomerRow>>;
    /// Whether any revision references the customer.
    async fn customer_is_referenced(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool>;
    async fn destination_by_id(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DestinationRow>>;
    async fn destination_by_key(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<DestinationRow>>;
    async fn destinations(
        &mut self,
        org_id: Uuid,
        scope: Scope,
        state: Option<DestinationState>,
        page: Page,
    ) -> StoreResult<Vec<DestinationRow>>;
}

/// Writes and locking reads; only in a write unit of work.
#[async_trait]
pub trait PartyWrite: PartyRead {
    async fn insert_customer(&mut self, c: &CustomerRow) -> StoreResult<()>;
    async fn update_customer(&mut self, c: &CustomerRow) -> StoreResult<()>;
    async fn delete_customer(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;
    async fn insert_destination(&mut self, d: &DestinationRow) -> StoreResult<()>;
    /// Reads and locks the destination: drafts share-lock it, so it cannot be deactivated until
    /// they commit yet they do not queue behind each other; deactivation takes it exclusively.
    async fn lock_destination(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<DestinationRow>>;
    /// Reads and locks the customer (drafts share; delete and update take it exclusively).
    async fn lock_customer(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<CustomerRow>>;
    /// Reads and locks, in this order and in one call where the backend allows: the agent `reads`
    /// names (as [`IdentityWrite::lock_agent`] would), then the draft's customer and destination
    /// (as [`PartyWrite::lock_customer`] and [`PartyWrite::lock_destination`]), then the key.
    ///
    /// [`IdentityWrite::lock_agent`]: crate::identity::IdentityWrite::lock_agent
    async fn lock_draft_parties(
        &mut self,
        org_id: Uuid,
        reads: DraftReads<'_>,
        lock: Lock,
    ) -> StoreResult<DraftParties>;
    async fn set_destination_state(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        state: DestinationState,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
}
