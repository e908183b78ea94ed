//! The answer of a request that became a proposal needing a second approver (202), and how a
//! proposal reads on the wire: shared by `/v1/organisation` and `/v1/users`.

use crate::http::schema::{ChangeKindSchema, ChangeStateSchema, RoleSchema};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_app::ChangeView;
use tauros_domain::governance::{ChangeKind, ChangeState};
use tauros_domain::identity::Role;
use utoipa::ToSchema;
use uuid::Uuid;

/// A proposal that needs a second approver.
#[derive(Serialize, ToSchema)]
pub struct ChangeResponse {
    /// Confirm or reject it at `/v1/organisation/changes/{id}/…`.
    pub id: Uuid,
    /// What it asks for.
    #[schema(value_type = ChangeKindSchema)]
    pub kind: ChangeKind,
    /// The approver who proposed it; they cannot confirm it.
    pub proposed_by: Uuid,
    /// Where it stands.
    #[schema(value_type = ChangeStateSchema)]
    pub state: ChangeState,
    /// `settings`: the `four_eyes` asked for (`null`: unchanged).
    pub four_eyes: Option<bool>,
    /// `settings`: the `shared_review` asked for (`null`: unchanged).
    pub shared_review: Option<bool>,
    /// `approver_invitation` (an invitation of either role): who is invited.
    pub email: Option<String>,
    /// `approver_invitation` (an invitation of either role): with which role.
    #[schema(value_type = Option<RoleSchema>)]
    pub role: Option<Role>,
    /// Who confirmed or rejected it.
    pub decided_by: Option<Uuid>,
    /// When it was confirmed or rejected.
    pub decided_at: Option<DateTime<Utc>>,
    /// When it was proposed (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// After this it can no longer be confirmed.
    pub expires_at: DateTime<Utc>,
    /// `payment_resolution`: the resolution it would apply (`GET /v1/payments/{id}` lists it
    /// under `resolutions`, with its action, invoice, amount and reason).
    pub payment_resolution_id: Option<Uuid>,
    /// `payment_resolution`: the payment it resolves (`/v1/payments/{id}`).
    pub payment_id: Option<Uuid>,
    /// `approver_deactivation`: the approver it deactivates (they may not decide it).
    pub user_id: Option<Uuid>,
    /// `settlement_agent`: the name of the agent with `settlement` it creates.
    pub agent_name: Option<String>,
    /// `settlement_agent`, once confirmed: the agent it created, owned by the proposer, who
    /// takes its key with `POST /v1/agents/{id}/rotate-key`.
    pub agent_id: Option<Uuid>,
}

impl From<ChangeView> for ChangeResponse {
    fn from(c: ChangeView) -> Self {
        ChangeResponse {
            id: c.id,
            kind: c.kind,
            proposed_by: c.proposed_by,
            state: c.state,
            four_eyes: c.four_eyes,
            shared_review: c.shared_review,
            email: c.email,
            role: c.role,
            decided_by: c.decided_by,
            decided_at: c.decided_at,
            created_at: c.created_at,
            expires_at: c.expires_at,
            payment_resolution_id: c.payment_resolution_id,
            payment_id: c.payment_id,
            user_id: c.user_id,
            agent_name: c.agent_name,
            agent_id: c.agent_id,
        }
    }
}

/// The answer 202: the request became a proposal; nothing changed yet.
#[derive(Serialize, ToSchema)]
pub struct ChangeAccepted {
    /// The pending proposal.
    pub change: ChangeResponse,
}

impl ChangeAccepted {
    /// 202 with the pending proposal.
    pub(super) fn response(change: ChangeView) -> Response {
        (
            StatusCode::ACCEPTED,
            Json(ChangeAccepted {
                change: change.into(),
            }),
        )
            .into_response()
    }
}
