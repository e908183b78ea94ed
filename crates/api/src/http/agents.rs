//! `/v1/agents`: agents managed by the humans who own them.

use super::extract::{Auth, IdPath, ListParams, StrictJson};
use super::problem::{ApiError, Problem};
use super::proposals::ChangeAccepted;
use crate::http::rules::{self, BodyRules};
use crate::http::schema::CapabilitySchema;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{AgentCreated, AgentView, FieldError, NewAgent};
use tauros_domain::identity::{Capabilities, Capability};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, rename_agent, delete_agent))
        .routes(routes!(rotate_key))
}

/// A new agent.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentRequest {
    /// Display name, 1–160 characters.
    #[schema(value_type = String, required = true, example = "Billing agent", min_length = 1, max_length = 160)]
    #[validate(required, custom(function = rules::name_or_label))]
    pub name: Option<String>,
    /// What its key may do; omitted, `null` or empty: `["invoicing"]`. At most 8 entries
    /// (repeats are kept once); a longer list is refused whole (`too_many_capabilities`).
    #[schema(value_type = Option<Vec<CapabilitySchema>>, example = json!(["invoicing"]), max_items = 8)]
    pub capabilities: Option<Vec<String>>,
}

/// A new name for the agent.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct RenameAgentRequest {
    /// New name, 1–160 characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 160)]
    #[validate(required, custom(function = rules::name_or_label))]
    pub name: Option<String>,
}

/// An agent (never its key).
#[derive(Serialize, ToSchema)]
pub struct AgentResponse {
    /// The `agent_id` of the customers, destinations and invoices it owns.
    pub id: Uuid,
    /// The organisation the agent belongs to.
    pub org_id: Uuid,
    /// The human who owns it.
    pub owner_id: Uuid,
    /// Display name, 1–160 characters.
    pub name: String,
    /// What its key may do.
    #[schema(value_type = Vec<CapabilitySchema>)]
    pub capabilities: Vec<Capability>,
    /// When the current key expires.
    pub key_expires_at: Option<DateTime<Utc>>,
    /// When the current key was last used (minute precision).
    pub key_last_used_at: Option<DateTime<Utc>>,
    /// When the agent was created (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When it was last renamed, or `created_at` (RFC 3339, UTC).
    pub updated_at: DateTime<Utc>,
}

impl From<AgentView> for AgentResponse {
    fn from(a: AgentView) -> Self {
        AgentResponse {
            id: a.id,
            org_id: a.org_id,
            owner_id: a.owner_id,
            name: a.name,
            capabilities: a.capabilities.as_slice().to_vec(),
            key_expires_at: a.key_expires_at,
            key_last_used_at: a.key_last_used_at,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

/// An agent with its API key, shown only at creation and rotation.
#[derive(Serialize, ToSchema)]
pub struct AgentWithKeyResponse {
    /// The agent.
    pub agent: AgentResponse,
    /// `tauros_…`: store it now, it is never shown again.
    pub api_key: String,
}

/// A page of agents, newest first.
#[derive(Serialize, ToSchema)]
pub struct AgentList {
    /// The agents.
    pub items: Vec<AgentResponse>,
    /// Pass as `?cursor=` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Create an agent (humans); the caller owns it. Its API key is in the answer, once.
///
/// Only an approver grants `settlement`, and never together with `invoicing` (422: create two
/// agents). While the organisation's `four_eyes` is on, creating a settlement agent is a
/// proposal: the answer is 202 with the pending change (`kind: settlement_agent`), nothing is
/// created, and a different approver confirms it with
/// `POST /v1/organisation/changes/{id}/confirm`. The confirmed agent is yours, without a key:
/// take its key with `POST /v1/agents/{id}/rotate-key` (`agent_id` in the change), so that the
/// confirming approver never sees it. Repeating the same proposal answers the pending one.
#[utoipa::path(post, path = "/v1/agents", tag = "agents", security(("bearer" = [])),
    request_body = CreateAgentRequest,
    responses(
        (status = 201, description = "Created", body = AgentWithKeyResponse),
        (status = 202, description = "Proposed: with `four_eyes` on, granting `settlement` waits for a second approver", body = ChangeAccepted),
        (status = 403, description = "`forbidden`: agents may not manage agents; only an approver grants `settlement`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`validation_failed`: a bad name or capability, or `settlement` with `invoicing`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_agent(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<CreateAgentRequest>,
) -> Result<Response, ApiError> {
    // Present: `CreateAgentRequest`'s rules required it.
    let Some(name) = body.name else {
        return Err(crate::http::problem::internal());
    };
    let input = NewAgent {
        name,
        capabilities: body.capabilities.unwrap_or_default(),
    };
    Ok(match state.app.create_agent(&actor, input).await? {
        AgentCreated::Done(agent, api_key) => (
            StatusCode::CREATED,
            Json(AgentWithKeyResponse {
                agent: agent.into(),
                api_key,
            }),
        )
            .into_response(),
        AgentCreated::Proposed(change) => ChangeAccepted::response(change),
    })
}

/// The agents the calling human owns, newest first.
#[utoipa::path(get, path = "/v1/agents", tag = "agents", security(("bearer" = [])),
    params(super::schema::Page),
    responses(
        (status = 200, description = "A page of agents", body = AgentList),
        (status = 403, description = "`forbidden`: agents may not list agents", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_agents(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
) -> Result<Json<AgentList>, ApiError> {
    let rows = state.app.list_agents(&actor, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |a| a.id);
    Ok(Json(AgentList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// One agent the caller owns.
#[utoipa::path(get, path = "/v1/agents/{id}", tag = "agents", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The agent", body = AgentResponse),
        (status = 403, description = "`forbidden`: agents may not read agents", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: unknown or not yours", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_agent(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<AgentResponse>, ApiError> {
    Ok(Json(state.app.get_agent(&actor, id).await?.into()))
}

/// Rename an agent.
#[utoipa::path(patch, path = "/v1/agents/{id}", tag = "agents", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Agent id")),
    request_body = RenameAgentRequest,
    responses(
        (status = 200, description = "Renamed", body = AgentResponse),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn rename_agent(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<RenameAgentRequest>,
) -> Result<Json<AgentResponse>, ApiError> {
    // Present: `RenameAgentRequest`'s rules required it.
    let Some(name) = body.name else {
        return Err(crate::http::problem::internal());
    };
    Ok(Json(
        state.app.rename_agent(&actor, id, &name).await?.into(),
    ))
}

/// Issue a new key; every older key of the agent stops working at once.
#[utoipa::path(post, path = "/v1/agents/{id}/rotate-key", tag = "agents", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Agent id")),
    responses(
        (status = 200, description = "The new key", body = AgentWithKeyResponse),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn rotate_key(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<AgentWithKeyResponse>, ApiError> {
    let (agent, api_key) = state.app.rotate_agent_key(&actor, id).await?;
    Ok(Json(AgentWithKeyResponse {
        agent: agent.into(),
        api_key,
    }))
}

/// Delete an agent that owns no customers, destinations or invoices.
#[utoipa::path(delete, path = "/v1/agents/{id}", tag = "agents", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Agent id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`has_dependents`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_agent(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<StatusCode, ApiError> {
    state.app.delete_agent(&actor, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

crate::body_rules!(RenameAgentRequest);

/// The name's rule is the wire's; the capabilities are the domain's to read
/// (`Capabilities::requested`: known names, at most 8, never `settlement` with `invoicing`).
impl BodyRules for CreateAgentRequest {
    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        validator::Validate::validate(self)
    }

    fn completing_rules(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        Capabilities::requested(
            self.capabilities.as_deref().unwrap_or_default(),
            &mut errors,
        );
        errors
    }
}
