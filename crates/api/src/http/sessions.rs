//! Humans and their credentials: sign-in, sign-out (here or everywhere), `GET /v1/me`, changing
//! one's password, accepting an invitation.

use super::extract::{Auth, ClientAddr, StrictJson};
use super::problem::{ApiError, Problem};
use crate::http::schema::{CapabilitySchema, RoleSchema, UserStateSchema};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{Actor, App, Me, SignedIn, UserView};
use tauros_domain::identity::{
    Capability, MAX_DEVICE_TOKEN_CHARS, MAX_EMAIL_CHARS, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS,
    Role, UserState,
};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(sign_in, sign_out_everywhere))
        .routes(routes!(sign_out))
        .routes(routes!(me))
        .routes(routes!(change_password))
        .routes(routes!(accept_invitation))
}

/// Email and password.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct SignInRequest {
    /// The human's email (case-insensitive); at most 254 characters.
    #[schema(value_type = String, required = true, example = "demo@tauros.local", max_length = 254)]
    #[validate(
        required,
        length(max = EMAIL_MAX, code = "email_too_long", message = "send an email address of at most 254 characters")
    )]
    pub email: Option<String>,
    /// The password set on accepting the invitation (or with `bootstrap-approver`); at most
    /// 1024 characters.
    #[schema(value_type = String, required = true, example = "tauros-demo-password", max_length = 1024)]
    #[validate(
        required,
        length(max = PASSWORD_MAX, code = "password_too_long", message = "send a password of at most 1024 characters")
    )]
    pub password: Option<String>,
    /// Which of the email's organisations to sign in to (its id or its name), when the email
    /// has an account in several. Left out or null: the email's oldest account that may sign in.
    #[schema(required = false, max_length = 160, example = "Demo")]
    #[validate(length(
        max = ORGANISATION_MAX,
        code = "organisation_too_long",
        message = "send the organisation's id or its name (at most 160 characters), or leave it out"
    ))]
    pub organisation: Option<String>,
    /// The `device_token` an earlier sign-in of this human answered on this device. With a
    /// valid one, failed sign-ins for the email from elsewhere do not stop this one; only this
    /// device's own failures can. Unknown, expired or revoked: the sign-in is checked as one
    /// without (never an error).
    #[schema(required = false, max_length = 128, example = "tdev_5nV0q…")]
    #[validate(length(
        max = DEVICE_TOKEN_MAX,
        code = "device_token_too_long",
        message = "send the device_token a sign-in answered (at most 128 characters), or leave it out"
    ))]
    pub device_token: Option<String>,
}

/// The longest `organisation` a sign-in names (an organisation's name is at most 160).
const ORGANISATION_MAX: u64 = tauros_domain::text::MAX_NAME_CHARS as u64;
/// The domain's bounds, as `validator` takes them.
const DEVICE_TOKEN_MAX: u64 = MAX_DEVICE_TOKEN_CHARS as u64;
const EMAIL_MAX: u64 = MAX_EMAIL_CHARS as u64;
const PASSWORD_MAX: u64 = MAX_PASSWORD_CHARS as u64;
const PASSWORD_MIN: u64 = MIN_PASSWORD_CHARS as u64;

/// A human.
#[derive(Serialize, ToSchema)]
pub struct UserResponse {
    /// The human's id (`approver_id` on decisions, `actor_id` on events).
    pub id: Uuid,
    /// The organisation the human belongs to.
    pub org_id: Uuid,
    /// The email the human signs in with (matched case-insensitively).
    pub email: String,
    /// What the human may do.
    #[schema(example = "approver")]
    #[schema(value_type = RoleSchema)]
    pub role: Role,
    /// Whether the account may sign in.
    #[schema(example = "active")]
    #[schema(value_type = UserStateSchema)]
    pub state: UserState,
    /// When the human was created (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
}

impl From<UserView> for UserResponse {
    fn from(u: UserView) -> Self {
        UserResponse {
            id: u.id,
            org_id: u.org_id,
            email: u.email,
            role: u.role,
            state: u.state,
            created_at: u.created_at,
        }
    }
}

/// A new session.
#[derive(Serialize, ToSchema)]
pub struct SessionResponse {
    /// Bearer token for `Authorization: Bearer …`; shown only here.
    pub token: String,
    /// When the token stops working.
    pub expires_at: DateTime<Utc>,
    /// Who signed in.
    pub user: UserResponse,
    /// Keep it on this device and send it with its next sign-in (valid 90 days; a password
    /// change or signing out everywhere revokes it). The one sent, if it was valid for this
    /// account; else a new one.
    #[schema(example = "tdev_5nV0q…")]
    pub device_token: String,
}

impl From<SignedIn> for SessionResponse {
    fn from(s: SignedIn) -> Self {
        SessionResponse {
            token: s.token,
            expires_at: s.expires_at,
            user: s.user.into(),
            device_token: s.device_token,
        }
    }
}

/// Sign in with email and password.
///
/// Wrong email, wrong password and an `organisation` the email has no account in get the same
/// answer. An email over 254 characters or a password over 1024 is a 422 before any other
/// work. Failed sign-ins are counted per email (from every address), per device token, and per
/// email from one client address. The email's count stops only sign-ins without a valid
/// `device_token` of this human; a device is stopped only by its own failures; an address only
/// for the emails it guessed. Over a limit, attempts wait (429, its `limit` named) until the
/// window ends.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", request_body = SignInRequest,
    responses(
        (status = 201, description = "Signed in", body = SessionResponse),
        (status = 401, description = "`invalid_credentials`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`validation_failed`: a missing field, an email over 254 characters or a password over 1024", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`rate_limited`, `limit` says which: `email` (failed sign-ins for this email from several addresses; a device that signed in before still can), `device` (this device token's failures), `address_and_email` (this email's failures from this address) or `address_in_flight` (this address's sign-ins being checked at once); retry after `Retry-After` seconds", body = Problem, content_type = "application/problem+json"),
    ))]
async fn sign_in(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    StrictJson(body): StrictJson<SignInRequest>,
) -> Result<(StatusCode, Json<SessionResponse>), ApiError> {
    // Both present: `SignInRequest`'s rules required them.
    let (Some(email), Some(password)) = (body.email, body.password) else {
        return Err(crate::http::problem::internal());
    };
    let signed_in = state
        .app
        .sign_in(
            &email,
            password,
            body.organisation.as_deref(),
            body.device_token.as_deref(),
            client,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(signed_in.into())))
}

/// End the current session at once (other sessions of the same human stay valid).
#[utoipa::path(delete, path = "/v1/sessions/current", tag = "sessions",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Signed out"),
        (status = 403, description = "`forbidden`: agents have no session", body = Problem, content_type = "application/problem+json"),
    ))]
async fn sign_out(
    State(state): State<AppState>,
    Auth(actor): Auth,
) -> Result<StatusCode, ApiError> {
    state.app.sign_out(actor.human()?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// End every session of the calling human, this one included, and revoke every device token
/// ("sign out everywhere").
#[utoipa::path(delete, path = "/v1/sessions", tag = "sessions",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Every session ended"),
        (status = 403, description = "`forbidden`: agents have no session", body = Problem, content_type = "application/problem+json"),
    ))]
async fn sign_out_everywhere(
    State(state): State<AppState>,
    Auth(actor): Auth,
) -> Result<StatusCode, ApiError> {
    state.app.sign_out_everywhere(actor.human()?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The current password and a new one.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct ChangePasswordRequest {
    /// The password the human signs in with now (at most 1024 characters).
    #[schema(value_type = String, required = true, max_length = 1024)]
    #[validate(
        required,
        length(max = PASSWORD_MAX, code = "password_too_long", message = "send a password of at most 1024 characters")
    )]
    pub current_password: Option<String>,
    /// The new password: 12 to 1024 characters.
    #[schema(value_type = String, required = true, min_length = 12, max_length = 1024)]
    #[validate(
        required,
        length(
            min = PASSWORD_MIN,
            max = PASSWORD_MAX,
            code = "password_too_short",
            message = "send a password of 12 to 1024 characters"
        )
    )]
    pub new_password: Option<String>,
}

/// Change your password; every other session of yours ends (this one stays).
///
/// A wrong `current_password` is a 422 on that field and counts as a failed sign-in for your
/// email, this session and your address (too many from this session or address → 429
/// `rate_limited`). Every device token of yours is revoked.
#[utoipa::path(post, path = "/v1/me/password", tag = "sessions",
    security(("bearer" = [])),
    request_body = ChangePasswordRequest,
    responses(
        (status = 204, description = "Changed"),
        (status = 403, description = "`forbidden`: agents have no password", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`password_changed`: another request changed it meanwhile", body = Problem, content_type = "application/problem+json"),
    ))]
async fn change_password(
    State(state): State<AppState>,
    Auth(actor): Auth,
    ClientAddr(client): ClientAddr,
    StrictJson(body): StrictJson<ChangePasswordRequest>,
) -> Result<StatusCode, ApiError> {
    // Both present: `ChangePasswordRequest`'s rules required them.
    let (Some(current), Some(new)) = (body.current_password, body.new_password) else {
        return Err(crate::http::problem::internal());
    };
    state
        .app
        .change_password(&actor, current, new, client)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller: a human or an agent.
#[derive(Serialize, ToSchema)]
pub struct MeResponse {
    /// Whether the caller is a human or an agent; says which of the members below are present.
    #[schema(value_type = super::schema::CallerKind, example = "agent")]
    pub kind: &'static str,
    /// The human's or the agent's id.
    pub id: Uuid,
    /// The caller's organisation.
    pub org_id: Uuid,
    /// Agents: their name.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub name: Option<String>,
    /// Humans: their email.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub email: Option<String>,
    /// Humans: what they may do.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[schema(value_type = Option<RoleSchema>)]
    pub role: Option<Role>,
    /// Agents: what the key may do.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    #[schema(value_type = Option<Vec<CapabilitySchema>>)]
    pub capabilities: Option<Vec<Capability>>,
}

/// Who am I?
#[utoipa::path(get, path = "/v1/me", tag = "sessions", security(("bearer" = [])),
    responses((status = 200, description = "The caller", body = MeResponse)))]
async fn me(
    State(state): State<AppState>,
    Auth(actor): Auth,
) -> Result<Json<MeResponse>, ApiError> {
    Ok(Json(whoami(&state.app, &actor).await?))
}

/// The caller (REST's `/v1/me` and the whoami tool).
pub(crate) async fn whoami(app: &App, actor: &Actor) -> Result<MeResponse, ApiError> {
    Ok(app.me(actor).await?.into())
}

impl From<Me> for MeResponse {
    fn from(me: Me) -> Self {
        match me {
            Me::Human(u) => MeResponse {
                kind: "human",
                id: u.id,
                org_id: u.org_id,
                name: None,
                email: Some(u.email),
                role: Some(u.role),
                capabilities: None,
            },
            Me::Agent {
                id,
                org_id,
                name,
                capabilities,
            } => MeResponse {
                kind: "agent",
                id,
                org_id,
                name: Some(name),
                email: None,
                role: None,
                capabilities: Some(capabilities.as_slice().to_vec()),
            },
        }
    }
}

/// Accept an invitation by choosing a password.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct AcceptInvitationRequest {
    /// The token from the invitation.
    #[schema(value_type = String, required = true)]
    #[validate(required)]
    pub invitation_token: Option<String>,
    /// At least 12 characters.
    #[schema(value_type = String, required = true, min_length = 12, max_length = 1024)]
    #[validate(
        required,
        length(
            min = PASSWORD_MIN,
            max = PASSWORD_MAX,
            code = "password_too_short",
            message = "send a password of 12 to 1024 characters"
        )
    )]
    pub password: Option<String>,
}

/// Accept an invitation: set a password and get a session.
///
/// Works once; a used, expired or unknown token gets `invalid_credentials`.
#[utoipa::path(post, path = "/v1/invitations/accept", tag = "sessions",
    request_body = AcceptInvitationRequest,
    responses(
        (status = 201, description = "Password set and signed in", body = SessionResponse),
        (status = 401, description = "`invalid_credentials`: unknown, expired or used token", body = Problem, content_type = "application/problem+json"),
    ))]
async fn accept_invitation(
    State(state): State<AppState>,
    StrictJson(body): StrictJson<AcceptInvitationRequest>,
) -> Result<(StatusCode, Json<SessionResponse>), ApiError> {
    // Both present: `AcceptInvitationRequest`'s rules required them.
    let (Some(token), Some(password)) = (body.invitation_token, body.password) else {
        return Err(crate::http::problem::internal());
    };
    let signed_in = state.app.accept_invitation(&token, password).await?;
    Ok((StatusCode::CREATED, Json(signed_in.into())))
}

crate::body_rules!(
    SignInRequest,
    ChangePasswordRequest,
    AcceptInvitationRequest
);
