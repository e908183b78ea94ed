//! Humans and credentials: sign-in, sign-out, invitations, a bearer token as an actor.

use crate::actor::{Actor, Agent, Human};
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult, FieldError, Limit};
use crate::limits::Attempt;
use crate::random::random_32;
use crate::users::UserView;
use chrono::{DateTime, Duration, Utc};
use tauros_domain::identity::{self, Capabilities, Credential, Interface};
use tauros_store::{DeviceTokenRow, Lane, Lock, Presented, Presenter, SessionRow, UserRow};
use uuid::Uuid;

/// A new session: the token is shown once.
#[derive(Debug)]
pub struct SignedIn {
    /// The bearer token for later requests.
    pub token: String,
    pub expires_at: DateTime<Utc>,
    pub user: UserView,
    /// The token the browser keeps and sends at its next sign-in (docs/SECURITY.md, "Nobody
    /// can lock a human out"): the one it sent, if that was valid for this account, else new.
    pub device_token: String,
}

/// The caller, as `GET /v1/me` shows it.
#[derive(Debug)]
pub enum Me {
    Human(UserView),
    Agent {
        id: Uuid,
        org_id: Uuid,
        name: String,
        capabilities: Capabilities,
    },
}

/// Who calls a use case: an authenticated actor, or a bearer credential checked with the read.
#[derive(Clone, Copy, Debug)]
pub enum Caller<'a> {
    /// Authenticated already.
    Actor(&'a Actor),
    /// A bearer credential, not yet checked, that came through `via`.
    Presented { bearer: &'a str, via: Interface },
}

impl<'a> From<&'a Actor> for Caller<'a> {
    fn from(actor: &'a Actor) -> Self {
        Caller::Actor(actor)
    }
}

/// Rows one pruning transaction deletes at most, so a sweep never holds the writer long.
const PRUNE_BATCH: i64 = 500;

/// `last_used_at` is written at most this often per key, so authentication stays a read.
const LAST_USED_GRANULARITY: i64 = 60;

/// An API key's use to record: its `last_used_at` was older than [`LAST_USED_GRANULARITY`].
#[derive(Debug)]
pub(crate) struct KeyUse {
    org_id: Uuid,
    key_id: Uuid,
    at: DateTime<Utc>,
}

impl App {
    /// A bearer token as an actor via `via` (or `Unauthorized`), charged to its rate limit.
    pub async fn authenticate(&self, bearer: &str, via: Interface) -> AppResult<Actor> {
        let Some(credential) = Credential::parse(bearer) else {
            return Err(AppError::Unauthorized);
        };
        let mut conn = self.store.reader(Lane::Unattributed).await?;
        let stored = match &credential {
            Credential::ApiKey(key) => conn
                .api_key_by_id(key.id())
                .await?
                .map(|(row, agent)| Presenter::ApiKey(row, agent)),
            Credential::Session(hash) => conn
                .session_by_hash(hash)
                .await?
                .map(|(session, user)| Presenter::Session(session, user)),
        };
        drop(conn);
        self.check_credential(&credential, stored, via).await
    }

    /// The caller as an actor: a presented credential is authenticated.
    pub async fn actor_of(&self, caller: Caller<'_>) -> AppResult<Actor> {
        match caller {
            Caller::Actor(actor) => Ok(actor.clone()),
            Caller::Presented { bearer, via } => self.authenticate(bearer, via).await,
        }
    }

    /// Checks the stored credential read for `credential`: hash in constant time, not revoked or
    /// expired, human active; charged to its rate limit. Every failure is `Unauthorized`, alike.
    pub(crate) async fn check_credential(
        &self,
        credential: &Credential,
        stored: Option<Presenter>,
        via: Interface,
    ) -> AppResult<Actor> {
        let (actor, used) = self.verify_credential(credential, stored, via)?;
        if let Some(used) = used {
            self.mark_used(used).await?;
        }
        Ok(actor)
    }

    /// [`App::check_credential`] without its write (the key's use is returned for
    /// [`App::mark_used`]): a caller holding a reader must not wait for a write unit meanwhile.
    pub(crate) fn verify_credential(
        &self,
        credential: &Credential,
        stored: Option<Presenter>,
        via: Interface,
    ) -> AppResult<(Actor, Option<KeyUse>)> {
        let now = now();
        let mut used = None;
        let actor = match (credential, stored) {
            (Credential::ApiKey(key), Some(Presenter::ApiKey(row, agent))) => {
                if !key.matches(&row.key_hash) || row.revoked_at.is_some() || row.expires_at <= now
                {
                    return Err(AppError::Unauthorized);
                }
                let stale = row
                    .last_used_at
                    .is_none_or(|t| now - t >= Duration::seconds(LAST_USED_GRANULARITY));
                if stale {
                    used = Some(KeyUse {
                        org_id: row.org_id,
                        key_id: row.id,
                        at: now,
                    });
                }
                Actor::Agent(Agent {
                    id: agent.id,
                    org_id: agent.org_id,
                    owner_id: agent.owner_id,
                    name: agent.name,
                    capabilities: Capabilities::from_stored(&agent.capabilities),
                    interface: via,
                })
            }
            (Credential::Session(_), Some(Presenter::Session(session, user))) => {
                // Deactivation deletes the sessions too; this is the second lock on the door.
                if session.expires_at <= now || user.deactivated_at.is_some() {
                    return Err(AppError::Unauthorized);
                }
                let view = UserView::from_row(&user)?;
                Actor::Human(Human {
                    id: user.id,
                    org_id: user.org_id,
                    email: user.email,
                    role: view.role,
                    session_id: session.id,
                    interface: via,
                })
            }
            _ => return Err(AppError::Unauthorized),
        };
        let limited = match &actor {
            Actor::Agent(a) => a.id,
            Actor::Human(h) => h.session_id,
        };
        self.credentials.take(limited)?;
        Ok((actor, used))
    }

    /// Records a key's use ([`App::verify_credential`]) in a write unit (SQLite's single writer).
    pub(crate) async fn mark_used(&self, used: KeyUse) -> AppResult<()> {
        let mut tx = self.store.begin(Lane::Org(used.org_id)).await?;
        let answer = async {
            tx.touch_api_key(used.org_id, used.key_id, used.at).await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Signs a human in (`organisation` picks among the email's accounts, docs/DECISIONS.md);
    /// a valid `device_token` of this human exempts the attempt from the email's failure count.
    pub async fn sign_in(
        &self,
        email: &str,
        password: String,
        organisation: Option<&str>,
        device_token: Option<&str>,
        client: Option<std::net::IpAddr>,
    ) -> AppResult<SignedIn> {
        let normalized = identity::normalize_email(email);
        let device = self.known_device(device_token, &normalized).await?;
        let attempt = self
            .reserve_sign_in(&normalized, client, device.as_ref().map(|(d, _)| d.id))
            .await?;
        let signed_in = self
            .check_password(email, &normalized, organisation, password, device)
            .await;
        match &signed_in {
            Err(AppError::InvalidCredentials) => attempt.failed(),
            Ok(_) => attempt.succeeded(),
            // A busy pool or a database error says nothing about the password.
            Err(_) => drop(attempt),
        }
        signed_in
    }

    /// The presented device token, if it is valid for `normalized`: unexpired, of an active
    /// account with that email. Anything else counts as no device token at all.
    async fn known_device<'t>(
        &self,
        token: Option<&'t str>,
        normalized: &str,
    ) -> AppResult<Option<(DeviceTokenRow, &'t str)>> {
        let Some((token, hash)) = token
            .map(str::trim)
            .and_then(|t| Some((t, identity::device_hash(t)?)))
        else {
            return Ok(None);
        };
        let found = self
            .store
            .reader(Lane::Unattributed)
            .await?
            .device_by_hash(&hash)
            .await?;
        Ok(found
            .filter(|(device, user)| {
                device.expires_at > now()
                    && user.deactivated_at.is_none()
                    && user.email_normalized == normalized
            })
            .map(|(device, _)| (device, token)))
    }

    /// A place for one sign-in attempt. Refused by the email's count, it first reads whether an
    /// operator cleared that count since (`tauros user unlock`, from any process).
    async fn reserve_sign_in(
        &self,
        normalized: &str,
        client: Option<std::net::IpAddr>,
        device: Option<Uuid>,
    ) -> AppResult<Attempt> {
        let refused = match self.sign_ins.reserve(normalized, client, device) {
            Err(
                refused @ AppError::RateLimited {
                    limit: Limit::Email,
                    ..
                },
            ) => refused,
            reserved => return reserved,
        };
        let digest = identity::email_digest(normalized);
        let unlocked = self
            .store
            .reader(Lane::Unattributed)
            .await?
            .sign_ins_unlocked_at(&digest)
            .await?;
        match unlocked {
            Some(at) if self.sign_ins.clear_email(normalized, at) => {
                self.sign_ins.reserve(normalized, client, device)
            }
            _ => Err(refused),
        }
    }

    async fn check_password(
        &self,
        email: &str,
        normalized: &str,
        organisation: Option<&str>,
        password: String,
        device: Option<(DeviceTokenRow, &str)>,
    ) -> AppResult<SignedIn> {
        // No account has an invalid email; answered as any unknown email is, after the same
        // password work, so the two cannot be told apart by time.
        let user = if identity::email_is_valid(email.trim()) {
            self.sign_in_account(normalized, organisation).await?
        } else {
            None
        };
        let stored = user.as_ref().and_then(|u| u.password_hash.clone());
        if !self.passwords.verify(password, stored).await? {
            return Err(AppError::InvalidCredentials);
        }
        let user = user.ok_or(AppError::InvalidCredentials)?;
        let mut tx = self.store.begin(Lane::Org(user.org_id)).await?;
        let answer = async {
            // The password was checked outside the transaction (it is slow). Under the row lock,
            // the account must still be the one checked: not deactivated, password unchanged since.
            let current = tx.lock_user(user.org_id, user.id, Lock::Share).await?;
            let Some(user) = current
                .filter(|u| u.deactivated_at.is_none() && u.password_hash == user.password_hash)
            else {
                return Err(AppError::InvalidCredentials);
            };
            let signed_in = self.open_session(&mut *tx, &user, device).await?;
            Ok(signed_in)
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// The one account a sign-in hashes against: the email's in `organisation`, else its oldest.
    async fn sign_in_account(
        &self,
        normalized: &str,
        organisation: Option<&str>,
    ) -> AppResult<Option<UserRow>> {
        let mut conn = self.store.reader(Lane::Unattributed).await?;
        let Some(named) = organisation.map(str::trim).filter(|o| !o.is_empty()) else {
            let accounts = conn.users_by_email(normalized, SIGN_IN_CANDIDATES).await?;
            return Ok(accounts
                .into_iter()
                .find(|u| u.password_hash.is_some() && u.deactivated_at.is_none()));
        };
        let org = match Uuid::parse_str(named) {
            Ok(id) => conn.org_by_id(id).await?,
            Err(_) => conn.org_by_name(named).await?,
        };
        match org {
            Some(org) => Ok(conn.user_by_org_email(org.id, normalized).await?),
            None => Ok(None),
        }
    }

    /// A session for `user`, and the device token to keep: `device`'s if it is this account's,
    /// else a new one (the human's oldest beyond [`DEVICES_PER_HUMAN`] are forgotten).
    async fn open_session(
        &self,
        tx: &mut dyn tauros_store::Tx,
        user: &UserRow,
        device: Option<(DeviceTokenRow, &str)>,
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
        let device_token = match device {
            Some((row, token)) if row.org_id == user.org_id && row.user_id == user.id => {
                token.to_owned()
            }
            _ => {
                let minted = identity::device_token(random_32());
                tx.insert_device_token(&DeviceTokenRow {
                    id: Uuid::now_v7(),
                    org_id: user.org_id,
                    user_id: user.id,
                    token_hash: minted.hash.to_vec(),
                    created_at: now,
                    expires_at: now + self.config.device_token_ttl,
                })
                .await?;
                tx.keep_newest_device_tokens(user.org_id, user.id, DEVICES_PER_HUMAN)
                    .await?;
                minted.token
            }
        };
        Ok(SignedIn {
            token: token.token,
            expires_at,
            user: UserView::from_row(user)?,
            device_token,
        })
    }

    /// Ends the session the request came with; other sessions of the human stay valid.
    pub async fn sign_out(&self, human: &Human) -> AppResult<()> {
        let mut tx = self.store.begin(Lane::Org(human.org_id)).await?;
        let answer = async {
            tx.delete_session(human.org_id, human.session_id).await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Ends every session of the human, this one included ("sign out everywhere").
    pub async fn sign_out_everywhere(&self, human: &Human) -> AppResult<()> {
        let mut tx = self.store.begin(Lane::Org(human.org_id)).await?;
        let answer = async {
            let ended = tx
                .delete_user_sessions(human.org_id, human.id, None)
                .await?;
            let devices = tx
                .keep_newest_device_tokens(human.org_id, human.id, 0)
                .await?;
            audit(
                &mut *tx,
                human.org_id,
                AuditActor::human(human),
                "user.signed_out_everywhere",
                ("user", human.id),
                serde_json::json!({ "sessions_ended": ended, "device_tokens_revoked": devices }),
            )
            .await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Changes the caller's password (other sessions end); a wrong one counts as a failed sign-in.
    pub async fn change_password(
        &self,
        actor: &Actor,
        current: String,
        new: String,
        client: Option<std::net::IpAddr>,
    ) -> AppResult<()> {
        // The field rules are the wire's (`ChangePasswordRequest`), checked before any work.
        let human = actor.human()?;
        let normalized = identity::normalize_email(&human.email);
        // The session is this attempt's device: a stolen one is stopped by its own failures.
        let attempt = self
            .sign_ins
            .reserve(&normalized, client, Some(human.session_id))?;
        let stored = self
            .store
            .reader(actor.lane())
            .await?
            .user_by_id(human.org_id, human.id)
            .await?
            .ok_or(AppError::Unauthorized)?
            .password_hash;
        if !self.passwords.verify(current, stored.clone()).await? {
            attempt.failed();
            return Err(AppError::field(
                "current_password",
                "wrong_password",
                "send this account's current password; after repeated failures the account's \
                 sign-ins are paused for a while",
            ));
        }
        // The right password: the place is released, nothing counted.
        drop(attempt);
        let hash = self.passwords.hash(new).await?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let user = tx
                .lock_user(human.org_id, human.id, Lock::Update)
                .await?
                .filter(|u| u.deactivated_at.is_none())
                .ok_or(AppError::Unauthorized)?;
            if user.password_hash != stored {
                return Err(AppError::Conflict {
                    code: "password_changed",
                    detail: "the password was changed by another request meanwhile; sign in again \
                             with the new one"
                        .into(),
                });
            }
            tx.set_password(human.org_id, human.id, &hash, now())
                .await?;
            let ended = tx
                .delete_user_sessions(human.org_id, human.id, Some(human.session_id))
                .await?;
            let devices = tx
                .keep_newest_device_tokens(human.org_id, human.id, 0)
                .await?;
            audit(
                &mut *tx,
                human.org_id,
                AuditActor::human(human),
                "user.password_changed",
                ("user", human.id),
                serde_json::json!({
                    "other_sessions_ended": ended,
                    "device_tokens_revoked": devices,
                }),
            )
            .await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Deletes expired sessions and device tokens and used or expired invitations in batches;
    /// how many sessions and device tokens, and how many invitations.
    pub async fn prune_credentials(&self, batch: i64) -> AppResult<(u64, u64)> {
        let (mut tokens, mut invitations) = (0, 0);
        loop {
            let now = now();
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = async {
                let s = tx.prune_sessions(now, batch).await?;
                let d = tx.prune_device_tokens(now, batch).await?;
                Ok((s, d, tx.prune_invitations(now, batch).await?))
            }
            .await;
            let (s, d, i) = crate::app::finish(tx, answer).await?;
            tokens += s + d;
            invitations += i;
            if s.max(d).max(i) < batch as u64 {
                return Ok((tokens, invitations));
            }
        }
    }

    /// `tauros user unlock --email`: clears the email's failed sign-ins on every process (each
    /// reads the unlock when that count next refuses a sign-in), audited as `cli` in each
    /// organisation the email has an account in; how many accounts. `NotFound` if none.
    pub async fn unlock_sign_ins(&self, email: &str) -> AppResult<usize> {
        let normalized = identity::normalize_email(email);
        let mut tx = self.store.begin(Lane::Unattributed).await?;
        let answer = async {
            let accounts = tx.users_by_email(&normalized, UNLOCK_ACCOUNTS).await?;
            if accounts.is_empty() {
                return Err(AppError::NotFound);
            }
            let digest = identity::email_digest(&normalized);
            tx.record_sign_in_unlock(&digest, now()).await?;
            for user in &accounts {
                audit(
                    &mut *tx,
                    user.org_id,
                    AuditActor::cli(),
                    "user.sign_ins_unlocked",
                    ("user", user.id),
                    serde_json::json!({}),
                )
                .await?;
            }
            Ok(accounts.len())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Runs the credential and webhook prunings every `every`; a failed sweep is logged, retried.
    pub fn spawn_pruning(&self, every: std::time::Duration) {
        let app = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match app.prune_credentials(PRUNE_BATCH).await {
                    Ok((tokens, invitations)) if tokens + invitations > 0 => {
                        tracing::info!(tokens, invitations, "pruned expired credentials");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "pruning expired credentials failed"),
                }
                match app.prune_webhook_attempts(PRUNE_BATCH).await {
                    Ok(0) => {}
                    Ok(attempts) => tracing::info!(attempts, "pruned old webhook attempts"),
                    Err(e) => tracing::warn!(error = %e, "pruning webhook attempts failed"),
                }
            }
        });
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
                let mut conn = self.store.reader(actor.lane()).await?;
                let user = conn
                    .user_by_id(h.org_id, h.id)
                    .await?
                    .ok_or(AppError::Unauthorized)?;
                Ok(Me::Human(UserView::from_row(&user)?))
            }
        }
    }

    /// Accepts an invitation once: sets the password and opens a session.
    pub async fn accept_invitation(&self, token: &str, password: String) -> AppResult<SignedIn> {
        // The field rules are the wire's (`AcceptInvitationRequest`), checked before any work.
        let Some(hash) = identity::invitation_hash(token.trim()) else {
            return Err(AppError::InvalidCredentials);
        };
        // Looked up before hashing: a bad token costs one read, never a place in the hashing pool.
        // The conditional update below stays the one-time guard.
        let usable = self
            .store
            .reader(Lane::Unattributed)
            .await?
            .invitation_by_hash(&hash)
            .await?
            .is_some_and(|i| i.accepted_at.is_none() && i.expires_at > now());
        if !usable {
            return Err(AppError::InvalidCredentials);
        }
        let password_hash = self.passwords.hash(password).await?;
        let now = now();
        let mut tx = self.store.begin(Lane::Unattributed).await?;
        let answer = async {
            // A second accept finds nothing to update.
            let Some(invitation) = tx.accept_invitation(&hash, now).await? else {
                return Err(AppError::InvalidCredentials);
            };
            // Deactivation deletes invitations under this lock: whichever is second sees the other.
            let Some(_) = tx
                .lock_user(invitation.org_id, invitation.user_id, Lock::Update)
                .await?
                .filter(|u| u.deactivated_at.is_none())
            else {
                return Err(AppError::InvalidCredentials);
            };
            tx.set_password(invitation.org_id, invitation.user_id, &password_hash, now)
                .await?;
            let user = tx
                .user_by_id(invitation.org_id, invitation.user_id)
                .await?
                .ok_or_else(|| AppError::Internal("invited user vanished".into()))?;
            let signed_in = self.open_session(&mut *tx, &user, None).await?;
            Ok(signed_in)
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}

/// Accounts of one email a sign-in without `organisation` looks at, oldest first.
const SIGN_IN_CANDIDATES: i64 = 16;

/// Accounts of one email an unlock audits at most (one per organisation).
const UNLOCK_ACCOUNTS: i64 = 1_000;

/// Device tokens one human keeps; a sign-in beyond them forgets the oldest.
const DEVICES_PER_HUMAN: i64 = 20;

/// The validation error for a password that is too short or too long.
pub(crate) fn password_error() -> AppError {
    AppError::Validation(vec![password_field_error()])
}

fn password_field_error() -> FieldError {
    password_field_error_on("password")
}

fn password_field_error_on(field: &str) -> FieldError {
    FieldError::plain(
        field,
        "password_too_short",
        format!(
            "send a password of {} to {} characters",
            identity::MIN_PASSWORD_CHARS,
            identity::MAX_PASSWORD_CHARS
        ),
    )
}

/// How the store looks `credential` up.
pub(crate) fn presented(credential: &Credential) -> Presented<'_> {
    match credential {
        Credential::ApiKey(key) => Presented::ApiKey(key.id()),
        Credential::Session(hash) => Presented::Session(hash),
    }
}
