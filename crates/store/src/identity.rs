//! The port for orgs, humans, sessions, invitations, agents, API keys and the org audit trail.

use crate::error::StoreResult;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::identity::{ActorKind, Interface};
use uuid::Uuid;

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
    /// Set when an approver deactivated the human; they can no longer sign in.
    pub deactivated_at: Option<DateTime<Utc>>,
}

/// A human's opaque token: a session, or a device (docs/SECURITY.md, "Nobody can lock a human
/// out"); only the token's hash is stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TokenRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub user_id: Uuid,
    pub token_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A human's session.
pub type SessionRow = TokenRow;

/// A device a human signed in from.
pub type DeviceTokenRow = TokenRow;

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
    #[sqlx(try_from = "crate::sql::Stored<ActorKind>")]
    pub actor_kind: ActorKind,
    pub actor_id: Option<Uuid>,
    #[sqlx(try_from = "crate::sql::Stored<Interface>")]
    pub interface: Interface,
    pub action: String,
    pub subject_type: String,
    pub subject_id: Uuid,
    pub detail: String,
    pub occurred_at: DateTime<Utc>,
}

/// Reads of identities, scoped by org except the look-ups that establish who is calling.
#[async_trait]
pub trait IdentityRead: Send {
    async fn org_by_id(&mut self, id: Uuid) -> StoreResult<Option<OrgRow>>;
    async fn org_by_name(&mut self, name: &str) -> StoreResult<Option<OrgRow>>;
    /// The humans holding `email_normalized` in any organisation, oldest first, at most `limit`.
    async fn users_by_email(
        &mut self,
        email_normalized: &str,
        limit: i64,
    ) -> StoreResult<Vec<UserRow>>;
    /// The invitation whose token hashes to `hash`, used or not.
    async fn invitation_by_hash(&mut self, hash: &[u8]) -> StoreResult<Option<InvitationRow>>;
    /// The human holding `email_normalized` in the organisation.
    async fn user_by_org_email(
        &mut self,
        org_id: Uuid,
        email_normalized: &str,
    ) -> StoreResult<Option<UserRow>>;
    async fn user_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<UserRow>>;
    async fn session_by_hash(&mut self, hash: &[u8]) -> StoreResult<Option<(SessionRow, UserRow)>>;
    /// The device token whose hash is `hash`, expired or not, and its human.
    async fn device_by_hash(
        &mut self,
        hash: &[u8],
    ) -> StoreResult<Option<(DeviceTokenRow, UserRow)>>;
    /// When an operator last cleared the failed sign-ins of the email with this digest.
    async fn sign_ins_unlocked_at(
        &mut self,
        email_digest: &[u8],
    ) -> StoreResult<Option<DateTime<Utc>>>;
    async fn agent_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>>;
    async fn agents_by_owner(
        &mut self,
        org_id: Uuid,
        owner_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<AgentRow>>;
    /// Whether the agent owns any customer, destination or invoice.
    async fn agent_has_dependents(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool>;
    async fn api_key_by_id(&mut self, id: Uuid) -> StoreResult<Option<(ApiKeyRow, AgentRow)>>;
    async fn active_key_expiry(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> StoreResult<Option<(DateTime<Utc>, Option<DateTime<Utc>>)>>;
    async fn audit_for_subject(
        &mut self,
        org_id: Uuid,
        subject_id: Uuid,
    ) -> StoreResult<Vec<AuditRow>>;
    /// The org's humans, newest first.
    async fn users_in_org(&mut self, org_id: Uuid, page: Page) -> StoreResult<Vec<UserRow>>;
    /// The org's audit trail, newest first.
    async fn audit_page(&mut self, org_id: Uuid, page: Page) -> StoreResult<Vec<AuditRow>>;
}

/// Writes and locking reads of identities; only in a write unit of work.
#[async_trait]
pub trait IdentityWrite: IdentityRead {
    async fn insert_org(&mut self, org: &OrgRow) -> StoreResult<bool>;
    /// Reads and locks the org row: settings changes and their proposals serialize on it.
    async fn lock_org(&mut self, id: Uuid, lock: Lock) -> StoreResult<Option<OrgRow>>;
    async fn update_org(&mut self, org: &OrgRow) -> StoreResult<()>;
    async fn insert_user(&mut self, user: &UserRow) -> StoreResult<()>;
    async fn set_password(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        password_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Reads the human and locks the row until the transaction ends.
    async fn lock_user(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<UserRow>>;
    async fn deactivate_user(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    async fn insert_session(&mut self, session: &SessionRow) -> StoreResult<()>;
    async fn delete_session(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;
    /// Ends every session of the human except `keep`; returns how many ended.
    async fn delete_user_sessions(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        keep: Option<Uuid>,
    ) -> StoreResult<u64>;
    async fn insert_device_token(&mut self, device: &DeviceTokenRow) -> StoreResult<()>;
    /// Deletes the human's device tokens but the `keep` newest; returns how many went.
    async fn keep_newest_device_tokens(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        keep: i64,
    ) -> StoreResult<u64>;
    /// Deletes up to `limit` device tokens expired before `now`, across organisations.
    async fn prune_device_tokens(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    /// Records that an operator cleared the failed sign-ins of the email with this digest.
    async fn record_sign_in_unlock(
        &mut self,
        email_digest: &[u8],
        at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Deletes the human's invitations (used or not); returns how many.
    async fn delete_user_invitations(&mut self, org_id: Uuid, user_id: Uuid) -> StoreResult<u64>;
    /// Deletes up to `limit` sessions expired before `now`, across organisations (by expiry).
    async fn prune_sessions(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    /// Deletes up to `limit` invitations that were used or expired before `now`.
    async fn prune_invitations(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64>;
    async fn insert_invitation(&mut self, invitation: &InvitationRow) -> StoreResult<()>;
    /// Accepts an unexpired, unused invitation, or `None`: this one write is the one-time guard.
    async fn accept_invitation(
        &mut self,
        hash: &[u8],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<InvitationRow>>;
    async fn insert_agent(&mut self, agent: &AgentRow) -> StoreResult<()>;
    /// Reads the agent row and locks it until the transaction ends.
    async fn lock_agent(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<AgentRow>>;
    async fn update_agent(&mut self, agent: &AgentRow) -> StoreResult<()>;
    async fn delete_agent(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;
    async fn insert_api_key(&mut self, key: &ApiKeyRow) -> StoreResult<()>;
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
    async fn insert_audit(&mut self, event: &AuditRow) -> StoreResult<()>;
}
