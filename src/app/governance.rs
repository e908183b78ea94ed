//! Proposals that need a second approver (docs/contract/api.md, "Sessions and humans"): listing
//! them, and confirming or rejecting one. The rules are `domain::governance`; making a proposal is
//! the job of the command that needs one (`update_org`, `invite_user`).

use super::org::{OrgView, apply_settings};
use super::users::Invitation;
use super::{
    Actor, App, AppError, AppResult, AuditActor, Human, PageRequest, audit, list_filter, now,
};
use crate::domain::error::Coded;
use crate::domain::governance::{
    self as rules, ChangeKind, ChangeState, Proposal, Resolution, ResolutionError, SettingsRequest,
};
use crate::domain::identity::Role;
use crate::store::{Lock, OrgChangeRow, Tx};
use chrono::{DateTime, Utc};
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
}

impl ChangeView {
    fn of(row: OrgChangeRow, now: DateTime<Utc>) -> ChangeView {
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
        }
    }
}

/// What a confirm or reject answers.
#[derive(Debug)]
pub struct Resolved {
    pub change: ChangeView,
    /// The organisation's settings after the decision.
    pub org: OrgView,
    /// A confirmed invitation: the new human and their one-time token (only in the
    /// answer of the confirm that created it).
    pub invitation: Option<Invitation>,
    /// The same decision had already been made by the same approver; nothing was written.
    pub replayed: bool,
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
    }
}

/// Records `proposal` and commits, unless the proposer already has an open proposal that asks
/// for the same (`same`): a repeated request answers that one and writes nothing.
pub(super) async fn propose(
    mut tx: Box<dyn Tx>,
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
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(ChangeView::of(proposal, now))
}

impl App {
    /// The org's proposals, newest first (approvers only); `?state=` filters by the state the
    /// caller sees (`pending` excludes lapsed ones, `expired` shows only them).
    pub async fn list_changes(
        &self,
        actor: &Actor,
        state: Option<&str>,
        page: PageRequest,
    ) -> AppResult<Vec<ChangeView>> {
        let approver = actor.human()?.approver()?;
        let mut errors = Vec::new();
        let state = list_filter(
            "state",
            state,
            &ChangeState::ALL,
            ChangeState::as_str,
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let (stored, lapsed) = state.map(ChangeState::stored_filter).unzip();
        let now = now();
        let rows = self
            .store
            .reader()
            .await?
            .changes(approver.org_id, stored, lapsed.flatten(), now, page.into())
            .await?;
        Ok(rows.into_iter().map(|r| ChangeView::of(r, now)).collect())
    }

    /// One proposal (approvers only).
    pub async fn get_change(&self, actor: &Actor, id: Uuid) -> AppResult<ChangeView> {
        let approver = actor.human()?.approver()?;
        let row = self
            .store
            .reader()
            .await?
            .change_by_id(approver.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        Ok(ChangeView::of(row, now()))
    }

    /// Confirms a proposal: a different approver than the proposer applies it.
    pub async fn confirm_change(&self, actor: &Actor, id: Uuid) -> AppResult<Resolved> {
        self.resolve_change(actor, id, ChangeState::Confirmed).await
    }

    /// Rejects a proposal (any approver, the proposer included: that withdraws it).
    pub async fn reject_change(&self, actor: &Actor, id: Uuid) -> AppResult<Resolved> {
        self.resolve_change(actor, id, ChangeState::Rejected).await
    }

    async fn resolve_change(
        &self,
        actor: &Actor,
        id: Uuid,
        goal: ChangeState,
    ) -> AppResult<Resolved> {
        let approver = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        // The org row first, as every settings change takes it: no lock-order inversion.
        let mut org = tx
            .lock_org(approver.org_id, Lock::Update)
            .await?
            .ok_or(AppError::NotFound)?;
        let mut change = tx
            .lock_change(approver.org_id, id, Lock::Update)
            .await?
            .ok_or(AppError::NotFound)?;
        let now = now();
        let proposal = Proposal {
            proposed_by: change.proposed_by,
            state: change.state,
            decided_by: change.decided_by,
            expires_at: change.expires_at,
        };
        let to = match rules::resolve(proposal, goal, approver.id, now).map_err(resolution_error)? {
            Resolution::Replay => {
                return Ok(Resolved {
                    change: ChangeView::of(change, now),
                    org: OrgView::of(org),
                    invitation: None,
                    replayed: true,
                });
            }
            Resolution::Apply(to) => to,
        };
        let mut invitation = None;
        if to == ChangeState::Confirmed {
            match change.kind {
                ChangeKind::Settings => {
                    let request = SettingsRequest {
                        four_eyes: change.four_eyes,
                        shared_review: change.shared_review,
                    };
                    let why = serde_json::json!({ "change_id": change.id, "proposed_by": change.proposed_by });
                    apply_settings(
                        &mut *tx,
                        &mut org,
                        request,
                        AuditActor::human(approver),
                        why,
                    )
                    .await?;
                }
                ChangeKind::ApproverInvitation => {
                    let (Some(email), Some(role)) = (change.email.as_deref(), change.role) else {
                        return Err(AppError::Internal(
                            "invitation proposal without email".into(),
                        ));
                    };
                    invitation = Some(
                        self.create_invitation(
                            &mut *tx,
                            change.org_id,
                            change.proposed_by,
                            email,
                            role,
                            AuditActor::human(approver),
                            Some(change.id),
                        )
                        .await?,
                    );
                }
            }
        }
        change.state = to;
        change.decided_by = Some(approver.id);
        change.decided_at = Some(now);
        tx.decide_change(&change).await?;
        let action = match to {
            ChangeState::Confirmed => "org.change_confirmed",
            _ => "org.change_rejected",
        };
        audit(
            &mut *tx,
            change.org_id,
            AuditActor::human(approver),
            action,
            ("org_change", change.id),
            serde_json::json!({ "kind": change.kind.as_str(), "proposed_by": change.proposed_by }),
        )
        .await?;
        tx.commit().await?;
        Ok(Resolved {
            change: ChangeView::of(change, now),
            org: OrgView::of(org),
            invitation,
            replayed: false,
        })
    }
}

fn resolution_error(e: ResolutionError) -> AppError {
    match e {
        ResolutionError::SameApprover => AppError::FourEyesRequired(e.to_string()),
        other => AppError::Conflict {
            code: other.code(),
            detail: other.to_string(),
        },
    }
}
