//! Settlement: `POST /v1/settlement-events` for agents with the `settlement` capability, and
//! the payments humans read (`/v1/payments`; what could not be applied by `?status=`).

use super::extract::{Auth, IdPath, IdempotencyKeyHeader, ListParams, QueryParams, StrictJson};
use super::headers::REPLAYED;
use super::problem::{ApiError, Problem};
use super::proposals::ChangeResponse;
use crate::http::schema::{PaymentStateSchema, PaymentStatusSchema};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tauros_app::{
    Actor, App, InvoiceStanding, PaymentResolutionView, PaymentView, Recorded, Replayed,
    ResolveOutcome, SettlementEventView,
};
use tauros_domain::input::{AmountInput, AmountMinorInput};
use tauros_domain::resolution::ResolveInput;
use tauros_domain::settlement::EventInput;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(record_settlement_event))
        .routes(routes!(list_payments))
        .routes(routes!(get_payment))
        .routes(routes!(resolve_payment))
}

/// One event about one payment, as a settlement source (a bank feed, a chain watcher) reports
/// it. `(source, event_id)` is the event's identity; `(source, payment_id)` the payment's. Name
/// the invoice with exactly one of `invoice_id` and `invoice_number`, and the amount with
/// exactly one of `amount` and `amount_minor`. The Rust fields are optional only so that every
/// missing member is reported at once (422).
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct SettlementEventRequest {
    /// Which system reports the event, 1–200 characters (`bank-feed`, `usdc-watcher`).
    #[schema(value_type = String, required = true, example = "bank-feed", min_length = 1, max_length = 200, pattern = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$")]
    pub source: Option<String>,
    /// The event's id at the source, 1–200 characters: the same id again is a redelivery.
    #[schema(value_type = String, required = true, example = "evt_0001", min_length = 1, max_length = 200, pattern = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$")]
    pub event_id: Option<String>,
    /// The payment's id at the source, 1–200 characters: every event about one payment names
    /// the same one.
    #[schema(value_type = String, required = true, example = "pay_0001", min_length = 1, max_length = 200, pattern = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$")]
    pub payment_id: Option<String>,
    /// The invoice paid, by Tauros's id. Send this or `invoice_number`, not both.
    #[schema(value_type = Uuid, required = false)]
    pub invoice_id: Option<Uuid>,
    /// The invoice paid, by the number it was issued under (`INV-2026-000042`). Send this or
    /// `invoice_id`, not both.
    #[schema(value_type = String, required = false, example = "INV-2026-000042", min_length = 1, max_length = 200, pattern = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$")]
    pub invoice_number: Option<String>,
    /// The amount paid in major units as a decimal string (`"1200.50"`), at most the currency's
    /// decimals, more than zero. Send this or `amount_minor`, not both.
    #[schema(value_type = String, required = false, example = "400.00", pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub amount: Option<AmountInput>,
    /// The amount paid in minor units (`40000` is 400.00 EUR), more than zero. Send this or
    /// `amount`, not both.
    #[schema(value_type = crate::http::schema::MinorUnitsInput, required = false)]
    pub amount_minor: Option<AmountMinorInput>,
    /// Currency code of the amount (`EUR`, `USDC`, …).
    #[schema(value_type = String, required = true, example = "EUR")]
    pub currency: Option<String>,
    /// What the source says the payment is now.
    #[schema(value_type = PaymentStateSchema, required = true)]
    pub status: Option<String>,
    /// When it happened at the source (RFC 3339, at most microseconds).
    #[schema(value_type = String, format = DateTime, required = true, example = "2026-03-01T12:00:00Z")]
    pub occurred_at: Option<String>,
    /// The source's own record of the event, kept for humans (a JSON object, at most 16 KiB;
    /// never read by Tauros).
    #[schema(value_type = Option<Object>)]
    pub raw: Option<Map<String, Value>>,
}

impl From<SettlementEventRequest> for EventInput {
    fn from(b: SettlementEventRequest) -> Self {
        // Destructured so that a field added to either type fails to compile here.
        let SettlementEventRequest {
            source,
            event_id,
            payment_id,
            invoice_id,
            invoice_number,
            amount,
            amount_minor,
            currency,
            status,
            occurred_at,
            raw,
        } = b;
        EventInput {
            source,
            event_id,
            payment_id,
            invoice_id,
            invoice_number,
            amount,
            amount_minor,
            currency,
            status,
            occurred_at,
            raw,
        }
    }
}

/// What reporting an event answers. A settlement answer reveals of the matched invoice only its
/// id, number and state, and of the payment what the source itself reported and whether it
/// counted; never the invoice's currency, totals, amount paid or balance, nor how much of the
/// payment was allocated or how an approver resolved it (humans read those at
/// `GET /v1/payments/{id}`).
#[derive(Serialize, ToSchema)]
pub struct SettlementEventRecorded {
    /// The event, as first received.
    pub event: SettlementEventView,
    /// Its payment, as it is now.
    pub payment: ReportedPayment,
    /// The invoice the payment is matched to, as it is now; `null` when it names no known
    /// invoice.
    pub invoice: Option<MatchedInvoice>,
    /// `true` when this was a redelivery of an event already recorded: nothing was written.
    pub replayed: bool,
}

/// A payment as its reporting source sees it: its own facts and whether it counted.
#[derive(Serialize, ToSchema)]
pub struct ReportedPayment {
    /// The `{id}` of `/v1/payments/{id}` (read by humans).
    pub id: Uuid,
    /// The reporting system.
    pub source: String,
    /// The payment's id at the source.
    pub payment_id: String,
    /// The invoice as the source named it (one of the two; the earliest event's).
    pub invoice_id: Option<Uuid>,
    pub invoice_number: Option<String>,
    /// The invoice it is matched to; `null` while no invoice has that id or number.
    pub matched_invoice_id: Option<Uuid>,
    /// The amount paid, with exactly the currency's decimals (the earliest event's).
    pub amount: String,
    /// `amount` in minor units: an exact JSON integer at any size.
    #[schema(value_type = u128)]
    pub amount_minor: tauros_domain::money::MinorAmount,
    pub currency: String,
    /// The furthest state any of its events reported; it never moves back.
    #[schema(value_type = PaymentStateSchema)]
    pub state: &'static str,
    /// What Tauros made of it.
    #[schema(value_type = PaymentStatusSchema)]
    pub status: &'static str,
    /// Why it counts toward no invoice, when it names one it cannot count toward.
    #[schema(value_type = Option<crate::http::schema::UnmatchedSchema>)]
    pub unmatched_reason: Option<&'static str>,
    /// Confirmed once, failed since (the source reversed it).
    pub reversed: bool,
    /// How many events were reported about it.
    pub event_count: i32,
    /// When its first event arrived (RFC 3339, UTC).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When it last changed (RFC 3339, UTC).
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

impl From<PaymentView> for ReportedPayment {
    fn from(p: PaymentView) -> Self {
        ReportedPayment {
            id: p.id,
            source: p.source,
            payment_id: p.payment_id,
            invoice_id: p.invoice_id,
            invoice_number: p.invoice_number,
            matched_invoice_id: p.matched_invoice_id,
            amount: p.amount,
            amount_minor: p.amount_minor,
            currency: p.currency,
            state: p.state.as_str(),
            status: p.status.as_str(),
            unmatched_reason: p.unmatched_reason.map(|u| u.as_str()),
            reversed: p.reversed,
            event_count: p.event_count,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// The invoice a reported payment is matched to, as its source may see it.
#[derive(Serialize, ToSchema)]
pub struct MatchedInvoice {
    /// The invoice.
    pub id: Uuid,
    /// Its number, once issued.
    pub number: Option<String>,
    #[schema(value_type = crate::http::schema::InvoiceStateSchema)]
    pub state: tauros_domain::invoice::InvoiceState,
}

impl From<InvoiceStanding> for MatchedInvoice {
    fn from(i: InvoiceStanding) -> Self {
        MatchedInvoice {
            id: i.id,
            number: i.number,
            state: i.state,
        }
    }
}

/// A page of payments, newest first.
#[derive(Serialize, ToSchema)]
pub struct PaymentList {
    /// The payments.
    pub items: Vec<PaymentView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// One payment with a page of the events reported about it.
#[derive(Serialize, ToSchema)]
pub struct PaymentDetail {
    /// The payment.
    pub payment: PaymentView,
    /// A page of its events, in the order they arrived (`?limit=`, default 50; a payment keeps
    /// at most 100).
    pub events: Vec<SettlementEventView>,
    /// `?cursor=` for the next page of `events`; `null` on the last.
    pub events_next_cursor: Option<String>,
    /// Every resolution an approver asked for on it (`POST /v1/payments/{id}/resolve`),
    /// oldest first: applied, proposed (four eyes) or rejected.
    pub resolutions: Vec<PaymentResolutionView>,
}

/// How an approver resolves a payment settlement could not. The Rust fields are optional only
/// so that every missing member is reported at once (422).
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct ResolvePaymentRequest {
    /// `accept`: count a payment in `conflict` at `amount`. `allocate`: count an `unmatched`
    /// payment toward `invoice_id` (an issued or partially paid invoice in the payment's
    /// currency), at `amount` or the payment's own amount, never more than the invoice's open
    /// balance. `void`: count nothing of it from now on.
    #[schema(value_type = String, required = true, example = "accept")]
    pub action: Option<String>,
    /// `allocate` only: the invoice the payment is for.
    #[schema(value_type = Uuid, required = false)]
    pub invoice_id: Option<Uuid>,
    /// `accept` (required) and `allocate` (optional): the amount that counts, in major units of
    /// the payment's currency as a decimal string. Send this or `amount_minor`, not both.
    #[schema(value_type = String, required = false, example = "400.00", pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub amount: Option<AmountInput>,
    /// `amount` in minor units. Send this or `amount`, not both.
    #[schema(value_type = crate::http::schema::MinorUnitsInput, required = false)]
    pub amount_minor: Option<AmountMinorInput>,
    /// Why, for the audit trail and the second approver: 1–1000 characters.
    #[schema(value_type = String, required = true, example = "the bank confirmed 400.00 by phone")]
    pub reason: Option<String>,
}

impl From<ResolvePaymentRequest> for ResolveInput {
    fn from(b: ResolvePaymentRequest) -> Self {
        // Destructured so that a field added to either type fails to compile here.
        let ResolvePaymentRequest {
            action,
            invoice_id,
            amount,
            amount_minor,
            reason,
        } = b;
        ResolveInput {
            action,
            invoice_id,
            amount,
            amount_minor,
            reason,
        }
    }
}

/// What resolving a payment answers.
#[derive(Serialize, ToSchema)]
pub struct PaymentResolved {
    /// The resolution: `applied`, or `proposed` while four eyes is on.
    pub resolution: PaymentResolutionView,
    /// The payment, as it is now.
    pub payment: PaymentView,
    /// The invoice the payment is matched to, as it is now; `null` when none.
    pub invoice: Option<InvoiceStanding>,
    /// The proposal another approver confirms at `/v1/organisation/changes/{id}/confirm`
    /// (four eyes); `null` when the resolution applied at once.
    pub change: Option<ChangeResponse>,
    /// `true` when this repeated an earlier request with the same key and body: nothing was
    /// written.
    pub replayed: bool,
}

/// Report one settlement event (agents whose key has the `settlement` capability). A new event
/// answers 201 with its payment and the invoice after reconciliation; the same event again
/// (same `source` and `event_id`, same body) answers 200 with `Idempotent-Replayed: true` and
/// writes nothing; the same `event_id` with another body is 409 `idempotency_conflict`. An
/// event Tauros cannot apply (unknown invoice, another currency, an invoice not issued yet, an
/// overpayment, a contradiction) is kept and listed for a human, never dropped.
#[utoipa::path(post, path = "/v1/settlement-events", tag = "settlement", security(("bearer" = [])),
    request_body = SettlementEventRequest,
    responses(
        (status = 201, description = "Recorded and reconciled", body = SettlementEventRecorded),
        (status = 200, description = "A redelivery: the event, its payment and invoice as they are now; nothing written", body = SettlementEventRecorded),
        (status = 403, description = "`forbidden`: humans read payments, they do not report them (and a key that also holds `invoicing` may not either); `source_owned`: another agent reported under this `source` first", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`: this source reported this `event_id` with another body; `limit_reached`: the payment has its 100 events, or its invoice its 1,000 payments (kept nowhere)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn record_settlement_event(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<SettlementEventRequest>,
) -> Result<
    (
        StatusCode,
        [(HeaderName, HeaderValue); 1],
        Json<SettlementEventRecorded>,
    ),
    ApiError,
> {
    let recorded = record(&state.app, &actor, body).await?;
    let status = if recorded.replayed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    let header = HeaderValue::from_static(if recorded.replayed { "true" } else { "false" });
    Ok((status, [(REPLAYED, header)], Json(recorded)))
}

/// Records one settlement event or answers its redelivery (REST and MCP); counts replays.
pub(crate) async fn record(
    app: &App,
    actor: &Actor,
    body: SettlementEventRequest,
) -> Result<SettlementEventRecorded, ApiError> {
    let Replayed { value, replayed } = app.record_settlement_event(actor, body.into()).await?;
    if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "settlement_event").increment(1);
    }
    let Recorded {
        event,
        payment,
        invoice,
    } = value;
    Ok(SettlementEventRecorded {
        event,
        payment: payment.into(),
        invoice: invoice.map(Into::into),
        replayed,
    })
}

/// The payments you may see (approvers and operators, for the agents whose invoices they see;
/// a payment that names no known invoice belongs to the settlement agent that reported it),
/// newest first. `?status=unmatched`, `overpaid` and `conflict` are the inbox of what needs a
/// human.
#[utoipa::path(get, path = "/v1/payments", tag = "settlement", security(("bearer" = [])),
    params(
        ("status" = Option<PaymentStatusSchema>, Query, description = "Only payments with this status; `unmatched`, `overpaid` and `conflict` need a human"),
        crate::http::schema::Page,
    ),
    responses(
        (status = 200, description = "A page of payments", body = PaymentList),
        (status = 403, description = "`forbidden`: agents report payments, humans read them", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_payments(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
    query: QueryParams,
) -> Result<Json<PaymentList>, ApiError> {
    let rows = state
        .app
        .list_payments(&actor, query.get("status"), params.page())
        .await?;
    let (items, next_cursor) = params.split(rows, |p| p.id);
    Ok(Json(PaymentList { items, next_cursor }))
}

/// One payment with a page of the events reported about it, oldest first (humans who may see
/// it). `limit` and `cursor` page its `events` (`events_next_cursor`); the payment and its
/// resolutions come with every page.
#[utoipa::path(get, path = "/v1/payments/{id}", tag = "settlement", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Payment id (Tauros's)"), super::schema::Page),
    responses(
        (status = 200, description = "The payment and a page of its events", body = PaymentDetail),
        (status = 422, description = "`validation_failed`: `limit` outside 1–100 or a `cursor` that is not an `events_next_cursor`", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`forbidden`: agents report payments, humans read them", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_payment(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    params: ListParams,
) -> Result<Json<PaymentDetail>, ApiError> {
    let (p, events) = state.app.get_payment(&actor, id, params.page()).await?;
    let (events, events_next_cursor) = params.split(events, |e| e.id);
    let resolutions = state.app.payment_resolutions(&actor, id).await?;
    Ok(Json(PaymentDetail {
        payment: p,
        events,
        events_next_cursor,
        resolutions,
    }))
}

/// Resolve what settlement cannot (approvers, with an `Idempotency-Key`): `accept` a payment
/// whose events contradict each other at the amount you state, `allocate` an unmatched payment
/// to an invoice, or `void` a payment so nothing of it counts. Each is recorded on the payment
/// (`resolutions`, and the audit trail) and, where it moves money, as an invoice event
/// (`payment_applied` or `payment_reversed`, and `paid` when the invoice is now paid). While
/// `four_eyes` is on it becomes a proposal (202) that another approver confirms. The same key
/// and body again answers the resolution as it is now and writes nothing; the same key with
/// another body is 409 `idempotency_conflict`.
#[utoipa::path(post, path = "/v1/payments/{id}/resolve", tag = "settlement", security(("bearer" = [])),
    params(
        ("id" = Uuid, Path, description = "Payment id (Tauros's)"),
        ("Idempotency-Key" = String, Header, min_length = 1, max_length = 200, pattern = r"^[!-~](?:[ -~]{0,198}[!-~])?$",
            description = "Required: makes retries safe. The same key and body again answers the same resolution (`Idempotent-Replayed: true`); the same key with another body is 409 `idempotency_conflict`. Keys are yours: another approver's key never collides."),
    ),
    request_body = ResolvePaymentRequest,
    responses(
        (status = 200, description = "Applied (or a replay of an applied resolution)", body = PaymentResolved),
        (status = 202, description = "Four eyes is on: proposed; another approver confirms `change`", body = PaymentResolved),
        (status = 403, description = "`forbidden`: only approvers resolve payments", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`payment_not_resolvable` (`field`: `action`): the action does not fit the payment's status; `idempotency_conflict`: the key was used with another body; `limit_reached`: `allocate` to an invoice that has its 1,000 payments", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`validation_failed`: a member is missing or broken (`action`, `invoice_id`, `amount`, `reason`, the key); nothing written", body = Problem, content_type = "application/problem+json"),
    ))]
async fn resolve_payment(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    StrictJson(body): StrictJson<ResolvePaymentRequest>,
) -> Result<
    (
        StatusCode,
        [(HeaderName, HeaderValue); 1],
        Json<PaymentResolved>,
    ),
    ApiError,
> {
    let Replayed { value, replayed } = state
        .app
        .resolve_payment(&actor, id, body.into(), key.as_deref())
        .await
        .map_err(|e| {
            let e = IdempotencyKeyHeader::named(e);
            // The action does not fit the payment's status: the field to change is `action`.
            if e.code() == "payment_not_resolvable" {
                e.with_field("action")
            } else {
                e
            }
        })?;
    if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "payment_resolution").increment(1);
    }
    let ResolveOutcome {
        resolution,
        payment,
        invoice,
        change,
    } = value;
    let status = if resolution.state == "proposed" {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let header = HeaderValue::from_static(if replayed { "true" } else { "false" });
    Ok((
        status,
        [(REPLAYED, header)],
        Json(PaymentResolved {
            resolution,
            payment,
            invoice,
            change: change.map(Into::into),
            replayed,
        }),
    ))
}

crate::body_rules!(SettlementEventRequest, ResolvePaymentRequest);
