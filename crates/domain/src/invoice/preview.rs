//! What an approver would notice about a valid draft (docs/contract/api.md, "Preview"). A
//! warning never refuses a body, so a preview's refusals are exactly a create's.

use super::InvoiceState;
use chrono::NaiveDate;
use uuid::Uuid;

/// A due date closer than this many days (today included) is `due_date_soon`: the invoice may
/// be overdue by the time it is approved, issued and delivered.
pub const DUE_SOON_DAYS: i64 = 7;

/// A due date more than this many days ahead is `due_date_far`.
pub const DUE_FAR_DAYS: i64 = 365;

/// The states of an open invoice (not final), one a duplicate would be billed beside.
pub const OPEN_STATES: [InvoiceState; 5] = [
    InvoiceState::Draft,
    InvoiceState::PendingApproval,
    InvoiceState::Approved,
    InvoiceState::Issued,
    InvoiceState::PartiallyPaid,
];

/// One thing an approver would notice; it never blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Stable: `due_date_soon`, `due_date_far`, `possible_duplicate`.
    pub code: &'static str,
    /// For a person (or a model): what and why.
    pub message: String,
    /// The request member concerned, when there is one.
    pub field: Option<&'static str>,
    /// The other invoice, for `possible_duplicate`.
    pub invoice_id: Option<Uuid>,
}

/// The facts a preview's warnings are judged on.
pub struct PreviewFacts<'a> {
    /// Today (UTC).
    pub today: NaiveDate,
    /// The draft's due date (already checked: today or later).
    pub due_date: NaiveDate,
    /// The caller's open invoices for the same customer, currency and total, newest first.
    pub duplicates: &'a [Uuid],
}

/// The warnings of a valid draft, in a stable order.
pub fn preview_warnings(facts: &PreviewFacts<'_>) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let days = (facts.due_date - facts.today).num_days();
    if days < DUE_SOON_DAYS {
        warnings.push(Warning {
            code: "due_date_soon",
            message: format!(
                "due_date {} is {days} day(s) from today (UTC): the invoice may be overdue before it is approved and issued",
                facts.due_date
            ),
            field: Some("due_date"),
            invoice_id: None,
        });
    } else if days > DUE_FAR_DAYS {
        warnings.push(Warning {
            code: "due_date_far",
            message: format!(
                "due_date {} is {days} days from today (UTC), more than {DUE_FAR_DAYS}: check the year",
                facts.due_date
            ),
            field: Some("due_date"),
            invoice_id: None,
        });
    }
    for id in facts.duplicates {
        warnings.push(Warning {
            code: "possible_duplicate",
            message: format!(
                "your open invoice {id} bills the same customer the same total in the same currency; GET /v1/invoices/{id} before proposing another"
            ),
            field: None,
            invoice_id: Some(*id),
        });
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    fn codes(today: &str, due: &str, duplicates: &[Uuid]) -> Vec<&'static str> {
        preview_warnings(&PreviewFacts {
            today: day(today),
            due_date: day(due),
            duplicates,
        })
        .into_iter()
        .map(|w| w.code)
        .collect()
    }

    #[test]
    fn due_dates_between_the_thresholds_warn_of_nothing() {
        assert!(codes("2030-01-01", "2030-01-08", &[]).is_empty());
        assert!(codes("2030-01-01", "2031-01-01", &[]).is_empty());
    }

    #[test]
    fn a_due_date_too_close_or_too_far_warns() {
        assert_eq!(codes("2030-01-01", "2030-01-01", &[]), ["due_date_soon"]);
        assert_eq!(codes("2030-01-01", "2030-01-07", &[]), ["due_date_soon"]);
        assert_eq!(codes("2030-01-01", "2031-01-02", &[]), ["due_date_far"]);
    }

    #[test]
    fn every_duplicate_is_named() {
        let ids = [Uuid::from_u128(1), Uuid::from_u128(2)];
        assert_eq!(
            codes("2030-01-01", "2030-02-01", &ids),
            ["possible_duplicate", "possible_duplicate"]
        );
    }
}
