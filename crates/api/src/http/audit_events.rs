//! `GET /v1/audit-events`: the organisation's audit trail, newest first. Invoice events have
//! their own chained trail at `/v1/invoices/{id}/events`.

use super::extract::{Auth, ListParams};
use super::problem::{ApiError, Problem};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use tauros_app::AuditEventView;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit_events))
}

/// A page of audit events, newest first.
#[derive(Serialize, ToSchema)]
pub struct AuditEventList {
    /// The events.
    pub items: Vec<AuditEventView>,
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
    Ok(Json(AuditEventList { items, next_cursor }))
}
