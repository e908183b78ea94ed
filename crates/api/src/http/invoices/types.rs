//! The bodies of `/v1/invoices`: what clients send and what they get back, as OpenAPI schemas,
//! and their conversions from and to the app's types.

use crate::http::json::Object;
use crate::http::schema::InvoiceStateSchema;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use tauros_app::{
    DecisionView, DraftInput, EventView, InvoiceView, LatestDecision, RevisionView, VerifyReport,
};
use tauros_domain::input::{MajorAmountInput, MinorAmountInput, QuantityInput};
use tauros_domain::invoice::InvoiceState;
use tauros_domain::lines::{LineInput, LineView};
use tauros_domain::money::MinorAmount;
use utoipa::ToSchema;
use uuid::Uuid;

/// One line of a request: exactly one of `unit_amount` and `unit_amount_minor`.
// The body is parsed into this type, so its schema follows what is accepted. The members are
// optional in Rust only so that a missing one is reported with every other problem of the
// request (422); the schema states the contract: `description` and `quantity` are required.
// The amount and quantity types are the domain's strict inputs, which refuse JSON floats.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LineRequest {
    /// What is billed, 1–500 characters (sealed into the payload).
    #[schema(value_type = String, example = "Discovery workshop", min_length = 1, max_length = 500)]
    pub description: Option<String>,
    /// How many units: a decimal string, > 0, ≤ 1,000,000,000, ≤ 6 decimals.
    #[schema(
        value_type = String,
        example = "1.5",
        pattern = r"^([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)$"
    )]
    pub quantity: Option<QuantityInput>,
    /// Unit price in major units as a decimal string (`"1200.50"`), with at most the
    /// currency's decimals; exact at any size. Send this or `unit_amount_minor`, not both.
    #[schema(value_type = String, required = false, example = "400.00", pattern = r"^[0-9]+(\.[0-9]+)?$")]
    pub unit_amount: Option<MajorAmountInput>,
    /// Unit price in minor units (`40000` is 400.00 EUR). Send this or `unit_amount`, not both.
    #[schema(value_type = crate::http::schema::MinorUnitsInput, required = false)]
    pub unit_amount_minor: Option<MinorAmountInput>,
}

impl From<LineRequest> for LineInput {
    fn from(line: LineRequest) -> Self {
        // Destructured so that a field added to either type fails to compile here.
        let LineRequest {
            description,
            quantity,
            unit_amount,
            unit_amount_minor,
        } = line;
        LineInput {
            description,
            quantity,
            unit_amount,
            unit_amount_minor,
        }
    }
}

fn line_inputs(lines: Option<Vec<Object<LineRequest>>>) -> Option<Vec<LineInput>> {
    lines.map(|lines| {
        lines
            .into_iter()
            .map(|Object(line)| LineInput::from(line))
            .collect()
    })
}

/// A new invoice proposal. Every member but `idempotency_key` is required (the Rust fields are
/// optional only so that every missing one is reported at once, as a 422).
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CreateInvoiceRequest {
    /// The idempotency key, when it is not sent as the `Idempotency-Key` header (if both are
    /// sent they must be equal): 1–200 characters, no leading or trailing space.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$"
    )]
    pub idempotency_key: Option<String>,
    /// One of your customers.
    #[schema(value_type = Uuid, required = true)]
    pub customer_id: Option<Uuid>,
    /// One of your active payment destinations, receiving `currency`.
    #[schema(value_type = Uuid, required = true)]
    pub payment_destination_id: Option<Uuid>,
    /// Currency code of every amount in `lines`; must be the payment destination's currency.
    #[schema(value_type = String, required = true, example = "EUR")]
    pub currency: Option<String>,
    /// When payment is due: `YYYY-MM-DD`, today (UTC) or later.
    #[schema(value_type = String, format = Date, required = true, example = "2030-01-31")]
    pub due_date: Option<String>,
    /// The lines, in the order the customer sees them (1–100).
    #[schema(value_type = Vec<LineRequest>, required = true, min_items = 1, max_items = 100)]
    pub lines: Option<Vec<Object<LineRequest>>>,
    /// Why you propose this, for the approver (not part of the seal), 1–4000 characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 4000)]
    pub reasoning: Option<String>,
}

/// A revision: omitted fields keep the current revision's values; `reasoning` is required.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ReviseRequest {
    /// Why this revision, for the approver (not part of the seal), 1–4000 characters.
    #[schema(value_type = String, required = true, min_length = 1, max_length = 4000)]
    pub reasoning: Option<String>,
    /// Another of your customers to bill.
    pub customer_id: Option<Uuid>,
    /// Another of your active payment destinations, receiving the currency.
    pub payment_destination_id: Option<Uuid>,
    /// New currency (send `lines` too).
    pub currency: Option<String>,
    /// When payment is due: `YYYY-MM-DD`, today (UTC) or later.
    #[schema(format = Date)]
    pub due_date: Option<String>,
    /// New lines, replacing all of them (1–100).
    #[schema(value_type = Option<Vec<LineRequest>>, min_items = 1, max_items = 100)]
    pub lines: Option<Vec<Object<LineRequest>>>,
}

/// A decision on one exact revision.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The revision you reviewed (`current_revision.id`).
    #[schema(value_type = Uuid, required = true)]
    pub revision_id: Option<Uuid>,
    /// Its `payload_hash`, as you reviewed it (64 lowercase hex characters).
    #[schema(value_type = String, required = true, pattern = "^[0-9a-f]{64}$")]
    pub payload_hash: Option<String>,
    /// Required for reject and request-changes (1–2000 characters), optional for approve.
    pub reason: Option<String>,
}

/// A cancellation of an approved invoice; `reason` is required.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why (1–2000 characters).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2000)]
    pub reason: Option<String>,
}

/// No fields: send `{}` or no body.
#[derive(Deserialize, ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// A line with every amount in both forms.
#[derive(Serialize, ToSchema)]
pub struct LineResponse {
    /// As stored and sealed: trimmed and NFC-normalized.
    pub description: String,
    /// Normalized decimal string (`"1.50"` is shown as `"1.5"`).
    pub quantity: String,
    /// Unit price in major units, with exactly the currency's decimals.
    pub unit_amount: String,
    /// `unit_amount` in minor units: an exact JSON integer at any size. JavaScript's
    /// `JSON.parse` rounds integers above 2^53 (9007199254740992): read `unit_amount` there.
    #[schema(value_type = u128)]
    pub unit_amount_minor: MinorAmount,
    /// `quantity × unit_amount`, exactly the currency's decimals.
    pub amount: String,
    /// `amount` in minor units: an exact JSON integer at any size. JavaScript's `JSON.parse`
    /// rounds integers above 2^53 (9007199254740992): read `amount` there.
    #[schema(value_type = u128)]
    pub amount_minor: MinorAmount,
}

/// One sealed version of an invoice's content: approvers decide on its `payload_hash`.
#[derive(Serialize, ToSchema)]
pub struct RevisionResponse {
    /// Name it as `revision_id` when deciding on this revision.
    pub id: Uuid,
    /// 1, 2, …
    pub number: i32,
    /// Customer billed.
    pub customer_id: Uuid,
    /// Destination paid.
    pub payment_destination_id: Uuid,
    /// Currency code of every amount in this revision.
    pub currency: String,
    /// When payment is due.
    pub due_date: NaiveDate,
    /// In the order they were sent.
    pub lines: Vec<LineResponse>,
    /// Sum of the line amounts as a decimal string with exactly the currency's decimals; exact
    /// at any size.
    pub total: String,
    /// `total` in minor units: an exact JSON integer at any size. JavaScript's `JSON.parse`
    /// rounds integers above 2^53 (9007199254740992): read `total` there.
    #[schema(value_type = u128)]
    pub total_minor: MinorAmount,
    /// Why the agent proposed this revision (not part of the seal).
    pub reasoning: String,
    /// The exact canonical bytes that were hashed (a JSON string).
    pub canonical_payload: String,
    /// Lowercase hex SHA-256 of `canonical_payload`.
    pub payload_hash: String,
    /// When this revision was written (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
}

/// An invoice with its current revision.
#[derive(Serialize, ToSchema)]
pub struct InvoiceResponse {
    /// The `{id}` of `/v1/invoices/{id}`.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: Uuid,
    /// The key it was created with.
    pub idempotency_key: String,
    /// Where the invoice is in its lifecycle.
    #[schema(value_type = InvoiceStateSchema)]
    pub state: InvoiceState,
    /// Assigned at issue; `null` until then.
    pub number: Option<String>,
    /// The current revision.
    pub current_revision: RevisionResponse,
    /// How many revisions exist.
    pub revision_count: i32,
    /// The latest decision on any of its revisions, `null` before the first: after
    /// `request_changes` the invoice is `draft` again and this says why.
    pub decision: Option<LatestDecision>,
    /// How much of the total confirmed payments cover, with exactly the currency's decimals
    /// (never more than the total: an overpayment stays on its payment).
    pub amount_paid: String,
    /// `amount_paid` in minor units: an exact JSON integer at any size.
    #[schema(value_type = u128)]
    pub amount_paid_minor: MinorAmount,
    /// What is still to be paid (`total - amount_paid`), with exactly the currency's decimals.
    pub balance: String,
    /// `balance` in minor units: an exact JSON integer at any size.
    #[schema(value_type = u128)]
    pub balance_minor: MinorAmount,
    /// Issued or partially paid, due before today (UTC), a balance open: computed when read,
    /// never stored.
    pub overdue: bool,
    /// When the invoice was proposed (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When its latest event happened (RFC 3339, UTC).
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

/// All decisions, oldest first.
#[derive(Serialize, ToSchema)]
pub struct DecisionList {
    /// The decisions.
    pub items: Vec<DecisionView>,
}

/// The trail, in order.
#[derive(Serialize, ToSchema)]
pub struct EventList {
    /// The events.
    pub items: Vec<EventView>,
}

/// One revision's seal check.
#[derive(Serialize, ToSchema)]
pub struct RevisionCheck {
    /// The revision's `number`.
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
    /// Every revision and the event chain passed.
    pub ok: bool,
    /// One check per revision, oldest first.
    pub revisions: Vec<RevisionCheck>,
    /// The check of the event chain.
    pub events: EventsCheck,
}

// The responses are the app's views as the wire shows them: every member moved as it is, but
// the few whose wire form differs (a quantity as a string).

impl From<LineView> for LineResponse {
    fn from(l: LineView) -> Self {
        LineResponse {
            description: l.description,
            quantity: l.quantity.to_string(),
            unit_amount: l.unit_amount,
            unit_amount_minor: l.unit_amount_minor,
            amount: l.amount,
            amount_minor: l.amount_minor,
        }
    }
}

impl From<RevisionView> for RevisionResponse {
    fn from(r: RevisionView) -> Self {
        RevisionResponse {
            id: r.id,
            number: r.number,
            customer_id: r.customer_id,
            payment_destination_id: r.payment_destination_id,
            currency: r.currency,
            due_date: r.due_date,
            lines: r.lines.into_iter().map(LineResponse::from).collect(),
            total: r.total,
            total_minor: r.total_minor,
            reasoning: r.reasoning,
            canonical_payload: r.canonical_payload,
            payload_hash: r.payload_hash,
            created_at: r.created_at,
        }
    }
}

impl From<InvoiceView> for InvoiceResponse {
    fn from(i: InvoiceView) -> Self {
        InvoiceResponse {
            id: i.id,
            agent_id: i.agent_id,
            idempotency_key: i.idempotency_key,
            state: i.state,
            number: i.number,
            current_revision: i.current_revision.into(),
            revision_count: i.revision_count,
            decision: i.decision,
            amount_paid: i.amount_paid,
            amount_paid_minor: i.amount_paid_minor,
            balance: i.balance,
            balance_minor: i.balance_minor,
            overdue: i.overdue,
            created_at: i.created_at,
            updated_at: i.updated_at,
        }
    }
}

impl From<VerifyReport> for VerifyResponse {
    fn from(r: VerifyReport) -> Self {
        let VerifyReport {
            ok,
            revisions,
            events_ok,
            broken_at,
        } = r;
        VerifyResponse {
            ok,
            revisions: revisions
                .into_iter()
                .map(|(number, ok)| RevisionCheck { number, ok })
                .collect(),
            events: EventsCheck {
                ok: events_ok,
                broken_at,
            },
        }
    }
}

impl From<ReviseRequest> for DraftInput {
    fn from(b: ReviseRequest) -> Self {
        DraftInput {
            customer_id: b.customer_id,
            payment_destination_id: b.payment_destination_id,
            currency: b.currency,
            due_date: b.due_date,
            lines: line_inputs(b.lines),
            reasoning: b.reasoning,
        }
    }
}

impl From<CreateInvoiceRequest> for DraftInput {
    fn from(b: CreateInvoiceRequest) -> Self {
        DraftInput {
            customer_id: b.customer_id,
            payment_destination_id: b.payment_destination_id,
            currency: b.currency,
            due_date: b.due_date,
            lines: line_inputs(b.lines),
            reasoning: b.reasoning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Lines reach the domain through [`LineRequest`] over HTTP and through [`LineInput`]'s own
    /// `Deserialize` in process (the demo seed, tests); both must accept and refuse alike.
    #[test]
    fn request_lines_parse_like_domain_lines() {
        let samples = [
            json!({"description": "a", "quantity": "1.5", "unit_amount": "400.00"}),
            json!({"description": "a", "quantity": "1", "unit_amount_minor": 40000}),
            json!({"description": "a", "quantity": "1", "unit_amount_minor": "40000"}),
            json!({"description": null, "unit_amount_minor": -5}),
            json!({}),
            json!({"description": "a", "quantity": "1", "amount": "1"}),
            json!({"description": "a", "quantity": 1}),
            json!({"description": "a", "quantity": "1", "unit_amount": 400}),
        ];
        for sample in samples {
            let request = serde_json::from_value::<LineRequest>(sample.clone())
                .map(LineInput::from)
                .map_err(|e| e.to_string());
            let domain =
                serde_json::from_value::<LineInput>(sample.clone()).map_err(|e| e.to_string());
            assert_eq!(request, domain, "{sample}");
        }
        let float = r#"{"description":"a","quantity":"1","unit_amount_minor":1.0}"#;
        let request = serde_json::from_str::<LineRequest>(float).map(LineInput::from);
        let domain = serde_json::from_str::<LineInput>(float);
        assert_eq!(
            request.map_err(|e| e.to_string()),
            domain.map_err(|e| e.to_string())
        );
    }
}
