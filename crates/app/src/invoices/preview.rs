//! A dry run of a create (`POST /v1/invoices/preview`, MCP `preview_invoice`): the create's
//! checks and computation ([`checked_draft`], then [`drafted`]) in a plain read unit that
//! writes nothing; it refuses what a create would, or answers what it would seal and warnings.

use super::commands::{checked_draft, proposer};
use super::content::drafted;
use super::views::SealedView;
use crate::actor::Actor;
use crate::app::App;
use crate::auth::Caller;
use crate::clock::now;
use crate::error::AppResult;
use chrono::NaiveDate;
use serde::Serialize;
use tauros_domain::fingerprint::key_is_valid;
use tauros_domain::invoice::{DraftInput, OPEN_STATES, PreviewFacts, preview_warnings};
use tauros_domain::visibility::Scope;
use tauros_store::{InvoiceFilter, Page, Reader};
use utoipa::ToSchema;
use uuid::Uuid;

/// Open invoices per state (newest first) compared for `possible_duplicate`.
const DUPLICATES_SCANNED: i64 = 100;

/// What a create of the same body would seal, and what an approver would notice.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = InvoicePreviewResponse)]
pub struct PreviewView {
    /// What a create of this body, now, would seal as revision 1 (the same bytes and hash).
    #[serde(flatten)]
    pub sealed: SealedView,
    /// What an approver would notice; never blocks a create. Empty when nothing stands out.
    pub warnings: Vec<WarningView>,
}

/// One thing an approver would notice about a valid body.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = PreviewWarning)]
pub struct WarningView {
    /// `due_date_soon` (due in fewer than 7 days), `due_date_far` (more than 365 days ahead),
    /// `possible_duplicate` (an open invoice of yours bills the same customer the same total).
    pub code: String,
    /// What and why.
    pub message: String,
    /// The request member concerned, when there is one (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    pub field: Option<String>,
    /// `possible_duplicate`: the other invoice, yours to read (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Uuid, required = false)]
    pub invoice_id: Option<Uuid>,
}

impl App {
    /// A create's dry run; `key`, if sent, is checked as a create checks it.
    pub async fn preview_draft(
        &self,
        caller: impl Into<Caller<'_>>,
        key: Option<&str>,
        input: DraftInput,
    ) -> AppResult<PreviewView> {
        let actor = self.actor_of(caller.into()).await?;
        let agent = proposer(&actor)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let key_ok = key.is_none_or(key_is_valid);
        let content = checked_draft(&mut *conn, &actor, key_ok, &input).await?;
        let org_id = agent.org_id;
        let customer = conn.customer_by_id(org_id, content.customer_id).await?;
        let destination = conn
            .destination_by_id(org_id, content.destination_id)
            .await?;
        let now = now();
        let revision = drafted(
            &actor,
            &content,
            (customer, destination),
            (org_id, Uuid::nil()),
            1,
            now,
        )?;
        let sealed = SealedView::of(revision.canonical_payload, revision.payload_hash)?;
        let today = now.date_naive();
        let duplicates = open_duplicates(&mut *conn, &actor, &sealed, today).await?;
        let warnings = preview_warnings(&PreviewFacts {
            today,
            due_date: sealed.due_date,
            duplicates: &duplicates,
        })
        .into_iter()
        .map(|w| WarningView {
            code: w.code.to_owned(),
            message: w.message,
            field: w.field.map(str::to_owned),
            invoice_id: w.invoice_id,
        })
        .collect();
        Ok(PreviewView { sealed, warnings })
    }
}

/// The caller's open invoices billing `sealed`'s customer the same total, newest first, up to
/// [`DUPLICATES_SCANNED`] per state; only the agent's own, so the caller may read each.
async fn open_duplicates(
    conn: &mut dyn Reader,
    actor: &Actor,
    sealed: &SealedView,
    today: NaiveDate,
) -> AppResult<Vec<Uuid>> {
    let Actor::Agent(agent) = actor else {
        return Ok(Vec::new());
    };
    let total = sealed.total_minor.to_string();
    let mut found = Vec::new();
    for state in OPEN_STATES {
        let filter = InvoiceFilter {
            scope: Scope::Agent(agent.id),
            state: Some(state),
            customer_id: Some(sealed.customer_id),
            agent_id: Some(agent.id),
            decision: None,
            idempotency_key: None,
            oldest_first: false,
            overdue: None,
            today,
            issuing: None,
        };
        let page = Page {
            after: None,
            limit: DUPLICATES_SCANNED,
        };
        found.extend(
            conn.invoices(agent.org_id, &filter, page)
                .await?
                .into_iter()
                .filter(|j| {
                    j.revision.currency == sealed.currency && j.revision.total_minor == total
                })
                .map(|j| j.revision.invoice_id),
        );
    }
    Ok(found)
}
