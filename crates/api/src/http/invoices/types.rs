//! The bodies of `/v1/invoices`: what clients send and what they get back, as OpenAPI schemas,
//! and their conversions from and to the app's types.

use crate::http::json::Object;
use crate::http::rules::BodyRules;
use serde::{Deserialize, Serialize};
use tauros_app::FieldError;
use tauros_app::{DecisionView, DraftInput, EventView, InvoiceView, RevisionView, VerifyReport};
use tauros_domain::input::{MajorAmountInput, MinorAmountInput, QuantityInput};
use tauros_domain::invoice::check_content;
use tauros_domain::lines::LineInput;
use utoipa::ToSchema;
use uuid::Uuid;

/// One line of a request: exactly one of `unit_amount` and `unit_amount_minor`.
// Members are optional in Rust only so that a missing one is reported with every other
// problem (422); the schema states the contract. The amount and quantity types are the
// domain's strict inputs, which refuse JSON floats.
#[derive(Debug, Deserialize, ToSchema, validator::Validate)]
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

impl From<&LineRequest> for LineInput {
    fn from(line: &LineRequest) -> Self {
        // Destructured so that a field added to either type fails to compile here.
        let LineRequest {
            description,
            quantity,
            unit_amount,
            unit_amount_minor,
        } = line;
        LineInput {
            description: description.clone(),
            quantity: quantity.clone(),
            unit_amount: unit_amount.clone(),
            unit_amount_minor: unit_amount_minor.clone(),
        }
    }
}

/// The lines as the domain reads them.
fn line_inputs(lines: Option<&Vec<Object<LineRequest>>>) -> Option<Vec<LineInput>> {
    lines.map(|lines| lines.iter().map(|Object(line)| line.into()).collect())
}

/// A create's or a revise's content as the domain reads it: one conversion for both.
macro_rules! draft_input_from {
    ($($request:ty),*) => {$(
        impl From<&$request> for DraftInput {
            fn from(b: &$request) -> Self {
                DraftInput {
                    customer_id: b.customer_id,
                    payment_destination_id: b.payment_destination_id,
                    currency: b.currency.clone(),
                    due_date: b.due_date.clone(),
                    lines: line_inputs(b.lines.as_ref()),
                    reasoning: b.reasoning.clone(),
                }
            }
        }
    )*};
}
draft_input_from!(CreateInvoiceRequest, ReviseRequest);

/// An invoice's content rules are the domain's ([`check_content`]), so here they only complete
/// a refused answer (docs/DECISIONS.md, "Every mistake in one answer").
impl BodyRules for CreateInvoiceRequest {
    const READ_IN_ONE_PASS: bool = true;

    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        validator::Validate::validate(self)
    }

    fn completing_rules(&self) -> Vec<FieldError> {
        content_errors(&self.into())
    }
}

/// A revise's content rules without the current revision: the members it sends must be valid;
/// one it omits keeps its value (so it is not reported missing here).
impl BodyRules for ReviseRequest {
    const READ_IN_ONE_PASS: bool = true;

    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        validator::Validate::validate(self)
    }

    fn completing_rules(&self) -> Vec<FieldError> {
        const KEPT: &[&str] = &[
            "customer_id",
            "payment_destination_id",
            "currency",
            "due_date",
            "lines",
        ];
        content_errors(&self.into())
            .into_iter()
            .filter(|e| !(e.code == "required" && KEPT.contains(&e.field.as_str())))
            .collect()
    }
}

/// What the domain's content rules say of `input` (nothing when it is well-formed).
fn content_errors(input: &DraftInput) -> Vec<FieldError> {
    check_content(input, None)
        .err()
        .map_or_else(Vec::new, |refused| refused.errors)
}

/// A new invoice proposal. Every member but `idempotency_key` is required (the Rust fields are
/// optional only so that every missing one is reported at once, as a 422).
#[derive(Debug, Deserialize, ToSchema, Default, validator::Validate)]
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
#[derive(Debug, Deserialize, ToSchema, Default, validator::Validate)]
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
#[derive(Debug, Deserialize, ToSchema, validator::Validate)]
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
#[derive(Debug, Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why (1–2000 characters).
    #[schema(value_type = String, required = true, min_length = 1, max_length = 2000)]
    pub reason: Option<String>,
}

/// No fields: send `{}` or no body.
#[derive(Deserialize, ToSchema, Default, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct EmptyRequest {}

/// What every invoice command answers.
#[derive(Serialize, ToSchema)]
pub struct CommandResponse {
    /// The invoice as it is now.
    pub invoice: InvoiceView,
    /// `true` when the command's goal already held and nothing was written.
    pub replayed: bool,
}

/// A page of invoices.
#[derive(Serialize, ToSchema)]
pub struct InvoiceList {
    /// The invoices.
    pub items: Vec<InvoiceView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A page of revisions, oldest first (an invoice has at most 100).
#[derive(Serialize, ToSchema)]
pub struct RevisionList {
    /// The revisions.
    pub items: Vec<RevisionView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// All decisions, oldest first.
#[derive(Serialize, ToSchema)]
pub struct DecisionList {
    /// The decisions.
    pub items: Vec<DecisionView>,
}

/// A page of the trail, in order.
#[derive(Serialize, ToSchema)]
pub struct EventList {
    /// The events.
    pub items: Vec<EventView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
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

crate::body_rules!(LineRequest, EmptyRequest);
crate::body_rules!(one_pass: DecideRequest, CancelRequest);

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
                .map(|line| LineInput::from(&line))
                .map_err(|e| e.to_string());
            let domain =
                serde_json::from_value::<LineInput>(sample.clone()).map_err(|e| e.to_string());
            assert_eq!(request, domain, "{sample}");
        }
        let float = r#"{"description":"a","quantity":"1","unit_amount_minor":1.0}"#;
        let request = serde_json::from_str::<LineRequest>(float).map(|line| LineInput::from(&line));
        let domain = serde_json::from_str::<LineInput>(float);
        assert_eq!(
            request.map_err(|e| e.to_string()),
            domain.map_err(|e| e.to_string())
        );
    }
}
