//! Bounds per record (docs/contract/api.md, Tenancy), so no record's history, nor a read or
//! reconciliation of it, grows without end. Crossing one is a 409 saying what to do instead.

/// The most revisions an invoice has: a `revise` that would make revision 101 is refused.
pub const MAX_REVISIONS: i32 = 100;

/// The most payments matched to one invoice; the event of a new payment beyond it is refused.
pub const MAX_PAYMENTS_PER_INVOICE: usize = 1000;

/// The most events kept about one payment; a new event beyond it is refused.
pub const MAX_EVENTS_PER_PAYMENT: i32 = 100;

/// A bound a command would cross; nothing of it is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The invoice has [`MAX_REVISIONS`] revisions.
    Revisions,
    /// The invoice has [`MAX_PAYMENTS_PER_INVOICE`] payments matched to it.
    PaymentsPerInvoice,
    /// The payment has [`MAX_EVENTS_PER_PAYMENT`] events.
    EventsPerPayment,
}

impl Bound {
    /// The stable error code.
    pub fn code(self) -> &'static str {
        match self {
            Bound::Revisions => "revision_limit",
            Bound::PaymentsPerInvoice | Bound::EventsPerPayment => "limit_reached",
        }
    }

    /// What the caller should do instead.
    pub fn detail(self) -> String {
        match self {
            Bound::Revisions => format!(
                "an invoice has at most {MAX_REVISIONS} revisions and this one has them all; \
                 nothing was written. Submit it as it is, or cancel it (withdraw a draft) and \
                 create a new invoice with the content you want"
            ),
            Bound::PaymentsPerInvoice => format!(
                "an invoice has at most {MAX_PAYMENTS_PER_INVOICE} payments matched to it and \
                 this one has them all; the event was kept nowhere. Report further payments of \
                 this invoice as events of a payment it already has, or ask an approver"
            ),
            Bound::EventsPerPayment => format!(
                "a payment keeps at most {MAX_EVENTS_PER_PAYMENT} events and this one has them \
                 all; the event was kept nowhere. Report only changes of the payment's state, \
                 or ask an approver to resolve it"
            ),
        }
    }
}

/// The number of the revision a `revise` makes, or [`Bound::Revisions`] at [`MAX_REVISIONS`].
pub fn next_revision(count: i32) -> Result<i32, Bound> {
    if count >= MAX_REVISIONS {
        Err(Bound::Revisions)
    } else {
        Ok(count + 1)
    }
}

/// Whether an invoice with `matched` payments may take one more.
pub fn admit_payment(matched: usize, limit: usize) -> Result<(), Bound> {
    if matched >= limit {
        Err(Bound::PaymentsPerInvoice)
    } else {
        Ok(())
    }
}

/// Whether a payment with `events` events may keep one more.
pub fn admit_event(events: i32) -> Result<(), Bound> {
    if events >= MAX_EVENTS_PER_PAYMENT {
        Err(Bound::EventsPerPayment)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hundredth_revision_is_the_last() {
        assert_eq!(next_revision(1), Ok(2));
        assert_eq!(next_revision(99), Ok(100));
        assert_eq!(next_revision(100), Err(Bound::Revisions));
        assert_eq!(Bound::Revisions.code(), "revision_limit");
    }

    #[test]
    fn payments_and_events_stop_at_their_bound() {
        assert_eq!(admit_payment(999, MAX_PAYMENTS_PER_INVOICE), Ok(()));
        assert_eq!(
            admit_payment(1000, MAX_PAYMENTS_PER_INVOICE),
            Err(Bound::PaymentsPerInvoice)
        );
        assert_eq!(admit_event(99), Ok(()));
        assert_eq!(admit_event(100), Err(Bound::EventsPerPayment));
        assert_eq!(Bound::EventsPerPayment.code(), "limit_reached");
    }
}
