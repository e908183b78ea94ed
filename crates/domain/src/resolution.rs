//! Resolving a payment by hand (docs/contract/effects.md §6, "Payments"; where the contract is
//! silent, docs/SETTLEMENT.md, "Resolving a payment"): what settlement cannot decide, an
//! approver does. Reconciliation then reads the payment through [`effective`].

use std::fmt;

use uuid::Uuid;

use super::currency::Currency;
use super::error::{FieldError, required};
use super::fingerprint::fingerprint;
use super::input::{AmountInput, AmountMinorInput};
use super::money::MinorAmount;
use super::settlement::{
    InvoiceFacts, PaymentState, PaymentStatus, PaymentSummary, is_issued, positive,
};
use super::text::checked_multiline_text;

/// The longest `reason`.
pub const MAX_REASON_CHARS: usize = 1000;

/// What an approver does with a payment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResolveAction {
    /// Count a contradicted payment at a stated amount.
    Accept,
    /// Count an unmatched payment toward an invoice.
    Allocate,
    /// Count nothing of the payment.
    Void,
}

impl ResolveAction {
    /// Every action.
    pub const ALL: [ResolveAction; 3] = [
        ResolveAction::Accept,
        ResolveAction::Allocate,
        ResolveAction::Void,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolveAction::Accept => "accept",
            ResolveAction::Allocate => "allocate",
            ResolveAction::Void => "void",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<ResolveAction> {
        ResolveAction::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The payment statuses the action resolves.
    pub fn resolves(self) -> &'static [PaymentStatus] {
        match self {
            ResolveAction::Accept => &[PaymentStatus::Conflict],
            ResolveAction::Allocate => &[PaymentStatus::Unmatched],
            ResolveAction::Void => &[
                PaymentStatus::Pending,
                PaymentStatus::Applied,
                PaymentStatus::Overpaid,
                PaymentStatus::Unmatched,
                PaymentStatus::Conflict,
            ],
        }
    }
}

impl fmt::Display for ResolveAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The resolution in force on a payment, as reconciliation reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Counts at this amount, whatever its events disagree about.
    Accepted(MinorAmount),
    /// Counts at this amount toward the invoice it was allocated to.
    Allocated(MinorAmount),
    /// Counts nothing.
    Voided,
}

impl Resolution {
    /// The resolution an action with its checked amount puts in force.
    pub fn of(action: ResolveAction, amount: Option<MinorAmount>) -> Option<Resolution> {
        match (action, amount) {
            (ResolveAction::Accept, Some(a)) => Some(Resolution::Accepted(a)),
            (ResolveAction::Allocate, Some(a)) => Some(Resolution::Allocated(a)),
            (ResolveAction::Void, _) => Some(Resolution::Voided),
            _ => None,
        }
    }

    pub fn action(self) -> ResolveAction {
        match self {
            Resolution::Accepted(_) => ResolveAction::Accept,
            Resolution::Allocated(_) => ResolveAction::Allocate,
            Resolution::Voided => ResolveAction::Void,
        }
    }

    pub fn amount(self) -> Option<MinorAmount> {
        match self {
            Resolution::Accepted(a) | Resolution::Allocated(a) => Some(a),
            Resolution::Voided => None,
        }
    }
}

/// The payment as reconciliation counts it, with the resolution in force. A resolution stands:
/// a later contradiction never puts an accepted or allocated payment back in `conflict` (a human
/// judged it), though a reversal still takes it out; a voided one counts as failed.
pub fn effective(mut summary: PaymentSummary, resolution: Option<Resolution>) -> PaymentSummary {
    match resolution {
        None => {}
        Some(Resolution::Accepted(amount) | Resolution::Allocated(amount)) => {
            summary.conflict = false;
            summary.facts.amount = amount;
        }
        Some(Resolution::Voided) => {
            summary.conflict = false;
            summary.state = PaymentState::Failed;
            summary.confirmed_at = None;
        }
    }
    summary
}

/// A resolution as sent, every member optional so a missing one is reported with the rest.
#[derive(Clone, Debug, Default)]
pub struct ResolveInput {
    pub action: Option<String>,
    pub invoice_id: Option<Uuid>,
    pub amount: Option<AmountInput>,
    pub amount_minor: Option<AmountMinorInput>,
    pub reason: Option<String>,
}

/// A resolution request that passed every rule that needs no database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidResolve {
    pub action: ResolveAction,
    /// `allocate`: the invoice.
    pub invoice_id: Option<Uuid>,
    /// `accept` (always) and `allocate` (when stated): in the payment's currency.
    pub amount: Option<MinorAmount>,
    pub reason: String,
    /// What a replay under the same key must match: the normalized request and its payment.
    pub fingerprint: String,
}

/// Checks a resolution of a payment in `currency`; on failure returns every offending field.
pub fn validate_resolve(
    input: &ResolveInput,
    payment_id: Uuid,
    currency: Currency,
) -> Result<ValidResolve, Vec<FieldError>> {
    let mut errors = Vec::new();
    let action = required("action", input.action.as_deref(), &mut errors).and_then(|a| {
        let found = ResolveAction::parse(a);
        if found.is_none() {
            errors.push(FieldError::plain(
                "action",
                "invalid_value",
                "action must be one of accept (a contradicted payment, at a stated amount), \
                 allocate (an unmatched payment, to an invoice) or void",
            ));
        }
        found
    });
    let reason = required("reason", input.reason.as_deref(), &mut errors)
        .map(|r| checked_multiline_text("reason", r, MAX_REASON_CHARS, &mut errors));
    let amount = match (&input.amount, &input.amount_minor) {
        (Some(major), None) => positive("amount", major.0.to_minor(currency), NOTHING, &mut errors),
        (None, Some(minor)) => positive("amount_minor", minor.0.to_minor(), NOTHING, &mut errors),
        (None, None) => None,
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
    let amount_sent = input.amount.is_some() || input.amount_minor.is_some();
    match action {
        Some(ResolveAction::Accept) => {
            if !amount_sent {
                errors.push(FieldError::plain(
                    "amount",
                    "required",
                    format!(
                        "accept counts the payment at the amount you state: send `amount` (a \
                         decimal string in {currency}, such as \"400.00\") or `amount_minor`"
                    ),
                ));
            }
            if input.invoice_id.is_some() {
                errors.push(FieldError::plain(
                    "invoice_id",
                    "unknown_field",
                    "accept keeps the payment on the invoice it names; leave `invoice_id` out \
                     (to count it toward another invoice, accept it, then allocate it)",
                ));
            }
        }
        Some(ResolveAction::Allocate) if input.invoice_id.is_none() => {
            errors.push(FieldError::plain(
                "invoice_id",
                "required",
                "allocate needs the invoice the payment is for: send `invoice_id`",
            ));
        }
        Some(ResolveAction::Void) => {
            if amount_sent {
                errors.push(FieldError::plain(
                    "amount",
                    "unknown_field",
                    "void counts nothing of the payment; leave `amount` out",
                ));
            }
            if input.invoice_id.is_some() {
                errors.push(FieldError::plain(
                    "invoice_id",
                    "unknown_field",
                    "void counts the payment toward no invoice; leave `invoice_id` out",
                ));
            }
        }
        Some(ResolveAction::Allocate) | None => {}
    }
    match (action, reason) {
        (Some(action), Some(reason)) if errors.is_empty() => {
            let fingerprint = fingerprint(&[
                &payment_id.to_string(),
                action.as_str(),
                &input.invoice_id.map(|i| i.to_string()).unwrap_or_default(),
                &amount.map(|a| a.to_string()).unwrap_or_default(),
                &reason,
            ]);
            Ok(ValidResolve {
                action,
                invoice_id: input.invoice_id,
                amount,
                reason,
                fingerprint,
            })
        }
        _ => Err(errors),
    }
}

/// What a resolution's zero amount is told.
const NOTHING: &str = "to count nothing, void the payment";

/// Why a resolution cannot apply to the payment as it is now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct NotResolvable {
    pub detail: String,
}

/// Whether `action` may resolve a payment with `status` (read under its lock).
pub fn check_status(action: ResolveAction, status: PaymentStatus) -> Result<(), NotResolvable> {
    if action.resolves().contains(&status) {
        return Ok(());
    }
    let wants: Vec<&str> = action.resolves().iter().map(|s| s.as_str()).collect();
    let hint = match (action, status) {
        (_, PaymentStatus::Failed) => {
            "it counts toward nothing already (failed at the source, or voided)"
        }
        (ResolveAction::Allocate, PaymentStatus::Conflict) => {
            "its events disagree: accept it at the amount you know first, then allocate it if it \
             is still unmatched"
        }
        _ => "GET the payment to see where it stands",
    };
    Err(NotResolvable {
        detail: format!(
            "`action` {action} resolves a payment that is {}; this one is `{status}`: {hint}",
            wants.join(" or "),
            status = status.as_str(),
        ),
    })
}

/// The amount an allocation counts, checked under the locks: it never converts money nor
/// overpays (at most the payment's amount and the open balance; `paid` is what is covered now).
pub fn check_allocation(
    payment_amount: MinorAmount,
    payment_currency: Currency,
    invoice: &InvoiceFacts,
    paid: MinorAmount,
    stated: Option<MinorAmount>,
) -> Result<MinorAmount, FieldError> {
    if invoice.currency != payment_currency {
        return Err(FieldError::plain(
            "invoice_id",
            "wrong_currency",
            format!(
                "that invoice is in {}, the payment in {payment_currency}: Tauros never converts; \
                 allocate it to an invoice in {payment_currency}, or void it and settle the \
                 difference with the customer",
                invoice.currency
            ),
        ));
    }
    if !is_issued(invoice.state) || invoice.state == crate::invoice::InvoiceState::Paid {
        return Err(FieldError::plain(
            "invoice_id",
            "invoice_not_payable",
            format!(
                "that invoice is `{}`: a payment is allocated to an invoice that is issued or \
                 partially paid",
                invoice.state
            ),
        ));
    }
    let amount = stated.unwrap_or(payment_amount);
    let field = if stated.is_some() {
        "amount"
    } else {
        "invoice_id"
    };
    if amount > payment_amount {
        return Err(FieldError::plain(
            "amount",
            "exceeds_payment",
            format!(
                "`amount` is more than the payment ({}): allocate at most what was paid",
                payment_amount.to_major_string(payment_currency)
            ),
        ));
    }
    let balance = super::settlement::balance(invoice.total, paid);
    if amount > balance {
        return Err(FieldError::plain(
            field,
            "over_allocation",
            format!(
                "the invoice's open balance is {}; allocate at most that (send `amount`), and \
                 refund the rest with the customer",
                balance.to_major_string(payment_currency)
            ),
        ));
    }
    Ok(amount)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{MajorAmountInput, MinorAmountInput};
    use crate::invoice::InvoiceState;

    fn eur() -> Currency {
        "EUR".parse().unwrap()
    }

    fn minor(n: u64) -> MinorAmount {
        MinorAmount::parse_minor(&n.to_string()).unwrap()
    }

    fn codes(r: Result<ValidResolve, Vec<FieldError>>) -> Vec<(String, String)> {
        r.err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.field, e.code.to_owned()))
            .collect()
    }

    #[test]
    fn each_action_takes_its_members() {
        let id = Uuid::now_v7();
        let accept = ResolveInput {
            action: Some("accept".into()),
            amount: Some(AmountInput(MajorAmountInput("400.00".into()))),
            reason: Some("bank confirmed 400".into()),
            ..ResolveInput::default()
        };
        let ok = validate_resolve(&accept, id, eur()).unwrap();
        assert_eq!(ok.amount, Some(minor(40000)));
        let mut no_amount = accept;
        no_amount.amount = None;
        assert_eq!(
            codes(validate_resolve(&no_amount, id, eur())),
            [("amount".to_owned(), "required".to_owned())]
        );
        let allocate = ResolveInput {
            action: Some("allocate".into()),
            reason: Some("customer typo".into()),
            ..ResolveInput::default()
        };
        assert_eq!(
            codes(validate_resolve(&allocate, id, eur())),
            [("invoice_id".to_owned(), "required".to_owned())]
        );
        let void = ResolveInput {
            action: Some("void".into()),
            amount_minor: Some(AmountMinorInput(MinorAmountInput::Integer(5))),
            reason: Some("duplicate".into()),
            ..ResolveInput::default()
        };
        assert_eq!(
            codes(validate_resolve(&void, id, eur())),
            [("amount".to_owned(), "unknown_field".to_owned())]
        );
        let nothing = ResolveInput::default();
        assert_eq!(
            codes(validate_resolve(&nothing, id, eur())),
            [
                ("action".to_owned(), "required".to_owned()),
                ("reason".to_owned(), "required".to_owned())
            ]
        );
    }

    #[test]
    fn the_fingerprint_covers_the_payment_and_the_request() {
        let input = ResolveInput {
            action: Some("void".into()),
            reason: Some("duplicate".into()),
            ..ResolveInput::default()
        };
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let fa = validate_resolve(&input, a, eur()).unwrap().fingerprint;
        assert_eq!(fa, validate_resolve(&input, a, eur()).unwrap().fingerprint);
        assert_ne!(fa, validate_resolve(&input, b, eur()).unwrap().fingerprint);
    }

    #[test]
    fn allocation_never_converts_nor_overpays() {
        let invoice = InvoiceFacts {
            currency: eur(),
            total: minor(100_000),
            state: InvoiceState::PartiallyPaid,
        };
        let paid = minor(60_000);
        assert_eq!(
            check_allocation(minor(40_000), eur(), &invoice, paid, None),
            Ok(minor(40_000))
        );
        let code = |r: Result<MinorAmount, FieldError>| r.map_err(|e| (e.field, e.code));
        assert_eq!(
            code(check_allocation(minor(50_000), eur(), &invoice, paid, None)),
            Err(("invoice_id".to_owned(), "over_allocation"))
        );
        assert_eq!(
            code(check_allocation(
                minor(50_000),
                eur(),
                &invoice,
                paid,
                Some(minor(60_000))
            )),
            Err(("amount".to_owned(), "exceeds_payment"))
        );
        assert_eq!(
            code(check_allocation(
                minor(50_000),
                "USD".parse().unwrap(),
                &invoice,
                paid,
                None
            )),
            Err(("invoice_id".to_owned(), "wrong_currency"))
        );
        let paid_off = InvoiceFacts {
            state: InvoiceState::Paid,
            ..invoice
        };
        assert_eq!(
            code(check_allocation(
                minor(1),
                eur(),
                &paid_off,
                minor(100_000),
                None
            )),
            Err(("invoice_id".to_owned(), "invoice_not_payable"))
        );
    }

    #[test]
    fn a_voided_payment_counts_as_failed_even_in_conflict() {
        use crate::settlement::{InvoiceRef, Observation, PaymentFacts, PaymentSummary};
        let at = chrono::DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .to_utc();
        let facts = PaymentFacts {
            amount: minor(100),
            currency: eur(),
            invoice: InvoiceRef::Id(Uuid::now_v7()),
        };
        let observation = Observation {
            event_id: "e".into(),
            state: PaymentState::Confirmed,
            facts,
            occurred_at: at,
        };
        let mut summary = PaymentSummary::of(&observation);
        summary.conflict = true;
        let voided = effective(summary.clone(), Some(Resolution::Voided));
        assert!(!voided.conflict);
        assert_eq!(voided.state, PaymentState::Failed);
        assert!(!voided.reversed());
        let accepted = effective(summary, Some(Resolution::Accepted(minor(70))));
        assert!(!accepted.conflict);
        assert_eq!(accepted.facts.amount, minor(70));
    }

    #[test]
    fn each_action_resolves_its_statuses() {
        assert!(check_status(ResolveAction::Accept, PaymentStatus::Conflict).is_ok());
        assert!(check_status(ResolveAction::Accept, PaymentStatus::Applied).is_err());
        assert!(check_status(ResolveAction::Allocate, PaymentStatus::Unmatched).is_ok());
        assert!(check_status(ResolveAction::Allocate, PaymentStatus::Conflict).is_err());
        assert!(check_status(ResolveAction::Void, PaymentStatus::Applied).is_ok());
        assert!(check_status(ResolveAction::Void, PaymentStatus::Failed).is_err());
    }
}
