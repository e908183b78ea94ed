//! `/v1/webhook-endpoints`: the organisation's webhook endpoints and their delivery attempts,
//! for approvers. The signing secret appears in two answers only: the creation (and its keyed
//! replay within a day) and a rotation. Deliveries without dead ends (docs/WEBHOOKS.md): a
//! failed delivery is resent, a disabled endpoint re-enabled.

use super::extract::{Auth, IdPath, IdempotencyKeyHeader, ListParams, StrictJson};
use super::headers::REPLAYED;
use super::problem::{ApiError, Problem};
use super::schema::WebhookEventType;
use crate::http::rules::{self, BodyRules};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use tauros_app::{
    FieldError, NewWebhookEndpoint, Replayed, WebhookAttemptView, WebhookDeliveryView,
    WebhookEndpointView, WithSecret,
};
use tauros_domain::webhook::{TIMEOUT_SECONDS, endpoint_form_errors};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook_endpoint, list_webhook_endpoints))
        .routes(routes!(get_webhook_endpoint, delete_webhook_endpoint))
        .routes(routes!(rotate_webhook_secret))
        .routes(routes!(enable_webhook_endpoint))
        .routes(routes!(list_webhook_deliveries))
        .routes(routes!(resend_webhook_delivery))
}

/// `/{id}/deliveries/{delivery_id}`: both UUIDs.
struct DeliveryPath {
    endpoint_id: Uuid,
    delivery_id: Uuid,
}

impl<S: Send + Sync> FromRequestParts<S> for DeliveryPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path((endpoint, delivery)) =
            axum::extract::Path::<(String, String)>::from_request_parts(parts, state)
                .await
                .map_err(|_| {
                    ApiError::bad_request("invalid_type", "the path needs `id` and `delivery_id`")
                })?;
        let parse = |raw: &str, field: &'static str| {
            Uuid::parse_str(raw).map_err(|_| {
                ApiError::bad_request(
                    "invalid_type",
                    format!("`{field}` in the path must be a UUID (e.g. 0192f6c4-…)"),
                )
                .with_field(field)
            })
        };
        Ok(DeliveryPath {
            endpoint_id: parse(&endpoint, "id")?,
            delivery_id: parse(&delivery, "delivery_id")?,
        })
    }
}

fn replayed_header(replayed: bool) -> [(HeaderName, HeaderValue); 1] {
    [(
        REPLAYED,
        HeaderValue::from_static(if replayed { "true" } else { "false" }),
    )]
}

/// A new webhook endpoint.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookEndpointRequest {
    /// Where deliveries are POSTed: `http://` or `https://`, at most 2000 characters, no user
    /// name or password. Its host must have only public addresses, unless the server's
    /// operator allow-lists it (`TAUROS_WEBHOOK_ALLOW_HOSTS`; a non-empty list admits only its
    /// hosts).
    #[schema(value_type = String, required = true, example = "https://hooks.example.com/tauros",
        max_length = 2000, pattern = r"^[Hh][Tt][Tt][Pp][Ss]?://")]
    #[validate(required)]
    pub url: Option<String>,
    /// The event types to deliver: at least one (a repeat counts once).
    #[schema(value_type = Vec<WebhookEventType>, required = true, min_items = 1, max_items = 32,
        example = json!(["invoice.submitted", "invoice.approved"]))]
    #[validate(required)]
    pub events: Option<Vec<String>>,
    /// A note for humans, 1–200 characters.
    #[schema(min_length = 1, max_length = 200, example = "Accounting system")]
    #[validate(custom(function = rules::webhook_description))]
    pub description: Option<String>,
    /// Seconds one attempt may take (connecting, sending, and the answer's status line):
    /// 1–30, 10 when omitted. Longer is a failed attempt, retried.
    #[schema(minimum = 1, maximum = 30, default = 10)]
    #[validate(range(
        min = TIMEOUT_MIN,
        max = TIMEOUT_MAX,
        message = "`timeout_seconds` must be a whole number of seconds from 1 to 30 (10 when omitted)"
    ))]
    pub timeout_seconds: Option<i64>,
}

/// The domain's bounds of an attempt's timeout, as `validator` takes them.
const TIMEOUT_MIN: i64 = *TIMEOUT_SECONDS.start() as i64;
const TIMEOUT_MAX: i64 = *TIMEOUT_SECONDS.end() as i64;

/// Presence, description and timeout are the wire's rules; the URL's form and the event types
/// the domain's (`webhook::endpoint_form_errors`); the outbound allow-list the use case's.
impl BodyRules for CreateWebhookEndpointRequest {
    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        validator::Validate::validate(self)
    }

    fn completing_rules(&self) -> Vec<FieldError> {
        endpoint_form_errors(self.url.as_deref(), self.events.as_deref())
    }
}

/// An endpoint with its signing secret: shown in this answer and never again.
#[derive(Serialize, ToSchema)]
pub struct WebhookEndpointWithSecret {
    pub endpoint: WebhookEndpointView,
    /// `whsec_` + the base64 of 32 random bytes; the HMAC-SHA256 key is the decoded bytes
    /// (Standard Webhooks). Store it now: it cannot be read again, only rotated. `null` only on
    /// a replayed keyed creation more than 24 hours after it, or after a rotation: rotate then.
    #[schema(example = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")]
    pub secret: Option<String>,
}

impl From<WithSecret> for WebhookEndpointWithSecret {
    fn from(w: WithSecret) -> Self {
        WebhookEndpointWithSecret {
            endpoint: w.endpoint,
            secret: w.secret.map(|s| s.expose().to_owned()),
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
/// delivered to it. With `Idempotency-Key`, a repeat of the same body answers 200 with the
/// same endpoint and `Idempotent-Replayed: true`, creating nothing.
#[utoipa::path(post, path = "/v1/webhook-endpoints", tag = "webhooks", security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 200, pattern = r"^[!-~](?:[ -~]{0,198}[!-~])?$",
        description = "Optional; makes retries safe: the same key and body again (from the same approver) answers the same endpoint (200, `Idempotent-Replayed: true`), with its secret while the creation is less than 24 hours old and the secret was not rotated (else `secret` is null); the same key with another body is 409 `idempotency_conflict`. Without a key every request registers an endpoint. 1–200 visible ASCII characters, no leading or trailing space (a UUID makes a good key).")),
    request_body = CreateWebhookEndpointRequest,
    responses(
        (status = 201, description = "Registered; `secret` is shown this once", body = WebhookEndpointWithSecret),
        (status = 200, description = "Replay of an earlier request with the same key and body: the same endpoint, nothing created", body = WebhookEndpointWithSecret),
        (status = 403, description = "`forbidden`: only approvers manage webhook endpoints", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`too_many_endpoints`: the organisation has 20 already; `idempotency_conflict`: the key was used with another body", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_webhook_endpoint(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    StrictJson(body): StrictJson<CreateWebhookEndpointRequest>,
) -> Result<
    (
        StatusCode,
        [(HeaderName, HeaderValue); 1],
        Json<WebhookEndpointWithSecret>,
    ),
    ApiError,
> {
    // `url` and `events` present, the timeout 1–30: `CreateWebhookEndpointRequest`'s rules.
    let (Some(url), Some(events)) = (body.url, body.events) else {
        return Err(crate::http::problem::internal());
    };
    let input = NewWebhookEndpoint {
        url,
        events,
        description: body.description,
        timeout_seconds: body.timeout_seconds.and_then(|t| i32::try_from(t).ok()),
    };
    let Replayed { value, replayed } = state
        .app
        .create_webhook_endpoint(&actor, input, key.as_deref())
        .await
        .map_err(IdempotencyKeyHeader::named)?;
    let status = if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "webhook_endpoint").increment(1);
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, replayed_header(replayed), Json(value.into())))
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

/// Re-enable a disabled webhook endpoint (approvers): its failure window starts afresh and every
/// delivery it held goes out, each in a new cycle with a fresh attempt budget. An endpoint that
/// is enabled already is answered as it is, nothing written.
#[utoipa::path(post, path = "/v1/webhook-endpoints/{id}/enable", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id")),
    responses(
        (status = 200, description = "The endpoint, active (`held_deliveries` 0: they are pending again)", body = WebhookEndpointView),
        (status = 403, description = "`forbidden`: only approvers manage webhook endpoints", body = Problem, content_type = "application/problem+json"),
    ))]
async fn enable_webhook_endpoint(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<WebhookEndpointView>, ApiError> {
    Ok(Json(
        state.app.enable_webhook_endpoint(&actor, id).await?.value,
    ))
}

/// Send a delivery again (approvers): one whose attempts are used up (`delivery_status`
/// `failed`, also after its job was pruned), or a `delivered` one whose receiver lost it, goes
/// out in a new job cycle with a fresh attempt budget and the same `webhook-id`, so a receiver
/// that has it deduplicates it. A delivery that is pending already is answered as it is (200),
/// nothing written: repeating a resend never sends twice at once.
#[utoipa::path(post, path = "/v1/webhook-endpoints/{id}/deliveries/{delivery_id}/resend", tag = "webhooks", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Endpoint id"),
        ("delivery_id" = Uuid, Path, description = "The delivery (`delivery_id` on the deliveries list)")),
    responses(
        (status = 202, description = "Resent: the delivery, `pending` in its new cycle", body = WebhookDeliveryView),
        (status = 200, description = "Already pending (a repeated resend, or its attempts are not used up yet): the delivery as it is, nothing written", body = WebhookDeliveryView),
        (status = 403, description = "`forbidden`: only approvers resend deliveries", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: unknown endpoint or delivery, or another organisation's", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`endpoint_disabled`: re-enable the endpoint first (that sends its held deliveries)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn resend_webhook_delivery(
    State(state): State<AppState>,
    Auth(actor): Auth,
    path: DeliveryPath,
) -> Result<(StatusCode, Json<WebhookDeliveryView>), ApiError> {
    let Replayed { value, replayed } = state
        .app
        .resend_webhook_delivery(&actor, path.endpoint_id, path.delivery_id)
        .await?;
    let status = if replayed {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok((status, Json(value)))
}
