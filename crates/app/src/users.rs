//! The organisation's humans: inviting (a proposal under four eyes), listing, deactivating.

use crate::actor::{Actor, Human};
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::PageRequest;
use crate::proposals::{ChangeView, pending, propose};
use crate::random::random_32;
use chrono::{DateTime, Utc};
use tauros_domain::governance::{self as rules, ChangeKind, Settings};
use tauros_domain::identity::{self, Role, UserState};
use tauros_store::{Constraint, InvitationRow, Lock, OrgChangeRow, StoreError, Tx, UserRow};
use uuid::Uuid;

/// A human as shown to clients (never the password hash).
#[derive(Clone, Debug)]
pub struct UserView {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    pub role: Role,
    pub state: UserState,
    pub created_at: DateTime<Utc>,
}

impl UserView {
    pub(crate) fn from_row(row: &UserRow) -> AppResult<UserView> {
        Ok(UserView {
            id: row.id,
            org_id: row.org_id,
            email: row.email.clone(),
            role: Role::parse(&row.role)
                .ok_or_else(|| AppError::Internal(format!("unknown role {}", row.role)))?,
            state: UserState::of(row.password_hash.is_some(), row.deactivated_at.is_some()),
            created_at: row.created_at,
        })
    }
}

/// A new human and the one-time token that lets them set a password.
#[derive(Debug)]
pub struct Invitation {
    pub user: UserView,
    /// Shown once; only its hash is stored.
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

/// What `POST /v1/users/{id}/deactivate` did.
#[derive(Debug)]
pub enum Deactivated {
    /// The human is deactivated (or already was).
    Done(UserView),
    /// An approver under four eyes: the deactivation waits for a second approver.
    Proposed(ChangeView),
}

/// What `POST /v1/users` did.
#[derive(Debug)]
pub enum Invited {
    Done(Invitation),
    /// An invitation under four eyes: it waits for a second approver.
    Proposed(ChangeView),
}

impl App {
    /// An approver invites a human; under `four_eyes` a proposal (the confirmer gets the token).
    pub async fn invite_user(&self, actor: &Actor, email: &str, role: Role) -> AppResult<Invited> {
        let inviter = actor.human()?.approver()?;
        // The email's rule is the caller's (`InviteRequest`'s `validator` rule).
        let email = email.trim();
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            // Shared: a settings change waits for this invitation, and this one for it.
            let org = tx
                .lock_org(inviter.org_id, Lock::Share)
                .await?
                .ok_or(AppError::NotFound)?;
            let settings = Settings {
                four_eyes: org.four_eyes,
                shared_review: org.shared_review,
            };
            if rules::invitation_needs_confirmation(settings) {
                // Refused now, not after a second approver spent their attention on it.
                if tx
                    .user_by_org_email(inviter.org_id, &identity::normalize_email(email))
                    .await?
                    .is_some()
                {
                    return Err(email_taken());
                }
                let same = |c: &OrgChangeRow| {
                    c.email.as_deref().is_some_and(|e| {
                        identity::normalize_email(e) == identity::normalize_email(email)
                    }) && c.role == Some(role)
                };
                let proposal = OrgChangeRow {
                    email: Some(email.to_owned()),
                    role: Some(role),
                    ..pending(inviter, ChangeKind::ApproverInvitation, now())
                };
                let change = propose(&mut *tx, inviter, proposal, same).await?;
                return Ok(Invited::Proposed(change));
            }
            let invitation = self
                .create_invitation(
                    &mut *tx,
                    inviter.org_id,
                    inviter.id,
                    email,
                    role,
                    AuditActor::human(inviter),
                    None,
                )
                .await?;
            Ok(Invited::Done(invitation))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Creates the invited human and invitation, audited by `actor`; `invited_by` asked for it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn create_invitation(
        &self,
        tx: &mut dyn Tx,
        org_id: Uuid,
        invited_by: Uuid,
        email: &str,
        role: Role,
        actor: AuditActor,
        change: Option<Uuid>,
    ) -> AppResult<Invitation> {
        let now = now();
        let user = UserRow {
            id: Uuid::now_v7(),
            org_id,
            email: email.to_owned(),
            email_normalized: identity::normalize_email(email),
            role: role.as_str().to_owned(),
            password_hash: None,
            is_bootstrap: false,
            created_at: now,
            updated_at: now,
            deactivated_at: None,
        };
        let token = identity::invitation_token(random_32());
        let expires_at = now + self.config.invitation_ttl;
        insert_user(tx, &user).await?;
        tx.insert_invitation(&InvitationRow {
            id: Uuid::now_v7(),
            org_id,
            user_id: user.id,
            invited_by,
            token_hash: token.hash.to_vec(),
            created_at: now,
            expires_at,
            accepted_at: None,
        })
        .await?;
        let detail = match change {
            None => serde_json::json!({ "role": role.as_str() }),
            Some(change_id) => serde_json::json!({
                "role": role.as_str(),
                "change_id": change_id,
                "proposed_by": invited_by,
            }),
        };
        audit(tx, org_id, actor, "user.invited", ("user", user.id), detail).await?;
        Ok(Invitation {
            user: UserView::from_row(&user)?,
            token: token.token,
            expires_at,
        })
    }

    /// The org's humans, newest first (approvers only).
    pub async fn list_users(&self, actor: &Actor, page: PageRequest) -> AppResult<Vec<UserView>> {
        let approver = actor.human()?.approver()?;
        let rows = self
            .store
            .reader(actor.lane())
            .await?
            .users_in_org(approver.org_id, page.into())
            .await?;
        rows.iter().map(UserView::from_row).collect()
    }

    /// Deactivates a human (approvers, never themself): sessions and invitations end, proposals
    /// are rejected, agents keep working; under `four_eyes` an approver's is a proposal.
    pub async fn deactivate_user(&self, actor: &Actor, id: Uuid) -> AppResult<Deactivated> {
        let approver = actor.human()?.approver()?;
        if approver.id == id {
            return Err(AppError::Forbidden(
                "an approver cannot deactivate themself; ask another approver",
            ));
        }
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let user = tx
                .user_by_id(approver.org_id, id)
                .await?
                .ok_or(AppError::NotFound)?;
            if user.deactivated_at.is_some() {
                return Ok(Deactivated::Done(UserView::from_row(&user)?));
            }
            // Shared: a settings change waits for this deactivation, and this one for it.
            let org = tx
                .lock_org(approver.org_id, Lock::Share)
                .await?
                .ok_or(AppError::NotFound)?;
            let settings = Settings {
                four_eyes: org.four_eyes,
                shared_review: org.shared_review,
            };
            let role = Role::parse(&user.role)
                .ok_or_else(|| AppError::Internal(format!("unknown role {}", user.role)))?;
            if rules::deactivation_needs_confirmation(settings, role) {
                let same = |c: &OrgChangeRow| c.user_id == Some(user.id);
                let proposal = OrgChangeRow {
                    user_id: Some(user.id),
                    ..pending(approver, ChangeKind::ApproverDeactivation, now())
                };
                let change = propose(&mut *tx, approver, proposal, same).await?;
                return Ok(Deactivated::Proposed(change));
            }
            let user = deactivate_in(&mut *tx, user, approver, None).await?;
            Ok(Deactivated::Done(UserView::from_row(&user)?))
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}

/// Deactivates `user` in `tx` as `approver`; one already deactivated is answered as it is.
pub(crate) async fn deactivate_in(
    tx: &mut dyn Tx,
    user: UserRow,
    approver: &Human,
    change: Option<&OrgChangeRow>,
) -> AppResult<UserRow> {
    // Invitation rows first, then the human's row: the order in which accepting an
    // invitation takes them, so the two cannot deadlock. Under the human's lock, a sign-in
    // or acceptance that commits first has its session ended below; one that comes second
    // sees the deactivation.
    let invitations = tx.delete_user_invitations(user.org_id, user.id).await?;
    let user = tx
        .lock_user(user.org_id, user.id, Lock::Update)
        .await?
        .ok_or(AppError::NotFound)?;
    if user.deactivated_at.is_some() {
        return Ok(user);
    }
    let now = now();
    tx.deactivate_user(user.org_id, user.id, now).await?;
    let sessions = tx.delete_user_sessions(user.org_id, user.id, None).await?;
    let devices = tx
        .keep_newest_device_tokens(user.org_id, user.id, 0)
        .await?;
    let proposals = tx
        .reject_changes_by(user.org_id, user.id, approver.id, now)
        .await?;
    let mut detail = serde_json::json!({
        "sessions_ended": sessions,
        "device_tokens_revoked": devices,
        "invitations_ended": invitations,
        "proposals_rejected": proposals,
    });
    if let Some(change) = change {
        detail["change_id"] = serde_json::json!(change.id);
        detail["proposed_by"] = serde_json::json!(change.proposed_by);
    }
    audit(
        &mut *tx,
        user.org_id,
        AuditActor::human(approver),
        "user.deactivated",
        ("user", user.id),
        detail,
    )
    .await?;
    tx.user_by_id(user.org_id, user.id)
        .await?
        .ok_or_else(|| AppError::Internal("deactivated user vanished".into()))
}

fn email_taken() -> AppError {
    AppError::field(
        "email",
        "email_taken",
        "a human with this email already exists in this organisation; send another email",
    )
}

/// Inserts a human, turning a duplicate email into a field error.
pub(crate) async fn insert_user(tx: &mut dyn Tx, user: &UserRow) -> AppResult<()> {
    match tx.insert_user(user).await {
        Err(StoreError::Conflict(Constraint::UserEmail)) => Err(email_taken()),
        Err(StoreError::Conflict(Constraint::OneBootstrapPerOrg)) => Err(AppError::ApproverExists),
        other => Ok(other?),
    }
}
