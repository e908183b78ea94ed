//! The short text a tool answers beside its structured content: what happened, the ids the next
//! step needs, and what to do next (docs/MCP.md, "Answers and errors").

use super::answers::{DestinationCommand, InvoiceAnswer};
use crate::http::customers::CustomerList;
use crate::http::destinations::{DestinationList, DestinationResponse};
use crate::http::invoices::types::{CommandResponse, InvoiceList};
use crate::http::problem::Problem;
use crate::http::sessions::MeResponse;
use crate::http::settlement::SettlementEventRecorded;
use std::fmt::Write;
use tauros_app::{InvoiceView, PreviewView};
use tauros_domain::invoice::{DecisionKind, InvoiceState};

/// What a tool's answer says in a few lines of text.
pub(super) trait Summary {
    fn summary(&self) -> String;
}

fn more(next_cursor: Option<&str>, argument: &str) -> String {
    next_cursor.map_or_else(String::new, |c| {
        format!("\nMore: pass {argument} \"{c}\" for the next page.")
    })
}

fn replayed(replayed: bool) -> &'static str {
    if replayed {
        " (replayed: nothing new was written)"
    } else {
        ""
    }
}

/// One line naming an invoice and its figures.
fn invoice_line(invoice: &InvoiceView) -> String {
    let revision = &invoice.current_revision;
    let mut line = format!("invoice {} {}", invoice.id, invoice.state.as_str());
    if let Some(number) = &invoice.number {
        let _ = write!(line, " {number}");
        if invoice.number_void {
            line.push_str(" (void)");
        }
    }
    let _ = write!(
        line,
        ", {} {}, customer {}, due {}, revision {}",
        revision.sealed.total,
        revision.sealed.currency,
        revision.sealed.customer_id,
        revision.sealed.due_date,
        revision.number
    );
    if matches!(
        invoice.state,
        InvoiceState::Issued | InvoiceState::PartiallyPaid
    ) {
        let _ = write!(line, ", balance {}", invoice.balance);
        if invoice.overdue {
            line.push_str(" overdue");
        }
    }
    if let Some(issuing) = &invoice.issuing {
        let _ = write!(line, ", issuing {}", issuing.status.as_str());
    }
    line
}

/// What an agent does next with an invoice in this state.
fn next_step(invoice: &InvoiceView) -> String {
    match invoice.state {
        InvoiceState::Draft => match &invoice.decision {
            Some(d) if d.current && d.decision == DecisionKind::ChangesRequested => format!(
                "An approver asked for changes: \"{}\". Next: revise_invoice with this id, \
                 then submit_invoice.",
                d.reason.as_deref().unwrap_or_default()
            ),
            _ => "Next: submit_invoice with this id puts it in the approvers' inbox.".to_owned(),
        },
        InvoiceState::PendingApproval => "Next: wait for a human approver (minutes to days); \
             check with get_invoice now and then, not in a loop."
            .to_owned(),
        InvoiceState::Approved => "Approved: Tauros issues it and gives it its number \
             (INV-…); nothing for you to do."
            .to_owned(),
        InvoiceState::Issued | InvoiceState::PartiallyPaid => "Issued: payers quote its \
             number; payments are recorded by settlement feeds, not by you."
            .to_owned(),
        InvoiceState::Paid => "Paid in full; nothing to do.".to_owned(),
        InvoiceState::Rejected => format!(
            "Rejected for good{}; propose a new invoice if the work is still owed.",
            invoice
                .decision
                .as_ref()
                .and_then(|d| d.reason.as_deref())
                .map(|r| format!(": \"{r}\""))
                .unwrap_or_default()
        ),
        InvoiceState::Cancelled => "Cancelled for good.".to_owned(),
    }
}

impl Summary for CommandResponse {
    fn summary(&self) -> String {
        format!(
            "{}{}.\n{}",
            capitalised(&invoice_line(&self.invoice)),
            replayed(self.replayed),
            next_step(&self.invoice)
        )
    }
}

impl Summary for InvoiceAnswer {
    fn summary(&self) -> String {
        let invoice = &self.invoice;
        let mut text = format!("{}.", capitalised(&invoice_line(invoice)));
        let revision = &invoice.current_revision;
        for (i, line) in revision.sealed.lines.iter().enumerate() {
            let _ = write!(
                text,
                "\nLine {}: {} × {} = {} {}",
                i + 1,
                line.quantity,
                line.description,
                line.amount,
                revision.sealed.currency
            );
        }
        if let Some(d) = &invoice.decision {
            let _ = write!(
                text,
                "\nLatest decision: {} on revision {}{}{}.",
                d.decision.as_str(),
                d.revision_id,
                if d.current {
                    ""
                } else {
                    " (an older revision)"
                },
                d.reason
                    .as_deref()
                    .map(|r| format!(", reason \"{r}\""))
                    .unwrap_or_default()
            );
        }
        match &self.history {
            Some(h) => {
                let _ = write!(
                    text,
                    "\nHistory: {}, {}, {}.{}",
                    plural(h.revisions.len(), "revision"),
                    plural(h.decisions.len(), "decision"),
                    plural(h.events.len(), "event"),
                    more(h.events_next_cursor.as_deref(), "events_cursor")
                        .replace("next page", "next 100 events")
                );
            }
            None => text.push_str("\nHistory (revisions, decisions, events): history: true."),
        }
        let _ = write!(text, "\n{}", next_step(invoice));
        text
    }
}

impl Summary for InvoiceList {
    fn summary(&self) -> String {
        let mut text = count(self.items.len(), "invoice");
        for invoice in &self.items {
            let _ = write!(text, "\n- {}", invoice_line(invoice));
            if let Some(d) = &invoice.decision
                && d.current
                && d.decision == DecisionKind::ChangesRequested
            {
                text.push_str(", changes requested");
            }
        }
        text + &more(self.next_cursor.as_deref(), "cursor")
    }
}

impl Summary for PreviewView {
    fn summary(&self) -> String {
        let mut text = format!(
            "Valid; nothing was written. A create now seals {} {} over {} line(s), due {}.",
            self.sealed.total,
            self.sealed.currency,
            self.sealed.lines.len(),
            self.sealed.due_date,
        );
        for w in &self.warnings {
            let _ = write!(text, "\nWarning {}: {}", w.code, w.message);
        }
        text + "\nNext: create_invoice_draft with the same arguments and an idempotency_key."
    }
}

impl Summary for MeResponse {
    fn summary(&self) -> String {
        let capabilities = self
            .capabilities
            .iter()
            .flatten()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "You are {} \"{}\" (id {}) of organisation {}; your key may: {}.",
            self.kind,
            self.name.as_deref().unwrap_or_default(),
            self.id,
            self.org_id,
            if capabilities.is_empty() {
                "nothing"
            } else {
                &capabilities
            }
        )
    }
}

impl Summary for CustomerList {
    fn summary(&self) -> String {
        let mut text = count(self.items.len(), "customer");
        for c in &self.items {
            let _ = write!(text, "\n- customer {} \"{}\" <{}>", c.id, c.name, c.email);
        }
        text + &more(self.next_cursor.as_deref(), "cursor")
    }
}

fn destination_line(d: &DestinationResponse) -> String {
    format!(
        "destination {} \"{}\" {} on {} {}, {}",
        d.id, d.label, d.currency, d.network, d.address, d.state
    )
}

impl Summary for DestinationList {
    fn summary(&self) -> String {
        let mut text = count(self.items.len(), "payment destination");
        for d in &self.items {
            let _ = write!(text, "\n- {}", destination_line(d));
        }
        text + &more(self.next_cursor.as_deref(), "cursor")
    }
}

impl Summary for DestinationResponse {
    fn summary(&self) -> String {
        format!("{}.", capitalised(&destination_line(self)))
    }
}

impl Summary for DestinationCommand {
    fn summary(&self) -> String {
        format!(
            "{}{}.",
            capitalised(&destination_line(&self.payment_destination)),
            replayed(self.replayed)
        )
    }
}

impl Summary for SettlementEventRecorded {
    fn summary(&self) -> String {
        let p = &self.payment;
        let mut text = format!(
            "Recorded{}: payment {} {}, {} {}, {}.",
            replayed(self.replayed),
            p.payment_id,
            p.state,
            p.amount,
            p.currency,
            p.status
        );
        match &self.invoice {
            Some(i) => {
                let name = i.number.clone().unwrap_or_else(|| i.id.to_string());
                let _ = write!(text, " Invoice {name} is {}.", i.state.as_str());
            }
            None => text.push_str(" No invoice matched: it is kept for a human."),
        }
        if let Some(reason) = p.unmatched_reason {
            let _ = write!(text, " Not applied: {reason}.");
        }
        text
    }
}

/// A refusal: status and code, then every field error one per line (their details say what to
/// send instead, so the problem's `detail` is not repeated) or else the detail; then the extra
/// members that name something (`invoice_id`, `id_kind`, `from`, `action`).
pub(super) fn refusal(problem: &Problem) -> String {
    let mut text = format!("Refused: {} {}", problem.status, problem.code);
    if problem.errors.is_empty() {
        let _ = write!(text, ": {}", problem.detail);
    } else {
        let _ = write!(
            text,
            ", {}; fix them all:",
            plural(problem.errors.len(), "problem")
        );
    }
    for e in &problem.errors {
        let _ = write!(text, "\n- {} ({}): {}", e.field, e.code, e.detail);
    }
    for (name, value) in &problem.extra {
        if let Some(value) = value.as_str().filter(|_| name != "field") {
            let _ = write!(text, "\n{name}: {value}");
        }
    }
    text
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn count(n: usize, what: &str) -> String {
    match n {
        0 => format!("No {what}s."),
        1 => format!("1 {what}:"),
        n => format!("{n} {what}s:"),
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
