//! A payment as stored and as the settlement rules see it: facts, folded events, standing.

use crate::error::{AppError, AppResult};
use std::str::FromStr;
use tauros_domain::currency::Currency;
use tauros_domain::money::MinorAmount;
use tauros_domain::resolution::{Resolution, effective};
use tauros_domain::settlement::{InvoiceRef, PaymentFacts, PaymentSummary, Standing};
use tauros_store::PaymentRow;
use uuid::Uuid;

pub(crate) fn set_summary(row: &mut PaymentRow, s: &PaymentSummary) {
    row.amount_minor = s.facts.amount.to_string();
    row.currency = s.facts.currency.code().to_owned();
    row.invoice_ref_id = invoice_ref_id(&s.facts.invoice);
    row.invoice_ref_number = invoice_ref_number(&s.facts.invoice);
    row.first_at = s.first_at;
    row.first_event_id = s.first_event_id.clone();
    row.state = s.state;
    row.conflict = s.conflict;
    row.confirmed_at = s.confirmed_at;
}

/// Writes a reconciliation's answer onto the payment; `agent_id` is whose humans see it.
pub(crate) fn set_standing(row: &mut PaymentRow, standing: Standing, agent_id: Uuid) {
    row.status = standing.status;
    row.unmatched_reason = standing.unmatched;
    row.allocated_minor = standing.allocated.to_string();
    row.agent_id = agent_id;
}

/// The payment as reconciliation counts it: its events folded, with the resolution in force.
pub(crate) fn effective_summary(row: &PaymentRow) -> AppResult<PaymentSummary> {
    Ok(effective(summary_of(row)?, resolution_of(row)?))
}

/// The resolution in force on the payment, as stored.
pub(crate) fn resolution_of(row: &PaymentRow) -> AppResult<Option<Resolution>> {
    let amount = row
        .resolved_amount_minor
        .as_deref()
        .map(MinorAmount::parse_minor)
        .transpose()
        .map_err(|e| AppError::Internal(e.to_string()))?;
    match row.resolution {
        None => Ok(None),
        Some(action) => Resolution::of(action, amount)
            .map(Some)
            .ok_or_else(|| AppError::Internal("stored resolution without its amount".into())),
    }
}

/// The payment's events folded, as stored.
pub(crate) fn summary_of(row: &PaymentRow) -> AppResult<PaymentSummary> {
    Ok(PaymentSummary {
        facts: facts_of(row)?,
        first_at: row.first_at,
        first_event_id: row.first_event_id.clone(),
        state: row.state,
        conflict: row.conflict,
        confirmed_at: row.confirmed_at,
    })
}

pub(crate) fn facts_of(row: &PaymentRow) -> AppResult<PaymentFacts> {
    Ok(PaymentFacts {
        amount: MinorAmount::parse_minor(&row.amount_minor)
            .map_err(|e| AppError::Internal(e.to_string()))?,
        currency: currency(&row.currency)?,
        invoice: stored_ref(row.invoice_ref_id, row.invoice_ref_number.as_deref())?,
    })
}

pub(crate) fn stored_ref(id: Option<Uuid>, number: Option<&str>) -> AppResult<InvoiceRef> {
    match (id, number) {
        (Some(id), None) => Ok(InvoiceRef::Id(id)),
        (None, Some(number)) => Ok(InvoiceRef::Number(number.to_owned())),
        _ => Err(AppError::Internal(
            "stored invoice reference unreadable".into(),
        )),
    }
}

pub(crate) fn invoice_ref_id(r: &InvoiceRef) -> Option<Uuid> {
    match r {
        InvoiceRef::Id(id) => Some(*id),
        InvoiceRef::Number(_) => None,
    }
}

pub(crate) fn invoice_ref_number(r: &InvoiceRef) -> Option<String> {
    match r {
        InvoiceRef::Id(_) => None,
        InvoiceRef::Number(n) => Some(n.clone()),
    }
}

pub(crate) fn currency(code: &str) -> AppResult<Currency> {
    Currency::from_str(code).map_err(|_| AppError::Internal("stored currency unreadable".into()))
}
