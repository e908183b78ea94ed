//! `GET /v1/audit-events`: the organisation's audit trail (settings, humans, agents, keys,
//! customers, destinations), newest first. Invoice events have their own chained trail at
//! `/v1/invoices/{id}/events`.

use super::extract::{Auth, ListParams};
use super::problem::{ApiError, Problem};
use crate::http::schema::{ActorKindSchema, InterfaceSchema};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_app::AuditEventView;
use tauros_domain::identity::{ActorKind, Interface};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit_events))
}

/// One audited change.
#[derive(Serialize, ToSchema)]
pub struct AuditEventResponse {
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

impl From<AuditEventView> for AuditEventResponse {
    fn from(e: AuditEventView) -> Self {
        AuditEventResponse {
            id: e.id,
            actor_kind: e.actor_kind,
            actor_id: e.actor_id,
            interface: e.interface,
            action: e.action,
            subject_type: e.subject_type,
            subject_id: e.subject_id,
            detail: e.detail,
            occurred_at: e.occurred_at,
        }
    }
}

/// A page of audit events, newest first.
#[derive(Serialize, ToSchema)]
pub struct AuditEventList {
    /// The events.
    pub items: Vec<AuditEventResponse>,
    /// Pass as `?cursor=` for the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The organisation's audit trail, newest first (approvers).
#[utoipa::path(get, path = "/v1/audit-events", tag = "organisation", security(("bearer" = [])),
    params(super::schema::Page),
    responses(
        (status = 200, description = "A page of audit events", body = AuditEventList),
        (status = 403, description = "`forbidden`: not an approver", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_audit_events(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
) -> Result<Json<AuditEventList>, ApiError> {
    let rows = state.app.list_audit_events(&actor, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |e| e.id);
    Ok(Json(AuditEventList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}
