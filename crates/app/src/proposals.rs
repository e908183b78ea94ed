//! Making a proposal for a second approver; `governance` lists, confirms and rejects them.

use crate::actor::Human;
use crate::audit::{AuditActor, audit};

use crate::error::AppResult;
use chrono::{DateTime, Utc};
use tauros_domain::governance::{self as rules, ChangeKind, ChangeState};
use tauros_domain::identity::Role;
use tauros_store::{OrgChangeRow, Tx};
use uuid::Uuid;

/// A proposal as approvers see it.
#[derive(Clone, Debug)]
pub struct ChangeView {
    pub id: Uuid,
    pub kind: ChangeKind,
    pub proposed_by: Uuid,
    /// `expired` when a pending proposal has lapsed.
    pub state: ChangeState,
    /// Settings proposals: the values asked for (`None`: unchanged).
    pub four_eyes: Option<bool>,
    pub shared_review: Option<bool>,
    /// Invitations (`approver_invitation`, either role): who, with which role.
    pub email: Option<String>,
    pub role: Option<Role>,
    pub decided_by: Option<Uuid>,
    pub decided_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// `payment_resolution`: the resolution it would apply (see the payment's `resolutions`).
    pub payment_resolution_id: Option<Uuid>,
    /// `payment_resolution`: the payment it resolves.
    pub payment_id: Option<Uuid>,
    /// `approver_deactivation`: the human it deactivates.
    pub user_id: Option<Uuid>,
    /// `settlement_agent`: the name of the agent it creates.
    pub agent_name: Option<String>,
    /// `settlement_agent`, once confirmed: the agent it created (owned by the proposer).
    pub agent_id: Option<Uuid>,
}

impl ChangeView {
    pub(super) fn of(row: OrgChangeRow, now: DateTime<Utc>) -> ChangeView {
        ChangeView {
            id: row.id,
            kind: row.kind,
            proposed_by: row.proposed_by,
            state: row.state.seen(row.expires_at, now),
            four_eyes: row.four_eyes,
            shared_review: row.shared_review,
            email: row.email,
            role: row.role,
            decided_by: row.decided_by,
            decided_at: row.decided_at,
            created_at: row.created_at,
            expires_at: row.expires_at,
            payment_resolution_id: row.payment_resolution_id,
            payment_id: row.payment_id,
            user_id: row.user_id,
            agent_name: row.agent_name,
            agent_id: row.agent_id,
        }
    }
}

/// A new pending proposal by `proposer` (the caller fills in what it asks for).
pub(super) fn pending(proposer: &Human, kind: ChangeKind, now: DateTime<Utc>) -> OrgChangeRow {
    OrgChangeRow {
        id: Uuid::now_v7(),
        org_id: proposer.org_id,
        kind,
        proposed_by: proposer.id,
        state: ChangeState::Pending,
        four_eyes: None,
        shared_review: None,
        email: None,
        role: None,
        decided_by: None,
        decided_at: None,
        created_at: now,
        expires_at: rules::proposal_expiry(now),
        payment_resolution_id: None,
        payment_id: None,
        user_id: None,
        agent_name: None,
        agent_id: None,
    }
}

/// Records `proposal` unless the proposer has an open one asking the same (`same`): that one.
pub(super) async fn propose(
    tx: &mut dyn Tx,
    proposer: &Human,
    proposal: OrgChangeRow,
    same: impl Fn(&OrgChangeRow) -> bool,
) -> AppResult<ChangeView> {
    let now = proposal.created_at;
    let open = tx
        .open_changes_by(proposer.org_id, proposer.id, proposal.kind, now)
        .await?;
    if let Some(existing) = open.into_iter().find(|c| same(c)) {
        return Ok(ChangeView::of(existing, now));
    }
    tx.insert_change(&proposal).await?;
    audit(
        &mut *tx,
        proposal.org_id,
        AuditActor::human(proposer),
        "org.change_proposed",
        ("org_change", proposal.id),
        serde_json::json!({
            "kind": proposal.kind.as_str(),
            "four_eyes": proposal.four_eyes,
            "shared_review": proposal.shared_review,
            "email": proposal.email,
            "role": proposal.role.map(Role::as_str),
            "user_id": proposal.user_id,
            "agent_name": proposal.agent_name,
        }),
    )
    .await?;
    Ok(ChangeView::of(proposal, now))
}
