//! `GET/PATCH /v1/organisation`.

use super::AppState;
use super::extract::{Auth, StrictJson};
use super::problem::{ApiError, Problem};
use crate::app::{OrgSettingsChange, OrgView};
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_organisation, update_organisation))
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
#[derive(Deserialize, ToSchema)]
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
#[utoipa::path(patch, path = "/v1/organisation", tag = "organisation", security(("bearer" = [])),
    request_body = UpdateOrganisationRequest,
    responses(
        (status = 200, description = "Updated", body = OrganisationResponse),
        (status = 403, description = "`forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
    ))]
async fn update_organisation(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<UpdateOrganisationRequest>,
) -> Result<Json<OrganisationResponse>, ApiError> {
    let change = OrgSettingsChange {
        four_eyes: body.four_eyes,
        shared_review: body.shared_review,
    };
    Ok(Json(state.app.update_org(&actor, change).await?.into()))
}
