//! An invoice's hash-chained event trail (docs/contract/domain.md §2, §8) and its deliveries.

use crate::audit::AuditActor;
use crate::error::AppResult;
use tauros_domain::audit::EventFields;
use tauros_domain::invoice::{Action, InvoiceState, OrgSettings};
use tauros_store::{EventRow, InvoiceRow, RevisionRow, Tx};
use uuid::Uuid;

/// What one event records beyond the invoice's new state.
pub(super) struct EventInput<'a> {
    pub action: Action,
    /// `None` for the creating event.
    pub from: Option<InvoiceState>,
    pub actor: AuditActor,
    pub revision: Option<&'a RevisionRow>,
    pub idempotency_key: Option<&'a str>,
    pub note: Option<&'a str>,
    /// Decisions: the org settings in force.
    pub settings: Option<OrgSettings>,
}

/// The chain's next link at the invoice's new state; moves the invoice's chain head to it.
pub(super) fn next_event(invoice: &mut InvoiceRow, input: &EventInput<'_>) -> EventRow {
    let mut event = EventRow {
        id: Uuid::now_v7(),
        org_id: invoice.org_id,
        invoice_id: invoice.id,
        seq: invoice.event_count + 1,
        action: input.action,
        from_state: input.from,
        to_state: invoice.state,
        actor_kind: input.actor.kind,
        actor_id: input.actor.id,
        interface: input.actor.interface,
        revision_id: input.revision.map(|r| r.id),
        payload_hash: input.revision.map(|r| r.payload_hash.clone()),
        idempotency_key: input.idempotency_key.map(str::to_owned),
        note: input.note.map(str::to_owned),
        occurred_at: invoice.updated_at,
        prev_hash: invoice.last_event_hash.clone(),
        hash: String::new(),
        four_eyes: input.settings.map(|s| s.four_eyes),
        shared_review: input.settings.map(|s| s.shared_review),
    };
    event.hash = tauros_domain::audit::event_hash(&event.prev_hash, &event_fields(&event));
    invoice.event_count = event.seq;
    invoice.last_event_hash = event.hash.clone();
    event
}

/// Writes an event with one delivery job per subscribed endpoint, in the same transaction.
pub(super) async fn record_event(tx: &mut dyn Tx, event: &EventRow) -> AppResult<()> {
    tx.insert_event(event).await?;
    failpoint!(event.org_id, EventInserted);
    let event_type = tauros_domain::webhook::EventType::Invoice(event.action);
    crate::webhooks::enqueue_deliveries(tx, event.org_id, event.id, event_type).await
}

/// The fields an event's hash covers.
pub(super) fn event_fields(e: &EventRow) -> EventFields<'_> {
    EventFields {
        invoice_id: e.invoice_id,
        seq: e.seq,
        action: e.action.as_str(),
        from_state: e.from_state.map(InvoiceState::as_str),
        to_state: e.to_state.as_str(),
        actor_kind: e.actor_kind.as_str(),
        actor_id: e.actor_id,
        interface: e.interface.as_str(),
        revision_id: e.revision_id,
        payload_hash: e.payload_hash.as_deref(),
        idempotency_key: e.idempotency_key.as_deref(),
        note: e.note.as_deref(),
        occurred_at: e.occurred_at,
        settings: e.four_eyes.zip(e.shared_review),
    }
}
