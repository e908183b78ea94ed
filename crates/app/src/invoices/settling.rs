//! What settlement does to an invoice (docs/contract/effects.md §4), under its row lock.

use super::chain::{EventInput, next_event, record_event};
use super::commands::current_revision;
use super::invalid;
use crate::audit::AuditActor;
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::payments::{effective_summary, set_standing};
use std::str::FromStr;
use tauros_domain::currency::Currency;
use tauros_domain::invoice::{Action, InvoiceState};
use tauros_domain::money::MinorAmount;
use tauros_domain::settlement::{self as rules, Candidate, InvoiceFacts, PaymentSummary};
use tauros_store::{InvoiceRow, PaymentRow, RevisionRow, Tx};

/// Allocates the locked invoice's payments and records the move of their sum, if any.
pub(crate) async fn reconcile_invoice(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    actor: AuditActor,
    cause: &str,
) -> AppResult<()> {
    let revision = current_revision(&mut *tx, invoice).await?;
    let facts = facts_of_revision(invoice, &revision)?;
    let mut payments = tx.payments_of_invoice(invoice.org_id, invoice.id).await?;
    // Each payment as a human's resolution, if any, says it counts.
    let summaries = payments
        .iter()
        .map(effective_summary)
        .collect::<AppResult<Vec<_>>>()?;
    let candidates: Vec<Candidate<'_>> = payments
        .iter()
        .zip(&summaries)
        .map(|(p, summary)| Candidate {
            source: &p.source,
            payment_id: &p.source_payment_id,
            summary,
        })
        .collect();
    let allocation = rules::allocate(&facts, &candidates);
    let at = now();
    for (payment, standing) in payments.iter_mut().zip(&allocation.standings) {
        let before = payment.clone();
        set_standing(payment, *standing, invoice.agent_id);
        if !same_standing(&before, payment) {
            payment.updated_at = at;
            tx.update_payment(payment).await?;
        }
    }
    // The running figures (docs/SETTLEMENT.md, "What one event costs").
    let counted: Vec<&PaymentSummary> = summaries.iter().collect();
    invoice.payment_count = i32::try_from(payments.len()).unwrap_or(i32::MAX);
    invoice.counted_minor = rules::counted_sum(&facts, &counted).map(|c| c.to_string());
    tx.set_settlement_figures(invoice).await?;
    move_amount(
        tx,
        invoice,
        &revision,
        &facts,
        allocation.amount_paid,
        actor,
        cause,
    )
    .await
}

/// One payment changed (`before` and `payment`: it for this invoice, then and now): reconciled
/// from the running figures, or by [`reconcile_invoice`] when the whole allocation is needed.
pub(crate) async fn reconcile_payment(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    before: Option<&PaymentSummary>,
    payment: Option<&mut PaymentRow>,
    actor: AuditActor,
    cause: &str,
) -> AppResult<()> {
    let Some(counted) = invoice
        .counted_minor
        .as_deref()
        .map(stored_amount)
        .transpose()?
    else {
        return reconcile_invoice(tx, invoice, actor, cause).await;
    };
    let revision = current_revision(&mut *tx, invoice).await?;
    let facts = facts_of_revision(invoice, &revision)?;
    let after = payment.as_deref().map(effective_summary).transpose()?;
    let Some(one) = rules::reconcile_one(&facts, counted, before, after.as_ref()) else {
        return reconcile_invoice(tx, invoice, actor, cause).await;
    };
    if let (Some(payment), Some(standing)) = (payment, one.standing) {
        let was = payment.clone();
        set_standing(payment, standing, invoice.agent_id);
        if !same_standing(&was, payment) {
            payment.updated_at = now();
            tx.update_payment(payment).await?;
        }
    }
    invoice.payment_count += i32::from(after.is_some()) - i32::from(before.is_some());
    invoice.counted_minor = Some(one.counted.to_string());
    tx.set_settlement_figures(invoice).await?;
    move_amount(
        tx,
        invoice,
        &revision,
        &facts,
        one.amount_paid,
        actor,
        cause,
    )
    .await
}

/// Records the move of the amount paid to `after`, if any, and `paid` on reaching the total.
async fn move_amount(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    revision: &RevisionRow,
    facts: &InvoiceFacts,
    after: MinorAmount,
    actor: AuditActor,
    cause: &str,
) -> AppResult<()> {
    let currency = facts.currency;
    let at = now();
    let before = stored_amount(&invoice.amount_paid_minor)?;
    let Some(step) =
        rules::invoice_move(invoice.state, facts.total, before, after).map_err(invalid)?
    else {
        return Ok(());
    };
    invoice.state = step.to;
    invoice.amount_paid_minor = after.to_string();
    invoice.updated_at = at;
    let note = format!(
        "paid {} of {} {currency}: {cause}",
        after.to_major_string(currency),
        facts.total.to_major_string(currency),
    );
    let event = next_event(
        invoice,
        &EventInput {
            action: step.action,
            from: Some(step.from),
            actor,
            revision: Some(revision),
            idempotency_key: None,
            note: Some(&note),
            settings: None,
        },
    );
    tx.update_invoice(invoice).await?;
    record_event(&mut *tx, &event).await?;
    // Reaching `paid` is an event of its own (`invoice.paid`), once per time it is reached.
    if step.to == InvoiceState::Paid && step.from != InvoiceState::Paid {
        rules::settle_paid(step.to).map_err(invalid)?;
        let note = format!(
            "paid in full: {} {currency}",
            facts.total.to_major_string(currency)
        );
        let paid = next_event(
            invoice,
            &EventInput {
                action: Action::Paid,
                from: Some(InvoiceState::Paid),
                actor,
                revision: Some(revision),
                idempotency_key: None,
                note: Some(&note),
                settings: None,
            },
        );
        tx.update_invoice(invoice).await?;
        record_event(&mut *tx, &paid).await?;
    }
    Ok(())
}

/// What settlement needs to know of the locked invoice: its currency, total and state.
pub(crate) async fn invoice_facts(
    tx: &mut dyn Tx,
    invoice: &InvoiceRow,
) -> AppResult<InvoiceFacts> {
    let revision = current_revision(&mut *tx, invoice).await?;
    facts_of_revision(invoice, &revision)
}

fn facts_of_revision(invoice: &InvoiceRow, revision: &RevisionRow) -> AppResult<InvoiceFacts> {
    Ok(InvoiceFacts {
        currency: Currency::from_str(&revision.currency)
            .map_err(|_| AppError::Internal("stored currency unreadable".into()))?,
        total: stored_amount(&revision.total_minor)?,
        state: invoice.state,
    })
}

/// In the issue's transaction: payments naming the new number are matched, and every payment
/// that arrived before the issue is allocated (a confirmed one moves it on, in its own event).
pub(super) async fn match_at_issue(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    actor: AuditActor,
) -> AppResult<()> {
    if let Some(number) = invoice.number.clone() {
        for mut payment in tx.lock_unmatched_by_number(invoice.org_id, &number).await? {
            payment.invoice_id = Some(invoice.id);
            payment.agent_id = invoice.agent_id;
            payment.updated_at = now();
            tx.update_payment(&payment).await?;
        }
    }
    reconcile_invoice(
        tx,
        invoice,
        actor,
        "payments reported before the invoice was issued",
    )
    .await
}

pub(crate) fn stored_amount(digits: &str) -> AppResult<MinorAmount> {
    MinorAmount::parse_minor(digits).map_err(|e| AppError::Internal(e.to_string()))
}

fn same_standing(a: &PaymentRow, b: &PaymentRow) -> bool {
    (a.status, a.unmatched_reason, &a.allocated_minor, a.agent_id)
        == (b.status, b.unmatched_reason, &b.allocated_minor, b.agent_id)
}
