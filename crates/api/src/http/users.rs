//! `/v1/users`: the organisation's humans — inviting (a proposal for approvers while four eyes
//! is on), listing, deactivating.

use super::extract::{Auth, IdPath, ListParams, StrictJson};
use super::problem::{ApiError, Problem};
use super::proposals::ChangeAccepted;
use super::sessions::UserResponse;
use crate::http::schema::RoleSchema;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{Deactivated, Invitation, Invited};
use tauros_domain::identity::Role;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(invite_user, list_users))
        .routes(routes!(deactivate_user))
}

/// Invite a human into the organisation.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct InviteRequest {
    /// Their email (unique within the organisation; another organisation's humans do not
    /// matter): one `@`, no spaces inside.
    #[schema(
        value_type = String,
        required = true,
        example = "ops@example.com",
        min_length = 3,
        max_length = 254,
        pattern = r"^[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+@[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    #[validate(required, custom(function = crate::http::rules::email_address))]
    pub email: Option<String>,
    /// What the human may do; fixed for good.
    #[schema(value_type = RoleSchema, required = true, example = "operator")]
    #[validate(required)]
    pub role: Option<Role>,
}

/// The invited human and their one-time invitation token.
#[derive(Serialize, ToSchema)]
pub struct InviteResponse {
    /// The human (no password yet).
    pub user: UserResponse,
    /// Hand this to the human; it works once, until `invitation_expires_at`. Shown only here.
    pub invitation_token: String,
    /// When the invitation expires.
    pub invitation_expires_at: DateTime<Utc>,
}

impl From<Invitation> for InviteResponse {
    fn from(i: Invitation) -> Self {
        InviteResponse {
            user: i.user.into(),
            invitation_token: i.token,
            invitation_expires_at: i.expires_at,
        }
    }
}

/// A page of humans, newest first.
#[derive(Serialize, ToSchema)]
pub struct UserList {
    /// The humans.
    pub items: Vec<UserResponse>,
    /// Pass as `?cursor=` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Invite a human (approvers only).
///
/// While the organisation's `four_eyes` is on, inviting **any** human (operator or approver:
/// either can own agents, and four eyes keys on the agent's owner) is a proposal: the answer is
/// 202 with the pending change, nothing is created, and a different approver confirms it with
/// `POST /v1/organisation/changes/{id}/confirm` (that answer carries the invitation token).
/// Repeating the same proposal answers the pending one. With `four_eyes` off, the human is
/// invited at once (201).
#[utoipa::path(post, path = "/v1/users", tag = "sessions", security(("bearer" = [])),
    request_body = InviteRequest,
    responses(
        (status = 201, description = "Invited", body = InviteResponse),
        (status = 202, description = "Proposed: with `four_eyes` on, every invitation waits for a second approver", body = ChangeAccepted),
        (status = 403, description = "`forbidden`: not an approver, or an agent", body = Problem, content_type = "application/problem+json"),
    ))]
async fn invite_user(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<InviteRequest>,
) -> Result<Response, ApiError> {
    // Both present: `InviteRequest`'s rules required them.
    let (Some(email), Some(role)) = (body.email, body.role) else {
        return Err(crate::http::problem::internal());
    };
    Ok(match state.app.invite_user(&actor, &email, role).await? {
        Invited::Done(invitation) => {
            (StatusCode::CREATED, Json(InviteResponse::from(invitation))).into_response()
        }
        Invited::Proposed(change) => ChangeAccepted::response(change),
    })
}

/// The organisation's humans, newest first (approvers only).
#[utoipa::path(get, path = "/v1/users", tag = "sessions", security(("bearer" = [])),
    params(super::schema::Page),
    responses(
        (status = 200, description = "A page of humans", body = UserList),
        (status = 403, description = "`forbidden`: not an approver, or an agent", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_users(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
) -> Result<Json<UserList>, ApiError> {
    let rows = state.app.list_users(&actor, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |u| u.id);
    Ok(Json(UserList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// Deactivate a human (approvers only; never yourself).
///
/// In one step their sessions and open invitation end and their pending proposals are
/// rejected; they cannot sign in again. Their agents keep working. Already deactivated: 200
/// with the human as they are, nothing written. While the organisation's `four_eyes` is on,
/// deactivating an **approver** is a proposal: 202 with the pending change
/// (`kind: approver_deactivation`), confirmed by an approver who is neither the proposer nor
/// the approver it deactivates; deactivating an operator stays immediate.
#[utoipa::path(post, path = "/v1/users/{id}/deactivate", tag = "sessions", security(("bearer" = [])),
    params(("id" = uuid::Uuid, Path, description = "The human's id")),
    responses(
        (status = 200, description = "Deactivated", body = UserResponse),
        (status = 202, description = "Proposed: with `four_eyes` on, deactivating an approver waits for another approver", body = ChangeAccepted),
        (status = 403, description = "`forbidden`: not an approver, an agent, or yourself", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: no such human in your organisation", body = Problem, content_type = "application/problem+json"),
    ))]
async fn deactivate_user(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Response, ApiError> {
    Ok(match state.app.deactivate_user(&actor, id).await? {
        Deactivated::Done(user) => Json(UserResponse::from(user)).into_response(),
        Deactivated::Proposed(change) => ChangeAccepted::response(change),
    })
}

crate::body_rules!(InviteRequest);
