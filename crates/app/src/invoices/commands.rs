//! The invoice commands. Each one on an existing invoice locks the invoice row first and
//! decides on its current state, then any destination: always invoice → destination, so
//! commands cannot deadlock. A command whose goal already holds writes nothing: a replay.

use super::chain::{EventInput, next_event, record_event};
use super::content::{
    canonical_to, create_parties, current_content, drafted, locked_parties, refused_parties,
    seal_to, seals_as, stored,
};
use super::views::{InvoiceView, invoice_view, joined_view};
use super::{access_error, caller, conflict, invalid};
use crate::actor::{Actor, Agent};
use crate::app::{App, finish};
use crate::audit::AuditActor;
use crate::auth::Caller;
use crate::clock::now;
use crate::error::{AppError, AppResult, FieldError, KeyHolder};
use crate::idempotency::{self, Keyed, KeyedCreate, Replayed, Written};
use async_trait::async_trait;
use tauros_domain::audit::GENESIS;
use tauros_domain::destination::DestinationState;
use tauros_domain::error::required;
use tauros_domain::fingerprint::{key_error, key_is_valid};
use tauros_domain::identity::{Capability, Credential, Interface};
use tauros_domain::invoice::{
    self as rules, Action, DecideFacts, DecideOutcome, DecisionKind, DraftContent, DraftInput,
    ExistingDecision, InvoiceState, OrgSettings, SubmitFacts, Transition, check_content,
    check_payload_hash,
};
use tauros_domain::payload::verify;
use tauros_store::{
    Constraint, DecisionRow, InvoiceJoined, InvoiceRow, Lane, Lock, Presenter, Reader, RevisionRow,
    StoreError, Tx,
};
use uuid::Uuid;

impl App {
    /// An agent proposes an invoice; a repeat with its key replays, another payload conflicts.
    pub async fn create_draft(
        &self,
        caller: impl Into<Caller<'_>>,
        key: &str,
        input: DraftInput,
    ) -> AppResult<Replayed<InvoiceView>> {
        match caller.into() {
            Caller::Actor(actor) => self.create_draft_as(actor, key, input).await,
            Caller::Presented { bearer, via } => {
                self.create_draft_presented(bearer, via, key, input).await
            }
        }
    }

    async fn create_draft_as(
        &self,
        actor: &Actor,
        key: &str,
        input: DraftInput,
    ) -> AppResult<Replayed<InvoiceView>> {
        let agent = proposer(actor)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let content = checked_draft(&mut *conn, actor, key_is_valid(key), &input).await?;

        // Fast path: a replay costs one indexed read and takes no lock.
        let create = NewDraft {
            agent,
            key,
            content,
        };
        if let Some(replayed) = idempotency::lookup(&create, &mut *conn).await? {
            return Ok(replayed);
        }
        drop(conn);
        self.created(&create).await
    }

    /// A create under the agent's lock: written, or a concurrent winner's replay.
    async fn created(&self, create: &NewDraft<'_>) -> AppResult<Replayed<InvoiceView>> {
        let created = idempotency::create(&self.store, create).await?;
        if !created.replayed {
            failpoint!(create.agent.org_id, CreateCommitted);
        }
        Ok(created)
    }

    /// [`App::create_draft`] checking an API key and its idempotency key in one statement.
    async fn create_draft_presented(
        &self,
        bearer: &str,
        via: Interface,
        key: &str,
        input: DraftInput,
    ) -> AppResult<Replayed<InvoiceView>> {
        let credential = Credential::parse(bearer).ok_or(AppError::Unauthorized)?;
        let checked = key_is_valid(key).then(|| check_content(&input, None));
        let (Credential::ApiKey(api_key), Some(Ok(content))) = (&credential, checked) else {
            let actor = self.authenticate(bearer, via).await?;
            return self.create_draft_as(&actor, key, input).await;
        };
        // Whose work this is is known only once the credential is checked, with this read.
        let mut conn = self.store.reader(Lane::Unattributed).await?;
        let found = conn.invoice_by_key_presented(api_key.id(), key).await?;
        let (stored, existing) = found.map_or((None, None), |(k, existing)| {
            (Some(Presenter::from(k)), existing)
        });
        let (actor, used) = self.verify_credential(&credential, stored, via)?;
        // A replay keeps its reader for the comparison (one acquire in all) unless the key's
        // use is recorded first: that write waits for a unit of work, never while holding one.
        let conn = match used {
            None => Some(conn),
            Some(used) => {
                drop(conn);
                self.mark_used(used).await?;
                None
            }
        };
        let agent = proposer(&actor)?;
        let create = NewDraft {
            agent,
            key,
            content,
        };
        match existing {
            Some(existing) => {
                let mut conn = match conn {
                    Some(conn) => conn,
                    None => self.store.reader(actor.lane()).await?,
                };
                idempotency::answer(&create, &mut *conn, existing).await
            }
            None => {
                drop(conn);
                self.created(&create).await
            }
        }
    }

    /// Every field problem of a keyless create at once, without the database (humans get 403).
    pub fn draft_field_errors(
        &self,
        actor: &Actor,
        input: &DraftInput,
    ) -> AppResult<Vec<FieldError>> {
        proposer(actor)?;
        Ok(check_content(input, None)
            .err()
            .map(|refused| refused.errors)
            .unwrap_or_default())
    }

    /// The agent writes a new revision (the invoice back to `draft`); unchanged content replays.
    pub async fn revise(
        &self,
        actor: &Actor,
        id: Uuid,
        input: DraftInput,
    ) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let (mut invoice, _) = locked(&mut *tx, actor, id, Action::Revise).await?;
            let Transition::Apply { to } =
                rules::transition(Action::Revise, invoice.state, invoice.cancelled_by)
                    .map_err(invalid)?
            else {
                return Err(AppError::Internal("revise never replays by state".into()));
            };
            let current = current_revision(&mut *tx, &invoice).await?;
            let content = match check_content(&input, Some(&current_content(&current)?)) {
                Ok(content) => content,
                Err(refused) => {
                    let mut errors = refused.errors;
                    errors.extend(refused_parties(&mut *tx, actor, refused.known).await?);
                    return Err(AppError::Validation(errors));
                }
            };
            // Content equal to the current revision's is a replay, recognised before the
            // parties are checked again (docs/contract/domain.md §7): its destination may
            // have been retired or its due date passed since.
            if seals_as(&content, &current)? {
                return unchanged(&mut *tx, &invoice).await;
            }
            // At most 100 revisions, by the invoice's revision count read under its lock.
            let number = tauros_domain::bounds::next_revision(invoice.revision_count)?;
            let parties = locked_parties(&mut *tx, actor, &content).await?;
            let now = now();
            let revision = drafted(
                actor,
                &content,
                parties,
                (invoice.org_id, invoice.id),
                number,
                now,
            )?;
            let from = invoice.state;
            invoice.state = to;
            invoice.current_revision_id = revision.id;
            invoice.revision_count = number;
            invoice.updated_at = now;
            let event = next_event(
                &mut invoice,
                &EventInput {
                    action: Action::Revise,
                    from: Some(from),
                    actor: AuditActor::of(actor),
                    revision: Some(&revision),
                    idempotency_key: None,
                    note: None,
                    settings: None,
                },
            );
            tx.insert_revision(&revision).await?;
            tx.update_invoice(&invoice).await?;
            record_event(&mut *tx, &event).await?;
            written(&mut *tx, &invoice).await
        }
        .await;
        committed(tx, actor.org_id(), answer).await
    }

    /// The proposing agent asks for approval.
    pub async fn submit(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let (mut invoice, _) = locked(&mut *tx, actor, id, Action::Submit).await?;
            let current = current_revision(&mut *tx, &invoice).await?;
            let decision = tx.decision_for_revision(invoice.org_id, current.id).await?;
            let destination = tx
                .lock_destination(invoice.org_id, current.payment_destination_id, Lock::Share)
                .await?;
            let facts = SubmitFacts {
                state: invoice.state,
                current_decision: decision.map(|d| d.decision),
                destination_active: destination
                    .is_some_and(|d| d.state == DestinationState::Active),
            };
            // An illegal state keeps its `from` and `action` members, as in every other command.
            match rules::submit_transition(facts).map_err(|e| match e {
                rules::SubmitError::InvalidTransition(t) => invalid(t),
                other => conflict(&other),
            })? {
                Transition::Replay => unchanged(&mut *tx, &invoice).await,
                Transition::Apply { to } => {
                    let change = Change {
                        action: Action::Submit,
                        to,
                        revision: &current,
                        note: None,
                        settings: None,
                    };
                    apply(&mut *tx, &mut invoice, actor, change).await
                }
            }
        }
        .await;
        committed(tx, actor.org_id(), answer).await
    }

    /// The proposing agent, or a human who sees it, takes an undecided invoice back.
    pub async fn withdraw(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        self.simple_transition(actor, id, Action::Withdraw, None)
            .await
    }

    /// An approver cancels an approved invoice; a reason is required.
    pub async fn cancel(
        &self,
        actor: &Actor,
        id: Uuid,
        reason: Option<&str>,
    ) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        self.simple_transition(actor, id, Action::Cancel, reason)
            .await
    }

    async fn simple_transition(
        &self,
        actor: &Actor,
        id: Uuid,
        action: Action,
        reason: Option<&str>,
    ) -> AppResult<Replayed<InvoiceView>> {
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let (mut invoice, _) = locked(&mut *tx, actor, id, action).await?;
            // Who may act comes first: an agent calling cancel hears 403, not a missing reason.
            let note = rules::validate_reason(action, reason)
                .map_err(|e| AppError::Validation(vec![e]))?;
            match rules::transition(action, invoice.state, invoice.cancelled_by).map_err(invalid)? {
                Transition::Replay => unchanged(&mut *tx, &invoice).await,
                Transition::Apply { to } => {
                    rules::check_issuing(
                        action,
                        invoice.number.is_some(),
                        invoice
                            .issuing_status
                            .is_some_and(tauros_domain::effect::IssuingStatus::awaits_human),
                    )
                    .map_err(|e| conflict(&e))?;
                    if to == InvoiceState::Cancelled {
                        invoice.cancelled_by = Some(action);
                        // Not issuing any more; a number it had stays on it, void.
                        invoice.issuing_status = None;
                        invoice.issuing_reason = None;
                    }
                    let current = current_revision(&mut *tx, &invoice).await?;
                    let change = Change {
                        action,
                        to,
                        revision: &current,
                        note,
                        settings: None,
                    };
                    apply(&mut *tx, &mut invoice, actor, change).await
                }
            }
        }
        .await;
        committed(tx, actor.org_id(), answer).await
    }

    /// An approver approves, rejects or requests changes on one exact revision and hash, in
    /// the nine-step order of docs/contract/domain.md §5.
    pub async fn decide(
        &self,
        actor: &Actor,
        id: Uuid,
        kind: DecisionKind,
        revision_id: Option<Uuid>,
        payload_hash: Option<&str>,
        reason: Option<&str>,
    ) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        let action = kind.action();
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let (mut invoice, settings) = locked(&mut *tx, actor, id, action).await?;
            let approver_id = actor.id();
            // After the access check (403, or a stranger's 404), every field rule at once.
            let mut errors = Vec::new();
            let revision_id = required("revision_id", revision_id, &mut errors);
            let payload_hash = required("payload_hash", payload_hash, &mut errors);
            if let Some(Err(e)) = payload_hash.map(check_payload_hash) {
                errors.push(e);
            }
            let reason = rules::validate_reason(action, reason)
                .map_err(|e| errors.push(e))
                .ok()
                .flatten();
            let (Some(revision_id), Some(payload_hash)) = (revision_id, payload_hash) else {
                return Err(AppError::Validation(errors));
            };
            if !errors.is_empty() {
                return Err(AppError::Validation(errors));
            }
            let existing = tx
                .decision_for_revision(invoice.org_id, revision_id)
                .await?;
            failpoint!(invoice.org_id, ExistingDecisionRead);
            let named = tx.revision_by_id(invoice.org_id, revision_id).await?;
            failpoint!(invoice.org_id, NamedRevisionRead);
            let current = current_revision(&mut *tx, &invoice).await?;
            let destination = tx
                .lock_destination(invoice.org_id, current.payment_destination_id, Lock::Share)
                .await?;
            failpoint!(invoice.org_id, DecisionDestinationLocked);
            let facts = DecideFacts {
                kind,
                approver_id,
                revision_id,
                payload_hash: payload_hash.to_owned(),
                reason: reason.clone(),
                existing: existing.as_ref().map(|d| ExistingDecision {
                    approver_id: d.approver_id,
                    kind: d.decision,
                    payload_hash: d.payload_hash.clone(),
                }),
                state: invoice.state,
                revision_of_invoice: named.is_some_and(|r| r.invoice_id == invoice.id),
                current_revision_id: current.id,
                current_payload_hash: current.payload_hash.clone(),
                reseal_matches: verify(
                    &stored(&current),
                    &current.canonical_payload,
                    &current.payload_hash,
                )
                .is_ok(),
                destination_active: destination.is_some_and(|d| d.state == DestinationState::Active),
            };
            match rules::decide(facts).map_err(|e| match e {
                rules::DecideError::Reason(field) => AppError::Validation(vec![field]),
                rules::DecideError::InvalidTransition(t) => invalid(t),
                other => conflict(&other),
            })? {
                DecideOutcome::Replay => unchanged(&mut *tx, &invoice).await,
                DecideOutcome::Apply { to, kind, reason } => {
                    let decision = DecisionRow {
                        id: Uuid::now_v7(),
                        org_id: invoice.org_id,
                        invoice_id: invoice.id,
                        revision_id: current.id,
                        approver_id,
                        decision: kind,
                        payload_hash: current.payload_hash.clone(),
                        reason: reason.clone(),
                        decided_at: now(),
                    };
                    invoice.last_decision_id = Some(decision.id);
                    match tx.insert_decision(&decision).await {
                        // The invoice lock serializes deciders; the unique index is the backstop.
                        Err(StoreError::Conflict(Constraint::DecisionPerRevision)) => {
                            return Err(AppError::Conflict {
                                code: "already_decided",
                                detail: "this revision was decided concurrently; GET the invoice to see the decision".into(),
                            });
                        }
                        other => other?,
                    }
                    failpoint!(invoice.org_id, DecisionInserted);
                    // With an issuer, the approval and the job that issues it commit together.
                    if kind == DecisionKind::Approved && self.issuing_is_automatic() {
                        let enqueued = crate::queue::enqueue(
                            &mut *tx,
                            super::issue_job(invoice.org_id, invoice.id, invoice.issue_version),
                        )
                        .await?;
                        invoice.issuing_status = Some(tauros_domain::effect::IssuingStatus::Pending);
                        invoice.issuing_job_id = Some(enqueued.id);
                    }
                    let change = Change {
                        action,
                        to,
                        revision: &current,
                        note: reason,
                        settings: Some(settings),
                    };
                    apply(&mut *tx, &mut invoice, actor, change).await
                }
            }
        }
        .await;
        committed(tx, actor.org_id(), answer).await
    }
}

/// The agent proposing an invoice, if `actor` may (a human gets 403); every create's entry.
pub(super) fn proposer(actor: &Actor) -> AppResult<&Agent> {
    actor.require(Capability::Invoicing)?;
    rules::authorize_create_draft(caller(actor)).map_err(access_error)?;
    match actor {
        Actor::Agent(agent) => Ok(agent),
        Actor::Human(_) => Err(AppError::Forbidden("only agents propose invoices")),
    }
}

/// A create's body checked before any lock, by create and preview alike, so one answer lists
/// every broken rule (`key_ok`: the key is well-formed); [`drafted`] rejudges the parties.
pub(super) async fn checked_draft(
    conn: &mut dyn Reader,
    actor: &Actor,
    key_ok: bool,
    input: &DraftInput,
) -> AppResult<DraftContent> {
    match (key_ok, check_content(input, None)) {
        (true, Ok(content)) => Ok(content),
        (key_ok, checked) => {
            let mut errors = if key_ok { vec![] } else { vec![key_error()] };
            let known = match checked {
                Ok(content) => content.known(),
                Err(refused) => {
                    errors.extend(refused.errors);
                    refused.known
                }
            };
            errors.extend(refused_parties(&mut *conn, actor, known).await?);
            Err(AppError::Validation(errors))
        }
    }
}

/// Whether revision 1 is current: a replay then compares bytes, sparing the request's hash.
fn revision_one_is_current(existing: &InvoiceJoined) -> bool {
    existing.revision.number == 1
}

/// An agent's proposal under its idempotency key (unique per org and agent).
struct NewDraft<'a> {
    agent: &'a Agent,
    key: &'a str,
    content: DraftContent,
}

/// A create whose key exists: the same payload (revision 1's) replays, another conflicts.
#[async_trait]
impl Keyed for NewDraft<'_> {
    type Stored = InvoiceJoined;
    type Answer = InvoiceView;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<InvoiceJoined>> {
        let agent = self.agent;
        Ok(conn
            .invoice_joined_by_key(agent.org_id, agent.id, self.key)
            .await?)
    }

    /// Revision 1's canonical bytes while it is current (in the read row), else its hash.
    fn stored_fingerprint<'s>(&self, existing: &'s InvoiceJoined) -> Option<&'s str> {
        Some(if revision_one_is_current(existing) {
            &existing.revision.canonical_payload
        } else {
            &existing.first_payload_hash
        })
    }

    /// The request sealed as revision 1 was: the same destination's network and address.
    async fn fingerprint(
        &self,
        conn: &mut dyn Reader,
        existing: &InvoiceJoined,
    ) -> AppResult<Option<String>> {
        let content = &self.content;
        // Destinations are immutable, so the network and address sealed in any revision that
        // names the same destination are the ones revision 1 sealed.
        let destination = if existing.revision.payment_destination_id == content.destination_id {
            Some((
                existing.revision.destination_network.clone(),
                existing.revision.destination_address.clone(),
            ))
        } else {
            conn.destination_by_id(existing.revision.org_id, content.destination_id)
                .await?
                .filter(|d| d.agent_id == self.agent.id)
                .map(|d| (d.network, d.address))
        };
        Ok(destination.and_then(|(network, address)| {
            let (id, network, address) = (content.destination_id, &network, &address);
            if revision_one_is_current(existing) {
                canonical_to(content, id, network, address).ok()
            } else {
                seal_to(content, id, network, address).ok().map(|s| s.hash)
            }
        }))
    }

    fn conflict(&self, existing: &InvoiceJoined) -> AppError {
        AppError::IdempotencyConflict(KeyHolder::Invoice(existing.revision.invoice_id))
    }

    async fn replay(&self, _: &mut dyn Reader, existing: InvoiceJoined) -> AppResult<InvoiceView> {
        joined_view(existing)
    }

    fn vanished(&self) -> AppError {
        AppError::Internal("invoice vanished after a key conflict".into())
    }
}

#[async_trait]
impl KeyedCreate for NewDraft<'_> {
    fn lane(&self) -> Lane {
        Lane::Org(self.agent.org_id)
    }

    /// Holds the agent with the draft's parties (one read), then inserts the invoice, revision 1
    /// and its first event. The unique key (org, agent, key) serializes concurrent creates: the
    /// loser inserts nothing and its unit stays readable.
    async fn write(&self, tx: &mut dyn Tx) -> AppResult<Written<InvoiceView>> {
        let (agent, key, content) = (self.agent, self.key, &self.content);
        let actor = Actor::Agent(agent.clone());
        let Some(parties) = create_parties(&mut *tx, agent, key, content).await? else {
            return Ok(Written::KeyTaken);
        };
        let now = now();
        let invoice_id = Uuid::now_v7();
        let revision = drafted(&actor, content, parties, (agent.org_id, invoice_id), 1, now)?;
        let mut invoice = InvoiceRow {
            id: invoice_id,
            org_id: agent.org_id,
            agent_id: agent.id,
            idempotency_key: key.to_owned(),
            state: InvoiceState::Draft,
            cancelled_by: None,
            number: None,
            current_revision_id: revision.id,
            revision_count: 1,
            first_payload_hash: revision.payload_hash.clone(),
            event_count: 0,
            last_event_hash: GENESIS.to_owned(),
            created_at: now,
            updated_at: now,
            last_decision_id: None,
            amount_paid_minor: "0".to_owned(),
            issuing_status: None,
            issuing_reason: None,
            issuing_job_id: None,
            issue_version: 1,
            payment_count: 0,
            counted_minor: None,
        };
        let event = next_event(
            &mut invoice,
            &EventInput {
                action: Action::CreateDraft,
                from: None,
                actor: AuditActor::agent(agent),
                revision: Some(&revision),
                idempotency_key: Some(key),
                note: None,
                settings: None,
            },
        );
        if !tx.insert_invoice(&invoice).await? {
            return Ok(Written::KeyTaken);
        }
        failpoint!(agent.org_id, InvoiceInserted);
        tx.insert_revision(&revision).await?;
        failpoint!(agent.org_id, RevisionInserted);
        record_event(&mut *tx, &event).await?;
        Ok(Written::Fresh(invoice_view(&invoice, revision)?))
    }
}

/// Locks the invoice and checks `actor` may run `action`; with the settings checked under.
pub(super) async fn locked(
    tx: &mut dyn Tx,
    actor: &Actor,
    id: Uuid,
    action: Action,
) -> AppResult<(InvoiceRow, OrgSettings)> {
    let Some(invoice) = tx.lock_invoice(actor.org_id(), id).await? else {
        return Err(super::miss::unknown_invoice(&mut *tx, actor, id).await?);
    };
    failpoint!(invoice.org_id, InvoiceLocked);
    let (access, settings) =
        super::access_facts(&mut *tx, invoice.org_id, invoice.agent_id).await?;
    rules::authorize(action, caller(actor), access, settings).map_err(access_error)?;
    Ok((invoice, settings))
}

pub(super) async fn current_revision(
    tx: &mut dyn Tx,
    invoice: &InvoiceRow,
) -> AppResult<RevisionRow> {
    let current = tx
        .revision_by_id(invoice.org_id, invoice.current_revision_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without current revision".into()))?;
    failpoint!(invoice.org_id, CurrentRevisionRead);
    Ok(current)
}

/// A state change a command writes.
struct Change<'a> {
    action: Action,
    to: InvoiceState,
    /// The revision the event names (the current one).
    revision: &'a RevisionRow,
    /// The decision's or cancellation's reason.
    note: Option<String>,
    /// A decision's org settings in force.
    settings: Option<OrgSettings>,
}

/// Writes the state change and its event, and answers the invoice as it is now.
async fn apply(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    actor: &Actor,
    change: Change<'_>,
) -> AppResult<Replayed<InvoiceView>> {
    let from = invoice.state;
    invoice.state = change.to;
    invoice.updated_at = now();
    let event = next_event(
        invoice,
        &EventInput {
            action: change.action,
            from: Some(from),
            actor: AuditActor::of(actor),
            revision: Some(change.revision),
            idempotency_key: None,
            note: change.note.as_deref(),
            settings: change.settings,
        },
    );
    tx.update_invoice(invoice).await?;
    failpoint!(invoice.org_id, InvoiceUpdated);
    record_event(&mut *tx, &event).await?;
    written(tx, invoice).await
}

/// The invoice as a command left it, read back inside the transaction (with latest decision).
pub(super) async fn written(
    tx: &mut dyn Tx,
    invoice: &InvoiceRow,
) -> AppResult<Replayed<InvoiceView>> {
    let joined = tx
        .invoice_joined(invoice.org_id, invoice.id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice vanished inside its transaction".into()))?;
    failpoint!(invoice.org_id, InvoiceReadBack);
    Ok(Replayed::fresh(joined_view(joined)?))
}

/// Ends a command's unit ([`finish`]), passing `CommandCommitted` after a change's commit.
#[cfg_attr(not(feature = "failpoints"), allow(unused_variables))]
pub(super) async fn committed(
    tx: Box<dyn Tx>,
    org_id: Uuid,
    answer: AppResult<Replayed<InvoiceView>>,
) -> AppResult<Replayed<InvoiceView>> {
    let answer = finish(tx, answer).await?;
    if !answer.replayed {
        failpoint!(org_id, CommandCommitted);
    }
    Ok(answer)
}

/// A replay: nothing is written; the invoice is answered as it is now.
pub(super) async fn unchanged(
    tx: &mut dyn Tx,
    invoice: &InvoiceRow,
) -> AppResult<Replayed<InvoiceView>> {
    let joined = tx
        .invoice_joined(invoice.org_id, invoice.id)
        .await?
        .ok_or(AppError::NotFound)?;
    Ok(Replayed::replay(joined_view(joined)?))
}
