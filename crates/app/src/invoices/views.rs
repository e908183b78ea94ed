//! How invoices, revisions, decisions and events look to callers, and the mappers from rows.

use crate::error::{AppError, AppResult};
use crate::schema::{
    ActionSchema, ActorKindSchema, DecisionKindSchema, InterfaceSchema, InvoiceStateSchema,
    IssuingStatusSchema, LineSchema,
};
use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, Timelike, Utc};
use serde::Serialize;
use std::str::FromStr;
use tauros_domain::currency::Currency;
use tauros_domain::effect::IssuingStatus;
use tauros_domain::identity::{ActorKind, Interface};
use tauros_domain::invoice::{Action, DecisionKind, InvoiceState};
use tauros_domain::job::JobState;
use tauros_domain::lines::LineView;
use tauros_domain::money::MinorAmount;
use tauros_domain::payload::{Decoded, decode};
use tauros_domain::settlement;
use tauros_store::{DecisionRow, EventRow, InvoiceJoined, InvoiceRow, RevisionRow};
use utoipa::ToSchema;
use uuid::Uuid;

/// One sealed version of an invoice's content: approvers decide on its `payload_hash`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = RevisionResponse)]
pub struct RevisionView {
    /// Name it as `revision_id` when deciding on this revision.
    pub id: Uuid,
    /// 1, 2, …
    pub number: i32,
    #[serde(flatten)]
    pub sealed: SealedView,
    /// Why the agent proposed this revision (not part of the seal).
    pub reasoning: String,
    /// When this revision was written (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
}

/// What a revision seals (or a preview would), read back from its canonical payload: the one
/// place sealed content is stored. Amounts are as sealed, never recomputed.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SealedContent)]
pub struct SealedView {
    /// Customer billed.
    pub customer_id: Uuid,
    /// Destination paid.
    pub payment_destination_id: Uuid,
    /// Currency code of every amount in this revision.
    pub currency: String,
    /// When payment is due.
    pub due_date: NaiveDate,
    /// In the order they were sent.
    #[schema(value_type = Vec<LineSchema>)]
    pub lines: Vec<LineView>,
    /// Sum of the line amounts as a decimal string with exactly the currency's decimals; exact
    /// at any size.
    pub total: String,
    /// `total` in minor units: an exact JSON integer at any size. JavaScript's `JSON.parse`
    /// rounds integers above 2^53 (9007199254740992): read `total` there.
    #[schema(value_type = u128)]
    pub total_minor: MinorAmount,
    /// The exact canonical bytes that were hashed (a JSON string).
    pub canonical_payload: String,
    /// Lowercase hex SHA-256 of `canonical_payload`.
    pub payload_hash: String,
}

/// An invoice with its current revision.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = InvoiceResponse)]
pub struct InvoiceView {
    /// The `{id}` of `/v1/invoices/{id}`.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: Uuid,
    /// The key it was created with.
    pub idempotency_key: String,
    /// Where the invoice is in its lifecycle.
    #[schema(value_type = InvoiceStateSchema)]
    pub state: InvoiceState,
    /// Assigned when issuing admits the invoice; `null` until then. A cancelled invoice keeps
    /// the number it had, void (`number_void`).
    pub number: Option<String>,
    /// `true` when the invoice was cancelled after it got its number: the number is void (it
    /// was never issued under it, and it is never given to another invoice).
    pub number_void: bool,
    /// Where issuing stands while it is not simply done: `null` when not issuing (draft,
    /// pending approval, issued or later, cancelled, or approved with no issuer and nothing
    /// tried).
    pub issuing: Option<IssuingView>,
    /// The current revision.
    pub current_revision: RevisionView,
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
    #[serde(serialize_with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    /// When its latest event happened (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
}

/// Where issuing an approved invoice stands (docs/EFFECTS.md, the runbook of each status).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = IssuingResponse)]
pub struct IssuingView {
    #[schema(value_type = IssuingStatusSchema)]
    pub status: IssuingStatus,
    /// Why it stopped (the issuer's reason, both values of a conflict, …); while `pending`,
    /// `null` unless its job stopped (discarded or cancelled: then nothing runs until an
    /// approver issues again, and this says so).
    pub reason: Option<String>,
    /// The issue job of the current operation version (`GET /v1/jobs/{id}`), once enqueued.
    pub job_id: Option<Uuid>,
    /// The job's current attempt (`null` when there is no job, or it was pruned).
    pub attempts: Option<i32>,
}

/// The latest decision on an invoice.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = LatestDecisionResponse)]
pub struct LatestDecision {
    #[schema(value_type = DecisionKindSchema)]
    pub decision: DecisionKind,
    /// The approver's reason (required for `rejected` and `changes_requested`).
    pub reason: Option<String>,
    /// The revision decided on; an older one than `current_revision` once the agent revised.
    pub revision_id: Uuid,
    /// When the approver decided (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub decided_at: DateTime<Utc>,
    /// `true` while the decision is about the invoice's current revision; `false` once a newer
    /// revision exists (after `changes_requested` and a revise: the request was answered).
    pub current: bool,
}

/// An approver's answer to one exact revision.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = DecisionResponse)]
pub struct DecisionView {
    /// Identifies this decision; a revision has at most one.
    pub id: Uuid,
    /// The revision decided on.
    pub revision_id: Uuid,
    /// What the approver decided.
    #[schema(value_type = DecisionKindSchema)]
    pub decision: DecisionKind,
    /// The `payload_hash` the approver named, which matched the revision's.
    pub payload_hash: String,
    /// The approver's reason.
    pub reason: Option<String>,
    /// The human who decided.
    pub approver_id: Uuid,
    /// When the decision was recorded (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub decided_at: DateTime<Utc>,
}

/// One audit event.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = EventResponse)]
pub struct EventView {
    /// Identifies this event.
    pub id: Uuid,
    /// 1, 2, … per invoice, without gaps.
    pub seq: i32,
    /// The command that caused it.
    #[schema(value_type = ActionSchema)]
    pub action: Action,
    /// The invoice's state before the command; `null` for `create_draft`.
    #[schema(value_type = Option<InvoiceStateSchema>)]
    pub from_state: Option<InvoiceState>,
    /// The invoice's state after the command.
    #[schema(value_type = InvoiceStateSchema)]
    pub to_state: InvoiceState,
    /// Who acted.
    #[schema(value_type = ActorKindSchema)]
    pub actor_kind: ActorKind,
    /// The human or agent who acted; `null` for `system`.
    pub actor_id: Option<Uuid>,
    /// The entry point the command came through.
    #[schema(value_type = InterfaceSchema)]
    pub interface: Interface,
    /// The revision concerned.
    pub revision_id: Option<Uuid>,
    /// That revision's `payload_hash`.
    pub payload_hash: Option<String>,
    /// The idempotency key (create only).
    pub idempotency_key: Option<String>,
    /// The reason sent with the command, if any.
    pub note: Option<String>,
    /// When the command took effect (RFC 3339, UTC).
    #[serde(serialize_with = "rfc3339")]
    pub occurred_at: DateTime<Utc>,
    /// The hash of the event before (64 zeros for the first).
    pub prev_hash: String,
    /// Lowercase hex SHA-256 of `prev_hash`, a newline and this event's canonical JSON.
    pub hash: String,
    /// Decisions (`approve`, `reject`, `request_changes`): the organisation's `four_eyes` when
    /// the decision was made; `null` on every other event. Covered by `hash`.
    pub four_eyes: Option<bool>,
    /// Decisions: the organisation's `shared_review` when the decision was made; else `null`.
    pub shared_review: Option<bool>,
}

/// The outcome of `verify`.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// Every revision re-sealed to its stored bytes and the event chain is intact.
    pub ok: bool,
    /// Per revision number: whether its canonical payload re-seals to its bytes and hash and its
    /// columns are true copies of it.
    pub revisions: Vec<(i32, bool)>,
    pub events_ok: bool,
    /// The `seq` of the first broken link.
    pub broken_at: Option<i32>,
}

impl SealedView {
    /// The content `canonical_payload` seals, as callers read it.
    pub(super) fn of(canonical_payload: String, payload_hash: String) -> AppResult<SealedView> {
        let Decoded {
            payload,
            total_minor,
        } = decode(&canonical_payload)?;
        let currency = payload.currency;
        let lines = payload
            .lines
            .iter()
            .map(|l| LineView::new(currency, l).map_err(|e| AppError::Internal(e.to_string())))
            .collect::<AppResult<Vec<_>>>()?;
        Ok(SealedView {
            customer_id: payload.customer_id,
            payment_destination_id: payload.destination.id,
            currency: currency.code().to_owned(),
            due_date: payload.due_date,
            lines,
            total: total_minor.to_major_string(currency),
            total_minor,
            canonical_payload,
            payload_hash,
        })
    }
}

pub(super) fn revision_view(r: RevisionRow) -> AppResult<RevisionView> {
    Ok(RevisionView {
        id: r.id,
        number: r.number,
        sealed: SealedView::of(r.canonical_payload, r.payload_hash)?,
        reasoning: r.reasoning,
        created_at: r.created_at,
    })
}

/// What the invoice's payments cover, what is left, and whether it is overdue today.
struct Settled {
    amount_paid: String,
    amount_paid_minor: MinorAmount,
    balance: String,
    balance_minor: MinorAmount,
    overdue: bool,
}

fn settled(state: InvoiceState, revision: &RevisionView, paid: &str) -> AppResult<Settled> {
    let currency = Currency::from_str(&revision.sealed.currency)
        .map_err(|_| AppError::Internal("stored currency unreadable".into()))?;
    let paid = MinorAmount::parse_minor(paid).map_err(|e| AppError::Internal(e.to_string()))?;
    let balance = settlement::balance(revision.sealed.total_minor, paid);
    let today = crate::clock::now().date_naive();
    Ok(Settled {
        amount_paid: paid.to_major_string(currency),
        amount_paid_minor: paid,
        balance: balance.to_major_string(currency),
        balance_minor: balance,
        overdue: settlement::is_overdue(state, revision.sealed.due_date, today, balance),
    })
}

/// A new invoice as create just wrote it, with its first revision (and no decision yet).
pub(super) fn invoice_view(invoice: &InvoiceRow, revision: RevisionRow) -> AppResult<InvoiceView> {
    let current_revision = revision_view(revision)?;
    let s = settled(invoice.state, &current_revision, &invoice.amount_paid_minor)?;
    Ok(InvoiceView {
        id: invoice.id,
        agent_id: invoice.agent_id,
        idempotency_key: invoice.idempotency_key.clone(),
        state: invoice.state,
        number: invoice.number.clone(),
        number_void: false,
        issuing: None,
        current_revision,
        revision_count: invoice.revision_count,
        decision: None,
        amount_paid: s.amount_paid,
        amount_paid_minor: s.amount_paid_minor,
        balance: s.balance,
        balance_minor: s.balance_minor,
        overdue: s.overdue,
        created_at: invoice.created_at,
        updated_at: invoice.updated_at,
    })
}

/// Why a `pending` issue will not go on by itself: its job was discarded or cancelled, so
/// nothing runs until an approver issues again (docs/EFFECTS.md, "Pending, but the job stopped").
fn stopped_job(
    status: IssuingStatus,
    job: Option<JobState>,
    error: Option<&str>,
) -> Option<String> {
    if status != IssuingStatus::Pending {
        return None;
    }
    let how = match job? {
        JobState::Discarded => "was discarded",
        JobState::Cancelled => "was cancelled",
        _ => return None,
    };
    let error = error
        .map(|e| format!(" (last error: {e})"))
        .unwrap_or_default();
    Some(format!(
        "the issue job {how}{error}, so nothing runs until an approver issues again \
         (POST /v1/invoices/{{id}}/issue re-drives it under the same operation key)"
    ))
}

/// The invoice as a joined read returned it.
pub(crate) fn joined_view(j: InvoiceJoined) -> AppResult<InvoiceView> {
    let id = j.revision.invoice_id;
    let current_revision_id = j.revision.id;
    let current_revision = revision_view(j.revision)?;
    let s = settled(j.state, &current_revision, &j.amount_paid_minor)?;
    Ok(InvoiceView {
        id,
        agent_id: j.agent_id,
        idempotency_key: j.idempotency_key,
        state: j.state,
        number_void: j.state == InvoiceState::Cancelled && j.invoice_number.is_some(),
        number: j.invoice_number,
        issuing: j.issuing_status.map(|status| IssuingView {
            status,
            reason: j.issuing_reason.or_else(|| {
                stopped_job(status, j.issuing_job_state, j.issuing_job_error.as_deref())
            }),
            job_id: j.issuing_job_id,
            attempts: j.issuing_attempts,
        }),
        revision_count: j.revision_count,
        decision: match (
            j.last_decision,
            j.last_decision_revision_id,
            j.last_decided_at,
        ) {
            (Some(decision), Some(revision_id), Some(decided_at)) => Some(LatestDecision {
                decision,
                reason: j.last_decision_reason,
                revision_id,
                decided_at,
                current: revision_id == current_revision_id,
            }),
            _ => None,
        },
        amount_paid: s.amount_paid,
        amount_paid_minor: s.amount_paid_minor,
        balance: s.balance,
        balance_minor: s.balance_minor,
        overdue: s.overdue,
        created_at: j.invoice_created_at,
        updated_at: j.invoice_updated_at,
        current_revision,
    })
}

impl From<DecisionRow> for DecisionView {
    fn from(d: DecisionRow) -> Self {
        DecisionView {
            id: d.id,
            revision_id: d.revision_id,
            decision: d.decision,
            payload_hash: d.payload_hash,
            reason: d.reason,
            approver_id: d.approver_id,
            decided_at: d.decided_at,
        }
    }
}

impl TryFrom<EventRow> for EventView {
    type Error = AppError;

    fn try_from(e: EventRow) -> AppResult<Self> {
        Ok(EventView {
            id: e.id,
            seq: e.seq,
            action: e.action,
            from_state: e.from_state,
            to_state: e.to_state,
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
            four_eyes: e.four_eyes,
            shared_review: e.shared_review,
        })
    }
}

/// Writes a timestamp as chrono's `Serialize` does, but as one string: serde_json escapes each
/// of chrono's pieces in its own call. Same bytes: `timestamps_are_written_as_chrono_writes_them`.
fn rfc3339<S: serde::Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut out = *b"0000-00-00T00:00:00.000000000Z";
    match write_rfc3339(at, &mut out) {
        Some(len) => serializer
            .serialize_str(std::str::from_utf8(&out[..len]).map_err(serde::ser::Error::custom)?),
        None => serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
    }
}

/// `at` written over `out`'s template: the length written, or `None` outside years 0–9999.
fn write_rfc3339(at: &DateTime<Utc>, out: &mut [u8; 30]) -> Option<usize> {
    let (date, time) = (at.date_naive(), at.time());
    let year = u32::try_from(date.year()).ok().filter(|y| *y <= 9999)?;
    // A leap second is kept as nanoseconds past 1e9 in second 59, and written as second 60.
    let (second, nanos) = match time.nanosecond().checked_sub(1_000_000_000) {
        Some(past) => (time.second() + 1, past),
        None => (time.second(), time.nanosecond()),
    };
    decimal(&mut out[0..4], year);
    decimal(&mut out[5..7], date.month());
    decimal(&mut out[8..10], date.day());
    decimal(&mut out[11..13], time.hour());
    decimal(&mut out[14..16], time.minute());
    decimal(&mut out[17..19], second);
    let digits = match nanos {
        0 => 0,
        n if n % 1_000_000 == 0 => 3,
        n if n % 1_000 == 0 => 6,
        _ => 9,
    };
    let mut len = 19;
    if digits > 0 {
        decimal(
            &mut out[20..20 + digits],
            nanos / 10u32.pow(9 - digits as u32),
        );
        len = 20 + digits;
    }
    out[len] = b'Z';
    Some(len + 1)
}

/// `value`'s last decimal digits, as many as `out` holds, zero-padded.
fn decimal(out: &mut [u8], mut value: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    #[derive(Serialize)]
    struct Written(#[serde(serialize_with = "rfc3339")] DateTime<Utc>);

    proptest! {
        /// Every instant of years 1–9999 (leap seconds too), and signed years, as chrono writes it.
        #[test]
        fn timestamps_are_written_as_chrono_writes_them(
            seconds in prop_oneof![
                4 => -62_135_596_800i64..253_402_300_800,
                1 => -8_000_000_000_000i64..8_000_000_000_000,
                1 => -62_200_000_000i64..-62_000_000_000,
                1 => 253_400_000_000i64..253_410_000_000,
            ],
            nanos in prop_oneof![Just(0u32), 0u32..1_000, (0u32..1_000_000).prop_map(|n| n * 1_000), 0u32..2_000_000_000],
        ) {
            let at = Utc.timestamp_opt(seconds, nanos).single();
            prop_assume!(at.is_some());
            let at = at.unwrap();
            prop_assert_eq!(
                serde_json::to_string(&Written(at)).unwrap(),
                serde_json::to_string(&at).unwrap()
            );
        }
    }
}
