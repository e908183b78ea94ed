//! The port for proposals that need a second approver (`org_changes`).

use crate::error::StoreResult;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::governance::{ChangeKind, ChangeState};
use tauros_domain::identity::Role;
use uuid::Uuid;

/// A proposal; its kind's members are set, the others null. `state` is `pending`, `confirmed`
/// or `rejected` (a lapsed proposal stays `pending`; callers see it as `expired`).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct OrgChangeRow {
    pub id: Uuid,
    pub org_id: Uuid,
    #[sqlx(try_from = "crate::sql::Stored<ChangeKind>")]
    pub kind: ChangeKind,
    pub proposed_by: Uuid,
    #[sqlx(try_from = "crate::sql::Stored<ChangeState>")]
    pub state: ChangeState,
    pub four_eyes: Option<bool>,
    pub shared_review: Option<bool>,
    pub email: Option<String>,
    #[sqlx(try_from = "crate::sql::StoredOpt<Role>")]
    pub role: Option<Role>,
    pub decided_by: Option<Uuid>,
    pub decided_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// `payment_resolution`: the resolution (`payment_resolutions`) it would apply.
    pub payment_resolution_id: Option<Uuid>,
    /// `payment_resolution`: the payment it resolves.
    pub payment_id: Option<Uuid>,
    /// `approver_deactivation`: the human it deactivates.
    pub user_id: Option<Uuid>,
    /// `settlement_agent`: the name of the agent it creates.
    pub agent_name: Option<String>,
    /// `settlement_agent`, once confirmed: the agent it created.
    pub agent_id: Option<Uuid>,
}

/// Reads of proposals, scoped by org.
#[async_trait]
pub trait GovernanceRead: Send {
    async fn change_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<OrgChangeRow>>;
    /// The org's proposals, newest first, filtered by stored `state` and by `lapsed` at `now`.
    async fn changes(
        &mut self,
        org_id: Uuid,
        state: Option<ChangeState>,
        lapsed: Option<bool>,
        now: DateTime<Utc>,
        page: Page,
    ) -> StoreResult<Vec<OrgChangeRow>>;
    /// Pending proposals of one kind by one approver, that have not lapsed at `now`.
    async fn open_changes_by(
        &mut self,
        org_id: Uuid,
        proposed_by: Uuid,
        kind: ChangeKind,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<OrgChangeRow>>;
}

/// Writes of proposals; only in a write unit of work.
#[async_trait]
pub trait GovernanceWrite: GovernanceRead {
    async fn insert_change(&mut self, change: &OrgChangeRow) -> StoreResult<()>;
    async fn lock_change(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<OrgChangeRow>>;
    /// Records the decision on a pending proposal (and a confirmed `settlement_agent`'s agent).
    async fn decide_change(&mut self, change: &OrgChangeRow) -> StoreResult<()>;
    /// Rejects every pending proposal of `proposed_by` (they were deactivated), as `by`.
    async fn reject_changes_by(
        &mut self,
        org_id: Uuid,
        proposed_by: Uuid,
        by: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
}
