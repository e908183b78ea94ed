//! The storage port: what the app layer may ask of a database, and one adapter per backend.
//! SQL lives in this module tree and nowhere else; no business decision is made here.

mod invoices;
mod parties;
mod postgres;
mod sql;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use uuid::Uuid;

pub use invoices::{
    DecisionRow, EventRow, InvoiceFilter, InvoiceJoined, InvoiceRow, InvoiceTx, RevisionRow,
};
pub use parties::{CustomerRow, DestinationRow, PartyTx, Scope};
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// What can go wrong below the app layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness or other constraint refused the write; `constraint` names it.
    #[error("constraint {constraint} refused the write")]
    Conflict {
        /// The constraint's name as declared in the migrations.
        constraint: &'static str,
    },
    /// The database could not be reached or timed out: safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else: a bug or a broken database.
    #[error("database error: {0}")]
    Other(#[source] sqlx::Error),
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;

/// An organisation and its settings.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct OrgRow {
    pub id: Uuid,
    pub name: String,
    pub four_eyes: bool,
    pub shared_review: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A human.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct UserRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    pub email_normalized: String,
    pub role: String,
    pub password_hash: Option<String>,
    pub is_bootstrap: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A human's session; only the token's hash is stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SessionRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub token_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A one-time invitation for a human to set a password.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct InvitationRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub invited_by: Uuid,
    pub token_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub accepted_at: Option<DateTime<Utc>>,
}

/// An agent; `capabilities` is the comma-joined storage form.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AgentRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub capabilities: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An API key row; the key id is the id embedded in the key string.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApiKeyRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub key_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// An API key and its agent, read in one statement.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct KeyWithAgent {
    #[sqlx(flatten)]
    pub agent: AgentRow,
    pub key_id: Uuid,
    pub key_hash: Vec<u8>,
    pub key_created_at: DateTime<Utc>,
    pub key_expires_at: DateTime<Utc>,
    pub key_revoked_at: Option<DateTime<Utc>>,
    pub key_last_used_at: Option<DateTime<Utc>>,
}

impl KeyWithAgent {
    /// The key row and the agent row.
    pub fn split(self) -> (ApiKeyRow, AgentRow) {
        let key = ApiKeyRow {
            id: self.key_id,
            org_id: self.agent.org_id,
            agent_id: self.agent.id,
            key_hash: self.key_hash,
            created_at: self.key_created_at,
            expires_at: self.key_expires_at,
            revoked_at: self.key_revoked_at,
            last_used_at: self.key_last_used_at,
        };
        (key, self.agent)
    }
}

/// A row of the org-level audit trail.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AuditRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub actor_kind: String,
    pub actor_id: Option<Uuid>,
    pub interface: String,
    pub action: String,
    pub subject_type: String,
    pub subject_id: Uuid,
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
}

/// A page request for keyset pagination over time-ordered (v7) ids, newest first.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    /// Return rows with ids strictly below this one.
    pub before: Option<Uuid>,
    /// How many rows at most (the caller asks for one more to learn whether a next page exists).
    pub limit: i64,
}

/// A database backend: hands out transactions and plain connections.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a write transaction (`BEGIN IMMEDIATE` on SQLite).
    async fn begin(&self) -> StoreResult<Box<dyn Tx>>;
    /// A connection for reads outside a transaction; `commit` on it is a no-op.
    async fn reader(&self) -> StoreResult<Box<dyn Tx>>;
    /// Applies the embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Whether the database answers and every embedded migration is applied.
    async fn readiness(&self) -> StoreResult<bool>;
    /// Which backend this is (`postgres` or `sqlite`).
    fn backend(&self) -> &'static str;
}

/// Shared handle to a store.
pub type DynStore = Arc<dyn Store>;

/// One unit of work. Dropping it without `commit` rolls back.
#[async_trait]
pub trait Tx: IdentityTx + PartyTx + InvoiceTx + Send {
    /// Makes every write of this unit durable.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// Organisations, humans, sessions, invitations, agents, keys and the org audit trail.
#[async_trait]
pub trait IdentityTx: Send {
    async fn insert_org(&mut self, org: &OrgRow) -> StoreResult<bool>;
    async fn org_by_id(&mut self, id: Uuid) -> StoreResult<Option<OrgRow>>;
    async fn org_by_name(&mut self, name: &str) -> StoreResult<Option<OrgRow>>;
    async fn update_org(&mut self, org: &OrgRow) -> StoreResult<()>;

    async fn insert_user(&mut self, user: &UserRow) -> StoreResult<()>;
    async fn user_by_email(&mut self, email_normalized: &str) -> StoreResult<Option<UserRow>>;
    async fn user_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<UserRow>>;
    async fn set_password(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        password_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;

    async fn insert_session(&mut self, session: &SessionRow) -> StoreResult<()>;
    async fn session_by_hash(&mut self, hash: &[u8]) -> StoreResult<Option<(SessionRow, UserRow)>>;
    async fn delete_session(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;

    async fn insert_invitation(&mut self, invitation: &InvitationRow) -> StoreResult<()>;
    /// Marks an unexpired, unused invitation accepted; `None` when no such invitation exists.
    /// One-time use is decided by this single conditional write.
    async fn accept_invitation(
        &mut self,
        hash: &[u8],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<InvitationRow>>;

    async fn insert_agent(&mut self, agent: &AgentRow) -> StoreResult<()>;
    async fn agent_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>>;
    /// Reads and locks the agent row (`FOR UPDATE` on PostgreSQL).
    async fn lock_agent(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>>;
    async fn agents_by_owner(
        &mut self,
        org_id: Uuid,
        owner_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<AgentRow>>;
    async fn update_agent(&mut self, agent: &AgentRow) -> StoreResult<()>;
    async fn delete_agent(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;
    /// Whether the agent owns any customer, destination or invoice.
    async fn agent_has_dependents(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool>;

    async fn insert_api_key(&mut self, key: &ApiKeyRow) -> StoreResult<()>;
    async fn api_key_by_id(&mut self, id: Uuid) -> StoreResult<Option<(ApiKeyRow, AgentRow)>>;
    async fn revoke_agent_keys(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    async fn touch_api_key(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    async fn active_key_expiry(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> StoreResult<Option<(DateTime<Utc>, Option<DateTime<Utc>>)>>;

    async fn insert_audit(&mut self, event: &AuditRow) -> StoreResult<()>;
    async fn audit_for_subject(
        &mut self,
        org_id: Uuid,
        subject_id: Uuid,
    ) -> StoreResult<Vec<AuditRow>>;
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
