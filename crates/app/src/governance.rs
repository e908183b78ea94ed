//! Listing, confirming and rejecting proposals (docs/contract/api.md, "Sessions and humans").

use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::{PageRequest, list_filter};
use crate::org::{OrgView, apply_settings};
use crate::proposals::ChangeView;
use crate::users::{Invitation, deactivate_in};
use tauros_domain::error::Coded;
use tauros_domain::governance::{
    self as rules, ChangeKind, ChangeState, Proposal, Resolution, ResolutionError, SettingsRequest,
};
use tauros_store::Lock;
use uuid::Uuid;

/// What a confirm or reject answers.
#[derive(Debug)]
pub struct Resolved {
    pub change: ChangeView,
    /// The organisation's settings after the decision.
    pub org: OrgView,
    /// A confirmed invitation's human and one-time token (only in the confirm that created it).
    pub invitation: Option<Invitation>,
    /// The same decision had already been made by the same approver; nothing was written.
    pub replayed: bool,
}

impl App {
    /// The org's proposals, newest first (approvers); `state` as seen (a lapsed one is `expired`).
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
            .reader(actor.lane())
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
            .reader(actor.lane())
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
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
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
                subject: match change.kind {
                    ChangeKind::ApproverDeactivation => change.user_id,
                    _ => None,
                },
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
                    ChangeKind::PaymentResolution => {
                        let id = change.payment_resolution_id.ok_or_else(|| {
                            AppError::Internal(
                                "payment resolution proposal without its resolution".into(),
                            )
                        })?;
                        crate::resolutions::confirm(&mut *tx, id, approver, now).await?;
                    }
                    ChangeKind::SettlementAgent => {
                        let agent = self
                            .create_proposed_settlement_agent(
                                &mut *tx,
                                &change,
                                AuditActor::human(approver),
                            )
                            .await?;
                        change.agent_id = Some(agent);
                    }
                    ChangeKind::ApproverDeactivation => {
                        let user = change.user_id.ok_or_else(|| {
                            AppError::Internal("deactivation proposal without its human".into())
                        })?;
                        let user = tx
                            .user_by_id(change.org_id, user)
                            .await?
                            .ok_or_else(|| AppError::Internal("proposed human vanished".into()))?;
                        deactivate_in(&mut *tx, user, approver, Some(&change)).await?;
                    }
                }
            } else if let (ChangeKind::PaymentResolution, Some(id)) =
                (change.kind, change.payment_resolution_id)
            {
                crate::resolutions::reject(&mut *tx, id, approver, now).await?;
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
            Ok(Resolved {
                change: ChangeView::of(change, now),
                org: OrgView::of(org),
                invitation,
                replayed: false,
            })
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}

fn resolution_error(e: ResolutionError) -> AppError {
    match e {
        ResolutionError::SameApprover | ResolutionError::Subject => {
            AppError::FourEyesRequired(e.to_string())
        }
        other => AppError::Conflict {
            code: other.code(),
            detail: other.to_string(),
        },
    }
}
