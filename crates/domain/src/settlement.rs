//! Settlement (docs/contract/effects.md §4): what a source reports, how a payment's events
//! combine, how an invoice's payments are allocated to it, and when an invoice is overdue.
//!
//! Determinism is the design: [`PaymentSummary::merge`] is commutative and associative and
//! [`allocate`] is a function of the *set* of payments, so the same events in any order, with the
//! invoice issued before, between or after them, end in the same state (the property test below).

use std::fmt;

use chrono::{DateTime, NaiveDate, SecondsFormat, Timelike, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::currency::Currency;
use super::error::{FieldError, required};
use super::fingerprint::fingerprint;
use super::input::{AmountInput, AmountMinorInput};
use super::invoice::{Action, InvalidTransition, InvoiceState, settle};
use super::money::MinorAmount;
use super::text::{Lines, unclean, unclean_error};

/// Longest identifier a source may send (`source`, `event_id`, `payment_id`, `invoice_number`).
pub const MAX_IDENTIFIER_CHARS: usize = 200;
/// Largest `raw` object, as compact JSON.
pub const MAX_RAW_BYTES: usize = 16 * 1024;

/// What a source says a payment is, and what a payment is after all its events. It only moves
/// forward (the furthest state reported), so a late event is recorded and moves nothing back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PaymentState {
    /// Seen at the source, not final: nothing of it counts yet.
    Observed,
    /// Final at the source: it counts toward the invoice it names.
    Confirmed,
    /// Failed at the source, before or after it was confirmed (then it is a reversal).
    Failed,
}

impl PaymentState {
    /// Every state, in the order a payment moves through them.
    pub const ALL: [PaymentState; 3] = [
        PaymentState::Observed,
        PaymentState::Confirmed,
        PaymentState::Failed,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentState::Observed => "observed",
            PaymentState::Confirmed => "confirmed",
            PaymentState::Failed => "failed",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<PaymentState> {
        PaymentState::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

impl fmt::Display for PaymentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What Tauros did with a payment (a human's inbox: `unmatched`, `overpaid`, `conflict`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PaymentStatus {
    /// Observed for a known, issued invoice in its currency; waiting for confirmation.
    Pending,
    /// Confirmed and counted in full toward its invoice.
    Applied,
    /// Confirmed, but the invoice was already covered: part or all of it is beyond the total.
    Overpaid,
    /// It names no known invoice, or one in another currency, or one not issued yet.
    Unmatched,
    /// Its events disagree about amount, currency or invoice: nothing counts until a human looks.
    Conflict,
    /// It failed at the source (or was reversed); nothing of it counts.
    Failed,
}

impl PaymentStatus {
    /// Every status.
    pub const ALL: [PaymentStatus; 6] = [
        PaymentStatus::Pending,
        PaymentStatus::Applied,
        PaymentStatus::Overpaid,
        PaymentStatus::Unmatched,
        PaymentStatus::Conflict,
        PaymentStatus::Failed,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Pending => "pending",
            PaymentStatus::Applied => "applied",
            PaymentStatus::Overpaid => "overpaid",
            PaymentStatus::Unmatched => "unmatched",
            PaymentStatus::Conflict => "conflict",
            PaymentStatus::Failed => "failed",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<PaymentStatus> {
        PaymentStatus::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// Why a payment counts toward no invoice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unmatched {
    /// No invoice of the organisation has that id or number.
    UnknownInvoice,
    /// The invoice is in another currency.
    WrongCurrency,
    /// The invoice is not issued (yet): it is matched when it is.
    InvoiceNotIssued,
}

impl Unmatched {
    /// Every reason.
    pub const ALL: [Unmatched; 3] = [
        Unmatched::UnknownInvoice,
        Unmatched::WrongCurrency,
        Unmatched::InvoiceNotIssued,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Unmatched::UnknownInvoice => "unknown_invoice",
            Unmatched::WrongCurrency => "wrong_currency",
            Unmatched::InvoiceNotIssued => "invoice_not_issued",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Unmatched> {
        Unmatched::ALL.into_iter().find(|u| u.as_str() == s)
    }
}

/// The invoice an event names, exactly as the source sent it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InvoiceRef {
    /// Tauros's invoice id.
    Id(Uuid),
    /// The number the invoice was issued under (`INV-2026-000042`).
    Number(String),
}

impl InvoiceRef {
    /// The year of an issued invoice's number (`INV-2026-000042` → 2026); `None` otherwise.
    pub fn number_year(&self) -> Option<i32> {
        let InvoiceRef::Number(number) = self else {
            return None;
        };
        let rest = number.strip_prefix("INV-")?;
        let (year, sequence) = rest.split_once('-')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if year.len() == 4 && digits(year) && digits(sequence) {
            year.parse().ok()
        } else {
            None
        }
    }
}

/// What never changes for one payment: its amount, currency and invoice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PaymentFacts {
    /// In the currency's minor units; always positive.
    pub amount: MinorAmount,
    pub currency: Currency,
    pub invoice: InvoiceRef,
}

/// One event: one observation of one payment at the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub event_id: String,
    pub state: PaymentState,
    pub facts: PaymentFacts,
    /// When it happened at the source.
    pub occurred_at: DateTime<Utc>,
}

/// Everything the events of one payment say, folded in any order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentSummary {
    /// The facts of the earliest event (by `occurred_at`, then `event_id`): every event agrees
    /// with them, or the payment is in conflict.
    pub facts: PaymentFacts,
    /// When that earliest event happened, and its id.
    pub first_at: DateTime<Utc>,
    pub first_event_id: String,
    /// The furthest state any event reported.
    pub state: PaymentState,
    /// Two of its events disagree about the amount, currency or invoice.
    pub conflict: bool,
    /// When the earliest `confirmed` event happened: the order confirmed payments allocate in.
    pub confirmed_at: Option<DateTime<Utc>>,
}

impl PaymentSummary {
    /// A payment of one event.
    pub fn of(event: &Observation) -> PaymentSummary {
        PaymentSummary {
            facts: event.facts.clone(),
            first_at: event.occurred_at,
            first_event_id: event.event_id.clone(),
            state: event.state,
            conflict: false,
            confirmed_at: (event.state == PaymentState::Confirmed).then_some(event.occurred_at),
        }
    }

    /// The payment after one more event.
    pub fn with(self, event: &Observation) -> PaymentSummary {
        self.merge(PaymentSummary::of(event))
    }

    /// Both sets of events together; commutative and associative, so arrival order never matters.
    pub fn merge(self, other: PaymentSummary) -> PaymentSummary {
        let conflict = self.conflict || other.conflict || self.facts != other.facts;
        let state = self.state.max(other.state);
        let confirmed_at = match (self.confirmed_at, other.confirmed_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let first =
            if (self.first_at, &self.first_event_id) <= (other.first_at, &other.first_event_id) {
                self
            } else {
                other
            };
        PaymentSummary {
            conflict,
            state,
            confirmed_at,
            ..first
        }
    }

    /// Confirmed once, failed since: a reversal.
    pub fn reversed(&self) -> bool {
        self.state == PaymentState::Failed && self.confirmed_at.is_some()
    }

    /// Whether an event with these facts disagrees with the payment's (shown as contradiction).
    pub fn contradicted_by(&self, facts: &PaymentFacts) -> bool {
        self.facts != *facts
    }
}

/// The invoice a payment names, as the store found it under the invoice's lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvoiceFacts {
    pub currency: Currency,
    pub total: MinorAmount,
    pub state: InvoiceState,
}

/// Where a payment stands after reconciliation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Standing {
    pub status: PaymentStatus,
    pub unmatched: Option<Unmatched>,
    /// How much of it counts toward its invoice.
    pub allocated: MinorAmount,
}

impl Standing {
    fn counts_nothing(status: PaymentStatus, unmatched: Option<Unmatched>) -> Standing {
        Standing {
            status,
            unmatched,
            allocated: MinorAmount::ZERO,
        }
    }
}

/// One payment of an invoice, as allocation orders them.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub source: &'a str,
    pub payment_id: &'a str,
    pub summary: &'a PaymentSummary,
}

/// An invoice's payments, reconciled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// How much of the total confirmed payments cover (never more than the total).
    pub amount_paid: MinorAmount,
    /// One per candidate, in the order they were given.
    pub standings: Vec<Standing>,
}

/// Whether payments may count toward an invoice in this state.
pub fn is_issued(state: InvoiceState) -> bool {
    matches!(
        state,
        InvoiceState::Issued | InvoiceState::PartiallyPaid | InvoiceState::Paid
    )
}

/// Why nothing of a payment can count, in the order a human needs it (contradiction, failure,
/// mismatch); `None` when it may count toward `invoice`.
fn blocked(p: &PaymentSummary, invoice: Option<&InvoiceFacts>) -> Option<Standing> {
    let unmatched = match invoice {
        None => Some(Unmatched::UnknownInvoice),
        Some(i) if i.currency != p.facts.currency => Some(Unmatched::WrongCurrency),
        Some(i) if !is_issued(i.state) => Some(Unmatched::InvoiceNotIssued),
        Some(_) => None,
    };
    if p.conflict {
        Some(Standing::counts_nothing(PaymentStatus::Conflict, unmatched))
    } else if p.state == PaymentState::Failed {
        Some(Standing::counts_nothing(PaymentStatus::Failed, unmatched))
    } else if unmatched.is_some() {
        Some(Standing::counts_nothing(
            PaymentStatus::Unmatched,
            unmatched,
        ))
    } else if p.state == PaymentState::Observed {
        Some(Standing::counts_nothing(PaymentStatus::Pending, None))
    } else {
        None
    }
}

/// Where a payment that names no known invoice stands.
pub fn standing_without_invoice(p: &PaymentSummary) -> Standing {
    // Without an invoice a payment is at least unmatched, so `blocked` always answers.
    blocked(p, None).unwrap_or(Standing::counts_nothing(
        PaymentStatus::Unmatched,
        Some(Unmatched::UnknownInvoice),
    ))
}

/// Allocates an invoice's payments: unblocked ones count in the order they were confirmed at
/// the source (ties by source and payment id), each up to what is left; the rest is overpaid.
pub fn allocate(invoice: &InvoiceFacts, payments: &[Candidate<'_>]) -> Allocation {
    let mut standings: Vec<Option<Standing>> = payments
        .iter()
        .map(|c| blocked(c.summary, Some(invoice)))
        .collect();
    let mut order: Vec<usize> = (0..payments.len())
        .filter(|i| standings[*i].is_none())
        .collect();
    order.sort_by_key(|i| {
        let c = payments[*i];
        (c.summary.confirmed_at, c.source, c.payment_id)
    });
    let mut left = invoice.total;
    for i in order {
        let amount = payments[i].summary.facts.amount;
        let allocated = amount.min(left);
        left = left.checked_sub(allocated).unwrap_or(MinorAmount::ZERO);
        standings[i] = Some(Standing {
            status: if allocated == amount {
                PaymentStatus::Applied
            } else {
                PaymentStatus::Overpaid
            },
            unmatched: None,
            allocated,
        });
    }
    Allocation {
        amount_paid: invoice.total.checked_sub(left).unwrap_or(MinorAmount::ZERO),
        // Every payment was either blocked or allocated above.
        standings: standings
            .into_iter()
            .map(|s| s.unwrap_or(Standing::counts_nothing(PaymentStatus::Pending, None)))
            .collect(),
    }
}

/// What one payment would count toward `invoice` alone: its amount, unless something blocks it.
pub fn counting_amount(p: &PaymentSummary, invoice: &InvoiceFacts) -> MinorAmount {
    if blocked(p, Some(invoice)).is_some() {
        MinorAmount::ZERO
    } else {
        p.facts.amount
    }
}

/// The running sum of what each payment would count alone: within the total, [`allocate`]
/// applies each in full, so one payment changing changes no other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneChanged {
    /// The invoice's running sum after the change.
    pub counted: MinorAmount,
    /// How much the invoice is paid after it (what [`allocate`] would give).
    pub amount_paid: MinorAmount,
    /// The changed payment's standing, when it is matched to the invoice after the change.
    pub standing: Option<Standing>,
}

/// Reconciles one payment's change against an invoice's running sum in constant time (`None`
/// for a side: not matched to it). `None` when the whole allocation is needed: the invoice is
/// not issued, or the sum exceeds the total (then confirmation order decides who is overpaid).
pub fn reconcile_one(
    invoice: &InvoiceFacts,
    counted: MinorAmount,
    before: Option<&PaymentSummary>,
    after: Option<&PaymentSummary>,
) -> Option<OneChanged> {
    if !is_issued(invoice.state) || counted > invoice.total {
        return None;
    }
    let was = before.map_or(MinorAmount::ZERO, |p| counting_amount(p, invoice));
    let now = after.map_or(MinorAmount::ZERO, |p| counting_amount(p, invoice));
    let counted = counted.checked_sub(was)?.checked_add(now).ok()?;
    if counted > invoice.total {
        return None;
    }
    let standing = after.map(|p| {
        blocked(p, Some(invoice)).unwrap_or(Standing {
            status: PaymentStatus::Applied,
            unmatched: None,
            allocated: now,
        })
    });
    Some(OneChanged {
        counted,
        amount_paid: counted,
        standing,
    })
}

/// The running sum of a whole set of payments (what [`reconcile_one`] keeps up to date).
pub fn counted_sum(invoice: &InvoiceFacts, payments: &[&PaymentSummary]) -> Option<MinorAmount> {
    payments.iter().try_fold(MinorAmount::ZERO, |sum, p| {
        sum.checked_add(counting_amount(p, invoice)).ok()
    })
}

/// An issued invoice's state for the amount its confirmed payments cover.
pub fn paid_state(total: MinorAmount, paid: MinorAmount) -> InvoiceState {
    if paid.is_zero() {
        InvoiceState::Issued
    } else if paid < total {
        InvoiceState::PartiallyPaid
    } else {
        InvoiceState::Paid
    }
}

/// What is still to be paid.
pub fn balance(total: MinorAmount, paid: MinorAmount) -> MinorAmount {
    total.checked_sub(paid).unwrap_or(MinorAmount::ZERO)
}

/// One invoice event settlement records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvoiceMove {
    pub action: Action,
    pub from: InvoiceState,
    pub to: InvoiceState,
}

/// The invoice event for the amount paid going from `before` to `after`, if any (issued only).
pub fn invoice_move(
    from: InvoiceState,
    total: MinorAmount,
    before: MinorAmount,
    after: MinorAmount,
) -> Result<Option<InvoiceMove>, InvalidTransition> {
    if before == after || !is_issued(from) {
        return Ok(None);
    }
    let action = if after > before {
        Action::PaymentApplied
    } else {
        Action::PaymentReversed
    };
    let to = paid_state(total, after);
    settle(action, from, to)?;
    Ok(Some(InvoiceMove { action, from, to }))
}

/// The `paid` event (paid → paid) written on reaching `paid`, checked against the graph.
pub fn settle_paid(state: InvoiceState) -> Result<(), InvalidTransition> {
    settle(Action::Paid, state, InvoiceState::Paid).map(|_| ())
}

/// Overdue is computed, never stored: issued or partially paid, due before `today` (UTC), and a
/// balance open (always so in those states; named so it reads as docs/contract/effects.md §4).
pub fn is_overdue(
    state: InvoiceState,
    due_date: NaiveDate,
    today: NaiveDate,
    balance: MinorAmount,
) -> bool {
    matches!(state, InvoiceState::Issued | InvoiceState::PartiallyPaid)
        && due_date < today
        && !balance.is_zero()
}

/// A settlement event as sent, every member optional so a missing one is reported with the rest.
#[derive(Clone, Debug, Default)]
pub struct EventInput {
    pub source: Option<String>,
    pub event_id: Option<String>,
    pub payment_id: Option<String>,
    pub invoice_id: Option<Uuid>,
    pub invoice_number: Option<String>,
    pub amount: Option<AmountInput>,
    pub amount_minor: Option<AmountMinorInput>,
    pub currency: Option<String>,
    pub status: Option<String>,
    pub occurred_at: Option<String>,
    pub raw: Option<Map<String, Value>>,
}

/// An event that passed every rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidEvent {
    /// Which system reported it (a bank feed, a chain watcher).
    pub source: String,
    pub payment_id: String,
    pub observation: Observation,
    /// `raw` as compact JSON with sorted keys.
    pub raw: Option<String>,
    /// What a redelivery must match: the normalized body.
    pub fingerprint: String,
}

/// Checks an event; on failure returns every offending field.
pub fn validate_event(input: &EventInput) -> Result<ValidEvent, Vec<FieldError>> {
    let mut errors = Vec::new();
    let source = identifier("source", input.source.as_deref(), &mut errors);
    let event_id = identifier("event_id", input.event_id.as_deref(), &mut errors);
    let payment_id = identifier("payment_id", input.payment_id.as_deref(), &mut errors);
    let invoice = match (&input.invoice_id, &input.invoice_number) {
        (Some(id), None) => Some(InvoiceRef::Id(*id)),
        (None, Some(number)) => {
            identifier("invoice_number", Some(number), &mut errors).map(InvoiceRef::Number)
        }
        (None, None) => {
            errors.push(FieldError::plain(
                "invoice_id",
                "required",
                "name the invoice paid: send `invoice_id` (Tauros's id) or `invoice_number` (the \
                 number it was issued under, such as INV-2026-000042)",
            ));
            None
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::plain(
                "invoice_id",
                "conflicting_fields",
                "send the invoice once: either `invoice_id` or `invoice_number`, not both",
            ));
            None
        }
    };
    let currency = required("currency", input.currency.as_deref(), &mut errors).and_then(|c| {
        c.parse::<Currency>()
            .map_err(|e| errors.push(FieldError::new("currency", &e)))
            .ok()
    });
    let amount = match (&input.amount, &input.amount_minor) {
        (Some(major), None) => currency.and_then(|currency| {
            positive("amount", major.0.to_minor(currency), MOVES, &mut errors)
        }),
        (None, Some(minor)) => positive("amount_minor", minor.0.to_minor(), MOVES, &mut errors),
        (None, None) => {
            errors.push(FieldError::plain(
                "amount",
                "required",
                "send the amount paid: `amount` (a decimal string in major units, such as \
                 \"1200.50\") or `amount_minor` (an integer of minor units, such as 120050)",
            ));
            None
        }
        (Some(_), Some(_)) => {
            errors.push(FieldError::plain(
                "amount",
                "conflicting_fields",
                "send the amount once: either `amount` (a decimal string in major units) or \
                 `amount_minor` (an integer of minor units), not both",
            ));
            None
        }
    };
    let state = required("status", input.status.as_deref(), &mut errors).and_then(|s| {
        let found = PaymentState::parse(s);
        if found.is_none() {
            errors.push(FieldError::plain(
                "status",
                "invalid_value",
                "status must be one of observed, confirmed, failed",
            ));
        }
        found
    });
    let occurred_at =
        required("occurred_at", input.occurred_at.as_deref(), &mut errors).and_then(|t| {
            timestamp(t)
                .map_err(|detail| {
                    errors.push(FieldError::plain(
                        "occurred_at",
                        "invalid_timestamp",
                        detail,
                    ));
                })
                .ok()
        });
    let raw = input.raw.as_ref().and_then(|raw| {
        let text = Value::Object(raw.clone()).to_string();
        if text.len() > MAX_RAW_BYTES {
            errors.push(FieldError::plain(
                "raw",
                "too_large",
                format!(
                    "`raw` is {} bytes as JSON; keep it to {MAX_RAW_BYTES} (the source's own \
                     record of the event, for a human to read)",
                    text.len()
                ),
            ));
            None
        } else {
            Some(text)
        }
    });
    match (
        source,
        event_id,
        payment_id,
        invoice,
        currency,
        amount,
        state,
        occurred_at,
    ) {
        (
            Some(source),
            Some(event_id),
            Some(payment_id),
            Some(invoice),
            Some(currency),
            Some(amount),
            Some(state),
            Some(occurred_at),
        ) if errors.is_empty() => {
            let facts = PaymentFacts {
                amount,
                currency,
                invoice,
            };
            let fingerprint = event_fingerprint(
                &source,
                &payment_id,
                &event_id,
                state,
                &facts,
                occurred_at,
                raw.as_deref(),
            );
            Ok(ValidEvent {
                source,
                payment_id,
                observation: Observation {
                    event_id,
                    state,
                    facts,
                    occurred_at,
                },
                raw,
                fingerprint,
            })
        }
        _ => Err(errors),
    }
}

/// The normalized body: `"400"` and `"400.00"` and `40000` minor are one amount, and `raw`'s
/// members are compared whatever their order.
fn event_fingerprint(
    source: &str,
    payment_id: &str,
    event_id: &str,
    state: PaymentState,
    facts: &PaymentFacts,
    occurred_at: DateTime<Utc>,
    raw: Option<&str>,
) -> String {
    let (kind, invoice) = match &facts.invoice {
        InvoiceRef::Id(id) => ("invoice_id", id.to_string()),
        InvoiceRef::Number(number) => ("invoice_number", number.clone()),
    };
    fingerprint(&[
        "tauros.settlement_event.v1",
        source,
        event_id,
        payment_id,
        kind,
        &invoice,
        &facts.amount.to_string(),
        facts.currency.code(),
        state.as_str(),
        &occurred_at.to_rfc3339_opts(SecondsFormat::Micros, true),
        raw.unwrap_or(""),
    ])
}

/// An identifier of the source's: compared exactly, so never trimmed (surrounding space refused).
fn identifier(field: &str, value: Option<&str>, errors: &mut Vec<FieldError>) -> Option<String> {
    let value = required(field, value, errors)?;
    let len = value.chars().count();
    if let Some(found) = unclean(value, Lines::One) {
        errors.push(unclean_error(field, found));
        None
    } else if len == 0 || len > MAX_IDENTIFIER_CHARS || value.trim() != value {
        errors.push(FieldError::plain(
            field,
            "invalid_identifier",
            format!(
                "`{field}` must be 1–{MAX_IDENTIFIER_CHARS} characters without surrounding \
                 spaces, exactly as the source names it"
            ),
        ));
        None
    } else {
        Some(value.to_owned())
    }
}

/// What a settlement event's zero amount is told.
const MOVES: &str = "a payment moves money";

/// `amount` when more than zero; else the field's error, with `hint`, is pushed onto `errors`.
pub(crate) fn positive(
    field: &str,
    amount: Result<MinorAmount, super::money::MoneyError>,
    hint: &str,
    errors: &mut Vec<FieldError>,
) -> Option<MinorAmount> {
    match amount {
        Ok(a) if a.is_zero() => {
            errors.push(FieldError::plain(
                field,
                "amount_not_positive",
                format!("`{field}` must be more than zero: {hint}"),
            ));
            None
        }
        Ok(a) => Some(a),
        Err(e) => {
            errors.push(FieldError::new(field, &e));
            None
        }
    }
}

/// An RFC 3339 timestamp, kept to the microsecond (the precision both databases store; a finer
/// one is refused rather than cut).
fn timestamp(text: &str) -> Result<DateTime<Utc>, String> {
    let parsed = DateTime::parse_from_rfc3339(text).map_err(|_| {
        "`occurred_at` must be an RFC 3339 timestamp such as 2026-03-01T12:00:00Z (when the \
         payment event happened at the source)"
            .to_owned()
    })?;
    // chrono reads a leap second (`…:59:60`) as 1e9 or more nanoseconds; neither database
    // stores one, so it is refused like any time that cannot be kept exactly.
    if parsed.nanosecond() >= 1_000_000_000 {
        return Err(
            "`occurred_at` is a leap second, which cannot be stored exactly; send the next \
             second (…:00) instead"
                .to_owned(),
        );
    }
    if parsed.nanosecond() % 1_000 != 0 {
        return Err(
            "`occurred_at` is more precise than a microsecond; send at most six fractional \
             digits"
                .to_owned(),
        );
    }
    Ok(parsed.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{MajorAmountInput, MinorAmountInput};
    use InvoiceState::{Approved, Issued, Paid, PartiallyPaid};
    use PaymentState::{Confirmed, Failed, Observed};
    use chrono::TimeZone;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const INVOICE: Uuid = Uuid::from_u128(7);

    fn minor(v: i128) -> MinorAmount {
        MinorAmount::new(v).unwrap()
    }

    fn at(second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, second).unwrap()
    }

    fn facts(amount: i128) -> PaymentFacts {
        PaymentFacts {
            amount: minor(amount),
            currency: Currency::Eur,
            invoice: InvoiceRef::Id(INVOICE),
        }
    }

    fn event(id: &str, state: PaymentState, amount: i128, second: u32) -> Observation {
        Observation {
            event_id: id.to_owned(),
            state,
            facts: facts(amount),
            occurred_at: at(second),
        }
    }

    fn invoice(total: i128, state: InvoiceState) -> InvoiceFacts {
        InvoiceFacts {
            currency: Currency::Eur,
            total: minor(total),
            state,
        }
    }

    fn fold(events: &[Observation]) -> PaymentSummary {
        let (first, rest) = events.split_first().unwrap();
        rest.iter()
            .fold(PaymentSummary::of(first), |p, e| p.with(e))
    }

    fn one<'a>(source_id: &'static str, p: &'a PaymentSummary) -> Candidate<'a> {
        Candidate {
            source: "bank",
            payment_id: source_id,
            summary: p,
        }
    }

    #[test]
    fn names_round_trip() {
        for s in PaymentState::ALL {
            assert_eq!(PaymentState::parse(s.as_str()), Some(s));
        }
        for s in PaymentStatus::ALL {
            assert_eq!(PaymentStatus::parse(s.as_str()), Some(s));
        }
        for u in Unmatched::ALL {
            assert_eq!(Unmatched::parse(u.as_str()), Some(u));
        }
        assert_eq!(PaymentState::parse("paid"), None);
    }

    #[test]
    fn a_payment_never_moves_back() {
        let confirmed_first = fold(&[
            event("e2", Confirmed, 100, 2),
            event("e1", Observed, 100, 1),
        ]);
        assert_eq!(confirmed_first.state, Confirmed);
        assert_eq!(confirmed_first.confirmed_at, Some(at(2)));
        // The facts are the earliest event's, whatever arrived first.
        assert_eq!(confirmed_first.first_event_id, "e1");
        let reversed = fold(&[
            event("e3", Failed, 100, 3),
            event("e1", Observed, 100, 1),
            event("e2", Confirmed, 100, 2),
        ]);
        assert_eq!(reversed.state, Failed);
        assert!(reversed.reversed());
        let failed = fold(&[event("e1", Observed, 100, 1), event("e2", Failed, 100, 2)]);
        assert!(!failed.reversed());
        assert!(!confirmed_first.conflict);
    }

    #[test]
    fn a_contradiction_is_remembered_in_any_order() {
        let a = event("e1", Observed, 100, 1);
        let b = event("e2", Confirmed, 200, 2);
        let c = event("e3", Confirmed, 100, 3);
        for order in [[&a, &b, &c], [&c, &b, &a], [&b, &a, &c], [&c, &a, &b]] {
            let p = fold(&order.map(Clone::clone));
            assert!(p.conflict);
            assert_eq!(p.facts, facts(100));
            assert!(p.contradicted_by(&b.facts));
            assert!(!p.contradicted_by(&c.facts));
        }
        let other_invoice = Observation {
            facts: PaymentFacts {
                invoice: InvoiceRef::Number("INV-2026-000001".into()),
                ..facts(100)
            },
            ..event("e4", Confirmed, 100, 4)
        };
        assert!(fold(&[a.clone(), other_invoice]).conflict);
        let other_currency = Observation {
            facts: PaymentFacts {
                currency: Currency::Usd,
                ..facts(100)
            },
            ..event("e5", Confirmed, 100, 5)
        };
        assert!(fold(&[a, other_currency]).conflict);
    }

    #[test]
    fn two_partial_payments_pay_an_invoice() {
        let p1 = fold(&[event("e1", Confirmed, 400, 1)]);
        let p2 = fold(&[event("e2", Confirmed, 800, 2)]);
        let inv = invoice(1200, Issued);
        let first = allocate(&inv, &[one("p1", &p1)]);
        assert_eq!(first.amount_paid, minor(400));
        assert_eq!(paid_state(inv.total, first.amount_paid), PartiallyPaid);
        let both = allocate(&inv, &[one("p1", &p1), one("p2", &p2)]);
        assert_eq!(both.amount_paid, minor(1200));
        assert_eq!(paid_state(inv.total, both.amount_paid), Paid);
        assert!(
            both.standings
                .iter()
                .all(|s| s.status == PaymentStatus::Applied)
        );
        assert_eq!(balance(inv.total, both.amount_paid), MinorAmount::ZERO);
    }

    #[test]
    fn what_goes_beyond_the_total_is_an_overpayment_in_confirmation_order() {
        let early = fold(&[event("e1", Confirmed, 1000, 1)]);
        let late = fold(&[event("e2", Confirmed, 500, 2)]);
        let inv = invoice(1200, Issued);
        // Given in either order, the earlier confirmation is applied in full.
        for (payments, early_at, late_at) in [
            (vec![one("a", &early), one("b", &late)], 0, 1),
            (vec![one("b", &late), one("a", &early)], 1, 0),
        ] {
            let a = allocate(&inv, &payments);
            assert_eq!(a.amount_paid, minor(1200));
            assert_eq!(a.standings[early_at].status, PaymentStatus::Applied);
            assert_eq!(a.standings[early_at].allocated, minor(1000));
            assert_eq!(a.standings[late_at].status, PaymentStatus::Overpaid);
            assert_eq!(a.standings[late_at].allocated, minor(200));
        }
        let more = fold(&[event("e3", Confirmed, 1, 3)]);
        let a = allocate(&inv, &[one("a", &early), one("b", &late), one("c", &more)]);
        assert_eq!(a.standings[2].status, PaymentStatus::Overpaid);
        assert_eq!(a.standings[2].allocated, MinorAmount::ZERO);
    }

    #[test]
    fn only_confirmed_payments_in_the_currency_of_an_issued_invoice_count() {
        let observed = fold(&[event("e1", Observed, 100, 1)]);
        let failed = fold(&[event("e2", Confirmed, 100, 1), event("e3", Failed, 100, 2)]);
        let dollars = PaymentSummary::of(&Observation {
            facts: PaymentFacts {
                currency: Currency::Usd,
                ..facts(100)
            },
            ..event("e4", Confirmed, 100, 1)
        });
        let conflicted = fold(&[
            event("e5", Confirmed, 100, 1),
            event("e6", Confirmed, 90, 2),
        ]);
        let inv = invoice(1000, Issued);
        let a = allocate(
            &inv,
            &[
                one("a", &observed),
                one("b", &failed),
                one("c", &dollars),
                one("d", &conflicted),
            ],
        );
        assert_eq!(a.amount_paid, MinorAmount::ZERO);
        let statuses: Vec<_> = a
            .standings
            .iter()
            .map(|s| (s.status, s.unmatched))
            .collect();
        assert_eq!(
            statuses,
            [
                (PaymentStatus::Pending, None),
                (PaymentStatus::Failed, None),
                (PaymentStatus::Unmatched, Some(Unmatched::WrongCurrency)),
                (PaymentStatus::Conflict, None),
            ]
        );
        let confirmed = fold(&[event("e7", Confirmed, 100, 1)]);
        let not_issued = allocate(&invoice(1000, Approved), &[one("a", &confirmed)]);
        assert_eq!(not_issued.amount_paid, MinorAmount::ZERO);
        assert_eq!(
            not_issued.standings[0].unmatched,
            Some(Unmatched::InvoiceNotIssued)
        );
        let unknown = standing_without_invoice(&confirmed);
        assert_eq!(unknown.status, PaymentStatus::Unmatched);
        assert_eq!(unknown.unmatched, Some(Unmatched::UnknownInvoice));
        let unknown_failed = standing_without_invoice(&failed);
        assert_eq!(unknown_failed.status, PaymentStatus::Failed);
        assert_eq!(unknown_failed.unmatched, Some(Unmatched::UnknownInvoice));
    }

    #[test]
    fn invoice_moves_follow_the_amount_paid() {
        let t = minor(1200);
        let mv = |from, before, after| invoice_move(from, t, minor(before), minor(after));
        assert_eq!(mv(Issued, 0, 0), Ok(None));
        assert_eq!(mv(Approved, 0, 400), Ok(None));
        assert_eq!(
            mv(Issued, 0, 400),
            Ok(Some(InvoiceMove {
                action: Action::PaymentApplied,
                from: Issued,
                to: PartiallyPaid
            }))
        );
        assert_eq!(mv(PartiallyPaid, 400, 1200).unwrap().unwrap().to, Paid);
        assert_eq!(mv(Issued, 0, 1200).unwrap().unwrap().to, Paid);
        let back = mv(Paid, 1200, 400).unwrap().unwrap();
        assert_eq!(
            (back.action, back.to),
            (Action::PaymentReversed, PartiallyPaid)
        );
        assert_eq!(mv(PartiallyPaid, 400, 0).unwrap().unwrap().to, Issued);
        assert_eq!(mv(Paid, 1200, 0).unwrap().unwrap().to, Issued);
        let same_state = mv(PartiallyPaid, 400, 800).unwrap().unwrap();
        assert_eq!(
            (same_state.action, same_state.to),
            (Action::PaymentApplied, PartiallyPaid)
        );
    }

    #[test]
    fn overdue_is_issued_or_partly_paid_past_its_due_date_with_a_balance() {
        let today = NaiveDate::from_ymd_opt(2026, 3, 10).unwrap();
        let yesterday = today.pred_opt().unwrap();
        let open = minor(1);
        assert!(is_overdue(Issued, yesterday, today, open));
        assert!(is_overdue(PartiallyPaid, yesterday, today, open));
        assert!(!is_overdue(Issued, today, today, open));
        assert!(!is_overdue(Paid, yesterday, today, MinorAmount::ZERO));
        assert!(!is_overdue(Approved, yesterday, today, open));
        assert!(!is_overdue(Issued, yesterday, today, MinorAmount::ZERO));
    }

    #[test]
    fn numbers_tauros_issues_have_a_year() {
        let n = |s: &str| InvoiceRef::Number(s.to_owned()).number_year();
        assert_eq!(n("INV-2026-000042"), Some(2026));
        assert_eq!(n("INV-26-1"), None);
        assert_eq!(n("inv-2026-000042"), None);
        assert_eq!(n("INV-2026-"), None);
        assert_eq!(InvoiceRef::Id(INVOICE).number_year(), None);
    }

    fn input() -> EventInput {
        EventInput {
            source: Some("bank".into()),
            event_id: Some("evt_1".into()),
            payment_id: Some("pay_1".into()),
            invoice_id: Some(INVOICE),
            invoice_number: None,
            amount: Some(AmountInput(MajorAmountInput("400".into()))),
            amount_minor: None,
            currency: Some("EUR".into()),
            status: Some("confirmed".into()),
            occurred_at: Some("2026-03-01T12:00:00Z".into()),
            raw: None,
        }
    }

    fn fields(input: &EventInput) -> Vec<(String, &'static str)> {
        validate_event(input)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.field, e.code))
            .collect()
    }

    #[test]
    fn a_valid_event() {
        let valid = validate_event(&input()).unwrap();
        assert_eq!(valid.observation.facts, facts(40_000));
        assert_eq!(valid.observation.state, Confirmed);
        assert_eq!(valid.source, "bank");
        assert_eq!(valid.payment_id, "pay_1");
        assert_eq!(valid.observation.occurred_at, at(0));
    }

    #[test]
    fn every_missing_member_is_listed() {
        let got = fields(&EventInput::default());
        let names: Vec<&str> = got.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            names,
            [
                "source",
                "event_id",
                "payment_id",
                "invoice_id",
                "currency",
                "amount",
                "status",
                "occurred_at"
            ]
        );
        assert!(got.iter().all(|(_, code)| *code == "required"));
    }

    #[test]
    fn broken_rules_name_their_field() {
        let mut e = input();
        e.amount = Some(AmountInput(MajorAmountInput("10.005".into())));
        assert_eq!(fields(&e), [("amount".into(), "too_many_decimals")]);
        e.amount = Some(AmountInput(MajorAmountInput("0.00".into())));
        assert_eq!(fields(&e), [("amount".into(), "amount_not_positive")]);
        e.amount = None;
        e.amount_minor = Some(AmountMinorInput(MinorAmountInput::Integer(-5)));
        assert_eq!(fields(&e), [("amount_minor".into(), "negative_amount")]);
        e.amount = Some(AmountInput(MajorAmountInput("1".into())));
        assert_eq!(fields(&e), [("amount".into(), "conflicting_fields")]);
        let mut e = input();
        e.invoice_number = Some("INV-2026-000001".into());
        e.currency = Some("EURO".into());
        e.status = Some("paid".into());
        e.occurred_at = Some("yesterday".into());
        e.source = Some(" bank".into());
        e.event_id = Some("evt\u{200B}1".into());
        let got = fields(&e);
        assert_eq!(
            got,
            [
                ("source".into(), "invalid_identifier"),
                ("event_id".into(), "invalid_characters"),
                ("invoice_id".into(), "conflicting_fields"),
                ("currency".into(), "unknown_currency"),
                ("status".into(), "invalid_value"),
                ("occurred_at".into(), "invalid_timestamp"),
            ]
        );
        let mut e = input();
        e.occurred_at = Some("2026-03-01T12:00:00.0000001Z".into());
        assert_eq!(fields(&e), [("occurred_at".into(), "invalid_timestamp")]);
        e.occurred_at = Some("2016-12-31T23:59:60Z".into());
        assert_eq!(fields(&e), [("occurred_at".into(), "invalid_timestamp")]);
        e.occurred_at = Some("2026-03-01T13:00:00.123456+01:00".into());
        assert_eq!(
            validate_event(&e).unwrap().observation.occurred_at,
            at(0) + chrono::Duration::microseconds(123_456)
        );
        let mut e = input();
        let mut raw = Map::new();
        raw.insert("blob".into(), Value::String("x".repeat(MAX_RAW_BYTES)));
        e.raw = Some(raw);
        assert_eq!(fields(&e), [("raw".into(), "too_large")]);
    }

    #[test]
    fn one_body_has_one_fingerprint_however_it_is_written() {
        let base = validate_event(&input()).unwrap().fingerprint;
        let mut e = input();
        e.amount = Some(AmountInput(MajorAmountInput("400.00".into())));
        assert_eq!(validate_event(&e).unwrap().fingerprint, base);
        e.amount = None;
        e.amount_minor = Some(AmountMinorInput(MinorAmountInput::Text("40000".into())));
        assert_eq!(validate_event(&e).unwrap().fingerprint, base);
        e.occurred_at = Some("2026-03-01T14:00:00+02:00".into());
        assert_eq!(validate_event(&e).unwrap().fingerprint, base);
        e.status = Some("observed".into());
        assert_ne!(validate_event(&e).unwrap().fingerprint, base);
        let raw = |pairs: &[(&str, i64)]| {
            let mut m = Map::new();
            for (k, v) in pairs {
                m.insert((*k).to_owned(), Value::from(*v));
            }
            let mut e = input();
            e.raw = Some(m);
            validate_event(&e).unwrap().fingerprint
        };
        assert_eq!(raw(&[("a", 1), ("b", 2)]), raw(&[("b", 2), ("a", 1)]));
        assert_ne!(raw(&[("a", 1)]), base);
    }

    // The permutation property: payments' events and the invoice's issue, applied as the app
    // does in any order, make only legal moves and end in the same state.

    /// One thing that happens: an event of payment `payment`, or the invoice being issued.
    #[derive(Clone, Debug)]
    enum Step {
        Event(usize, Observation),
        Issue,
    }

    /// The state the app keeps, plus the order payments were first seen in (as their rows come
    /// back from the database), which the end state must not depend on.
    #[derive(Clone, Debug)]
    struct Ledger {
        state: InvoiceState,
        paid: MinorAmount,
        payments: BTreeMap<usize, (PaymentSummary, Standing)>,
        arrival: Vec<usize>,
    }

    impl PartialEq for Ledger {
        fn eq(&self, other: &Ledger) -> bool {
            (self.state, self.paid, &self.payments) == (other.state, other.paid, &other.payments)
        }
    }

    const TOTAL: i128 = 1_200;
    const PAYMENT_IDS: [&str; 5] = ["p0", "p1", "p2", "p3", "p4"];

    impl Ledger {
        fn new(state: InvoiceState) -> Ledger {
            Ledger {
                state,
                paid: MinorAmount::ZERO,
                payments: BTreeMap::new(),
                arrival: Vec::new(),
            }
        }

        fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
            match step {
                Step::Issue => {
                    prop_assert_eq!(self.state, Approved);
                    self.state = Issued;
                }
                Step::Event(p, e) => {
                    let summary = match self.payments.remove(p) {
                        Some((summary, _)) => summary.with(e),
                        None => {
                            self.arrival.push(*p);
                            PaymentSummary::of(e)
                        }
                    };
                    let standing = standing_without_invoice(&summary);
                    self.payments.insert(*p, (summary, standing));
                }
            }
            self.reconcile()
        }

        /// What the app does under the invoice's lock after each step.
        fn reconcile(&mut self) -> Result<(), TestCaseError> {
            let facts = invoice(TOTAL, self.state);
            let ours: Vec<usize> = self
                .arrival
                .iter()
                .copied()
                .filter(|p| self.payments[p].0.facts.invoice == InvoiceRef::Id(INVOICE))
                .collect();
            let candidates: Vec<Candidate<'_>> = ours
                .iter()
                .map(|p| Candidate {
                    source: "bank",
                    payment_id: PAYMENT_IDS[*p],
                    summary: &self.payments[p].0,
                })
                .collect();
            let allocation = allocate(&facts, &candidates);
            prop_assert!(allocation.amount_paid <= facts.total);
            let allocated =
                MinorAmount::checked_sum(allocation.standings.iter().map(|s| s.allocated));
            prop_assert_eq!(allocated, Ok(allocation.amount_paid));
            let moved = invoice_move(self.state, facts.total, self.paid, allocation.amount_paid);
            prop_assert!(moved.is_ok(), "illegal move {:?}", moved);
            if let Ok(Some(m)) = moved {
                self.state = m.to;
            }
            self.paid = allocation.amount_paid;
            if is_issued(self.state) {
                prop_assert_eq!(self.state, paid_state(facts.total, self.paid));
            }
            for (p, standing) in ours.iter().zip(allocation.standings) {
                if let Some(entry) = self.payments.get_mut(p) {
                    entry.1 = standing;
                }
            }
            Ok(())
        }
    }

    /// One payment's states, amount, currency, whether it names the invoice, is contradicted.
    fn payment_events() -> impl Strategy<Value = (Vec<PaymentState>, i128, bool, bool, bool)> {
        (
            proptest::sample::subsequence(vec![Observed, Confirmed, Failed], 1..=3),
            1..=900_i128,
            proptest::bool::weighted(0.85),
            proptest::bool::weighted(0.85),
            proptest::bool::weighted(0.1),
        )
    }

    fn scenario() -> impl Strategy<Value = (bool, Vec<Step>)> {
        (
            any::<bool>(),
            proptest::collection::vec(payment_events(), 1..=PAYMENT_IDS.len()),
        )
            .prop_map(|(issued_first, payments)| {
                let mut steps = Vec::new();
                let mut n = 0;
                for (p, (states, amount, euros, ours, contradicted)) in
                    payments.into_iter().enumerate()
                {
                    let facts = PaymentFacts {
                        amount: minor(amount),
                        currency: if euros { Currency::Eur } else { Currency::Usd },
                        invoice: if ours {
                            InvoiceRef::Id(INVOICE)
                        } else {
                            InvoiceRef::Number("INV-2026-999999".into())
                        },
                    };
                    let mut events: Vec<Observation> = states
                        .into_iter()
                        .map(|state| {
                            n += 1;
                            Observation {
                                event_id: format!("e{n}"),
                                state,
                                facts: facts.clone(),
                                occurred_at: at(n),
                            }
                        })
                        .collect();
                    if contradicted {
                        n += 1;
                        events.push(Observation {
                            event_id: format!("e{n}"),
                            state: Confirmed,
                            facts: PaymentFacts {
                                amount: minor(amount + 1),
                                ..facts
                            },
                            occurred_at: at(n),
                        });
                    }
                    steps.extend(events.into_iter().map(|e| Step::Event(p, e)));
                }
                if !issued_first {
                    steps.push(Step::Issue);
                }
                (issued_first, steps)
            })
    }

    fn run(issued_first: bool, steps: &[Step]) -> Result<Ledger, TestCaseError> {
        let mut ledger = Ledger::new(if issued_first { Issued } else { Approved });
        for step in steps {
            ledger.step(step)?;
        }
        Ok(ledger)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_same_events_in_any_order_end_in_the_same_state(
            (issued_first, steps, shuffled) in scenario().prop_flat_map(|(issued_first, steps)| {
                let shuffled = Just(steps.clone()).prop_shuffle();
                (Just(issued_first), Just(steps), shuffled)
            })
        ) {
            let expected = run(issued_first, &steps)?;
            let got = run(issued_first, &shuffled)?;
            prop_assert_eq!(&got, &expected);
            // The end state says what the events say: only confirmed, unchallenged euro
            // payments of this invoice count, never beyond its total.
            let counted = MinorAmount::checked_sum(expected.payments.values().filter_map(|(s, _)| {
                let counts = s.state == Confirmed
                    && !s.conflict
                    && s.facts.currency == Currency::Eur
                    && s.facts.invoice == InvoiceRef::Id(INVOICE);
                counts.then_some(s.facts.amount)
            })).unwrap();
            prop_assert_eq!(expected.paid, counted.min(minor(TOTAL)));
        }

        #[test]
        fn folding_is_commutative_and_associative(
            a in payment_events(), b in payment_events(), c in payment_events()
        ) {
            let summary = |(states, amount, _, _, _): (Vec<PaymentState>, i128, bool, bool, bool), seed: u32| {
                let events: Vec<Observation> = states.iter().enumerate()
                    .map(|(i, s)| event(&format!("e{seed}{i}"), *s, amount, seed + i as u32))
                    .collect();
                fold(&events)
            };
            let (x, y, z) = (summary(a, 10), summary(b, 20), summary(c, 30));
            prop_assert_eq!(x.clone().merge(y.clone()), y.clone().merge(x.clone()));
            prop_assert_eq!(
                x.clone().merge(y.clone()).merge(z.clone()),
                x.merge(y.merge(z))
            );
        }
    }
}

#[cfg(test)]
mod incremental_tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;
    use uuid::Uuid;

    fn summary_event(state: PaymentState, amount: i128, second: u32, n: usize) -> Observation {
        Observation {
            event_id: format!("evt-{n}"),
            state,
            facts: PaymentFacts {
                amount: MinorAmount::new(amount).unwrap(),
                currency: Currency::Eur,
                invoice: InvoiceRef::Id(Uuid::from_u128(7)),
            },
            occurred_at: Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, second).unwrap(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// `reconcile_one`, whenever it answers, agrees with the whole allocation, leaves the
        /// other payments' standings unchanged, and keeps the running sum exact.
        #[test]
        fn one_payment_reconciled_from_the_running_sum_agrees_with_the_whole_allocation(
            total in 1i128..3000,
            events in proptest::collection::vec((0usize..5, 0usize..3, 1i128..900, 0u32..60), 1..40),
        ) {
            let invoice = InvoiceFacts {
                currency: Currency::Eur,
                total: MinorAmount::new(total).unwrap(),
                state: InvoiceState::Issued,
            };
            let names = ["p0", "p1", "p2", "p3", "p4"];
            let mut payments: Vec<Option<PaymentSummary>> = vec![None; 5];
            let mut counted = MinorAmount::ZERO;
            for (n, (p, state, amount, second)) in events.into_iter().enumerate() {
                let observation = summary_event(PaymentState::ALL[state], amount, second, n);
                let before = payments[p].clone();
                let after = match &before {
                    Some(s) => s.clone().with(&observation),
                    None => PaymentSummary::of(&observation),
                };
                let previous: Vec<(usize, Standing)> = {
                    let present: Vec<(usize, &PaymentSummary)> = payments
                        .iter()
                        .enumerate()
                        .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
                        .collect();
                    let candidates: Vec<Candidate<'_>> = present
                        .iter()
                        .map(|(i, s)| Candidate { source: "bank", payment_id: names[*i], summary: s })
                        .collect();
                    let a = allocate(&invoice, &candidates);
                    present.iter().map(|(i, _)| *i).zip(a.standings).collect()
                };
                let one = reconcile_one(&invoice, counted, before.as_ref(), Some(&after));
                payments[p] = Some(after);
                let present: Vec<(usize, &PaymentSummary)> = payments
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
                    .collect();
                let candidates: Vec<Candidate<'_>> = present
                    .iter()
                    .map(|(i, s)| Candidate { source: "bank", payment_id: names[*i], summary: s })
                    .collect();
                let whole = allocate(&invoice, &candidates);
                let sums: Vec<&PaymentSummary> = present.iter().map(|(_, s)| *s).collect();
                let sum = counted_sum(&invoice, &sums).unwrap();
                match one {
                    Some(one) => {
                        prop_assert_eq!(one.counted, sum);
                        prop_assert_eq!(one.amount_paid, whole.amount_paid);
                        for ((i, _), standing) in present.iter().zip(&whole.standings) {
                            if *i == p {
                                prop_assert_eq!(one.standing, Some(*standing));
                            } else {
                                let was = previous.iter().find(|(j, _)| j == i).map(|(_, s)| *s);
                                prop_assert_eq!(was, Some(*standing));
                            }
                        }
                    }
                    None => prop_assert!(sum > invoice.total || counted > invoice.total),
                }
                counted = sum;
            }
        }
    }
}
