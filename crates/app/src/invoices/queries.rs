//! The reads: each one unit that cannot write, answering unknown and invisible alike.

use super::chain::event_fields;
use super::content::stored;
use super::miss::unknown_invoice;
use super::views::{
    DecisionView, EventView, InvoiceView, RevisionView, VerifyReport, joined_view, revision_view,
};
use super::{access_error, caller, check_readable, joined_access};
use crate::actor::Actor;
use crate::app::App;
use crate::auth::{Caller, presented};
use crate::error::{AppError, AppResult, FieldError};
use crate::lists::{PageRequest, list_filter};
use tauros_domain::audit::ChainWalk;
use tauros_domain::fingerprint::{key_error, key_is_valid};
use tauros_domain::identity::{Capability, Credential, Interface};
use tauros_domain::invoice::{self as rules, DecisionKind, InvoiceState};
use tauros_domain::payload::verify;
use tauros_domain::visibility::Scope;
use tauros_store::{InvoiceFilter, InvoiceJoined, Lane, Page, Presenter, Reader};
use uuid::Uuid;

/// How many revisions or events verify reads at a time.
const VERIFY_PAGE: i64 = 100;

/// Which invoices to list.
#[derive(Debug, Default, Clone)]
pub struct InvoiceQuery {
    /// Only this state (`pending_approval` lists oldest first: the approver's inbox).
    pub state: Option<String>,
    pub customer_id: Option<Uuid>,
    /// Only this agent's invoices.
    pub agent_id: Option<Uuid>,
    /// Only invoices whose latest decision, on the current revision, is this one.
    pub decision: Option<String>,
    /// Only the invoice the caller created with this key.
    pub idempotency_key: Option<String>,
    /// `true`: only overdue invoices (issued or partially paid, past due, open); `false`: others.
    pub overdue: Option<String>,
    /// Only approved invoices whose issuing stands here (`pending`, `blocked`, …).
    pub issuing: Option<String>,
}

impl App {
    /// One invoice the caller may see; a presented key is checked in the same statement.
    pub async fn get_invoice(
        &self,
        caller: impl Into<Caller<'_>>,
        id: Uuid,
    ) -> AppResult<InvoiceView> {
        let (bearer, via) = match caller.into() {
            Caller::Actor(actor) => {
                actor.require(Capability::Invoicing)?;
                let mut conn = self.store.reader(actor.lane()).await?;
                return joined_view(readable(&mut *conn, actor, id).await?);
            }
            Caller::Presented { bearer, via } => (bearer, via),
        };
        let credential = Credential::parse(bearer).ok_or(AppError::Unauthorized)?;
        // Whose work this is is known only once the credential is checked, with this read.
        let mut conn = self.store.reader(Lane::Unattributed).await?;
        let found = conn
            .invoice_joined_presented(presented(&credential), id)
            .await?;
        drop(conn);
        let (stored, joined) = found.map_or((None, None), |(c, i)| (Some(c), i));
        let actor = self.check_credential(&credential, stored, via).await?;
        actor.require(Capability::Invoicing)?;
        let Some(joined) = joined else {
            let mut conn = self.store.reader(actor.lane()).await?;
            return Err(unknown_invoice(&mut *conn, &actor, id).await?);
        };
        joined_view(check_readable(&actor, joined)?)
    }

    /// The invoices the caller may see (`state=pending_approval`: oldest first). An agent's key is
    /// checked in its page's statement; a human's scope needs the org: humans authenticate first.
    pub async fn list_invoices(
        &self,
        caller: impl Into<Caller<'_>>,
        query: InvoiceQuery,
        page: PageRequest,
    ) -> AppResult<Vec<InvoiceView>> {
        match caller.into() {
            Caller::Actor(actor) => self.list_invoices_as(actor, query, page).await,
            Caller::Presented { bearer, via } => {
                self.list_own_invoices_presented(bearer, via, query, page)
                    .await
            }
        }
    }

    async fn list_invoices_as(
        &self,
        actor: &Actor,
        query: InvoiceQuery,
        page: PageRequest,
    ) -> AppResult<Vec<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        let mut filter = invoice_filter(query)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let shared_review = match actor {
            Actor::Agent(_) => false,
            Actor::Human(h) => {
                conn.org_by_id(h.org_id)
                    .await?
                    .ok_or(AppError::NotFound)?
                    .shared_review
            }
        };
        filter.scope = Scope::of_invoices(caller(actor), shared_review);
        let rows = conn.invoices(actor.org_id(), &filter, page.into()).await?;
        rows.into_iter().map(joined_view).collect()
    }

    /// [`App::list_invoices`] for a presented credential: one round trip for an agent's key.
    async fn list_own_invoices_presented(
        &self,
        bearer: &str,
        via: Interface,
        query: InvoiceQuery,
        page: PageRequest,
    ) -> AppResult<Vec<InvoiceView>> {
        let credential = Credential::parse(bearer).ok_or(AppError::Unauthorized)?;
        let (Credential::ApiKey(key), Ok(filter)) = (&credential, invoice_filter(query.clone()))
        else {
            let actor = self.authenticate(bearer, via).await?;
            return self.list_invoices_as(&actor, query, page).await;
        };
        let mut conn = self.store.reader(Lane::Unattributed).await?;
        let found = conn
            .own_invoices_presented(key.id(), &filter, page.into())
            .await?;
        drop(conn);
        let (stored, rows) =
            found.map_or((None, vec![]), |(k, rows)| (Some(Presenter::from(k)), rows));
        let actor = self.check_credential(&credential, stored, via).await?;
        actor.require(Capability::Invoicing)?;
        if Scope::of_invoices(caller(&actor), false) != Scope::Agent(actor.id()) {
            // The rule no longer gives an agent exactly its own invoices: read it as it says.
            return self.list_invoices_as(&actor, query, page).await;
        }
        rows.into_iter().map(joined_view).collect()
    }

    /// A page of the revisions, oldest first.
    pub async fn list_revisions(
        &self,
        actor: &Actor,
        id: Uuid,
        page: PageRequest,
    ) -> AppResult<Vec<RevisionView>> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        readable(&mut *conn, actor, id).await?;
        let rows = conn.revisions(actor.org_id(), id, page.into()).await?;
        rows.into_iter().map(revision_view).collect()
    }

    /// Every decision, oldest first (the proposing agent reads them too, to learn why).
    pub async fn list_decisions(&self, actor: &Actor, id: Uuid) -> AppResult<Vec<DecisionView>> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        readable(&mut *conn, actor, id).await?;
        let rows = conn.decisions(actor.org_id(), id).await?;
        Ok(rows.into_iter().map(DecisionView::from).collect())
    }

    /// A page of the audit trail, in order.
    pub async fn list_events(
        &self,
        actor: &Actor,
        id: Uuid,
        page: PageRequest,
    ) -> AppResult<Vec<EventView>> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        readable(&mut *conn, actor, id).await?;
        let rows = conn.events(actor.org_id(), id, page.into()).await?;
        rows.into_iter().map(EventView::try_from).collect()
    }

    /// Re-seals the revisions and re-walks the chain (humans), [`VERIFY_PAGE`] rows at a time.
    pub async fn verify_invoice(&self, actor: &Actor, id: Uuid) -> AppResult<VerifyReport> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let Some(joined) = conn.invoice_joined(actor.org_id(), id).await? else {
            return Err(unknown_invoice(&mut *conn, actor, id).await?);
        };
        let org_id = joined.revision.org_id;
        let (access, settings) = joined_access(actor, &joined)?;
        rules::authorize_verify(caller(actor), access, settings).map_err(access_error)?;
        // One (number, ok) pair per revision: at most 100 (bounds per record).
        let mut revisions: Vec<(i32, bool)> = Vec::new();
        let mut after = None;
        loop {
            let page = Page {
                after,
                limit: VERIFY_PAGE,
            };
            let rows = conn.revisions(org_id, id, page).await?;
            revisions.extend(rows.iter().map(|r| {
                (
                    r.number,
                    verify(&stored(r), &r.canonical_payload, &r.payload_hash).is_ok(),
                )
            }));
            match rows.last() {
                Some(last) if rows.len() == VERIFY_PAGE as usize => after = Some(last.id),
                _ => break,
            }
        }
        let mut walk = ChainWalk::default();
        let mut broken_at = None;
        let mut after = None;
        while broken_at.is_none() {
            let page = Page {
                after,
                limit: VERIFY_PAGE,
            };
            let rows = conn.events(org_id, id, page).await?;
            broken_at = rows
                .iter()
                .find_map(|e| walk.step(&event_fields(e), &e.prev_hash, &e.hash).err());
            match rows.last() {
                Some(last) if rows.len() == VERIFY_PAGE as usize => after = Some(last.id),
                _ => break,
            }
        }
        let revisions_ok = revisions.iter().all(|(_, ok)| *ok);
        Ok(VerifyReport {
            ok: revisions_ok && broken_at.is_none(),
            revisions,
            events_ok: broken_at.is_none(),
            broken_at,
        })
    }
}

/// The list filter a query asks for, every malformed parameter reported at once.
fn invoice_filter(query: InvoiceQuery) -> AppResult<InvoiceFilter> {
    let mut errors = Vec::new();
    let state = list_filter(
        "state",
        query.state.as_deref(),
        &InvoiceState::ALL,
        InvoiceState::as_str,
        &mut errors,
    );
    let decision = list_filter(
        "decision",
        query.decision.as_deref(),
        &DecisionKind::ALL,
        DecisionKind::as_str,
        &mut errors,
    );
    let issuing = list_filter(
        "issuing",
        query.issuing.as_deref(),
        &tauros_domain::effect::IssuingStatus::ALL,
        tauros_domain::effect::IssuingStatus::as_str,
        &mut errors,
    );
    if query
        .idempotency_key
        .as_deref()
        .is_some_and(|k| !key_is_valid(k))
    {
        errors.push(key_error());
    }
    let overdue = match query.overdue.as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => {
            errors.push(FieldError::plain(
                "overdue",
                "invalid_value",
                "overdue must be true or false",
            ));
            None
        }
    };
    if !errors.is_empty() {
        return Err(AppError::Validation(errors));
    }
    Ok(InvoiceFilter {
        scope: Scope::Org,
        oldest_first: state == Some(InvoiceState::PendingApproval),
        state,
        customer_id: query.customer_id,
        agent_id: query.agent_id,
        decision,
        idempotency_key: query.idempotency_key,
        overdue,
        today: crate::clock::now().date_naive(),
        issuing,
    })
}

/// The invoice, if the caller may read it; else what the id is ([`unknown_invoice`]).
async fn readable(conn: &mut dyn Reader, actor: &Actor, id: Uuid) -> AppResult<InvoiceJoined> {
    let Some(joined) = conn.invoice_joined(actor.org_id(), id).await? else {
        return Err(unknown_invoice(conn, actor, id).await?);
    };
    check_readable(actor, joined)
}
