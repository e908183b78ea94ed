//! What a webhook delivers: event types, an endpoint's subscription, and the body of one event.
//!
//! An event is about one subject. Today every subject is an invoice (its audit events); a new
//! subject (a payment, a credit note) is a variant of [`EventType`] and of [`Event`], with its
//! names and its body here: subscriptions, deliveries, retries and resends take any event.

use crate::invoice::{Action, InvoiceState};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;

/// The type of one event, named on the wire as `<subject>.<what happened>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// An invoice command recorded in the invoice's audit chain.
    Invoice(Action),
}

impl EventType {
    /// Every event type, in the order endpoints list them.
    pub fn all() -> Vec<EventType> {
        Action::ALL.into_iter().map(EventType::Invoice).collect()
    }

    /// Every event type's name, in [`EventType::all`]'s order.
    pub fn names() -> Vec<&'static str> {
        EventType::all().into_iter().map(EventType::name).collect()
    }

    /// The name endpoints subscribe to and deliveries carry; a new `Action` fails to compile.
    pub fn name(self) -> &'static str {
        match self {
            EventType::Invoice(action) => match action {
                Action::CreateDraft => "invoice.created",
                Action::Revise => "invoice.revised",
                Action::Submit => "invoice.submitted",
                Action::Withdraw => "invoice.withdrawn",
                Action::Approve => "invoice.approved",
                Action::Reject => "invoice.rejected",
                Action::RequestChanges => "invoice.changes_requested",
                Action::Cancel => "invoice.cancelled",
                Action::Issue => "invoice.issued",
                Action::IssueBlocked => "invoice.issue_blocked",
                Action::IssueRejected => "invoice.issue_rejected",
                Action::IssueConflict => "invoice.issue_conflict",
                Action::IssueNeedsReview => "invoice.issue_needs_review",
                Action::PaymentApplied => "invoice.payment_applied",
                Action::PaymentReversed => "invoice.payment_reversed",
                Action::Paid => "invoice.paid",
            },
        }
    }

    /// The event type `name` names, if this build knows it.
    pub fn parse(name: &str) -> Option<EventType> {
        EventType::all().into_iter().find(|t| t.name() == name)
    }
}

/// The event types an endpoint receives, each once, in [`EventType::all`]'s order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription(Vec<EventType>);

impl Subscription {
    /// Whether an event of `event_type` is delivered.
    pub fn includes(&self, event_type: EventType) -> bool {
        self.0.contains(&event_type)
    }

    /// The event type names.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|t| t.name()).collect()
    }

    /// The stored form: the names, comma-separated.
    pub fn to_stored(&self) -> String {
        self.names().join(",")
    }

    /// Reads the stored form; names this build does not know are skipped.
    pub fn from_stored(stored: &str) -> Subscription {
        Subscription::of(stored.split(',').filter_map(EventType::parse))
    }

    pub(super) fn of(chosen: impl Iterator<Item = EventType>) -> Subscription {
        let chosen: Vec<EventType> = chosen.collect();
        Subscription(
            EventType::all()
                .into_iter()
                .filter(|t| chosen.contains(t))
                .collect(),
        )
    }
}

/// One event as its deliveries send it, read from its subject's immutable record: every
/// attempt of every cycle has the same body.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    Invoice(EventFacts<'a>),
}

impl Event<'_> {
    /// The `webhook-id` of every attempt.
    pub fn id(&self) -> Uuid {
        match self {
            Event::Invoice(facts) => facts.event_id,
        }
    }

    pub fn event_type(&self) -> EventType {
        match self {
            Event::Invoice(facts) => EventType::Invoice(facts.action),
        }
    }
}

/// An invoice event: one link of the invoice's audit chain.
#[derive(Clone, Copy, Debug)]
pub struct EventFacts<'a> {
    pub event_id: Uuid,
    pub invoice_id: Uuid,
    pub action: Action,
    /// 1, 2, … in the invoice's event chain.
    pub seq: i32,
    /// `None` for the creating event.
    pub from_state: Option<InvoiceState>,
    pub to_state: InvoiceState,
    pub revision_id: Option<Uuid>,
    pub payload_hash: Option<&'a str>,
    pub occurred_at: DateTime<Utc>,
}

#[derive(Serialize)]
struct Body<'a> {
    r#type: &'static str,
    timestamp: String,
    data: Data<'a>,
}

/// What `data` holds: the subject, by its name, and the event's place in its chain.
#[derive(Serialize)]
#[serde(untagged)]
enum Data<'a> {
    Invoice {
        invoice: InvoiceAtEvent<'a>,
        event: EventRef,
    },
}

#[derive(Serialize)]
struct InvoiceAtEvent<'a> {
    id: Uuid,
    state: &'static str,
    previous_state: Option<&'static str>,
    revision_id: Option<Uuid>,
    payload_hash: Option<&'a str>,
}

#[derive(Serialize)]
struct EventRef {
    id: Uuid,
    seq: i32,
}

/// The minified, "thin" JSON body of a delivery (docs/WEBHOOKS.md); the rest is in the API.
pub fn payload(event: &Event<'_>) -> String {
    let (occurred_at, data) = match event {
        Event::Invoice(facts) => (
            facts.occurred_at,
            Data::Invoice {
                invoice: InvoiceAtEvent {
                    id: facts.invoice_id,
                    state: facts.to_state.as_str(),
                    previous_state: facts.from_state.map(InvoiceState::as_str),
                    revision_id: facts.revision_id,
                    payload_hash: facts.payload_hash,
                },
                event: EventRef {
                    id: facts.event_id,
                    seq: facts.seq,
                },
            },
        ),
    };
    let body = Body {
        r#type: event.event_type().name(),
        timestamp: occurred_at.to_rfc3339_opts(SecondsFormat::Micros, true),
        data,
    };
    // Serializing plain strings, ids and integers cannot fail.
    serde_json::to_string(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_one_event_type_and_back() {
        let names = EventType::names();
        assert_eq!(names.len(), Action::ALL.len());
        for action in Action::ALL {
            let event_type = EventType::Invoice(action);
            let name = event_type.name();
            assert!(name.starts_with("invoice."), "{name}");
            assert_eq!(EventType::parse(name), Some(event_type));
        }
        assert_eq!(EventType::parse("invoice.create_draft"), None);
        assert_eq!(
            EventType::Invoice(Action::RequestChanges).name(),
            "invoice.changes_requested"
        );
    }

    #[test]
    fn the_body_is_thin_minified_and_stable() {
        let occurred_at = DateTime::parse_from_rfc3339("2026-03-01T10:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc);
        let event_id = Uuid::from_u128(1);
        let invoice_id = Uuid::from_u128(2);
        let revision_id = Uuid::from_u128(3);
        let event = Event::Invoice(EventFacts {
            event_id,
            invoice_id,
            action: Action::Approve,
            seq: 3,
            from_state: Some(InvoiceState::PendingApproval),
            to_state: InvoiceState::Approved,
            revision_id: Some(revision_id),
            payload_hash: Some("ab"),
            occurred_at,
        });
        let body = payload(&event);
        assert_eq!(
            body,
            format!(
                r#"{{"type":"invoice.approved","timestamp":"2026-03-01T10:00:00.123456Z","data":{{"invoice":{{"id":"{invoice_id}","state":"approved","previous_state":"pending_approval","revision_id":"{revision_id}","payload_hash":"ab"}},"event":{{"id":"{event_id}","seq":3}}}}}}"#
            )
        );
        assert_eq!(payload(&event), body);
        assert_eq!(event.id(), event_id);
    }
}
