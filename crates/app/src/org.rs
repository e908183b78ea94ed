//! The organisation: its settings (`four_eyes` off is a proposal while on) and audit trail.

use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::PageRequest;
use crate::proposals::{ChangeView, pending, propose};
use crate::schema::{ActorKindSchema, InterfaceSchema};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_domain::governance::{self as rules, ChangeKind, Settings, SettingsOutcome};
use tauros_domain::identity::{ActorKind, Interface};
use tauros_store::{AuditRow, Lane, Lock, OrgRow, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

pub use tauros_domain::governance::SettingsRequest as OrgSettingsChange;

/// The organisation as humans see it.
#[derive(Clone, Debug)]
pub struct OrgView {
    pub id: Uuid,
    pub name: String,
    /// Whether an approver may not decide on invoices of agents they own.
    pub four_eyes: bool,
    /// Whether approvers see and decide on every agent's invoices in the org.
    pub shared_review: bool,
    pub created_at: DateTime<Utc>,
}

impl OrgView {
    pub(super) fn of(org: OrgRow) -> OrgView {
        OrgView {
            id: org.id,
            name: org.name,
            four_eyes: org.four_eyes,
            shared_review: org.shared_review,
            created_at: org.created_at,
        }
    }
}

/// What `PATCH /v1/organisation` did.
#[derive(Debug)]
pub enum OrgUpdate {
    /// Applied at once (or nothing to change).
    Applied(OrgView),
    /// Turns `four_eyes` off while it is on: waits for a second approver.
    Proposed(ChangeView),
}

/// One audited change.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = AuditEventResponse)]
pub struct AuditEventView {
    /// Identifies the event.
    pub id: Uuid,
    /// Who acted.
    #[schema(value_type = ActorKindSchema)]
    pub actor_kind: ActorKind,
    /// The human or agent who acted; `null` for `system` (e.g. the command line).
    pub actor_id: Option<Uuid>,
    /// The entry point the change came through.
    #[schema(value_type = InterfaceSchema)]
    pub interface: Interface,
    /// What happened, e.g. `org.settings_changed`, `user.invited`, `user.deactivated`,
    /// `agent.key_rotated`, `org.change_proposed`.
    pub action: String,
    /// The kind of record changed: `org`, `user`, `agent`, `customer`, `payment_destination`,
    /// `org_change`.
    pub subject_type: String,
    /// The record changed.
    pub subject_id: Uuid,
    /// What changed (never a secret).
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
    /// When (RFC 3339, UTC).
    pub occurred_at: DateTime<Utc>,
}

impl App {
    /// The caller's organisation (humans only).
    pub async fn get_org(&self, actor: &Actor) -> AppResult<OrgView> {
        let human = actor.human()?;
        let org = self
            .store
            .reader(actor.lane())
            .await?
            .org_by_id(human.org_id)
            .await?;
        org.map(OrgView::of).ok_or(AppError::NotFound)
    }

    /// Changes settings (approvers), audited if anything changes; `four_eyes` off is a proposal.
    pub async fn update_org(
        &self,
        actor: &Actor,
        request: OrgSettingsChange,
    ) -> AppResult<OrgUpdate> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let mut org = tx
                .lock_org(human.org_id, Lock::Update)
                .await?
                .ok_or(AppError::NotFound)?;
            match rules::settings_request(settings(&org), request) {
                SettingsOutcome::Unchanged => Ok(OrgUpdate::Applied(OrgView::of(org))),
                SettingsOutcome::Apply(_) => {
                    apply_settings(
                        &mut *tx,
                        &mut org,
                        request,
                        AuditActor::human(human),
                        serde_json::json!({}),
                    )
                    .await?;
                    Ok(OrgUpdate::Applied(OrgView::of(org)))
                }
                SettingsOutcome::Propose => {
                    let proposal = tauros_store::OrgChangeRow {
                        four_eyes: request.four_eyes,
                        shared_review: request.shared_review,
                        ..pending(human, ChangeKind::Settings, now())
                    };
                    let same = |c: &tauros_store::OrgChangeRow| {
                        c.four_eyes == request.four_eyes && c.shared_review == request.shared_review
                    };
                    let change = propose(&mut *tx, human, proposal, same).await?;
                    Ok(OrgUpdate::Proposed(change))
                }
            }
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// `tauros org set`: immediate, audited as `cli` (e.g. out of a one-approver four-eyes org).
    pub async fn set_org_settings(
        &self,
        org_name: &str,
        request: OrgSettingsChange,
    ) -> AppResult<OrgView> {
        let mut tx = self.store.begin(Lane::Unattributed).await?;
        let answer = async {
            let id = tx
                .org_by_name(org_name)
                .await?
                .ok_or(AppError::NotFound)?
                .id;
            let mut org = tx
                .lock_org(id, Lock::Update)
                .await?
                .ok_or(AppError::NotFound)?;
            apply_settings(
                &mut *tx,
                &mut org,
                request,
                AuditActor::cli(),
                serde_json::json!({}),
            )
            .await?;
            Ok(OrgView::of(org))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// The org audit trail, newest first (approvers only).
    pub async fn list_audit_events(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> AppResult<Vec<AuditEventView>> {
        let approver = actor.human()?.approver()?;
        let rows = self
            .store
            .reader(actor.lane())
            .await?
            .audit_page(approver.org_id, page.into())
            .await?;
        rows.into_iter().map(audit_view).collect()
    }
}

fn settings(org: &OrgRow) -> Settings {
    Settings {
        four_eyes: org.four_eyes,
        shared_review: org.shared_review,
    }
}

/// Applies `request` to the locked `org`, audited as `org.settings_changed` if anything changes.
pub(super) async fn apply_settings(
    tx: &mut dyn Tx,
    org: &mut OrgRow,
    request: OrgSettingsChange,
    actor: AuditActor,
    why: serde_json::Value,
) -> AppResult<()> {
    let next = request.applied_to(settings(org));
    if next == settings(org) {
        return Ok(());
    }
    org.four_eyes = next.four_eyes;
    org.shared_review = next.shared_review;
    org.updated_at = now();
    tx.update_org(org).await?;
    let mut detail = serde_json::json!({
        "four_eyes": org.four_eyes,
        "shared_review": org.shared_review,
    });
    if let (Some(detail), serde_json::Value::Object(why)) = (detail.as_object_mut(), why) {
        detail.extend(why);
    }
    audit(
        tx,
        org.id,
        actor,
        "org.settings_changed",
        ("org", org.id),
        detail,
    )
    .await
}

fn audit_view(row: AuditRow) -> AppResult<AuditEventView> {
    Ok(AuditEventView {
        id: row.id,
        actor_kind: row.actor_kind,
        actor_id: row.actor_id,
        interface: row.interface,
        action: row.action,
        subject_type: row.subject_type,
        subject_id: row.subject_id,
        // Written by `audit` from a JSON value; anything else is shown as the text it is.
        detail: serde_json::from_str(&row.detail).unwrap_or(serde_json::Value::String(row.detail)),
        occurred_at: row.occurred_at,
    })
}
