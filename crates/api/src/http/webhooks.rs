//! `/v1/webhook-endpoints`: the organisation's webhook endpoints and their delivery attempts,
//! for approvers. The signing secret appears in two answers only: the creation and a rotation.

use super::extract::{Auth, IdPath, ListParams, StrictJson};
use super::problem::{ApiError, Problem};
use super::schema::WebhookEventType;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use tauros_app::{NewWebhookEndpoint, WebhookAttemptView, WebhookEndpointView, WithSecret};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook_endpoint, list_webhook_endpoints))
        .routes(routes!(get_webhook_endpoint, delete_webhook_endpoint))
        .routes(routes!(rotate_webhook_secret))
        .routes(routes!(list_webhook_deliveries))
}

/// A new webhook endpoint.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpointRequest {
    /// Where deliveries are POSTed: `http://` or `https://`, at most 2000 characters, no user
    /// name or password. Its host must have only public addresses, unless the server's
    /// operator allow-lists it (`TAUROS_WEBHOOK_ALLOW_HOSTS`; a non-empty list admits only its
    /// hosts).
    #[schema(value_type = String, required = true, example = "https://hooks.example.com/tauros",
        max_length = 2000, pattern = r"^[Hh][Tt][Tt][Pp][Ss]?://")]
    pub url: Option<String>,
    /// The event types to deliver: at least one (a repeat counts once).
    #[schema(value_type = Vec<WebhookEventType>, required = true, min_items = 1, max_items = 32,
        example = json!(["invoice.submitted", "invoice.approved"]))]
    pub events: Option<Vec<String>>,
    /// A note for humans, 1–200 characters.
    #[schema(min_length = 1, max_length = 200, example = "Accounting system")]
    pub description: Option<String>,
    /// Seconds one attempt may take (connecting, sending, and the answer's status line):
    /// 1–30, 10 when omitted. Longer is a failed attempt, retried.
    #[schema(minimum = 1, maximum = 30, default = 10)]
    pub timeout_seconds: Option<i64>,
}

/// An endpoint with its signing secret: shown in this answer and never again.
#[derive(Serialize, ToSchema)]
pub struct WebhookEndpointWithSecret {
    pub endpoint: WebhookEndpointView,
    /// `whsec_` + the base64 of 32 random bytes; the HMAC-SHA256 key is the decoded bytes
    /// (Standard Webhooks). Store it now: it cannot be read again, only rotated.
    #[schema(example = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")]
    pub secret: String,
}

impl From<WithSecret> for WebhookEndpointWithSecret {
    fn from(w: WithSecret) -> Self {
        WebhookEndpointWithSecret {
            endpoint: w.endpoint,
            secret: w.secret.expose().to_owned(),
        }
    }
}

/// A page of endpoints, newest first.
#[derive(Serialize, ToSchema)]
pub struct WebhookEndpointList {
    pub items: Vec<WebhookEndpointView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A page of delivery attempts, newest first.
#[derive(Serialize, ToSchema)]
pub struct WebhookAttemptList {
    pub items: Vec<WebhookAttemptView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// Register a webhook endpoint (approvers). The answer carries its signing secret, shown
/// this once. From now on every invoice event of the organisation whose type it lists is
/// delivered to it.
#[utoipa::path(post, path = "/v1/webhook-endpoints", tag = "webhooks", security(("bearer" = [])),
    request_body = CreateWebhookEndpointRequest,
    responses(
        (status = 201, description = "Registered; `secret` is shown this once", body = WebhookEndpointWithSecret),
        (status = 403, description = "`forbidden`: only approvers manage webhook endpoints", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`too_many_endpoints`: the organisation has 20 already", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_webhook_endpoint(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<CreateWebhookEndpointRequest>,
) -> Result<(StatusCode, Json<WebhookEndpointWithSecret>), ApiError> {
    let input = NewWebhookEndpoint {
        url: body.url,
        events: body.events,
        description: body.description,
        timeout_seconds: body.timeout_seconds,
    };
    let created = state.app.create_webhook_endpoint(&actor, input).await?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

/// The organisation's webhook endpoints, newest first (approvers).
#[utoipa::path(get, path = "/v1/webhook-endpoints", tag = "webhooks", security(("bearer" = [])),
    params(super::schema::Page),
    responses(
        (status = 200, description = "A page of endpoints", body = WebhookEndpointList),
        (status = 403, description = "`forbidden`: only approvers see webhook endpoints", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_webhook_endpoints(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
) -> Result<Json<WebhookEndpointList>, ApiError> {
    let rows = state
        .app
        .list_webhook_endpoints(&actor, params.page())
        .await?;
    let (items, next_cursor) = params.split(rows, |e| e.id);
    Ok(Json(WebhookEndpointList { items, next_cursor }))
}

/// One webhook endpoint (approvers).
#[utoipa::path(get, path = "/v1/webhook-endpoints/{id}", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 200, description = "The endpoint", body = WebhookEndpointView),
        (status = 403, description = "`forbidden`: only approvers see webhook endpoints", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: unknown or another organisation's", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_webhook_endpoint(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<WebhookEndpointView>, ApiError> {
    Ok(Json(state.app.get_webhook_endpoint(&actor, id).await?))
}

/// Delete a webhook endpoint and its attempts (approvers). Its deliveries that wait to run are
/// cancelled (they show as `cancelled` in `/v1/jobs`); one already running finishes its
/// attempt.
#[utoipa::path(delete, path = "/v1/webhook-endpoints/{id}", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "`forbidden`: only approvers manage webhook endpoints", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_webhook_endpoint(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<StatusCode, ApiError> {
    state.app.delete_webhook_endpoint(&actor, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replace an endpoint's signing secret (approvers); the new one is in this answer only. Every
/// attempt from now on is signed with it, retries of earlier events included.
#[utoipa::path(post, path = "/v1/webhook-endpoints/{id}/rotate-secret", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 200, description = "The endpoint with its new secret, shown this once", body = WebhookEndpointWithSecret),
        (status = 403, description = "`forbidden`: only approvers manage webhook endpoints", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn rotate_webhook_secret(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<WebhookEndpointWithSecret>, ApiError> {
    Ok(Json(
        state.app.rotate_webhook_secret(&actor, id).await?.into(),
    ))
}

/// An endpoint's delivery attempts, newest first (approvers): each attempt's event, status code
/// or network error, duration, and when a failed delivery is tried again.
#[utoipa::path(get, path = "/v1/webhook-endpoints/{id}/deliveries", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id"), super::schema::Page),
    responses(
        (status = 200, description = "A page of attempts", body = WebhookAttemptList),
        (status = 403, description = "`forbidden`: only approvers see webhook deliveries", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_webhook_deliveries(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    params: ListParams,
) -> Result<Json<WebhookAttemptList>, ApiError> {
    let rows = state
        .app
        .list_webhook_attempts(&actor, id, params.page())
        .await?;
    let (items, next_cursor) = params.split(rows, |a| a.id);
    Ok(Json(WebhookAttemptList { items, next_cursor }))
}
