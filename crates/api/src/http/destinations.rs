//! `/v1/payment-destinations`: registered by agents for themselves.

use super::extract::{Auth, IdPath, IdempotencyKeyHeader, ListParams, QueryParams, StrictJson};
use super::headers::REPLAYED;
use super::problem::{ApiError, Problem};
use crate::http::rules::BodyRules;
use crate::http::schema::{DestinationStateSchema, NetworkSchema};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{Actor, App, AppError, DestinationView, FieldError, NewDestination, Replayed};
use tauros_domain::destination::check_payee;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_destination, list_destinations))
        .routes(routes!(get_destination))
        .routes(routes!(deactivate_destination))
}

/// A new payment destination.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct CreateDestinationRequest {
    /// Display label, 1–160 characters (not part of any invoice seal).
    #[schema(value_type = String, required = true, example = "Operating account", min_length = 1, max_length = 160)]
    #[validate(required, custom(function = crate::http::rules::name_or_label))]
    pub label: Option<String>,
    /// Currency code (`EUR`, `USDC`, …).
    #[schema(value_type = String, required = true, example = "EUR")]
    #[validate(required)]
    pub currency: Option<String>,
    /// The network paid on; it must carry the currency.
    #[schema(value_type = NetworkSchema, required = true, example = "iban")]
    #[validate(required)]
    pub network: Option<String>,
    /// Address on that network (checksums are verified).
    #[schema(value_type = String, required = true, example = "DE89370400440532013000", min_length = 1, max_length = 128)]
    #[validate(required)]
    pub address: Option<String>,
    /// One of your active destinations that this one replaces (it becomes `superseded`).
    pub supersedes_id: Option<Uuid>,
}

impl CreateDestinationRequest {
    /// The checked body as the use case takes it; `None` only if its rules were skipped.
    fn checked(self) -> Option<NewDestination> {
        Some(NewDestination {
            label: self.label?,
            currency: self.currency?,
            network: self.network?,
            address: self.address?,
            supersedes_id: self.supersedes_id,
        })
    }
}

/// The label and the presence of every member are the wire's rules; the payee (currency,
/// network, their pairing, address and checksum) is the domain's (`destination::check_payee`).
impl BodyRules for CreateDestinationRequest {
    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        validator::Validate::validate(self)
    }

    fn completing_rules(&self) -> Vec<FieldError> {
        check_payee(
            self.currency.as_deref(),
            self.network.as_deref(),
            self.address.as_deref(),
        )
        .err()
        .unwrap_or_default()
    }
}

/// A payment destination.
#[derive(Serialize, ToSchema)]
pub struct DestinationResponse {
    /// The `payment_destination_id` of an invoice paid here.
    pub id: Uuid,
    /// The agent it belongs to.
    pub agent_id: Uuid,
    /// Display label (not part of any invoice seal).
    pub label: String,
    /// The one currency this destination receives.
    pub currency: String,
    /// The network paid on.
    #[schema(value_type = NetworkSchema)]
    pub network: String,
    /// As sent, trimmed, case kept; sealed into every invoice paid here.
    pub address: String,
    /// Whether it still receives money.
    #[schema(value_type = DestinationStateSchema)]
    pub state: String,
    /// The destination this one replaced.
    pub supersedes_id: Option<Uuid>,
    /// When the destination was registered (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
}

impl From<DestinationView> for DestinationResponse {
    fn from(d: DestinationView) -> Self {
        DestinationResponse {
            id: d.id,
            agent_id: d.agent_id,
            label: d.label,
            currency: d.currency,
            network: d.network,
            address: d.address,
            state: d.state.as_str().to_owned(),
            supersedes_id: d.supersedes_id,
            created_at: d.created_at,
        }
    }
}

/// A page of destinations, newest first.
#[derive(Serialize, ToSchema)]
pub struct DestinationList {
    /// The destinations.
    pub items: Vec<DestinationResponse>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

fn replayed_header(replayed: bool) -> [(HeaderName, HeaderValue); 1] {
    [(
        REPLAYED,
        HeaderValue::from_static(if replayed { "true" } else { "false" }),
    )]
}

/// Registers a destination for the calling agent (REST and MCP); replays are counted.
pub(crate) async fn create(
    app: &App,
    actor: &Actor,
    body: CreateDestinationRequest,
    key: Option<&str>,
) -> Result<Replayed<DestinationResponse>, AppError> {
    let input = body
        .checked()
        .ok_or_else(|| AppError::Internal("a destination body skipped its rules".into()))?;
    let Replayed { value, replayed } = app.create_destination(actor, input, key).await?;
    if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "payment_destination").increment(1);
    }
    Ok(Replayed {
        value: value.into(),
        replayed,
    })
}

/// A page of the destinations the caller may see, in `state` if given (REST and MCP).
pub(crate) async fn list(
    app: &App,
    actor: &Actor,
    state: Option<&str>,
    params: ListParams,
) -> Result<DestinationList, ApiError> {
    let rows = app.list_destinations(actor, state, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |d| d.id);
    Ok(DestinationList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    })
}

/// Stops a destination from receiving money (REST and the deactivate_payment_destination tool).
pub(crate) async fn deactivate(
    app: &App,
    actor: &Actor,
    id: Uuid,
) -> Result<DestinationResponse, ApiError> {
    Ok(app.deactivate_destination(actor, id).await?.into())
}

/// Register a payment destination (agents). With `Idempotency-Key`, a repeat of the same body
/// answers 200 with the original and `Idempotent-Replayed: true`.
#[utoipa::path(post, path = "/v1/payment-destinations", tag = "payment destinations",
    security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 200, pattern = r"^[!-~](?:[ -~]{0,198}[!-~])?$",
        description = "Optional; makes retries safe: the same key and body again answers the same destination (200, `Idempotent-Replayed: true`); the same key with another body is 409 `idempotency_conflict`. 1–200 visible ASCII characters, no leading or trailing space (a UUID makes a good key).")),
    request_body = CreateDestinationRequest,
    responses(
        (status = 201, description = "Created", body = DestinationResponse),
        (status = 200, description = "Replay of an earlier request with the same key and body", body = DestinationResponse),
        (status = 403, description = "`forbidden`: humans may not register destinations", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`: the key was used with another body", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_destination(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    StrictJson(body): StrictJson<CreateDestinationRequest>,
) -> Result<
    (
        StatusCode,
        [(HeaderName, HeaderValue); 1],
        Json<DestinationResponse>,
    ),
    ApiError,
> {
    let Replayed {
        value: destination,
        replayed,
    } = create(&state.app, &actor, body, key.as_deref())
        .await
        .map_err(IdempotencyKeyHeader::named)?;
    let status = if replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, replayed_header(replayed), Json(destination)))
}

/// The destinations the caller may see; `?state=active` for the ones that receive money.
#[utoipa::path(get, path = "/v1/payment-destinations", tag = "payment destinations",
    security(("bearer" = [])),
    params(
        ("state" = Option<DestinationStateSchema>, Query, description = "Only destinations in this state; `active` ones receive money"),
        super::schema::Page,
    ),
    responses((status = 200, description = "A page of destinations", body = DestinationList)))]
async fn list_destinations(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
    query: QueryParams,
) -> Result<Json<DestinationList>, ApiError> {
    Ok(Json(
        list(&state.app, &actor, query.get("state"), params).await?,
    ))
}

/// One destination.
#[utoipa::path(get, path = "/v1/payment-destinations/{id}", tag = "payment destinations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Destination id")),
    responses(
        (status = 200, description = "The destination", body = DestinationResponse),
    ))]
async fn get_destination(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<DestinationResponse>, ApiError> {
    Ok(Json(state.app.get_destination(&actor, id).await?.into()))
}

/// Stop a destination from receiving money (the owning agent or its human). Already inactive
/// → 200 with the destination unchanged, nothing written.
#[utoipa::path(post, path = "/v1/payment-destinations/{id}/deactivate", tag = "payment destinations",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Destination id")),
    responses(
        (status = 200, description = "Deactivated (or already inactive)", body = DestinationResponse),
    ))]
async fn deactivate_destination(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<DestinationResponse>, ApiError> {
    Ok(Json(deactivate(&state.app, &actor, id).await?))
}
