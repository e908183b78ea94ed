//! Humans and credentials: sign-in, sign-out, invitations, and turning a bearer token into an
//! actor.

use super::{
    Actor, Agent, App, AppError, AppResult, AuditActor, FieldError, Human, audit, now, random_32,
};
use crate::domain::error::required;
use crate::domain::identity::{self, Capabilities, Credential, Role};
use crate::store::{Constraint, InvitationRow, SessionRow, StoreError, UserRow};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// A human as shown to clients (never the password hash).
#[derive(Clone, Debug)]
pub struct UserView {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    pub role: Role,
    pub created_at: DateTime<Utc>,
}

impl UserView {
    fn from_row(row: &UserRow) -> AppResult<UserView> {
        Ok(UserView {
            id: row.id,
            org_id: row.org_id,
            email: row.email.clone(),
            role: Role::parse(&row.role)
                .ok_or_else(|| AppError::Internal(format!("unknown role {}", row.role)))?,
            created_at: row.created_at,
        })
    }
}

/// A new session: the token is shown once.
#[derive(Debug)]
pub struct SignedIn {
    /// The bearer token for later requests.
    pub token: String,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    pub user: UserView,
}

/// The caller, as `GET /v1/me` shows it.
#[derive(Debug)]
pub enum Me {
    /// A human.
    Human(UserView),
    /// An agent.
    Agent {
        id: Uuid,
        org_id: Uuid,
        name: String,
        capabilities: Capabilities,
    },
}

/// `last_used_at` is written at most this often per key, so authentication stays a read.
const LAST_USED_GRANULARITY: i64 = 60;

impl App {
    /// Turns a bearer token into an actor, or `Unauthorized` for every kind of bad credential;
    /// then takes one request from the credential's rate limit.
    pub async fn authenticate(&self, bearer: &str) -> AppResult<Actor> {
        let actor = self.identify(bearer).await?;
        let credential = match &actor {
            Actor::Agent(a) => a.id,
            Actor::Human(h) => h.session_id,
        };
        self.credentials.take(credential)?;
        Ok(actor)
    }

    async fn identify(&self, bearer: &str) -> AppResult<Actor> {
        let Some(credential) = Credential::parse(bearer) else {
            return Err(AppError::Unauthorized);
        };
        let now = now();
        let mut conn = self.store.reader().await?;
        match credential {
            Credential::ApiKey(key) => {
                let Some((row, agent)) = conn.api_key_by_id(key.id()).await? else {
                    return Err(AppError::Unauthorized);
                };
                if !key.matches(&row.key_hash) || row.revoked_at.is_some() || row.expires_at <= now
                {
                    return Err(AppError::Unauthorized);
                }
                let stale = row
                    .last_used_at
                    .is_none_or(|t| now - t >= Duration::seconds(LAST_USED_GRANULARITY));
                if stale {
                    // A write: it goes through a write unit (SQLite's single writer).
                    drop(conn);
                    let mut tx = self.store.begin().await?;
                    tx.touch_api_key(row.org_id, row.id, now).await?;
                    tx.commit().await?;
                }
                Ok(Actor::Agent(Agent {
                    id: agent.id,
                    org_id: agent.org_id,
                    owner_id: agent.owner_id,
                    name: agent.name,
                    capabilities: Capabilities::from_stored(&agent.capabilities),
                }))
            }
            Credential::Session(hash) => {
                let Some((session, user)) = conn.session_by_hash(&hash).await? else {
                    return Err(AppError::Unauthorized);
                };
                if session.expires_at <= now {
                    return Err(AppError::Unauthorized);
                }
                let view = UserView::from_row(&user)?;
                Ok(Actor::Human(Human {
                    id: user.id,
                    org_id: user.org_id,
                    email: user.email,
                    role: view.role,
                    session_id: session.id,
                }))
            }
        }
    }

    /// Signs a human in with email and password.
    pub async fn sign_in(
        &self,
        email: Option<&str>,
        password: Option<String>,
        client: Option<std::net::IpAddr>,
    ) -> AppResult<SignedIn> {
        let mut errors = Vec::new();
        let email = required("email", email, &mut errors);
        let password = required("password", password, &mut errors);
        let (Some(email), Some(password)) = (email, password) else {
            return Err(AppError::Validation(errors));
        };
        let normalized = identity::normalize_email(email);
        self.sign_ins.check(&normalized, client)?;
        let signed_in = self.check_password(email, &normalized, password).await;
        match &signed_in {
            Err(AppError::InvalidCredentials) => self.sign_ins.failed(&normalized, client),
            Ok(_) => self.sign_ins.succeeded(&normalized, client),
            Err(_) => {}
        }
        signed_in
    }

    async fn check_password(
        &self,
        email: &str,
        normalized: &str,
        password: String,
    ) -> AppResult<SignedIn> {
        if !identity::email_is_valid(email.trim()) {
            // No account has such an email; answered as any unknown email is, after the same
            // password work, so the two cannot be told apart by time.
            let _ = self.passwords.verify(password, None).await?;
            return Err(AppError::InvalidCredentials);
        }
        let user = self.store.reader().await?.user_by_email(normalized).await?;
        let stored = user.as_ref().and_then(|u| u.password_hash.clone());
        if !self.passwords.verify(password, stored).await? {
            return Err(AppError::InvalidCredentials);
        }
        let user = user.ok_or(AppError::InvalidCredentials)?;
        let mut tx = self.store.begin().await?;
        let signed_in = self.open_session(&mut *tx, &user).await?;
        tx.commit().await?;
        Ok(signed_in)
    }

    async fn open_session(
        &self,
        tx: &mut dyn crate::store::Tx,
        user: &UserRow,
    ) -> AppResult<SignedIn> {
        let token = identity::session_token(random_32());
        let now = now();
        let expires_at = now + self.config.session_ttl;
        tx.insert_session(&SessionRow {
            id: Uuid::now_v7(),
            org_id: user.org_id,
            user_id: user.id,
            token_hash: token.hash.to_vec(),
            created_at: now,
            expires_at,
        })
        .await?;
        Ok(SignedIn {
            token: token.token,
            expires_at,
            user: UserView::from_row(user)?,
        })
    }

    /// Ends the session the request came with; other sessions of the human stay valid.
    pub async fn sign_out(&self, human: &Human) -> AppResult<()> {
        let mut tx = self.store.begin().await?;
        tx.delete_session(human.org_id, human.session_id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Describes the caller.
    pub async fn me(&self, actor: &Actor) -> AppResult<Me> {
        match actor {
            Actor::Agent(a) => Ok(Me::Agent {
                id: a.id,
                org_id: a.org_id,
                name: a.name.clone(),
                capabilities: a.capabilities.clone(),
            }),
            Actor::Human(h) => {
                let mut conn = self.store.reader().await?;
                let user = conn
                    .user_by_id(h.org_id, h.id)
                    .await?
                    .ok_or(AppError::Unauthorized)?;
                Ok(Me::Human(UserView::from_row(&user)?))
            }
        }
    }

    /// An approver invites a human into their organisation; returns the one-time token.
    pub async fn invite_user(
        &self,
        actor: &Actor,
        email: Option<&str>,
        role: Option<Role>,
    ) -> AppResult<(UserView, String, DateTime<Utc>)> {
        let inviter = actor.human()?.approver()?;
        let mut errors = Vec::new();
        let email = required("email", email, &mut errors).map(str::trim);
        let role = required("role", role, &mut errors);
        if email.is_some_and(|e| !identity::email_is_valid(e)) {
            errors.push(FieldError::plain(
                "email",
                "invalid_email",
                "send an email address like name@example.com (1–254 characters, one @, no spaces)",
            ));
        }
        let (Some(email), Some(role)) = (email, role) else {
            return Err(AppError::Validation(errors));
        };
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let now = now();
        let user = UserRow {
            id: Uuid::now_v7(),
            org_id: inviter.org_id,
            email: email.to_owned(),
            email_normalized: identity::normalize_email(email),
            role: role.as_str().to_owned(),
            password_hash: None,
            is_bootstrap: false,
            created_at: now,
            updated_at: now,
        };
        let token = identity::invitation_token(random_32());
        let expires_at = now + self.config.invitation_ttl;
        let mut tx = self.store.begin().await?;
        insert_user(&mut *tx, &user).await?;
        tx.insert_invitation(&InvitationRow {
            id: Uuid::now_v7(),
            org_id: inviter.org_id,
            user_id: user.id,
            invited_by: inviter.id,
            token_hash: token.hash.to_vec(),
            created_at: now,
            expires_at,
            accepted_at: None,
        })
        .await?;
        audit(
            &mut *tx,
            inviter.org_id,
            AuditActor::human(inviter),
            "user.invited",
            ("user", user.id),
            serde_json::json!({ "role": role.as_str() }),
        )
        .await?;
        tx.commit().await?;
        Ok((UserView::from_row(&user)?, token.token, expires_at))
    }

    /// Accepts an invitation once: sets the password and opens a session.
    pub async fn accept_invitation(
        &self,
        token: Option<&str>,
        password: Option<String>,
    ) -> AppResult<SignedIn> {
        let mut errors = Vec::new();
        let token = required("invitation_token", token, &mut errors);
        let password = required("password", password, &mut errors);
        if password
            .as_deref()
            .is_some_and(|p| !identity::password_is_acceptable(p))
        {
            errors.push(password_field_error());
        }
        let (Some(token), Some(password)) = (token, password) else {
            return Err(AppError::Validation(errors));
        };
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let Some(hash) = identity::invitation_hash(token.trim()) else {
            return Err(AppError::InvalidCredentials);
        };
        let password_hash = self.passwords.hash(password).await?;
        let now = now();
        let mut tx = self.store.begin().await?;
        // The conditional update is the one-time guard: a second accept finds nothing to update.
        let Some(invitation) = tx.accept_invitation(&hash, now).await? else {
            return Err(AppError::InvalidCredentials);
        };
        tx.set_password(invitation.org_id, invitation.user_id, &password_hash, now)
            .await?;
        let user = tx
            .user_by_id(invitation.org_id, invitation.user_id)
            .await?
            .ok_or_else(|| AppError::Internal("invited user vanished".into()))?;
        let signed_in = self.open_session(&mut *tx, &user).await?;
        tx.commit().await?;
        Ok(signed_in)
    }
}

/// The validation error for a password that is too short or too long.
pub(crate) fn password_error() -> AppError {
    AppError::Validation(vec![password_field_error()])
}

fn password_field_error() -> FieldError {
    FieldError::plain(
        "password",
        "password_too_short",
        format!(
            "send a password of {} to {} characters",
            identity::MIN_PASSWORD_CHARS,
            identity::MAX_PASSWORD_CHARS
        ),
    )
}

/// Inserts a human, turning a duplicate email into a field error.
pub(crate) async fn insert_user(tx: &mut dyn crate::store::Tx, user: &UserRow) -> AppResult<()> {
    match tx.insert_user(user).await {
        Err(StoreError::Conflict(Constraint::UserEmail)) => Err(AppError::field(
            "email",
            "email_taken",
            "a human with this email already exists; emails are unique across Tauros",
        )),
        Err(StoreError::Conflict(Constraint::OneBootstrapPerOrg)) => Err(AppError::ApproverExists),
        other => Ok(other?),
    }
}
