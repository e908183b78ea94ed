//! The organisation and its settings.

use super::{Actor, App, AppError, AppResult, AuditActor, audit, now};
use chrono::{DateTime, Utc};
use uuid::Uuid;

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

/// A partial settings update: `None` keeps the current value.
#[derive(Debug, Default)]
pub struct OrgSettingsChange {
    /// New `four_eyes`, if given.
    pub four_eyes: Option<bool>,
    /// New `shared_review`, if given.
    pub shared_review: Option<bool>,
}

impl App {
    /// The caller's organisation (humans only).
    pub async fn get_org(&self, actor: &Actor) -> AppResult<OrgView> {
        let human = actor.human()?;
        let org = self.store.reader().await?.org_by_id(human.org_id).await?;
        org.map(view).ok_or(AppError::NotFound)
    }

    /// Changes settings (approvers only); audited when something actually changes.
    pub async fn update_org(&self, actor: &Actor, change: OrgSettingsChange) -> AppResult<OrgView> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let mut org = tx
            .org_by_id(human.org_id)
            .await?
            .ok_or(AppError::NotFound)?;
        let before = (org.four_eyes, org.shared_review);
        org.four_eyes = change.four_eyes.unwrap_or(org.four_eyes);
        org.shared_review = change.shared_review.unwrap_or(org.shared_review);
        if (org.four_eyes, org.shared_review) != before {
            org.updated_at = now();
            tx.update_org(&org).await?;
            audit(
                &mut *tx,
                org.id,
                AuditActor::human(human),
                "org.settings_changed",
                ("org", org.id),
                serde_json::json!({
                    "four_eyes": org.four_eyes,
                    "shared_review": org.shared_review,
                }),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(view(org))
    }
}

fn view(org: crate::store::OrgRow) -> OrgView {
    OrgView {
        id: org.id,
        name: org.name,
        four_eyes: org.four_eyes,
        shared_review: org.shared_review,
        created_at: org.created_at,
    }
}
