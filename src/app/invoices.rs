//! Invoices: create_draft with per-agent idempotency, revise, submit, withdraw, the three
//! decisions, cancel; reads of revisions, decisions and events; and verify.
//!
//! Every command locks the invoice row first and decides on the database's current state, then
//! (where it needs one) locks the destination: always invoice → destination, so concurrent
//! commands cannot deadlock. A command whose goal already holds commits nothing, writes no
//! event and answers `replayed = true`.

use super::destinations::ACTIVE;
use super::{Actor, App, AppError, AppResult, AuditActor, FieldError, now};
use crate::domain::address::Network;
use crate::domain::audit::{EventFields, GENESIS, event_hash, first_break};
use crate::domain::currency::Currency;
use crate::domain::error::Coded;
use crate::domain::identity::Role;
use crate::domain::invoice::{
    self as rules, AccessError, Action, Caller, DecideFacts, DecideOutcome, DecisionKind,
    ExistingDecision, InvoiceAccess, InvoiceState, OrgSettings, SubmitFacts, Transition,
};
use crate::domain::lines::{LineInput, LineView, validate_lines};
use crate::domain::money::MinorAmount;
use crate::domain::payload::{
    Payload, PayloadDestination, PayloadLine, StoredRevision, decode_lines, encode_lines, seal,
    verify,
};
use crate::store::{
    DecisionRow, DestinationRow, EventRow, InvoiceFilter, InvoiceJoined, InvoiceRow, Page,
    RevisionRow, Scope, StoreError, Tx,
};
use chrono::{DateTime, NaiveDate, Utc};
use std::str::FromStr;
use uuid::Uuid;

/// The financial content of a create or a revise, as sent (every field optional so that all
/// missing ones are reported at once).
#[derive(Debug, Default, Clone)]
pub struct DraftInput {
    /// The customer billed (one of the agent's).
    pub customer_id: Option<Uuid>,
    /// Where the money goes (one of the agent's active destinations).
    pub payment_destination_id: Option<Uuid>,
    /// Currency code; must be the destination's.
    pub currency: Option<String>,
    /// `YYYY-MM-DD`, today (UTC) or later.
    pub due_date: Option<String>,
    /// 1–100 lines.
    pub lines: Option<Vec<LineInput>>,
    /// Why the agent proposes this (not sealed), 1–4000 characters.
    pub reasoning: Option<String>,
}

/// One revision as clients see it.
#[derive(Debug, Clone)]
pub struct RevisionView {
    /// Id.
    pub id: Uuid,
    /// 1, 2, …
    pub number: i32,
    /// Customer billed.
    pub customer_id: Uuid,
    /// Destination paid.
    pub payment_destination_id: Uuid,
    /// Currency code.
    pub currency: String,
    /// Due date.
    pub due_date: NaiveDate,
    /// Lines with every amount in both forms.
    pub lines: Vec<LineView>,
    /// Total with exactly the currency's decimals.
    pub total: String,
    /// Total in minor units.
    pub total_minor: MinorAmount,
    /// The agent's reasoning.
    pub reasoning: String,
    /// The exact canonical bytes that were hashed.
    pub canonical_payload: String,
    /// Lowercase hex SHA-256 of `canonical_payload`.
    pub payload_hash: String,
    /// Created.
    pub created_at: DateTime<Utc>,
}

/// An invoice with its current revision.
#[derive(Debug, Clone)]
pub struct InvoiceView {
    /// Id.
    pub id: Uuid,
    /// The proposing agent.
    pub agent_id: Uuid,
    /// The key it was created with.
    pub idempotency_key: String,
    /// Lifecycle state.
    pub state: String,
    /// Assigned at issue.
    pub number: Option<String>,
    /// The current revision.
    pub current_revision: RevisionView,
    /// How many revisions exist.
    pub revision_count: i32,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
}

/// A decision as clients see it.
#[derive(Debug, Clone)]
pub struct DecisionView {
    /// Id.
    pub id: Uuid,
    /// The revision decided on.
    pub revision_id: Uuid,
    /// `approved`, `rejected` or `changes_requested`.
    pub decision: String,
    /// The hash decided on.
    pub payload_hash: String,
    /// The approver's reason.
    pub reason: Option<String>,
    /// The approver.
    pub approver_id: Uuid,
    /// When.
    pub decided_at: DateTime<Utc>,
}

/// The outcome of `verify`.
#[derive(Debug, Clone)]
pub struct VerifyReport {
    /// Everything matched.
    pub ok: bool,
    /// Per revision: whether re-sealing its stored fields reproduces its stored bytes and hash.
    pub revisions: Vec<(i32, bool)>,
    /// Whether the event chain is intact.
    pub events_ok: bool,
    /// The `seq` of the first broken link.
    pub broken_at: Option<i32>,
}

/// Which invoices to list.
#[derive(Debug, Default, Clone)]
pub struct InvoiceQuery {
    /// Only this state (`pending_approval` lists oldest first: the approver's inbox).
    pub state: Option<String>,
    /// Only this customer's.
    pub customer_id: Option<Uuid>,
    /// Only this agent's.
    pub agent_id: Option<Uuid>,
}

const MAX_REASONING_CHARS: usize = 4000;

impl App {
    /// An agent proposes an invoice. The same key with the same payload (compared with
    /// revision 1) answers the invoice as it is now, `replayed = true`, in one indexed read and
    /// without a lock; the same key with another payload is `IdempotencyConflict`.
    pub async fn create_draft(
        &self,
        actor: &Actor,
        key: &str,
        input: DraftInput,
    ) -> AppResult<(InvoiceView, bool)> {
        rules::authorize_create_draft(caller(actor)).map_err(access_error)?;
        let Actor::Agent(agent) = actor else {
            return Err(AppError::Forbidden("only agents propose invoices"));
        };
        let mut errors = Vec::new();
        if !crate::domain::fingerprint::key_is_valid(key) {
            errors.push(FieldError::plain(
                "idempotency_key",
                "invalid_idempotency_key",
                "send an Idempotency-Key of 1–200 characters without control characters",
            ));
        }
        let content = Content::from_input(&input, None, &mut errors);
        let Some(content) = content.filter(|_| errors.is_empty()) else {
            return Err(AppError::Validation(errors));
        };

        // Fast path: a replay costs one indexed read and takes no lock.
        let mut conn = self.store.reader().await?;
        if let Some(existing) = conn
            .invoice_joined_by_key(agent.org_id, agent.id, key)
            .await?
        {
            return self
                .replay_create(&mut *conn, agent.org_id, agent.id, existing, &content)
                .await;
        }
        drop(conn);

        let mut tx = self.store.begin().await?;
        let destination = check_parties(&mut *tx, actor, &content).await?;
        let sealed = content.seal(&destination)?;
        let now = now();
        let invoice_id = Uuid::now_v7();
        let revision =
            content.revision_row(agent.org_id, invoice_id, 1, &destination, &sealed, now);
        let mut invoice = InvoiceRow {
            id: invoice_id,
            org_id: agent.org_id,
            agent_id: agent.id,
            idempotency_key: key.to_owned(),
            state: InvoiceState::Draft.as_str().to_owned(),
            cancelled_by: None,
            number: None,
            current_revision_id: revision.id,
            revision_count: 1,
            first_payload_hash: sealed.hash.clone(),
            event_count: 0,
            last_event_hash: GENESIS.to_owned(),
            created_at: now,
            updated_at: now,
        };
        let event = next_event(
            &mut invoice,
            Action::CreateDraft,
            None,
            AuditActor::agent(agent),
            Some(&revision),
            Some(key),
            None,
        );
        // The unique key (org, agent, key) serializes concurrent creates: the loser inserts
        // nothing and answers as a replay of the winner.
        if !tx.insert_invoice(&invoice).await? {
            drop(tx);
            let mut conn = self.store.reader().await?;
            let existing = conn
                .invoice_joined_by_key(agent.org_id, agent.id, key)
                .await?
                .ok_or_else(|| {
                    AppError::Internal("invoice vanished after a key conflict".into())
                })?;
            return self
                .replay_create(&mut *conn, agent.org_id, agent.id, existing, &content)
                .await;
        }
        tx.insert_revision(&revision).await?;
        tx.insert_event(&event).await?;
        tx.commit().await?;
        Ok((view(&invoice, revision)?, false))
    }

    /// Every field problem of a create, found without touching the database and without
    /// writing anything: for a request that lacks its idempotency key, so that the key and every
    /// other missing field are reported at once. Humans get 403 first, as on a full create.
    pub fn draft_field_errors(
        &self,
        actor: &Actor,
        input: &DraftInput,
    ) -> AppResult<Vec<FieldError>> {
        rules::authorize_create_draft(caller(actor)).map_err(access_error)?;
        let mut errors = Vec::new();
        let _ = Content::from_input(input, None, &mut errors);
        Ok(errors)
    }

    async fn replay_create(
        &self,
        conn: &mut dyn Tx,
        org_id: Uuid,
        agent_id: Uuid,
        existing: InvoiceJoined,
        content: &Content,
    ) -> AppResult<(InvoiceView, bool)> {
        // Destinations are immutable, so the network and address sealed in any revision that
        // names the same destination are the ones revision 1 sealed.
        let destination = if existing.revision.payment_destination_id == content.destination_id {
            Some((
                existing.revision.destination_network.clone(),
                existing.revision.destination_address.clone(),
            ))
        } else {
            conn.destination_by_id(org_id, content.destination_id)
                .await?
                .filter(|d| d.agent_id == agent_id)
                .map(|d| (d.network, d.address))
        };
        let matches = match destination {
            Some((network, address)) => {
                let network = Network::from_str(&network)
                    .map_err(|_| AppError::Internal("stored network unreadable".into()))?;
                let payload = content.payload(PayloadDestination {
                    id: content.destination_id,
                    network,
                    address,
                });
                seal(&payload).is_ok_and(|s| s.hash == existing.first_payload_hash)
            }
            None => false,
        };
        if matches {
            Ok((joined_view(existing)?, true))
        } else {
            Err(AppError::IdempotencyConflict)
        }
    }

    /// The proposing agent replaces the financial content: a new revision (the invoice returns
    /// to `draft`), or nothing at all when the result equals the current revision's payload.
    pub async fn revise(
        &self,
        actor: &Actor,
        id: Uuid,
        input: DraftInput,
    ) -> AppResult<(InvoiceView, bool)> {
        let mut tx = self.store.begin().await?;
        let (mut invoice, _) = self.locked(&mut *tx, actor, id, Action::Revise).await?;
        let state = parse_state(&invoice.state)?;
        let Transition::Apply { to } =
            rules::transition(Action::Revise, state, cancelled_by(&invoice)).map_err(invalid)?
        else {
            return Err(AppError::Internal("revise never replays by state".into()));
        };
        let current = current_revision(&mut *tx, &invoice).await?;
        let mut errors = Vec::new();
        let Some(content) =
            Content::from_input(&input, Some(&current), &mut errors).filter(|_| errors.is_empty())
        else {
            return Err(AppError::Validation(errors));
        };
        let destination = check_parties(&mut *tx, actor, &content).await?;
        let sealed = content.seal(&destination)?;
        if sealed.hash == current.payload_hash {
            let joined = tx
                .invoice_joined(invoice.org_id, invoice.id)
                .await?
                .ok_or(AppError::NotFound)?;
            return Ok((joined_view(joined)?, true));
        }
        let now = now();
        let number = invoice.revision_count + 1;
        let revision = content.revision_row(
            invoice.org_id,
            invoice.id,
            number,
            &destination,
            &sealed,
            now,
        );
        let from = state;
        invoice.state = to.as_str().to_owned();
        invoice.current_revision_id = revision.id;
        invoice.revision_count = number;
        invoice.updated_at = now;
        let event = next_event(
            &mut invoice,
            Action::Revise,
            Some(from),
            AuditActor::of(actor),
            Some(&revision),
            None,
            None,
        );
        tx.insert_revision(&revision).await?;
        tx.update_invoice(&invoice).await?;
        tx.insert_event(&event).await?;
        tx.commit().await?;
        Ok((view(&invoice, revision)?, false))
    }

    /// The proposing agent asks for approval.
    pub async fn submit(&self, actor: &Actor, id: Uuid) -> AppResult<(InvoiceView, bool)> {
        let mut tx = self.store.begin().await?;
        let (mut invoice, _) = self.locked(&mut *tx, actor, id, Action::Submit).await?;
        let state = parse_state(&invoice.state)?;
        let current = current_revision(&mut *tx, &invoice).await?;
        let decision = tx.decision_for_revision(invoice.org_id, current.id).await?;
        let destination = tx
            .share_destination(invoice.org_id, current.payment_destination_id)
            .await?;
        let facts = SubmitFacts {
            state,
            current_decision: decision.map(|d| parse_kind(&d.decision)).transpose()?,
            destination_active: destination.is_some_and(|d| d.state == ACTIVE),
        };
        // An illegal state keeps its `from` and `action` members, as every other command's does.
        match rules::submit_transition(facts).map_err(|e| match e {
            rules::SubmitError::InvalidTransition(t) => invalid(t),
            other => conflict(&other),
        })? {
            Transition::Replay => self.unchanged(&mut *tx, &invoice).await,
            Transition::Apply { to } => {
                self.apply(
                    tx,
                    &mut invoice,
                    Action::Submit,
                    state,
                    to,
                    actor,
                    &current,
                    None,
                )
                .await
            }
        }
    }

    /// The proposing agent, or a human who sees it, takes an undecided invoice back.
    pub async fn withdraw(&self, actor: &Actor, id: Uuid) -> AppResult<(InvoiceView, bool)> {
        self.simple_transition(actor, id, Action::Withdraw, None)
            .await
    }

    /// An approver cancels an approved invoice; a reason is required.
    pub async fn cancel(
        &self,
        actor: &Actor,
        id: Uuid,
        reason: Option<&str>,
    ) -> AppResult<(InvoiceView, bool)> {
        self.simple_transition(actor, id, Action::Cancel, reason)
            .await
    }

    async fn simple_transition(
        &self,
        actor: &Actor,
        id: Uuid,
        action: Action,
        reason: Option<&str>,
    ) -> AppResult<(InvoiceView, bool)> {
        let mut tx = self.store.begin().await?;
        let (mut invoice, _) = self.locked(&mut *tx, actor, id, action).await?;
        // Who may act is answered before what they sent: an agent calling cancel hears 403,
        // not that a reason is missing.
        let note =
            rules::validate_reason(action, reason).map_err(|e| AppError::Validation(vec![e]))?;
        let state = parse_state(&invoice.state)?;
        match rules::transition(action, state, cancelled_by(&invoice)).map_err(invalid)? {
            Transition::Replay => self.unchanged(&mut *tx, &invoice).await,
            Transition::Apply { to } => {
                if to == InvoiceState::Cancelled {
                    invoice.cancelled_by = Some(action.as_str().to_owned());
                }
                let current = current_revision(&mut *tx, &invoice).await?;
                self.apply(tx, &mut invoice, action, state, to, actor, &current, note)
                    .await
            }
        }
    }

    /// An approver approves, rejects or requests changes on one exact revision and hash, in
    /// the nine-step order of domain.md §5.
    pub async fn decide(
        &self,
        actor: &Actor,
        id: Uuid,
        kind: DecisionKind,
        revision_id: Uuid,
        payload_hash: &str,
        reason: Option<&str>,
    ) -> AppResult<(InvoiceView, bool)> {
        let action = kind.action();
        let mut tx = self.store.begin().await?;
        let (mut invoice, approver_id) = self.locked(&mut *tx, actor, id, action).await?;
        // After the access check: an agent or operator hears 403 (a stranger 404), never that a
        // reason is missing. Then every field rule at once.
        let mut errors = Vec::new();
        if !is_payload_hash(payload_hash) {
            errors.push(FieldError::plain(
                "payload_hash",
                "invalid_hash",
                "send the payload_hash of the revision you reviewed: 64 lowercase hexadecimal \
                 characters, exactly as in current_revision.payload_hash",
            ));
        }
        let reason = rules::validate_reason(action, reason)
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let existing = tx
            .decision_for_revision(invoice.org_id, revision_id)
            .await?;
        let named = tx.revision_by_id(invoice.org_id, revision_id).await?;
        let current = current_revision(&mut *tx, &invoice).await?;
        let destination = tx
            .share_destination(invoice.org_id, current.payment_destination_id)
            .await?;
        let facts = DecideFacts {
            kind,
            approver_id,
            revision_id,
            payload_hash: payload_hash.to_owned(),
            reason: reason.clone(),
            existing: existing
                .as_ref()
                .map(|d| {
                    Ok::<_, AppError>(ExistingDecision {
                        approver_id: d.approver_id,
                        kind: parse_kind(&d.decision)?,
                        payload_hash: d.payload_hash.clone(),
                    })
                })
                .transpose()?,
            state: parse_state(&invoice.state)?,
            revision_of_invoice: named.is_some_and(|r| r.invoice_id == invoice.id),
            current_revision_id: current.id,
            current_payload_hash: current.payload_hash.clone(),
            reseal_matches: verify(
                &stored(&current),
                &current.canonical_payload,
                &current.payload_hash,
            )
            .is_ok(),
            destination_active: destination.is_some_and(|d| d.state == ACTIVE),
        };
        match rules::decide(facts).map_err(|e| match e {
            rules::DecideError::Reason(field) => AppError::Validation(vec![field]),
            rules::DecideError::InvalidTransition(t) => invalid(t),
            other => conflict(&other),
        })? {
            DecideOutcome::Replay => self.unchanged(&mut *tx, &invoice).await,
            DecideOutcome::Apply { to, kind, reason } => {
                let from = parse_state(&invoice.state)?;
                let decision = DecisionRow {
                    id: Uuid::now_v7(),
                    org_id: invoice.org_id,
                    invoice_id: invoice.id,
                    revision_id: current.id,
                    approver_id,
                    decision: kind.as_str().to_owned(),
                    payload_hash: current.payload_hash.clone(),
                    reason: reason.clone(),
                    decided_at: now(),
                };
                match tx.insert_decision(&decision).await {
                    // The invoice lock already serializes deciders; the unique index is the backstop.
                    Err(StoreError::Conflict {
                        constraint: "decisions_revision_key",
                    }) => {
                        return Err(AppError::Conflict {
                            code: "already_decided",
                            detail: "this revision was decided concurrently; GET the invoice to see the decision".into(),
                        });
                    }
                    other => other?,
                }
                self.apply(tx, &mut invoice, action, from, to, actor, &current, reason)
                    .await
            }
        }
    }

    /// Locks the invoice and checks that `actor` may run `action` on it; returns the row and the
    /// caller's id.
    async fn locked(
        &self,
        tx: &mut dyn Tx,
        actor: &Actor,
        id: Uuid,
        action: Action,
    ) -> AppResult<(InvoiceRow, Uuid)> {
        let invoice = tx
            .lock_invoice(actor.org_id(), id)
            .await?
            .ok_or(AppError::NotFound)?;
        let (access, settings) = access_facts(tx, invoice.org_id, invoice.agent_id).await?;
        rules::authorize(action, caller(actor), access, settings).map_err(access_error)?;
        Ok((invoice, actor_id(actor)))
    }

    /// Writes the state change and its event, commits, and answers the invoice as it is now.
    #[allow(clippy::too_many_arguments)]
    async fn apply(
        &self,
        mut tx: Box<dyn Tx>,
        invoice: &mut InvoiceRow,
        action: Action,
        from: InvoiceState,
        to: InvoiceState,
        actor: &Actor,
        revision: &RevisionRow,
        note: Option<String>,
    ) -> AppResult<(InvoiceView, bool)> {
        invoice.state = to.as_str().to_owned();
        invoice.updated_at = now();
        let event = next_event(
            invoice,
            action,
            Some(from),
            AuditActor::of(actor),
            Some(revision),
            None,
            note.as_deref(),
        );
        tx.update_invoice(invoice).await?;
        tx.insert_event(&event).await?;
        tx.commit().await?;
        Ok((view(invoice, revision.clone())?, false))
    }

    /// A replay: nothing is written; the invoice is answered as it is now.
    async fn unchanged(
        &self,
        tx: &mut dyn Tx,
        invoice: &InvoiceRow,
    ) -> AppResult<(InvoiceView, bool)> {
        let joined = tx
            .invoice_joined(invoice.org_id, invoice.id)
            .await?
            .ok_or(AppError::NotFound)?;
        Ok((joined_view(joined)?, true))
    }

    /// One invoice the caller may see.
    pub async fn get_invoice(&self, actor: &Actor, id: Uuid) -> AppResult<InvoiceView> {
        let mut conn = self.store.reader().await?;
        joined_view(self.readable(&mut *conn, actor, id).await?)
    }

    /// The invoices the caller may see. `state=pending_approval` lists oldest first.
    pub async fn list_invoices(
        &self,
        actor: &Actor,
        query: InvoiceQuery,
        page: Page,
    ) -> AppResult<Vec<InvoiceView>> {
        let mut errors = Vec::new();
        if query
            .state
            .as_deref()
            .is_some_and(|s| InvoiceState::parse(s).is_none())
        {
            errors.push(FieldError::plain(
                "state",
                "invalid_value",
                "state must be one of draft, pending_approval, approved, issued, partially_paid, paid, rejected, cancelled",
            ));
        }
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let mut conn = self.store.reader().await?;
        let scope = match actor {
            Actor::Agent(a) => Scope::Agent(a.id),
            Actor::Human(h) => {
                let org = conn.org_by_id(h.org_id).await?.ok_or(AppError::NotFound)?;
                if org.shared_review && h.role == Role::Approver {
                    Scope::Org
                } else {
                    Scope::Owner(h.id)
                }
            }
        };
        let filter = InvoiceFilter {
            scope,
            oldest_first: query.state.as_deref() == Some(InvoiceState::PendingApproval.as_str()),
            state: query.state,
            customer_id: query.customer_id,
            agent_id: query.agent_id,
        };
        let rows = conn.invoices(actor.org_id(), &filter, page).await?;
        rows.into_iter().map(joined_view).collect()
    }

    /// Every revision, oldest first.
    pub async fn list_revisions(&self, actor: &Actor, id: Uuid) -> AppResult<Vec<RevisionView>> {
        let mut conn = self.store.reader().await?;
        self.readable(&mut *conn, actor, id).await?;
        let rows = conn.revisions(actor.org_id(), id).await?;
        rows.into_iter().map(revision_view).collect()
    }

    /// Every decision, oldest first (the proposing agent reads them too, to learn why).
    pub async fn list_decisions(&self, actor: &Actor, id: Uuid) -> AppResult<Vec<DecisionView>> {
        let mut conn = self.store.reader().await?;
        self.readable(&mut *conn, actor, id).await?;
        let rows = conn.decisions(actor.org_id(), id).await?;
        Ok(rows
            .into_iter()
            .map(|d| DecisionView {
                id: d.id,
                revision_id: d.revision_id,
                decision: d.decision,
                payload_hash: d.payload_hash,
                reason: d.reason,
                approver_id: d.approver_id,
                decided_at: d.decided_at,
            })
            .collect())
    }

    /// The audit trail, in order.
    pub async fn list_events(&self, actor: &Actor, id: Uuid) -> AppResult<Vec<EventRow>> {
        let mut conn = self.store.reader().await?;
        self.readable(&mut *conn, actor, id).await?;
        Ok(conn.events(actor.org_id(), id).await?)
    }

    /// Re-seals every revision from its stored fields and re-walks the event chain (humans).
    pub async fn verify_invoice(&self, actor: &Actor, id: Uuid) -> AppResult<VerifyReport> {
        let mut conn = self.store.reader().await?;
        let joined = conn
            .invoice_joined(actor.org_id(), id)
            .await?
            .ok_or(AppError::NotFound)?;
        let org_id = joined.revision.org_id;
        let (access, settings) = joined_access(&joined);
        rules::authorize_verify(caller(actor), access, settings).map_err(access_error)?;
        let revisions: Vec<(i32, bool)> = conn
            .revisions(org_id, id)
            .await?
            .iter()
            .map(|r| {
                (
                    r.number,
                    verify(&stored(r), &r.canonical_payload, &r.payload_hash).is_ok(),
                )
            })
            .collect();
        let events = conn.events(org_id, id).await?;
        let broken_at = first_break(
            events
                .iter()
                .map(|e| (event_fields(e), e.prev_hash.as_str(), e.hash.as_str())),
        );
        let revisions_ok = revisions.iter().all(|(_, ok)| *ok);
        Ok(VerifyReport {
            ok: revisions_ok && broken_at.is_none(),
            revisions,
            events_ok: broken_at.is_none(),
            broken_at,
        })
    }

    /// The invoice with its current revision, if the caller may read it.
    async fn readable(
        &self,
        conn: &mut dyn Tx,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<InvoiceJoined> {
        let joined = conn
            .invoice_joined(actor.org_id(), id)
            .await?
            .ok_or(AppError::NotFound)?;
        let (access, settings) = joined_access(&joined);
        rules::authorize_read(caller(actor), access, settings).map_err(access_error)?;
        Ok(joined)
    }
}

/// Validated content of a create or revise, before the parties are checked.
struct Content {
    customer_id: Uuid,
    destination_id: Uuid,
    currency: Currency,
    due_date: NaiveDate,
    lines: Vec<PayloadLine>,
    reasoning: String,
}

impl Content {
    /// Checks every field (merging omitted ones from `current` for a revise); `None` when some
    /// field failed, with every failure in `errors`.
    fn from_input(
        input: &DraftInput,
        current: Option<&RevisionRow>,
        errors: &mut Vec<FieldError>,
    ) -> Option<Content> {
        let required = |field: &str, errors: &mut Vec<FieldError>| {
            errors.push(FieldError::plain(
                field,
                "required",
                format!("`{field}` is required"),
            ));
        };
        let customer_id = input.customer_id.or(current.map(|c| c.customer_id));
        if customer_id.is_none() {
            required("customer_id", errors);
        }
        let destination_id = input
            .payment_destination_id
            .or(current.map(|c| c.payment_destination_id));
        if destination_id.is_none() {
            required("payment_destination_id", errors);
        }
        let currency = match (&input.currency, current) {
            (Some(code), _) => Currency::from_str(code.trim())
                .map_err(|e| errors.push(FieldError::new("currency", &e)))
                .ok(),
            (None, Some(c)) => Currency::from_str(&c.currency).ok(),
            (None, None) => {
                required("currency", errors);
                None
            }
        };
        let due_date = match (&input.due_date, current) {
            (Some(text), _) => parse_due_date(text, errors),
            (None, Some(c)) => Some(c.due_date),
            (None, None) => {
                required("due_date", errors);
                None
            }
        };
        let reasoning = match &input.reasoning {
            Some(text) => Some(super::text_field(
                "reasoning",
                text,
                MAX_REASONING_CHARS,
                errors,
            )),
            None => {
                required("reasoning", errors);
                None
            }
        };
        let lines = match (&input.lines, currency, current) {
            (Some(lines), Some(currency), _) => match validate_lines(currency, lines) {
                Ok(valid) => Some(valid.payload_lines()),
                Err(mut line_errors) => {
                    errors.append(&mut line_errors);
                    None
                }
            },
            (Some(_), None, _) => None,
            (None, Some(currency), Some(c)) => {
                if currency.code() != c.currency {
                    // Stored lines are minor units of the old currency: they mean other money now.
                    errors.push(FieldError::plain(
                        "lines",
                        "required",
                        "send `lines` again when changing the currency: amounts are in the currency's units",
                    ));
                    None
                } else {
                    decode_lines(&c.lines)
                        .map_err(|e| errors.push(FieldError::new("lines", &e)))
                        .ok()
                }
            }
            (None, _, _) => {
                if current.is_none() {
                    required("lines", errors);
                }
                None
            }
        };
        Some(Content {
            customer_id: customer_id?,
            destination_id: destination_id?,
            currency: currency?,
            due_date: due_date?,
            lines: lines?,
            reasoning: reasoning?,
        })
    }

    fn payload(&self, destination: PayloadDestination) -> Payload {
        Payload {
            customer_id: self.customer_id,
            destination,
            currency: self.currency,
            due_date: self.due_date,
            lines: self.lines.clone(),
        }
    }

    fn seal(&self, destination: &DestinationRow) -> AppResult<crate::domain::payload::Seal> {
        let network = Network::from_str(&destination.network)
            .map_err(|_| AppError::Internal("stored network unreadable".into()))?;
        let payload = self.payload(PayloadDestination {
            id: destination.id,
            network,
            address: destination.address.clone(),
        });
        seal(&payload).map_err(|e| AppError::Validation(vec![FieldError::new("lines", &e)]))
    }

    fn revision_row(
        &self,
        org_id: Uuid,
        invoice_id: Uuid,
        number: i32,
        destination: &DestinationRow,
        sealed: &crate::domain::payload::Seal,
        now: DateTime<Utc>,
    ) -> RevisionRow {
        RevisionRow {
            id: Uuid::now_v7(),
            org_id,
            invoice_id,
            number,
            customer_id: self.customer_id,
            payment_destination_id: destination.id,
            destination_network: destination.network.clone(),
            destination_address: destination.address.clone(),
            currency: self.currency.code().to_owned(),
            due_date: self.due_date,
            lines: encode_lines(&self.lines),
            total_minor: sealed.total_minor.to_string(),
            reasoning: self.reasoning.clone(),
            canonical_payload: sealed.canonical.clone(),
            payload_hash: sealed.hash.clone(),
            created_at: now,
        }
    }
}

/// Reads `YYYY-MM-DD`. Whether the date is still ahead is checked with the parties, after a
/// create's replay look-up: a replay succeeds even after the original due date has passed.
fn parse_due_date(text: &str, errors: &mut Vec<FieldError>) -> Option<NaiveDate> {
    match NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d") {
        Ok(date) if text.trim().len() == 10 => Some(date),
        _ => {
            errors.push(FieldError::plain(
                "due_date",
                "invalid_date",
                "send due_date as YYYY-MM-DD",
            ));
            None
        }
    }
}

/// The rules of a new revision that depend on the current state (inside the transaction, after
/// the invoice lock): a due date of today (UTC) or later, the agent's own customer, the agent's
/// own active destination for this currency. The destination is share-locked: a concurrent deactivation
/// cannot slip between this check and the commit, yet drafts naming the same destination do
/// not queue behind each other.
async fn check_parties(
    tx: &mut dyn Tx,
    actor: &Actor,
    content: &Content,
) -> AppResult<DestinationRow> {
    let mut errors = Vec::new();
    let today = now().date_naive();
    if content.due_date < today {
        errors.push(FieldError::plain(
            "due_date",
            "due_date_in_past",
            format!("due_date must be today ({today}, UTC) or later"),
        ));
    }
    let customer = tx
        .customer_by_id(actor.org_id(), content.customer_id)
        .await?;
    let customer_ok = match customer {
        Some(c) => sees_own(actor, c.agent_id),
        None => false,
    };
    if !customer_ok {
        errors.push(FieldError::plain(
            "customer_id",
            "unknown_customer",
            "no customer with this id is yours; send one of your customers' ids (GET /v1/customers)",
        ));
    }
    let destination = tx
        .share_destination(actor.org_id(), content.destination_id)
        .await?
        .filter(|d| sees_own(actor, d.agent_id));
    match &destination {
        None => errors.push(FieldError::plain(
            "payment_destination_id",
            "unknown_destination",
            "no payment destination with this id is yours; send one of your destinations' ids",
        )),
        Some(d) if d.state != ACTIVE => errors.push(FieldError::plain(
            "payment_destination_id",
            "destination_inactive",
            "this payment destination no longer receives money; send an active one (GET /v1/payment-destinations?state=active)",
        )),
        Some(d) if d.currency != content.currency.code() => errors.push(FieldError::plain(
            "currency",
            "currency_mismatch",
            format!("the payment destination receives {}; send currency {} or another destination", d.currency, d.currency),
        )),
        Some(_) => {}
    }
    match destination {
        Some(d) if errors.is_empty() => Ok(d),
        _ => Err(AppError::Validation(errors)),
    }
}

/// A payload hash as Tauros writes it: lowercase hex SHA-256 (DECISIONS.md, Invoices).
fn is_payload_hash(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// An agent's records are the ones it owns; invoices are created and revised by agents only.
fn sees_own(actor: &Actor, agent_id: Uuid) -> bool {
    matches!(actor, Actor::Agent(a) if a.id == agent_id)
}

/// The visibility facts that came with a joined read.
fn joined_access(j: &InvoiceJoined) -> (InvoiceAccess, OrgSettings) {
    (
        InvoiceAccess {
            agent_id: j.agent_id,
            agent_owner_id: j.agent_owner_id,
        },
        OrgSettings {
            four_eyes: j.four_eyes,
            shared_review: j.shared_review,
        },
    )
}

async fn access_facts(
    tx: &mut dyn Tx,
    org_id: Uuid,
    agent_id: Uuid,
) -> AppResult<(InvoiceAccess, OrgSettings)> {
    let owner = tx
        .agent_by_id(org_id, agent_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without agent".into()))?
        .owner_id;
    let org = tx
        .org_by_id(org_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without org".into()))?;
    Ok((
        InvoiceAccess {
            agent_id,
            agent_owner_id: owner,
        },
        OrgSettings {
            four_eyes: org.four_eyes,
            shared_review: org.shared_review,
        },
    ))
}

async fn current_revision(tx: &mut dyn Tx, invoice: &InvoiceRow) -> AppResult<RevisionRow> {
    tx.revision_by_id(invoice.org_id, invoice.current_revision_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without current revision".into()))
}

fn caller(actor: &Actor) -> Caller {
    match actor {
        Actor::Agent(a) => Caller::Agent { id: a.id },
        Actor::Human(h) => Caller::Human {
            id: h.id,
            role: h.role,
        },
    }
}

fn actor_id(actor: &Actor) -> Uuid {
    match actor {
        Actor::Agent(a) => a.id,
        Actor::Human(h) => h.id,
    }
}

fn access_error(e: AccessError) -> AppError {
    match e {
        AccessError::NotFound => AppError::NotFound,
        AccessError::Forbidden(why) => AppError::Forbidden(why),
        AccessError::FourEyesRequired => AppError::FourEyesRequired(e.to_string()),
    }
}

fn invalid(e: rules::InvalidTransition) -> AppError {
    AppError::InvalidTransition {
        from: e.from.as_str(),
        action: e.action.as_str(),
        detail: e.to_string(),
    }
}

fn conflict<E: Coded>(e: &E) -> AppError {
    AppError::Conflict {
        code: e.code(),
        detail: e.to_string(),
    }
}

fn parse_state(s: &str) -> AppResult<InvoiceState> {
    InvoiceState::parse(s).ok_or_else(|| AppError::Internal(format!("unknown invoice state {s}")))
}

fn parse_kind(s: &str) -> AppResult<DecisionKind> {
    DecisionKind::parse(s).ok_or_else(|| AppError::Internal(format!("unknown decision {s}")))
}

fn cancelled_by(invoice: &InvoiceRow) -> Option<Action> {
    invoice.cancelled_by.as_deref().and_then(Action::parse)
}

/// The next link of the invoice's event chain; updates the invoice's chain head.
fn next_event(
    invoice: &mut InvoiceRow,
    action: Action,
    from: Option<InvoiceState>,
    actor: AuditActor,
    revision: Option<&RevisionRow>,
    idempotency_key: Option<&str>,
    note: Option<&str>,
) -> EventRow {
    let mut event = EventRow {
        id: Uuid::now_v7(),
        org_id: invoice.org_id,
        invoice_id: invoice.id,
        seq: invoice.event_count + 1,
        action: action.as_str().to_owned(),
        from_state: from.map(|s| s.as_str().to_owned()),
        to_state: invoice.state.clone(),
        actor_kind: actor.kind.as_str().to_owned(),
        actor_id: actor.id,
        interface: actor.interface.as_str().to_owned(),
        revision_id: revision.map(|r| r.id),
        payload_hash: revision.map(|r| r.payload_hash.clone()),
        idempotency_key: idempotency_key.map(str::to_owned),
        note: note.map(str::to_owned),
        occurred_at: invoice.updated_at,
        prev_hash: invoice.last_event_hash.clone(),
        hash: String::new(),
    };
    event.hash = event_hash(&event.prev_hash, &event_fields(&event));
    invoice.event_count = event.seq;
    invoice.last_event_hash = event.hash.clone();
    event
}

fn event_fields(e: &EventRow) -> EventFields<'_> {
    EventFields {
        invoice_id: e.invoice_id,
        seq: e.seq,
        action: &e.action,
        from_state: e.from_state.as_deref(),
        to_state: &e.to_state,
        actor_kind: &e.actor_kind,
        actor_id: e.actor_id,
        interface: &e.interface,
        revision_id: e.revision_id,
        payload_hash: e.payload_hash.as_deref(),
        idempotency_key: e.idempotency_key.as_deref(),
        note: e.note.as_deref(),
        occurred_at: e.occurred_at,
    }
}

fn stored(r: &RevisionRow) -> StoredRevision<'_> {
    StoredRevision {
        customer_id: r.customer_id,
        destination_id: r.payment_destination_id,
        network: &r.destination_network,
        address: &r.destination_address,
        currency: &r.currency,
        due_date: r.due_date,
        lines_json: &r.lines,
        total_minor: &r.total_minor,
    }
}

fn revision_view(r: RevisionRow) -> AppResult<RevisionView> {
    let currency = Currency::from_str(&r.currency)
        .map_err(|_| AppError::Internal("stored currency unreadable".into()))?;
    let lines = decode_lines(&r.lines).map_err(|e| AppError::Internal(e.to_string()))?;
    let lines = lines
        .iter()
        .map(|l| LineView::new(currency, l).map_err(|e| AppError::Internal(e.to_string())))
        .collect::<AppResult<Vec<_>>>()?;
    let total_minor =
        MinorAmount::parse_minor(&r.total_minor).map_err(|e| AppError::Internal(e.to_string()))?;
    Ok(RevisionView {
        id: r.id,
        number: r.number,
        customer_id: r.customer_id,
        payment_destination_id: r.payment_destination_id,
        currency: r.currency,
        due_date: r.due_date,
        lines,
        total: total_minor.to_major_string(currency),
        total_minor,
        reasoning: r.reasoning,
        canonical_payload: r.canonical_payload,
        payload_hash: r.payload_hash,
        created_at: r.created_at,
    })
}

fn view(invoice: &InvoiceRow, revision: RevisionRow) -> AppResult<InvoiceView> {
    Ok(InvoiceView {
        id: invoice.id,
        agent_id: invoice.agent_id,
        idempotency_key: invoice.idempotency_key.clone(),
        state: invoice.state.clone(),
        number: invoice.number.clone(),
        current_revision: revision_view(revision)?,
        revision_count: invoice.revision_count,
        created_at: invoice.created_at,
        updated_at: invoice.updated_at,
    })
}

fn joined_view(j: InvoiceJoined) -> AppResult<InvoiceView> {
    Ok(InvoiceView {
        id: j.revision.invoice_id,
        agent_id: j.agent_id,
        idempotency_key: j.idempotency_key,
        state: j.state,
        number: j.invoice_number,
        revision_count: j.revision_count,
        created_at: j.invoice_created_at,
        updated_at: j.invoice_updated_at,
        current_revision: revision_view(j.revision)?,
    })
}
