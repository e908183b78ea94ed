//! The reviewed tool list, what each tool tells a model, and what each one calls (the use case
//! its REST route calls: a function next to the handler, or `http::invoices::use_cases`).
//!
//! The list is closed on purpose: no tool approves, rejects, requests changes, cancels, manages
//! agents or keys, or changes organisation settings. `Tool::ALL` is pinned by a unit test here
//! and by `tests/api/resources/mcp.rs`, so adding a tool is a deliberate act.

use super::answers::{DestinationCommand, History, InvoiceAnswer};
use super::args::{Id, Key, WithExtras};
use super::schema::Pool;
use super::summary::Summary;
use crate::http::destinations::CreateDestinationRequest;
use crate::http::extract::ListParams;
use crate::http::invoices::types::{CreateInvoiceRequest, EmptyRequest, ReviseRequest};
use crate::http::invoices::use_cases as invoices;
use crate::http::json::{parse_value, parse_value_also};
use crate::http::problem::ApiError;
use crate::http::settlement::SettlementEventRequest;
use crate::http::{customers, destinations, sessions, settlement};
use rmcp::model::{JsonObject, ToolAnnotations};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tauros_app::{Actor, App, FieldError, InvoiceQuery};
use utoipa::ToSchema;
use uuid::Uuid;

/// One tool of the reviewed list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Whoami,
    ListCustomers,
    ListPaymentDestinations,
    CreatePaymentDestination,
    DeactivatePaymentDestination,
    ListInvoices,
    GetInvoice,
    PreviewInvoice,
    CreateInvoiceDraft,
    ReviseInvoice,
    SubmitInvoice,
    WithdrawInvoice,
    RecordSettlementEvent,
}

impl Tool {
    /// Every tool, in the order `tools/list` shows them. `record_settlement_event` is for keys
    /// with the `settlement` capability; every other tool needs `invoicing`.
    pub const ALL: [Tool; 13] = [
        Tool::Whoami,
        Tool::ListCustomers,
        Tool::ListPaymentDestinations,
        Tool::CreatePaymentDestination,
        Tool::DeactivatePaymentDestination,
        Tool::ListInvoices,
        Tool::GetInvoice,
        Tool::PreviewInvoice,
        Tool::CreateInvoiceDraft,
        Tool::ReviseInvoice,
        Tool::SubmitInvoice,
        Tool::WithdrawInvoice,
        Tool::RecordSettlementEvent,
    ];

    /// The tool's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Whoami => "whoami",
            Tool::ListCustomers => "list_customers",
            Tool::ListPaymentDestinations => "list_payment_destinations",
            Tool::CreatePaymentDestination => "create_payment_destination",
            Tool::DeactivatePaymentDestination => "deactivate_payment_destination",
            Tool::ListInvoices => "list_invoices",
            Tool::GetInvoice => "get_invoice",
            Tool::PreviewInvoice => "preview_invoice",
            Tool::CreateInvoiceDraft => "create_invoice_draft",
            Tool::ReviseInvoice => "revise_invoice",
            Tool::SubmitInvoice => "submit_invoice",
            Tool::WithdrawInvoice => "withdraw_invoice",
            Tool::RecordSettlementEvent => "record_settlement_event",
        }
    }

    /// The tool of that name, if it is on the list.
    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What the tool tells a model: what it does, what it never does, what comes next.
    fn description(self) -> &'static str {
        match self {
            Tool::Whoami => {
                "Who you are: this agent's id, name and organisation, and the capabilities of \
                 its key (`invoicing` is needed by every other tool). Reads only. Call it first \
                 to check that the key works; every other tool acts as this agent, on this \
                 agent's own records only."
            }
            Tool::ListCustomers => {
                "List your customers, the people and companies you may bill: id, name, email. \
                 Newest first; `limit` 1-100 (default 50); when the answer has a `next_cursor`, pass \
                 it as `cursor` for the next page. Reads only. Customers are created by your \
                 human owner, never by an agent: if the one you need is missing, ask your human."
            }
            Tool::ListPaymentDestinations => {
                "List your payment destinations, where invoices are paid: id, label, currency, \
                 network, address, state. Pass `state: \"active\"` for the ones a new invoice may \
                 use. Newest first, paged like list_customers. Reads only."
            }
            Tool::CreatePaymentDestination => {
                "Register a payment destination for yourself: `label`, `currency` (\"EUR\", \
                 \"USDC\", ...), `network` (iban, bitcoin, ethereum, arbitrum or base; it must \
                 carry the currency) and `address` (checksums are verified). `supersedes_id` \
                 retires one of your active destinations in the same step. Send an \
                 `idempotency_key` to make retries safe: the same key and arguments answer the \
                 original with `replayed: true`; the same key with other arguments is refused \
                 (idempotency_conflict). Answers {payment_destination, replayed}. It moves no \
                 money and needs no approval: money only goes where an invoice that a human \
                 approved says."
            }
            Tool::DeactivatePaymentDestination => {
                "Stop one of your payment destinations (`id`) from receiving money, for good \
                 (register a new one instead of reviving it). Already inactive: answered \
                 unchanged. Invoices that name it cannot be submitted or approved until revised \
                 onto an active destination."
            }
            Tool::ListInvoices => {
                "List your invoices, newest first (with `state: \"pending_approval\"`, oldest \
                 first). Filters: `state`, `customer_id`, `decision` (the latest human decision, \
                 while it is about the current revision: `changes_requested` is your to-do list, \
                 the drafts waiting for you to revise; approved, rejected) and `idempotency_key` \
                 (find the invoice an earlier create_invoice_draft made with that key). Paged \
                 with `limit` and `cursor` like list_customers. Each item's `id` is the invoice \
                 id every invoice tool takes; `current_revision.id` is a revision's id, never \
                 passed to a tool. Two numbers: `number` is the invoice number (INV-…, null until \
                 the invoice is issued after approval; payers quote it), \
                 `current_revision.number` counts revisions (1, 2, …). Reads only."
            }
            Tool::GetInvoice => {
                "One of your invoices by its id (`invoice.id` in any answer): its state, its \
                 number once issued, its current revision (lines, total, due date, \
                 payload_hash) and the latest human decision with its reason. `history: true` \
                 adds every revision (at most 100), every decision and the audit events 100 at \
                 a time (when the answer has an `events_next_cursor`, pass it as `events_cursor` for \
                 the next 100). Use it to see whether a human decided: approval may take \
                 minutes or days, so check now and then (every few minutes at most), never in a \
                 loop. After `changes_requested`, read the reason, then revise_invoice and \
                 submit_invoice again (the decision then says `current: false`). Reads only. An \
                 id that is not yours is answered not_found, exactly like one that does not \
                 exist; one of your revision ids is answered not_found naming its invoice \
                 (`invoice_id`)."
            }
            Tool::PreviewInvoice => {
                "Check an invoice before you propose it: the arguments of create_invoice_draft \
                 without `idempotency_key`. Reads only: it writes nothing, creates no invoice, \
                 puts nothing in an inbox. A body create_invoice_draft would refuse is refused \
                 with the same error, every mistake listed at once; a valid one answers what a \
                 create now would seal: the lines with their amounts, `total` and \
                 `total_minor`, `canonical_payload` and `payload_hash`, and `warnings` an \
                 approver would notice (`due_date_soon`: due in fewer than 7 days; \
                 `due_date_far`: more than 365 days ahead; `possible_duplicate`: an open invoice \
                 of yours bills the same customer the same total, its `invoice_id` named). \
                 Warnings never block. Money as for create_invoice_draft: a decimal string \
                 (`\"unit_amount\": \"1200.50\"`) or integer minor units \
                 (`\"unit_amount_minor\": 120050`), never a JSON float. Then call \
                 create_invoice_draft with the same arguments and a key."
            }
            Tool::CreateInvoiceDraft => {
                "Propose an invoice to one of your customers, as a draft. Money is never a JSON \
                 number: send each line's price as a decimal string in major units, e.g. \
                 {\"description\": \"Consulting\", \"quantity\": \"2\", \"unit_amount\": \
                 \"1200.50\"}, with at most the currency's decimals (EUR 2, USDC 6, JPY 0; never \
                 rounded), or as integer minor units in `unit_amount_minor` (120050). \
                 Floating-point numbers are refused. `idempotency_key` is required: choose one \
                 per intended invoice (a UUID) and reuse it when you retry; the same key and \
                 content answer the same invoice with `replayed: true`, the same key with other \
                 content is refused (idempotency_conflict). A refusal lists every mistake at \
                 once in `errors[]`: fix them all, then retry. `customer_id`: one of yours \
                 (list_customers); `payment_destination_id`: one of your active destinations \
                 receiving `currency` (list_payment_destinations); `due_date`: YYYY-MM-DD, today \
                 or later; `reasoning`: why, for the human approver. The answer's `invoice.id` \
                 is what every other invoice tool takes; `invoice.number` stays null until the \
                 invoice is issued. A draft is in no one's inbox: call submit_invoice next. This tool never approves, and no tool can: a \
                 human approver decides."
            }
            Tool::ReviseInvoice => {
                "Change your draft or pending invoice (`id`): send `reasoning` (why, for the \
                 approver) and only the fields that change (customer_id, payment_destination_id, \
                 currency, due_date; `lines` replaces every line). It writes a new sealed \
                 revision and puts the invoice back to draft, out of the approvers' inbox: call \
                 submit_invoice again. Content equal to the current revision changes nothing \
                 (`replayed: true`). Money as for create_invoice_draft: a decimal string in \
                 major units (`\"unit_amount\": \"1200.50\"`) or integer minor units \
                 (`\"unit_amount_minor\": 120050`), never a JSON float. A refusal lists every \
                 mistake at once. Approved, rejected and cancelled invoices cannot be revised."
            }
            Tool::SubmitInvoice => {
                "Send your draft invoice (`id`) to the approvers' inbox: its state becomes \
                 pending_approval. Already pending: answered unchanged (`replayed: true`). Then \
                 wait for a human: an approver approves, rejects or requests changes; you cannot, \
                 and no tool does. It may take minutes or days: check with get_invoice now and \
                 then (every few minutes at most), never in a loop; a human's own system can be \
                 told by webhooks instead (invoice.approved, invoice.changes_requested, \
                 invoice.rejected). After changes_requested, read the decision's reason, \
                 revise_invoice, then submit_invoice again. Once approved, Tauros issues the \
                 invoice and it gets its number (INV-…)."
            }
            Tool::WithdrawInvoice => {
                "Take back your draft or pending invoice (`id`): its state becomes cancelled, \
                 for good. Already withdrawn: answered unchanged (`replayed: true`). To change an \
                 invoice rather than drop it, use revise_invoice."
            }
            Tool::RecordSettlementEvent => {
                "For settlement keys only (a bank feed, a chain watcher, a payment provider): \
                 report one observation of one payment. `source` names your feed, `event_id` is \
                 the event's id at the source, `payment_id` the payment's; name the invoice by \
                 `invoice_id` or `invoice_number` (the INV-… number it got when issued, which \
                 payers quote; a revision's number is not an invoice number); the amount as a decimal string in major units \
                 (`amount: \"400.00\"`) or integer minor units (`amount_minor: 40000`), never a \
                 JSON float; `currency`; `status`: observed, confirmed or failed (a failed \
                 payment after confirmed is a reversal); `occurred_at` (RFC 3339). Redelivering \
                 the same event is safe (`replayed: true`); the same event_id with another body \
                 is refused (idempotency_conflict); a refusal lists every mistake at once. This \
                 never marks an invoice paid by itself: \
                 Tauros decides from confirmed payments, and keeps what it cannot apply \
                 (unknown invoice, another currency, not issued yet, overpaid, contradicting \
                 events) for a human. A `source` is yours once you first report under it \
                 (another key under it: source_owned); the answer shows the matched invoice's \
                 id, number and state only."
            }
        }
    }

    fn annotations(self) -> ToolAnnotations {
        let base = ToolAnnotations::new().open_world(false);
        match self {
            Tool::Whoami
            | Tool::ListCustomers
            | Tool::ListPaymentDestinations
            | Tool::ListInvoices
            | Tool::GetInvoice
            | Tool::PreviewInvoice => base.read_only(true),
            // Safe to repeat only with an idempotency key, which is optional here.
            Tool::CreatePaymentDestination => {
                base.read_only(false).destructive(false).idempotent(false)
            }
            Tool::CreateInvoiceDraft | Tool::ReviseInvoice | Tool::SubmitInvoice => {
                base.read_only(false).destructive(false).idempotent(true)
            }
            Tool::DeactivatePaymentDestination | Tool::WithdrawInvoice => {
                base.read_only(false).destructive(true).idempotent(true)
            }
            // Redelivering the same event is a replay.
            Tool::RecordSettlementEvent => {
                base.read_only(false).destructive(false).idempotent(true)
            }
        }
    }

    /// The JSON Schema of the tool's arguments.
    fn input_schema(self, pool: &mut Pool) -> JsonObject {
        let id = |what: &str| {
            (
                "id",
                json!({"type": "string", "format": "uuid", "description": what}),
                true,
            )
        };
        match self {
            Tool::Whoami => {
                let name = pool.add::<NoArgs>();
                pool.object(&name, &[])
            }
            Tool::ListCustomers => {
                let name = pool.add::<ListArgs>();
                pool.object(&name, &[])
            }
            Tool::ListPaymentDestinations => {
                let name = pool.add::<ListDestinationsArgs>();
                pool.object(&name, &[])
            }
            Tool::CreatePaymentDestination => pool.object(
                "CreateDestinationRequest",
                &[(
                    "idempotency_key",
                    json!({
                        "type": "string", "minLength": 1, "maxLength": 200,
                        "description": "Optional; makes retries safe: the same key and \
                            arguments again answer the same destination (`replayed: true`). \
                            1-200 characters, no surrounding spaces (a UUID makes a good key)."
                    }),
                    false,
                )],
            ),
            Tool::DeactivatePaymentDestination => pool.object(
                "EmptyRequest",
                &[id("The destination's id (from list_payment_destinations).")],
            ),
            Tool::ListInvoices => {
                let name = pool.add::<ListInvoicesArgs>();
                pool.object(&name, &[])
            }
            Tool::GetInvoice => {
                let name = pool.add::<GetInvoiceArgs>();
                pool.object(&name, &[id(INVOICE_ID)])
            }
            Tool::SubmitInvoice | Tool::WithdrawInvoice => {
                pool.object("EmptyRequest", &[id(INVOICE_ID)])
            }
            Tool::CreateInvoiceDraft => {
                let mut schema = pool.object("CreateInvoiceRequest", &[]);
                // The key is a header or a member over REST; here it is a required argument.
                if let Some(Value::Object(key)) = schema
                    .get_mut("properties")
                    .and_then(|p| p.get_mut("idempotency_key"))
                {
                    key.insert(
                        "description".into(),
                        json!(
                            "Required; makes retries safe: the same key and content again \
                             answer the same invoice (`replayed: true`), the same key with other \
                             content is refused. One key per intended invoice (a UUID makes a \
                             good key); 1-200 characters, no surrounding spaces."
                        ),
                    );
                }
                if let Some(Value::Array(required)) = schema.get_mut("required") {
                    required.insert(0, json!("idempotency_key"));
                }
                schema
            }
            Tool::PreviewInvoice => {
                // The body of a create; no key is needed (one sent anyway is checked, then
                // ignored), so the tool does not offer it.
                let mut schema = pool.object("CreateInvoiceRequest", &[]);
                if let Some(Value::Object(properties)) = schema.get_mut("properties") {
                    properties.remove("idempotency_key");
                }
                schema
            }
            Tool::ReviseInvoice => pool.object("ReviseRequest", &[id(INVOICE_ID)]),
            Tool::RecordSettlementEvent => pool.object("SettlementEventRequest", &[]),
        }
    }

    /// The tool as `tools/list` shows it.
    pub(super) fn definition(self, pool: &mut Pool) -> rmcp::model::Tool {
        rmcp::model::Tool::new(self.name(), self.description(), self.input_schema(pool))
            .annotate(self.annotations())
    }
}

/// No arguments.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// A page: the arguments of list_customers, and of every list tool.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// How many to answer, 1-100 (default 50).
    #[schema(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page; omit for the first page.
    cursor: Option<String>,
}

/// The arguments of list_payment_destinations.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct ListDestinationsArgs {
    /// Only destinations in this state; `active` ones receive money.
    #[schema(value_type = Option<crate::http::schema::DestinationStateSchema>)]
    state: Option<String>,
    /// How many to answer, 1-100 (default 50).
    #[schema(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page; omit for the first page.
    cursor: Option<String>,
}

/// The arguments of list_invoices.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct ListInvoicesArgs {
    /// Only invoices in this state; `pending_approval` lists oldest first.
    #[schema(value_type = Option<crate::http::schema::InvoiceStateSchema>)]
    state: Option<String>,
    /// Only this customer's.
    customer_id: Option<Uuid>,
    /// Only invoices whose latest decision is this one and is about the current revision
    /// (`changes_requested`: the drafts waiting for you to revise).
    #[schema(value_type = Option<crate::http::schema::DecisionKindSchema>)]
    decision: Option<String>,
    /// Only the invoice you created with this key.
    idempotency_key: Option<String>,
    /// Only approved invoices whose issuing stands here (`rejected`, `conflict` and
    /// `needs_review` wait for an approver).
    #[schema(value_type = Option<crate::http::schema::IssuingStatusSchema>)]
    issuing: Option<String>,
    /// How many to answer, 1-100 (default 50).
    #[schema(minimum = 1, maximum = 100)]
    limit: Option<i64>,
    /// The `next_cursor` of the previous page; omit for the first page.
    cursor: Option<String>,
}

/// The arguments of get_invoice besides its `id`.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
struct GetInvoiceArgs {
    /// `true` for the history too: every revision (at most 100), every decision and the first
    /// 100 audit events. Omitted or `false`: the invoice alone (its current revision and latest
    /// decision are in it).
    history: Option<bool>,
    /// The `events_next_cursor` of an earlier answer, for the next 100 events (implies
    /// `history`); omit for the first.
    events_cursor: Option<String>,
}

/// What an invoice tool's `id` is, and what it is not (the ids share a long prefix).
const INVOICE_ID: &str = "The invoice's id: `invoice.id` of create_invoice_draft's answer, or an \
    item's `id` from list_invoices. Not `current_revision.id` (a revision's id) and not the \
    invoice number INV-….";

/// How many revisions and events one get_invoice answers at most.
const HISTORY_PAGE: i64 = 100;

/// How an MCP client sends the key a create needs.
const SEND_A_KEY: &str = "send idempotency_key (one per intended invoice, reused when you \
                          retry) so retries are safe";

/// Parses `args` into a tool's argument type by the REST body rules.
fn parse<T: serde::de::DeserializeOwned + crate::http::rules::BodyRules>(
    args: JsonObject,
) -> Result<T, ApiError> {
    let value = Value::Object(args);
    let size = value.to_string().len();
    parse_value(value, size)
}

/// A tool's answer: the REST answer as structured content, and a short text summary of it.
pub(super) struct Answer {
    pub value: Value,
    pub summary: String,
}

fn answer(value: impl Serialize + Summary) -> Result<Answer, ApiError> {
    let summary = value.summary();
    let mut value = serde_json::to_value(value).map_err(|_| crate::http::problem::internal())?;
    compact(&mut value);
    Ok(Answer { value, summary })
}

/// The REST answer as a tool answers it, every fact once: no nulls, no `agent_id`, no `_minor`
/// twin beside its decimal string, no `canonical_payload` in a current revision (docs/MCP.md,
/// "Answers and errors"). A tool answers tens of these per page; an agent pays for each.
pub(super) fn compact(value: &mut Value) {
    match value {
        Value::Object(members) => {
            members.retain(|k, v| !v.is_null() && k != "agent_id");
            let twins: Vec<String> = members
                .keys()
                .filter(|k| {
                    k.strip_suffix("_minor")
                        .is_some_and(|major| members.get(major).is_some_and(Value::is_string))
                })
                .cloned()
                .collect();
            for twin in twins {
                members.remove(&twin);
            }
            if let Some(Value::Object(revision)) = members.get_mut("current_revision") {
                revision.remove("canonical_payload");
            }
            members.values_mut().for_each(compact);
        }
        Value::Array(items) => items.iter_mut().for_each(compact),
        _ => {}
    }
}

/// Runs `tool` for `actor` through its REST route's use case, its arguments read as a REST body.
pub(super) async fn call(
    app: &App,
    actor: &Actor,
    tool: Tool,
    args: JsonObject,
) -> Result<Answer, ApiError> {
    match tool {
        Tool::Whoami => {
            let NoArgs {} = parse(args)?;
            answer(sessions::whoami(app, actor).await?)
        }
        Tool::ListCustomers => {
            let a: ListArgs = parse(args)?;
            let page = ListParams::of(a.limit, a.cursor.as_deref())?;
            answer(customers::list(app, actor, page).await?)
        }
        Tool::ListPaymentDestinations => {
            let a: ListDestinationsArgs = parse(args)?;
            let page = ListParams::of(a.limit, a.cursor.as_deref())?;
            answer(destinations::list(app, actor, a.state.as_deref(), page).await?)
        }
        Tool::CreatePaymentDestination => {
            let a: WithExtras<Key, CreateDestinationRequest> = parse(args)?;
            let created = destinations::create(app, actor, a.body, a.extras.0.as_deref()).await?;
            answer(DestinationCommand {
                payment_destination: created.value,
                replayed: created.replayed,
            })
        }
        Tool::DeactivatePaymentDestination => {
            let a: WithExtras<Id, EmptyRequest> = parse(args)?;
            answer(destinations::deactivate(app, actor, a.extras.get()).await?)
        }
        Tool::ListInvoices => {
            let a: ListInvoicesArgs = parse(args)?;
            let page = ListParams::of(a.limit, a.cursor.as_deref())?;
            let query = InvoiceQuery {
                state: a.state,
                customer_id: a.customer_id,
                agent_id: None,
                decision: a.decision,
                idempotency_key: a.idempotency_key,
                overdue: None,
                issuing: a.issuing,
            };
            answer(invoices::list(app, actor.into(), query, page).await?)
        }
        Tool::GetInvoice => {
            let a: WithExtras<Id, GetInvoiceArgs> = parse(args)?;
            let id = a.extras.get();
            let events_page = ListParams::of(Some(HISTORY_PAGE), a.body.events_cursor.as_deref())
                .map_err(|e| e.rename_field("cursor", "events_cursor"))?;
            let invoice = invoices::get(app, actor.into(), id).await?;
            let history = if a.body.history == Some(true) || a.body.events_cursor.is_some() {
                let revisions = ListParams::of(Some(HISTORY_PAGE), None)?;
                let events = invoices::events(app, actor, id, events_page).await?;
                Some(History {
                    revisions: invoices::revisions(app, actor, id, revisions).await?.items,
                    decisions: invoices::decisions(app, actor, id).await?.items,
                    events: events.items,
                    events_next_cursor: events.next_cursor,
                })
            } else {
                None
            };
            answer(InvoiceAnswer { invoice, history })
        }
        Tool::PreviewInvoice => {
            let body: CreateInvoiceRequest = parse(args)?;
            answer(invoices::preview(app, actor.into(), None, body).await?)
        }
        Tool::CreateInvoiceDraft => {
            // A body refused for its shape lists a missing key too (the use case lists it with
            // the other rules otherwise): here the key can only come as an argument.
            let keyless = !args.contains_key("idempotency_key");
            let value = Value::Object(args);
            let size = value.to_string().len();
            let body: CreateInvoiceRequest = parse_value_also(value, size, || {
                if keyless {
                    vec![FieldError::plain("idempotency_key", "required", SEND_A_KEY)]
                } else {
                    Vec::new()
                }
            })?;
            answer(invoices::create(app, actor.into(), None, body, SEND_A_KEY).await?)
        }
        Tool::ReviseInvoice => {
            let a: WithExtras<Id, ReviseRequest> = parse(args)?;
            answer(invoices::revise(app, actor, a.extras.get(), a.body).await?)
        }
        Tool::SubmitInvoice => {
            let a: WithExtras<Id, EmptyRequest> = parse(args)?;
            answer(invoices::submit(app, actor, a.extras.get()).await?)
        }
        Tool::WithdrawInvoice => {
            let a: WithExtras<Id, EmptyRequest> = parse(args)?;
            answer(invoices::withdraw(app, actor, a.extras.get()).await?)
        }
        Tool::RecordSettlementEvent => {
            let body: SettlementEventRequest = parse(args)?;
            answer(settlement::record(app, actor, body).await?)
        }
    }
}

crate::body_rules!(
    NoArgs,
    ListArgs,
    ListDestinationsArgs,
    ListInvoicesArgs,
    GetInvoiceArgs
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The reviewed list (see the module documentation): a new tool must be added here too.
    #[test]
    fn the_tool_list_is_the_reviewed_one() {
        let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(
            names,
            [
                "whoami",
                "list_customers",
                "list_payment_destinations",
                "create_payment_destination",
                "deactivate_payment_destination",
                "list_invoices",
                "get_invoice",
                "preview_invoice",
                "create_invoice_draft",
                "revise_invoice",
                "submit_invoice",
                "withdraw_invoice",
                "record_settlement_event",
            ]
        );
        for tool in Tool::ALL {
            assert_eq!(Tool::parse(tool.name()), Some(tool));
        }
        for authority in [
            "approve",
            "reject",
            "request_changes",
            "cancel",
            "agent",
            "key",
        ] {
            assert!(
                names.iter().all(|n| !n.contains(authority)),
                "{authority} is not an agent's to do"
            );
        }
    }

    #[test]
    fn schemas_stand_alone_and_never_take_authority_fields_or_numbers_for_money() {
        let mut pool = Pool::new();
        for tool in Tool::ALL {
            let schema = Value::Object(tool.input_schema(&mut pool));
            assert!(!super::super::schema::has_reference(&schema), "{schema}");
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
            let properties = schema["properties"].as_object().unwrap();
            let reads = tool.annotations().read_only_hint == Some(true);
            // Filters of a list may name a state or a decision; nothing that writes may.
            let forbidden: &[&str] = if reads {
                &[
                    "agent_id",
                    "approver_id",
                    "payload_hash",
                    "total",
                    "total_minor",
                ]
            } else {
                &[
                    "state",
                    "decision",
                    "agent_id",
                    "approver_id",
                    "revision_id",
                    "payload_hash",
                    "total",
                    "total_minor",
                ]
            };
            for name in forbidden {
                assert!(!properties.contains_key(*name), "{}: {name}", tool.name());
            }
            let text = schema.to_string();
            assert!(!text.contains(r#""type":"number""#), "{}", tool.name());
        }
        let draft = Value::Object(Tool::CreateInvoiceDraft.input_schema(&mut pool));
        let required: Vec<&str> = draft["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(required.contains(&"idempotency_key"));
        assert!(required.contains(&"lines"));
        let revise = Value::Object(Tool::ReviseInvoice.input_schema(&mut pool));
        assert_eq!(revise["required"], json!(["id", "reasoning"]));
    }

    /// What each tool that writes must tell a model: the step after it, or what it will not
    /// do. The match has no catch-all, so a new tool cannot be added without saying.
    fn next_step_or_limit(tool: Tool) -> &'static [&'static str] {
        match tool {
            Tool::Whoami
            | Tool::ListCustomers
            | Tool::ListPaymentDestinations
            | Tool::ListInvoices
            | Tool::GetInvoice => &["Reads only"],
            Tool::PreviewInvoice => &["Reads only", "writes nothing", "create_invoice_draft"],
            Tool::CreatePaymentDestination => &["moves no money", "needs no approval"],
            Tool::DeactivatePaymentDestination => &["for good", "register a new one"],
            Tool::CreateInvoiceDraft => &["call submit_invoice next", "never approves"],
            Tool::ReviseInvoice => &["call submit_invoice again", "cannot be revised"],
            Tool::SubmitInvoice => &["wait for a human", "no tool does"],
            Tool::WithdrawInvoice => &["for good", "use revise_invoice"],
            Tool::RecordSettlementEvent => &["never marks an invoice paid by itself"],
        }
    }

    /// The ids share a long prefix and `number` has two meanings, so descriptions say which is
    /// which; they also say how long a human may take and that a refusal lists every mistake.
    #[test]
    fn descriptions_say_which_id_which_number_how_long_and_that_errors_list_everything() {
        let mut pool = Pool::new();
        for tool in Tool::ALL {
            let schema = Value::Object(tool.input_schema(&mut pool));
            let text = tool.description();
            let takes_invoice_id = matches!(
                tool,
                Tool::GetInvoice
                    | Tool::ReviseInvoice
                    | Tool::SubmitInvoice
                    | Tool::WithdrawInvoice
            );
            if takes_invoice_id {
                let id = schema["properties"]["id"]["description"].as_str().unwrap();
                for part in ["invoice.id", "Not `current_revision.id`", "INV-"] {
                    assert!(id.contains(part), "{}: {part} in {id}", tool.name());
                }
            } else if let Some(id) = schema["properties"]["id"]["description"].as_str() {
                assert!(!id.contains("invoice"), "{}: {id}", tool.name());
            }
            let (numbers, waits, lists_everything): (&[&str], &[&str], bool) = match tool {
                Tool::ListInvoices => (&["INV-", "counts revisions"], &[], false),
                Tool::CreateInvoiceDraft => (&["`invoice.number` stays null"], &[], true),
                Tool::RecordSettlementEvent => (&["INV-", "a revision's number is not"], &[], true),
                Tool::SubmitInvoice => (
                    &["INV-"],
                    &["minutes or days", "never in a loop", "webhooks"],
                    false,
                ),
                Tool::GetInvoice => (&[], &["minutes or days", "never in a loop"], false),
                Tool::ReviseInvoice => (&[], &[], true),
                Tool::PreviewInvoice => (&[], &[], true),
                Tool::Whoami
                | Tool::ListCustomers
                | Tool::ListPaymentDestinations
                | Tool::CreatePaymentDestination
                | Tool::DeactivatePaymentDestination
                | Tool::WithdrawInvoice => (&[], &[], false),
            };
            for part in numbers.iter().chain(waits) {
                assert!(text.contains(part), "{}: {part:?} in {text}", tool.name());
            }
            if lists_everything {
                assert!(text.contains("every mistake"), "{}: {text}", tool.name());
            }
        }
        let instructions = super::super::server::INSTRUCTIONS;
        for part in [
            "never `current_revision.id`",
            "INV-",
            "every mistake",
            "minutes or days",
        ] {
            assert!(instructions.contains(part), "{part} in the instructions");
        }
    }

    /// The decimal strings written in quotes in `text` (`"1200.50"`, `\"400.00\"`).
    fn quoted_decimals(text: &str) -> Vec<&str> {
        text.split('"')
            .skip(1)
            .step_by(2)
            .filter(|s| {
                s.split_once('.').is_some_and(|(units, fraction)| {
                    !units.is_empty()
                        && !fraction.is_empty()
                        && units
                            .bytes()
                            .chain(fraction.bytes())
                            .all(|b| b.is_ascii_digit())
                })
            })
            .collect()
    }

    #[test]
    fn every_description_says_what_it_will_not_do_or_what_comes_next() {
        for tool in Tool::ALL {
            let text = tool.description();
            assert!(text.len() > 80, "{}", tool.name());
            let reads = tool.annotations().read_only_hint == Some(true);
            let promises = next_step_or_limit(tool);
            // Only a tool that reads promises "Reads only", and first.
            assert_eq!(
                promises.first() == Some(&"Reads only"),
                reads,
                "{}",
                tool.name()
            );
            for promise in promises {
                assert!(
                    text.contains(promise),
                    "{}: {promise:?} in {text}",
                    tool.name()
                );
            }
        }
    }

    /// A tool whose arguments carry money (found from its schema, so a new one is caught)
    /// shows a decimal string in quotes and integer minor units, and says floats are refused.
    #[test]
    fn every_tool_that_takes_money_shows_the_decimal_string_format() {
        let mut pool = Pool::new();
        let mut money = Vec::new();
        for tool in Tool::ALL {
            let schema = Value::Object(tool.input_schema(&mut pool)).to_string();
            if !schema.contains("amount") {
                continue;
            }
            money.push(tool.name());
            let text = tool.description();
            let examples = quoted_decimals(text);
            assert!(
                !examples.is_empty(),
                "{}: no decimal string in {text}",
                tool.name()
            );
            assert!(text.contains("minor units"), "{}", tool.name());
            // The minor-unit example is the decimal one without its point.
            let minor = examples[0].replace('.', "");
            assert!(text.contains(&minor), "{}: {minor} in {text}", tool.name());
            assert!(
                text.contains("never a JSON float")
                    || text.contains("Floating-point numbers are refused"),
                "{}",
                tool.name()
            );
        }
        assert_eq!(
            money,
            [
                "preview_invoice",
                "create_invoice_draft",
                "revise_invoice",
                "record_settlement_event"
            ]
        );
    }
}
