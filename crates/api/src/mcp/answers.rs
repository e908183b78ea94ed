//! What the MCP tools answer where REST has no single body for it: the REST answer plus what
//! REST says in a header or spreads over several routes.

use crate::http::destinations::DestinationResponse;
use serde::Serialize;
use tauros_app::{DecisionView, EventView, InvoiceView, RevisionView};

/// What create_payment_destination answers (REST says `replayed` in a header).
#[derive(Serialize)]
pub(super) struct DestinationCommand {
    pub payment_destination: DestinationResponse,
    pub replayed: bool,
}

/// What get_invoice answers: the invoice, and with `history` its bounded history.
#[derive(Serialize)]
pub(super) struct InvoiceAnswer {
    pub invoice: InvoiceView,
    #[serde(flatten)]
    pub history: Option<History>,
}

/// An invoice's bounded history: its revisions (at most 100 per invoice), its decisions (at
/// most one per revision) and one page of 100 events.
#[derive(Serialize)]
pub(super) struct History {
    pub revisions: Vec<RevisionView>,
    pub decisions: Vec<DecisionView>,
    pub events: Vec<EventView>,
    /// Pass as `events_cursor` for the next page of events; `null` on the last.
    pub events_next_cursor: Option<String>,
}
