//! `/v1/organisation`: its settings, and the proposals that need a second approver
//! (`/v1/organisation/changes`).

use super::extract::{Auth, IdPath, ListParams, QueryParams, StrictJson};
use super::problem::{ApiError, Problem};
use super::proposals::{ChangeAccepted, ChangeResponse};
use super::users::InviteResponse;
use crate::http::schema::ChangeStateSchema;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{OrgSettingsChange, OrgUpdate, OrgView, Resolved};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_organisation, update_organisation))
        .routes(routes!(list_changes))
        .routes(routes!(get_change))
        .routes(routes!(confirm_change))
        .routes(routes!(reject_change))
}

/// The organisation and its settings.
#[derive(Serialize, ToSchema)]
pub struct OrganisationResponse {
    /// The `org_id` of its humans and agents.
    pub id: Uuid,
    /// Unique across Tauros; `bootstrap-approver --org` names it.
    pub name: String,
    /// An approver may not decide on invoices of agents they own.
    pub four_eyes: bool,
    /// Approvers see and decide on the invoices of every agent in the org.
    pub shared_review: bool,
    /// When the organisation was created (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
}

impl From<OrgView> for OrganisationResponse {
    fn from(o: OrgView) -> Self {
        OrganisationResponse {
            id: o.id,
            name: o.name,
            four_eyes: o.four_eyes,
            shared_review: o.shared_review,
            created_at: o.created_at,
        }
    }
}

/// Settings to change; omitted ones keep their value.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct UpdateOrganisationRequest {
    /// `true`: an approver may not decide on invoices of agents they own.
    pub four_eyes: Option<bool>,
    /// `true`: approvers see and decide on the invoices of every agent in the org.
    pub shared_review: Option<bool>,
}

/// The caller's organisation (humans).
#[utoipa::path(get, path = "/v1/organisation", tag = "organisation", security(("bearer" = [])),
    responses(
        (status = 200, description = "The organisation", body = OrganisationResponse),
        (status = 403, description = "`forbidden`: agents may not read it", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_organisation(
    State(state): State<AppState>,
    Auth(actor): Auth,
) -> Result<Json<OrganisationResponse>, ApiError> {
    Ok(Json(state.app.get_org(&actor).await?.into()))
}

/// Change the organisation's settings (approvers); audited.
///
/// Turning `four_eyes` off while it is on is a **proposal**: the answer is 202 with the pending
/// change, nothing changes, and a different approver confirms it with
/// `POST /v1/organisation/changes/{id}/confirm` (the whole request waits, `shared_review`
/// included). Repeating the same proposal answers the pending one. Everything else, turning
/// `four_eyes` on included, applies at once.
#[utoipa::path(patch, path = "/v1/organisation", tag = "organisation", security(("bearer" = [])),
    request_body = UpdateOrganisationRequest,
    responses(
        (status = 200, description = "Updated (or nothing to change)", body = OrganisationResponse),
        (status = 202, description = "Proposed: turning `four_eyes` off waits for a second approver", body = ChangeAccepted),
        (status = 403, description = "`forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
    ))]
async fn update_organisation(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<UpdateOrganisationRequest>,
) -> Result<Response, ApiError> {
    let change = OrgSettingsChange {
        four_eyes: body.four_eyes,
        shared_review: body.shared_review,
    };
    Ok(match state.app.update_org(&actor, change).await? {
        OrgUpdate::Applied(org) => Json(OrganisationResponse::from(org)).into_response(),
        OrgUpdate::Proposed(change) => ChangeAccepted::response(change),
    })
}

/// A page of proposals, newest first.
#[derive(Serialize, ToSchema)]
pub struct ChangeList {
    /// The proposals.
    pub items: Vec<ChangeResponse>,
    /// Pass as `?cursor=` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// What a confirm or reject did.
#[derive(Serialize, ToSchema)]
pub struct ChangeDecisionResponse {
    /// The proposal, decided.
    pub change: ChangeResponse,
    /// The organisation's settings now.
    pub organisation: OrganisationResponse,
    /// A confirmed `approver_invitation` (either role): the new human and the one-time
    /// invitation token, for the confirming approver to hand over. Only in the answer of the
    /// confirm that created it.
    pub invitation: Option<InviteResponse>,
    /// `true` when the same approver had already made the same decision: nothing was written.
    pub replayed: bool,
}

impl From<Resolved> for ChangeDecisionResponse {
    fn from(r: Resolved) -> Self {
        ChangeDecisionResponse {
            change: r.change.into(),
            organisation: r.org.into(),
            invitation: r.invitation.map(Into::into),
            replayed: r.replayed,
        }
    }
}

/// The organisation's proposals, newest first (approvers).
#[utoipa::path(get, path = "/v1/organisation/changes", tag = "organisation", security(("bearer" = [])),
    params(
        ("state" = Option<ChangeStateSchema>, Query, description = "Only proposals in this state, e.g. `pending`"),
        super::schema::Page,
    ),
    responses(
        (status = 200, description = "A page of proposals", body = ChangeList),
        (status = 403, description = "`forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_changes(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
    query: QueryParams,
) -> Result<Json<ChangeList>, ApiError> {
    let rows = state
        .app
        .list_changes(&actor, query.get("state"), params.page())
        .await?;
    let (items, next_cursor) = params.split(rows, |c| c.id);
    Ok(Json(ChangeList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// One proposal (approvers).
#[utoipa::path(get, path = "/v1/organisation/changes/{id}", tag = "organisation", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Proposal id")),
    responses(
        (status = 200, description = "The proposal", body = ChangeResponse),
        (status = 403, description = "`forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_change(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<ChangeResponse>, ApiError> {
    Ok(Json(state.app.get_change(&actor, id).await?.into()))
}

/// Confirm a proposal: a *different* approver than the proposer applies it (for an
/// `approver_deactivation`, also not the approver it deactivates). A confirmed
/// `settlement_agent` names the agent it created (`agent_id`, owned by the proposer, who takes
/// its key with a rotation); no key is in this answer.
///
/// Confirming again as the same approver answers the decided proposal with `replayed: true`.
#[utoipa::path(post, path = "/v1/organisation/changes/{id}/confirm", tag = "organisation", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Proposal id")),
    responses(
        (status = 200, description = "Confirmed and applied", body = ChangeDecisionResponse),
        (status = 403, description = "`four_eyes_required`: you proposed it, or it deactivates you; `forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`change_decided`: already confirmed or rejected by someone else; `change_expired`: lapsed", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`email_taken` (on `email`): an invited email was taken meanwhile", body = Problem, content_type = "application/problem+json"),
    ))]
async fn confirm_change(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<ChangeDecisionResponse>, ApiError> {
    Ok(Json(state.app.confirm_change(&actor, id).await?.into()))
}

/// Reject a proposal (any approver but the one an `approver_deactivation` deactivates; the
/// proposer rejecting it withdraws it).
#[utoipa::path(post, path = "/v1/organisation/changes/{id}/reject", tag = "organisation", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Proposal id")),
    responses(
        (status = 200, description = "Rejected; nothing was applied", body = ChangeDecisionResponse),
        (status = 403, description = "`four_eyes_required`: it deactivates you; `forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`change_decided`: already confirmed, or rejected by someone else", body = Problem, content_type = "application/problem+json"),
    ))]
async fn reject_change(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<ChangeDecisionResponse>, ApiError> {
    Ok(Json(state.app.reject_change(&actor, id).await?.into()))
}

crate::body_rules!(UpdateOrganisationRequest);
