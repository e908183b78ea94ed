//! `/v1/invoices`: proposals by agents, decisions by humans. Every command answers
//! `{invoice, replayed}` with the `Idempotent-Replayed` header.

use super::AppState;
use super::destinations::REPLAYED;
use super::extract::{
    Auth, IdPath, IdempotencyKeyHeader, ListParams, OptionalJson, QueryParams, StrictJson,
};
use super::problem::{ApiError, Problem};
use crate::app::{
    DecisionView, DraftInput, EventView, FieldError, InvoiceQuery, InvoiceView, Replayed,
    RevisionView, VerifyReport,
};
use crate::domain::invoice::DecisionKind;
use crate::domain::lines::{LineInput, LineView};
use crate::domain::money::MinorAmount;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_invoice, list_invoices))
        .routes(routes!(get_invoice))
        .routes(routes!(list_revisions))
        .routes(routes!(list_decisions))
        .routes(routes!(list_events))
        .routes(routes!(verify_invoice))
        .routes(routes!(revise))
        .routes(routes!(submit))
        .routes(routes!(withdraw))
        .routes(routes!(approve))
        .routes(routes!(reject))
        .routes(routes!(request_changes))
        .routes(routes!(cancel))
}

/// One line of a request: exactly one of `unit_amount` and `unit_amount_minor`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LineRequest {
    /// 1–500 characters.
    #[schema(example = "Discovery workshop")]
    description: String,
    /// Decimal string, > 0, ≤ 1,000,000,000, ≤ 6 decimals.
    #[schema(example = "1.5")]
    quantity: String,
    /// Unit price in major units as a string (`"1200.50"`), at most the currency's decimals.
    #[schema(example = "400.00")]
    unit_amount: Option<String>,
    /// Unit price in minor units: a JSON integer, or a string of digits beyond 2^53.
    #[schema(value_type = Option<i64>, example = 40000)]
    unit_amount_minor: Option<serde_json::Value>,
}

/// A new invoice proposal. All fields are required (they are optional in the schema only so
/// that every missing one is reported at once, as a 422).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CreateInvoiceRequest {
    /// The idempotency key, if not sent as the `Idempotency-Key` header (both: they must match).
    pub idempotency_key: Option<String>,
    /// One of your customers.
    pub customer_id: Option<Uuid>,
    /// One of your active payment destinations, receiving `currency`.
    pub payment_destination_id: Option<Uuid>,
    /// Currency code.
    #[schema(example = "EUR")]
    pub currency: Option<String>,
    /// `YYYY-MM-DD`, today (UTC) or later.
    #[schema(example = "2030-01-31")]
    pub due_date: Option<String>,
    /// 1–100 lines.
    #[schema(value_type = Option<Vec<LineRequest>>)]
    pub lines: Option<Vec<LineInput>>,
    /// Why you propose this (not part of the seal), 1–4000 characters.
    pub reasoning: Option<String>,
}

/// A revision: omitted fields keep the current revision's values; `reasoning` is required.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReviseRequest {
    /// Why this revision (required).
    pub reasoning: Option<String>,
    /// New customer.
    pub customer_id: Option<Uuid>,
    /// New destination.
    pub payment_destination_id: Option<Uuid>,
    /// New currency (send `lines` too).
    pub currency: Option<String>,
    /// New due date.
    pub due_date: Option<String>,
    /// New lines (replace all).
    #[schema(value_type = Option<Vec<LineRequest>>)]
    pub lines: Option<Vec<LineInput>>,
}

/// A decision on one exact revision.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The revision you reviewed (`current_revision.id`).
    pub revision_id: Uuid,
    /// Its `payload_hash`, as you reviewed it.
    pub payload_hash: String,
    /// Required for reject and request-changes (1–2000 characters), optional for approve.
    pub reason: Option<String>,
}

/// A cancellation.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why (1–2000 characters).
    pub reason: Option<String>,
}

/// No fields: send `{}` or no body.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// A line with every amount in both forms.
#[derive(Serialize, ToSchema)]
pub struct LineResponse {
    /// As stored.
    pub description: String,
    /// Normalized decimal string.
    pub quantity: String,
    /// Exactly the currency's decimals.
    pub unit_amount: String,
    /// Minor units.
    #[schema(value_type = i64)]
    pub unit_amount_minor: MinorAmount,
    /// `quantity × unit_amount`, exactly the currency's decimals.
    pub amount: String,
    /// Minor units.
    #[schema(value_type = i64)]
    pub amount_minor: MinorAmount,
}

/// A revision.
#[derive(Serialize, ToSchema)]
pub struct RevisionResponse {
    /// Id.
    pub id: Uuid,
    /// 1, 2, …
    pub number: i32,
    /// Customer billed.
    pub customer_id: Uuid,
    /// Destination paid.
    pub payment_destination_id: Uuid,
    /// Currency code.
    pub currency: String,
    /// Due date.
    pub due_date: NaiveDate,
    /// Lines.
    pub lines: Vec<LineResponse>,
    /// Total, exactly the currency's decimals.
    pub total: String,
    /// Total in minor units.
    #[schema(value_type = i64)]
    pub total_minor: MinorAmount,
    /// The agent's reasoning.
    pub reasoning: String,
    /// The exact canonical bytes that were hashed (a JSON string).
    pub canonical_payload: String,
    /// Lowercase hex SHA-256 of `canonical_payload`.
    pub payload_hash: String,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// An invoice with its current revision.
#[derive(Serialize, ToSchema)]
pub struct InvoiceResponse {
    /// Id.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: Uuid,
    /// The key it was created with.
    pub idempotency_key: String,
    /// `draft`, `pending_approval`, `approved`, `rejected`, `cancelled`, …
    pub state: String,
    /// Assigned at issue.
    pub number: Option<String>,
    /// The current revision.
    pub current_revision: RevisionResponse,
    /// How many revisions exist.
    pub revision_count: i32,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// What every invoice command answers.
#[derive(Serialize, ToSchema)]
pub struct CommandResponse {
    /// The invoice as it is now.
    pub invoice: InvoiceResponse,
    /// `true` when the command's goal already held and nothing was written.
    pub replayed: bool,
}

/// A page of invoices.
#[derive(Serialize, ToSchema)]
pub struct InvoiceList {
    /// The invoices.
    pub items: Vec<InvoiceResponse>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// All revisions, oldest first.
#[derive(Serialize, ToSchema)]
pub struct RevisionList {
    /// The revisions.
    pub items: Vec<RevisionResponse>,
}

/// A decision.
#[derive(Serialize, ToSchema)]
pub struct DecisionResponse {
    /// Id.
    pub id: Uuid,
    /// The revision decided on.
    pub revision_id: Uuid,
    /// `approved`, `rejected` or `changes_requested`.
    pub decision: String,
    /// The hash decided on.
    pub payload_hash: String,
    /// The approver's reason.
    pub reason: Option<String>,
    /// The approver.
    pub approver_id: Uuid,
    /// When.
    pub decided_at: DateTime<Utc>,
}

/// All decisions, oldest first.
#[derive(Serialize, ToSchema)]
pub struct DecisionList {
    /// The decisions.
    pub items: Vec<DecisionResponse>,
}

/// One audit event.
#[derive(Serialize, ToSchema)]
pub struct EventResponse {
    /// Id.
    pub id: Uuid,
    /// 1, 2, … per invoice.
    pub seq: i32,
    /// The command.
    pub action: String,
    /// State before.
    pub from_state: Option<String>,
    /// State after.
    pub to_state: String,
    /// `human`, `agent` or `system`.
    pub actor_kind: String,
    /// Who.
    pub actor_id: Option<Uuid>,
    /// `api`, `mcp`, `ui`, `cli` or `job`.
    pub interface: String,
    /// The revision concerned.
    pub revision_id: Option<Uuid>,
    /// Its payload hash.
    pub payload_hash: Option<String>,
    /// The idempotency key (create only).
    pub idempotency_key: Option<String>,
    /// Reason or note.
    pub note: Option<String>,
    /// When.
    pub occurred_at: DateTime<Utc>,
    /// The hash of the event before (64 zeros for the first).
    pub prev_hash: String,
    /// This event's hash.
    pub hash: String,
}

/// The trail, in order.
#[derive(Serialize, ToSchema)]
pub struct EventList {
    /// The events.
    pub items: Vec<EventResponse>,
}

/// One revision's seal check.
#[derive(Serialize, ToSchema)]
pub struct RevisionCheck {
    /// Revision number.
    pub number: i32,
    /// Re-sealing its stored fields reproduced its stored bytes and hash.
    pub ok: bool,
}

/// The event chain check.
#[derive(Serialize, ToSchema)]
pub struct EventsCheck {
    /// Every link holds.
    pub ok: bool,
    /// The `seq` of the first broken link.
    pub broken_at: Option<i32>,
}

/// The outcome of verify.
#[derive(Serialize, ToSchema)]
pub struct VerifyResponse {
    /// Everything matched.
    pub ok: bool,
    /// Per revision.
    pub revisions: Vec<RevisionCheck>,
    /// The event chain.
    pub events: EventsCheck,
}

fn line(l: LineView) -> LineResponse {
    LineResponse {
        description: l.description,
        quantity: l.quantity.to_string(),
        unit_amount: l.unit_amount,
        unit_amount_minor: l.unit_amount_minor,
        amount: l.amount,
        amount_minor: l.amount_minor,
    }
}

fn revision(r: RevisionView) -> RevisionResponse {
    RevisionResponse {
        id: r.id,
        number: r.number,
        customer_id: r.customer_id,
        payment_destination_id: r.payment_destination_id,
        currency: r.currency,
        due_date: r.due_date,
        lines: r.lines.into_iter().map(line).collect(),
        total: r.total,
        total_minor: r.total_minor,
        reasoning: r.reasoning,
        canonical_payload: r.canonical_payload,
        payload_hash: r.payload_hash,
        created_at: r.created_at,
    }
}

fn invoice(i: InvoiceView) -> InvoiceResponse {
    InvoiceResponse {
        id: i.id,
        agent_id: i.agent_id,
        idempotency_key: i.idempotency_key,
        state: i.state.as_str().to_owned(),
        number: i.number,
        current_revision: revision(i.current_revision),
        revision_count: i.revision_count,
        created_at: i.created_at,
        updated_at: i.updated_at,
    }
}

type CommandAnswer = (
    StatusCode,
    [(HeaderName, HeaderValue); 1],
    Json<CommandResponse>,
);

fn answer(result: Replayed<InvoiceView>, created: StatusCode) -> CommandAnswer {
    let Replayed {
        value: view,
        replayed,
    } = result;
    let status = if replayed { StatusCode::OK } else { created };
    if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "invoice").increment(1);
    }
    let header = HeaderValue::from_static(if replayed { "true" } else { "false" });
    (
        status,
        [(REPLAYED, header)],
        Json(CommandResponse {
            invoice: invoice(view),
            replayed,
        }),
    )
}

impl From<CreateInvoiceRequest> for DraftInput {
    fn from(b: CreateInvoiceRequest) -> Self {
        DraftInput {
            customer_id: b.customer_id,
            payment_destination_id: b.payment_destination_id,
            currency: b.currency,
            due_date: b.due_date,
            lines: b.lines,
            reasoning: b.reasoning,
        }
    }
}

/// Propose an invoice (agents). The same key and payload again answers 200 with the invoice as
/// it is now and `replayed: true`; the same key with another payload is 409.
#[utoipa::path(post, path = "/v1/invoices", tag = "invoices", security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Required here or as `idempotency_key` in the body; 1–200 characters")),
    request_body = CreateInvoiceRequest,
    responses(
        (status = 201, description = "Created", body = CommandResponse),
        (status = 200, description = "Replay: the invoice as it is now", body = CommandResponse),
        (status = 403, description = "`forbidden`: humans may not propose invoices", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`: the key was used with another payload", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_invoice(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdempotencyKeyHeader(header_key): IdempotencyKeyHeader,
    StrictJson(mut body): StrictJson<CreateInvoiceRequest>,
) -> Result<CommandAnswer, ApiError> {
    let key = match (header_key, body.idempotency_key.take()) {
        (Some(h), Some(b)) if h != b => {
            return Err(ApiError::bad_request(
                "idempotency_key_mismatch",
                "the Idempotency-Key header and the body's idempotency_key differ; send one, or the same value in both",
            )
            .with_field("idempotency_key"));
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => {
            // Every other missing field is reported with it; nothing is written (a complete
            // body without a key must not create an invoice behind a 422), and a human gets
            // the 403 a keyed request would get.
            let mut errors = vec![FieldError::plain(
                "idempotency_key",
                "required",
                "send an Idempotency-Key header (or idempotency_key in the body) so retries are safe",
            )];
            errors.extend(state.app.draft_field_errors(&actor, &body.into())?);
            return Err(ApiError::validation(errors));
        }
    };
    let result = state.app.create_draft(&actor, &key, body.into()).await?;
    Ok(answer(result, StatusCode::CREATED))
}

/// The invoices you may see. `?state=pending_approval` is the approver's inbox, oldest first.
#[utoipa::path(get, path = "/v1/invoices", tag = "invoices", security(("bearer" = [])),
    params(
        ("state" = Option<String>, Query, description = "Only this state"),
        ("customer_id" = Option<Uuid>, Query, description = "Only this customer's"),
        ("agent_id" = Option<Uuid>, Query, description = "Only this agent's"),
        ("limit" = Option<i64>, Query, description = "1–100, default 50"),
        ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"),
    ),
    responses((status = 200, description = "A page of invoices", body = InvoiceList)))]
async fn list_invoices(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
    query: QueryParams,
) -> Result<Json<InvoiceList>, ApiError> {
    let filter = InvoiceQuery {
        state: query.get("state").map(str::to_owned),
        customer_id: query.uuid("customer_id")?,
        agent_id: query.uuid("agent_id")?,
    };
    let rows = state
        .app
        .list_invoices(&actor, filter, params.page())
        .await?;
    let (items, next_cursor) = params.split(rows, |i| i.id);
    Ok(Json(InvoiceList {
        items: items.into_iter().map(invoice).collect(),
        next_cursor,
    }))
}

/// One invoice.
#[utoipa::path(get, path = "/v1/invoices/{id}", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The invoice", body = InvoiceResponse),
        (status = 404, description = "`not_found`: unknown or not visible", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_invoice(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<InvoiceResponse>, ApiError> {
    Ok(Json(invoice(state.app.get_invoice(&actor, id).await?)))
}

/// Every revision, oldest first.
#[utoipa::path(get, path = "/v1/invoices/{id}/revisions", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The revisions", body = RevisionList),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_revisions(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<RevisionList>, ApiError> {
    let rows = state.app.list_revisions(&actor, id).await?;
    Ok(Json(RevisionList {
        items: rows.into_iter().map(revision).collect(),
    }))
}

/// Every decision, oldest first (the proposing agent reads them too).
#[utoipa::path(get, path = "/v1/invoices/{id}/decisions", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The decisions", body = DecisionList),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_decisions(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<DecisionList>, ApiError> {
    let rows = state.app.list_decisions(&actor, id).await?;
    let items = rows
        .into_iter()
        .map(|d: DecisionView| DecisionResponse {
            id: d.id,
            revision_id: d.revision_id,
            decision: d.decision.as_str().to_owned(),
            payload_hash: d.payload_hash,
            reason: d.reason,
            approver_id: d.approver_id,
            decided_at: d.decided_at,
        })
        .collect();
    Ok(Json(DecisionList { items }))
}

/// The audit trail, in order; each event hash-chained to the one before.
#[utoipa::path(get, path = "/v1/invoices/{id}/events", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The events", body = EventList),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_events(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<EventList>, ApiError> {
    let rows = state.app.list_events(&actor, id).await?;
    let items = rows
        .into_iter()
        .map(|e: EventView| EventResponse {
            id: e.id,
            seq: e.seq,
            action: e.action.as_str().to_owned(),
            from_state: e.from_state.map(|s| s.as_str().to_owned()),
            to_state: e.to_state.as_str().to_owned(),
            actor_kind: e.actor_kind,
            actor_id: e.actor_id,
            interface: e.interface,
            revision_id: e.revision_id,
            payload_hash: e.payload_hash,
            idempotency_key: e.idempotency_key,
            note: e.note,
            occurred_at: e.occurred_at,
            prev_hash: e.prev_hash,
            hash: e.hash,
        })
        .collect();
    Ok(Json(EventList { items }))
}

/// Re-seal every revision and re-walk the event chain (humans).
#[utoipa::path(get, path = "/v1/invoices/{id}/verify", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The report", body = VerifyResponse),
        (status = 403, description = "`forbidden`: agents may not verify", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn verify_invoice(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<VerifyResponse>, ApiError> {
    let r: VerifyReport = state.app.verify_invoice(&actor, id).await?;
    Ok(Json(VerifyResponse {
        ok: r.ok,
        revisions: r
            .revisions
            .into_iter()
            .map(|(number, ok)| RevisionCheck { number, ok })
            .collect(),
        events: EventsCheck {
            ok: r.events_ok,
            broken_at: r.broken_at,
        },
    }))
}

/// Revise (the proposing agent): a new revision, the invoice back to `draft`; an identical
/// payload writes nothing and answers `replayed: true`.
#[utoipa::path(post, path = "/v1/invoices/{id}/revise", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = ReviseRequest,
    responses(
        (status = 200, description = "Revised, or unchanged (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden`: only the proposing agent revises", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn revise(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<ReviseRequest>,
) -> Result<CommandAnswer, ApiError> {
    let input = DraftInput {
        customer_id: body.customer_id,
        payment_destination_id: body.payment_destination_id,
        currency: body.currency,
        due_date: body.due_date,
        lines: body.lines,
        reasoning: body.reasoning,
    };
    Ok(answer(
        state.app.revise(&actor, id, input).await?,
        StatusCode::OK,
    ))
}

/// Submit for approval (the proposing agent).
#[utoipa::path(post, path = "/v1/invoices/{id}/submit", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body(content = Option<EmptyRequest>, description = "`{}` or no body"),
    responses(
        (status = 200, description = "Submitted, or already pending (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`, `revision_already_decided` or `destination_inactive`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn submit(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    OptionalJson(_empty): OptionalJson<EmptyRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(state.app.submit(&actor, id).await?, StatusCode::OK))
}

/// Withdraw (the proposing agent, or a human who sees it): draft or pending → cancelled.
#[utoipa::path(post, path = "/v1/invoices/{id}/withdraw", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body(content = Option<EmptyRequest>, description = "`{}` or no body"),
    responses(
        (status = 200, description = "Withdrawn, or already withdrawn (`replayed`)", body = CommandResponse),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn withdraw(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    OptionalJson(_empty): OptionalJson<EmptyRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(
        state.app.withdraw(&actor, id).await?,
        StatusCode::OK,
    ))
}

async fn decide(
    state: AppState,
    actor: crate::app::Actor,
    id: Uuid,
    kind: DecisionKind,
    body: DecideRequest,
) -> Result<CommandAnswer, ApiError> {
    let result = state
        .app
        .decide(
            &actor,
            id,
            kind,
            body.revision_id,
            &body.payload_hash,
            body.reason.as_deref(),
        )
        .await?;
    Ok(answer(result, StatusCode::OK))
}

/// Approve one exact revision (approvers who see it).
#[utoipa::path(post, path = "/v1/invoices/{id}/approve", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Approved, or the same approval again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` (agents, operators) or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch`, `payload_integrity` or `destination_inactive`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn approve(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::Approved, body).await
}

/// Reject one exact revision (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/reject", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Rejected, or the same rejection again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch` or `payload_integrity`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn reject(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::Rejected, body).await
}

/// Send one exact revision back to the agent (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/request-changes", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Back to draft, or the same request again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch` or `payload_integrity`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn request_changes(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::ChangesRequested, body).await
}

/// Cancel an approved invoice (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/cancel", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = CancelRequest,
    responses(
        (status = 200, description = "Cancelled, or already cancelled by cancel (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn cancel(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<CancelRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(
        state.app.cancel(&actor, id, body.reason.as_deref()).await?,
        StatusCode::OK,
    ))
}
