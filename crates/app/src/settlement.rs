//! Settlement (docs/contract/effects.md §4, docs/SETTLEMENT.md). Lock order everywhere: the
//! invoices an event can touch (by id), then the organisation's invoice numbers of a year (only
//! for a number that names no invoice yet), then the payment. Issuing takes the invoice, then
//! its payments; admission the invoice, then the numbers. A step that would need a lock out of
//! that order rolls back and starts again: no wait cycle.

use crate::actor::{Actor, Agent};
use crate::app::App;
use crate::audit::AuditActor;
use crate::clock::now;
use crate::error::{AppError, AppResult, KeyHolder};
use crate::idempotency::{self, Keyed, KeyedCreate, Replayed, Written};
use crate::invoices::{InvoiceView, caller, joined_view, reconcile_payment};
use crate::lists::{PageRequest, list_filter};
use crate::payments::{
    currency, effective_summary, facts_of, invoice_ref_id, invoice_ref_number, set_standing,
    set_summary, stored_ref, summary_of,
};
use crate::schema::{InvoiceStateSchema, PaymentStateSchema, PaymentStatusSchema, UnmatchedSchema};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use tauros_domain::bounds;
use tauros_domain::currency::Currency;
use tauros_domain::identity::Capability;
use tauros_domain::invoice::{InvoiceState, OrgSettings};
use tauros_domain::money::MinorAmount;
use tauros_domain::resolution::ResolveAction;
use tauros_domain::settlement::{
    self as rules, EventInput, InvoiceRef, PaymentFacts, PaymentState, PaymentStatus,
    PaymentSummary, Unmatched, ValidEvent,
};
use tauros_domain::visibility::Scope;
use tauros_store::{InvoiceRow, Lane, PaymentFilter, PaymentRow, Reader, SettlementEventRow, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

/// One payment, as its events and the reconciliation left it.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = PaymentResponse)]
pub struct PaymentView {
    /// The `{id}` of `/v1/payments/{id}`.
    pub id: Uuid,
    /// The reporting system.
    pub source: String,
    /// The payment's id at the source.
    pub payment_id: String,
    /// The invoice as the source named it (one of the two; the earliest event's).
    pub invoice_id: Option<Uuid>,
    pub invoice_number: Option<String>,
    /// The invoice it is matched to; `null` while no invoice has that id or number.
    pub matched_invoice_id: Option<Uuid>,
    /// The amount paid, with exactly the currency's decimals (the earliest event's).
    pub amount: String,
    /// `amount` in minor units: an exact JSON integer at any size.
    #[schema(value_type = u128)]
    pub amount_minor: MinorAmount,
    pub currency: String,
    /// The furthest state any of its events reported; it never moves back.
    #[schema(value_type = PaymentStateSchema)]
    #[serde(serialize_with = "payment_state")]
    pub state: PaymentState,
    /// What Tauros made of it.
    #[schema(value_type = PaymentStatusSchema)]
    #[serde(serialize_with = "payment_status")]
    pub status: PaymentStatus,
    /// Why it counts toward no invoice, when it names one it cannot count toward.
    #[schema(value_type = Option<UnmatchedSchema>)]
    #[serde(serialize_with = "unmatched")]
    pub unmatched_reason: Option<Unmatched>,
    /// Confirmed once, failed since (the source reversed it).
    pub reversed: bool,
    /// The part that counts toward its invoice, with exactly the currency's decimals; less
    /// than `amount` when it is overpaid.
    pub allocated: String,
    /// `allocated` in minor units.
    #[schema(value_type = u128)]
    pub allocated_minor: MinorAmount,
    /// How many events were reported about it.
    pub event_count: i32,
    /// When its first event arrived (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When an event, a reconciliation or a resolution last changed it (RFC 3339, UTC).
    pub updated_at: DateTime<Utc>,
    /// What an approver resolved it with (`POST /v1/payments/{id}/resolve`): `accept` (it
    /// counts at `resolved_amount`), `allocate` (it counts at `resolved_amount` toward
    /// `matched_invoice_id`) or `void` (nothing of it counts; its status is `failed`). `null`:
    /// not resolved.
    #[schema(value_type = Option<String>, example = "accept")]
    pub resolution: Option<&'static str>,
    /// The amount an `accept` or `allocate` counts it at, with exactly the currency's decimals.
    pub resolved_amount: Option<String>,
    /// `resolved_amount` in minor units.
    #[schema(value_type = Option<u128>)]
    pub resolved_amount_minor: Option<MinorAmount>,
}

/// One event as its source sent it.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = SettlementEventResponse)]
pub struct SettlementEventView {
    /// Tauros's id of the event.
    pub id: Uuid,
    /// The reporting system.
    pub source: String,
    /// The event's id at the source.
    pub event_id: String,
    /// The payment's id at the source.
    pub payment_id: String,
    /// The invoice as this event named it (one of the two).
    pub invoice_id: Option<Uuid>,
    pub invoice_number: Option<String>,
    /// The amount this event reported, with exactly the currency's decimals.
    pub amount: String,
    /// `amount` in minor units: an exact JSON integer at any size (read `amount` in
    /// JavaScript above 2^53).
    #[schema(value_type = u128)]
    pub amount_minor: MinorAmount,
    pub currency: String,
    /// What this event said the payment was.
    #[schema(value_type = PaymentStateSchema)]
    #[serde(serialize_with = "payment_state")]
    pub status: PaymentState,
    /// When it happened at the source (RFC 3339, UTC).
    pub occurred_at: DateTime<Utc>,
    /// The source's own record, as sent (members in name order).
    #[schema(value_type = Option<Object>)]
    #[serde(serialize_with = "raw_json")]
    pub raw: Option<String>,
    /// When Tauros received it first (RFC 3339, UTC).
    pub received_at: DateTime<Utc>,
    /// It disagrees with its payment's amount, currency or invoice: the payment is in
    /// `conflict` until a human has looked.
    pub contradicts: bool,
}

/// What a payment's invoice looks like after reconciliation.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = PaidInvoiceResponse)]
pub struct InvoiceStanding {
    /// The invoice.
    pub id: Uuid,
    /// Its number, once issued.
    pub number: Option<String>,
    #[schema(value_type = InvoiceStateSchema)]
    pub state: InvoiceState,
    pub currency: String,
    /// How much of the total confirmed payments cover, with exactly the currency's decimals.
    pub amount_paid: String,
    /// `amount_paid` in minor units.
    #[schema(value_type = u128)]
    pub amount_paid_minor: MinorAmount,
    /// What is still to be paid.
    pub balance: String,
    /// `balance` in minor units.
    #[schema(value_type = u128)]
    pub balance_minor: MinorAmount,
}

// The settlement enums have no serde form of their own: the wire shows their names.

fn payment_state<S: Serializer>(v: &PaymentState, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

fn payment_status<S: Serializer>(v: &PaymentStatus, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.as_str())
}

fn unmatched<S: Serializer>(v: &Option<Unmatched>, s: S) -> Result<S::Ok, S::Error> {
    v.map(Unmatched::as_str).serialize(s)
}

/// `raw` as the JSON it holds (`null` if it were ever not JSON).
fn raw_json<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    v.as_deref()
        .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .serialize(s)
}

/// What recording an event answers: the event, its payment and its matched invoice, as now.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub event: SettlementEventView,
    pub payment: PaymentView,
    pub invoice: Option<InvoiceStanding>,
}

/// One attempt at recording an event inside a transaction.
enum Attempt {
    Written(Box<Recorded>),
    /// The event exists already (a parallel redelivery won): answer as a replay.
    Redelivered,
    /// An invoice the event touches changed under it: roll back and start again.
    Retry,
}

impl App {
    /// Records one event (201); the same body again replays, another body is a conflict.
    pub async fn record_settlement_event(
        &self,
        actor: &Actor,
        input: EventInput,
    ) -> AppResult<Replayed<Recorded>> {
        actor.require(Capability::Settlement)?;
        let Actor::Agent(agent) = actor else {
            return Err(AppError::Forbidden(
                "settlement events are reported by agents whose key has the `settlement` \
                 capability; humans read them at GET /v1/payments",
            ));
        };
        let event = rules::validate_event(&input).map_err(AppError::Validation)?;
        let delivery = Delivery {
            agent,
            event: &event,
        };
        // A redelivery costs two indexed reads and takes no lock.
        {
            let mut conn = self.store.reader(actor.lane()).await?;
            // Another agent's source is refused before anything is read, redeliveries included.
            owned_source(
                conn.settlement_source_owner(agent.org_id, &event.source)
                    .await?,
                agent,
            )?;
            if let Some(replayed) = idempotency::lookup(&delivery, &mut *conn).await? {
                return Ok(replayed);
            }
        }
        idempotency::create(&self.store, &delivery).await
    }

    /// The payments the human may see, newest first; `status` narrows it to one inbox.
    pub async fn list_payments(
        &self,
        actor: &Actor,
        status: Option<&str>,
        page: PageRequest,
    ) -> AppResult<Vec<PaymentView>> {
        let human = actor.human()?;
        let mut errors = Vec::new();
        let status = list_filter(
            "status",
            status,
            &PaymentStatus::ALL,
            PaymentStatus::as_str,
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let mut conn = self.store.reader(actor.lane()).await?;
        let settings = org_settings(&mut *conn, human.org_id).await?;
        let filter = PaymentFilter {
            scope: Scope::of_invoices(caller(actor), settings.shared_review),
            status,
        };
        let rows = conn.payments(human.org_id, &filter, page.into()).await?;
        rows.into_iter().map(payment_view).collect()
    }

    /// One payment the human may see, with a page of its events, oldest first.
    pub async fn get_payment(
        &self,
        actor: &Actor,
        id: Uuid,
        page: PageRequest,
    ) -> AppResult<(PaymentView, Vec<SettlementEventView>)> {
        let human = actor.human()?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let payment = conn
            .payment_by_id(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let settings = org_settings(&mut *conn, human.org_id).await?;
        let owner = conn
            .agent_by_id(human.org_id, payment.agent_id)
            .await?
            .ok_or(AppError::NotFound)?
            .owner_id;
        let scope = Scope::of_invoices(caller(actor), settings.shared_review);
        if !scope.includes(payment.agent_id, owner) {
            return Err(AppError::NotFound);
        }
        let summary = summary_of(&payment)?;
        let events = conn
            .settlement_events(human.org_id, payment.id, page.into())
            .await?
            .into_iter()
            .map(|e| event_view(e, &payment.source_payment_id, &summary))
            .collect::<AppResult<Vec<_>>>()?;
        Ok((payment_view(payment)?, events))
    }
}

pub(crate) async fn org_settings(conn: &mut dyn Reader, org_id: Uuid) -> AppResult<OrgSettings> {
    let org = conn.org_by_id(org_id).await?.ok_or(AppError::NotFound)?;
    Ok(OrgSettings {
        four_eyes: org.four_eyes,
        shared_review: org.shared_review,
    })
}

/// One attempt in `tx`: lock in the module's order, keep the event, fold it, reconcile.
async fn record(tx: &mut dyn Tx, agent: &Agent, v: &ValidEvent) -> AppResult<Attempt> {
    let org_id = agent.org_id;
    let named = &v.observation.facts.invoice;
    let existing = tx
        .payment_by_source(org_id, &v.source, &v.payment_id)
        .await?;

    // 1. The invoices: the one the event names, and the one the payment names or is matched
    //    to now; locked in id order.
    let mut refs = vec![named.clone()];
    if let Some(p) = &existing {
        refs.push(facts_of(p)?.invoice);
    }
    let mut ids = Vec::new();
    for r in &refs {
        ids.extend(resolve(&mut *tx, org_id, r).await?);
    }
    ids.extend(existing.as_ref().and_then(|p| p.invoice_id));
    ids.sort();
    ids.dedup();
    let mut invoices = Vec::with_capacity(ids.len());
    for id in &ids {
        if let Some(invoice) = tx.lock_invoice(org_id, *id).await? {
            invoices.push(invoice);
        }
    }
    // 2. A number that names no invoice yet: no invoice may be numbered with it before this
    //    commits, or the issue that numbers it could miss this payment.
    for r in &refs {
        if let Some(year) = r.number_year()
            && resolve(&mut *tx, org_id, r).await?.is_none()
        {
            tx.hold_invoice_numbers(org_id, year).await?;
        }
    }
    for r in &refs {
        if resolve(&mut *tx, org_id, r)
            .await?
            .is_some_and(|id| !ids.contains(&id))
        {
            return Ok(Attempt::Retry);
        }
    }

    // 3. The payment, inserted from this event if it is new, then locked.
    let at = now();
    let fresh = new_payment(agent, v, at);
    let inserted = tx.insert_payment(&fresh).await?;
    let id = match (inserted, &existing) {
        (true, _) => Some(fresh.id),
        (false, Some(p)) => Some(p.id),
        // A concurrent first event of the same payment inserted it since it was read.
        (false, None) => tx
            .payment_by_source(org_id, &v.source, &v.payment_id)
            .await?
            .map(|p| p.id),
    };
    let mut payment = match id {
        Some(id) => tx.lock_payment(org_id, id).await?,
        None => None,
    }
    .ok_or_else(|| AppError::Internal("payment vanished under its lock".into()))?;
    if !inserted {
        // Another transaction may have moved the payment since it was read unlocked.
        let matched_elsewhere = payment.invoice_id.is_some_and(|id| !ids.contains(&id));
        let named_elsewhere = resolve(&mut *tx, org_id, &facts_of(&payment)?.invoice)
            .await?
            .is_some_and(|id| !ids.contains(&id));
        if matched_elsewhere || named_elsewhere {
            return Ok(Attempt::Retry);
        }
    }

    // 4. The event: the unique key decides whether this is its first delivery.
    let row = SettlementEventRow {
        id: Uuid::now_v7(),
        org_id,
        payment_id: payment.id,
        agent_id: agent.id,
        source: v.source.clone(),
        source_event_id: v.observation.event_id.clone(),
        fingerprint: v.fingerprint.clone(),
        status: v.observation.state,
        amount_minor: v.observation.facts.amount.to_string(),
        currency: v.observation.facts.currency.code().to_owned(),
        invoice_ref_id: invoice_ref_id(named),
        invoice_ref_number: invoice_ref_number(named),
        occurred_at: v.observation.occurred_at,
        raw: v.raw.clone(),
        received_at: at,
    };
    if !tx.insert_settlement_event(&row).await? {
        return Ok(Attempt::Redelivered);
    }
    // At most 100 events per payment (the error rolls the whole attempt back); checked after the
    // insert so that a redelivery of a kept event still replays.
    if !inserted {
        bounds::admit_event(payment.event_count)?;
    }

    // 5. The event folded into the payment; `was_counted`: what it counted before.
    let was_counted = if inserted {
        None
    } else {
        Some(effective_summary(&payment)?)
    };
    let summary = if inserted {
        PaymentSummary::of(&v.observation)
    } else {
        summary_of(&payment)?.with(&v.observation)
    };
    let was_matched_to = payment.invoice_id;
    set_summary(&mut payment, &summary);
    // A payment an approver allocated stays on the invoice it was allocated to.
    if payment.resolution != Some(ResolveAction::Allocate) {
        payment.invoice_id = resolve(&mut *tx, org_id, &summary.facts.invoice).await?;
    }
    // At most 1,000 payments per invoice, counted by the invoice's running figure under its lock.
    if let Some(invoice_id) = payment.invoice_id
        && was_matched_to != Some(invoice_id)
    {
        let matched = invoice_in(&invoices, invoice_id)?.payment_count;
        bounds::admit_payment(
            usize::try_from(matched).unwrap_or(usize::MAX),
            bounds::MAX_PAYMENTS_PER_INVOICE,
        )?;
    }
    payment.agent_id = match payment.invoice_id {
        Some(id) => invoice_in(&invoices, id)?.agent_id,
        None => payment.agent_id,
    };
    if !inserted {
        payment.event_count += 1;
    }
    payment.updated_at = at;
    if payment.invoice_id.is_none() {
        let agent_id = payment.agent_id;
        let standing = rules::standing_without_invoice(&effective_summary(&payment)?);
        set_standing(&mut payment, standing, agent_id);
    }
    tx.update_payment(&payment).await?;

    // 6. Every invoice the payment counted toward before or may count toward now.
    let cause = format!(
        "payment {}/{} {} ({})",
        v.source, v.payment_id, v.observation.state, v.observation.event_id
    );
    let actor = AuditActor::agent(agent);
    let mut touched: Vec<Uuid> = was_matched_to
        .into_iter()
        .chain(payment.invoice_id)
        .collect();
    touched.sort();
    touched.dedup();
    // Each touched invoice is reconciled from its running figures (`reconcile_payment`).
    for id in touched {
        let invoice = invoice_mut(&mut invoices, id)?;
        let before = was_counted.as_ref().filter(|_| was_matched_to == Some(id));
        let now = (payment.invoice_id == Some(id)).then_some(&mut payment);
        reconcile_payment(&mut *tx, invoice, before, now, actor, &cause).await?;
    }

    let payment = tx
        .payment_by_id(org_id, payment.id)
        .await?
        .ok_or_else(|| AppError::Internal("payment vanished inside its transaction".into()))?;
    let recorded = recorded(&mut *tx, row, payment).await?;
    Ok(Attempt::Written(Box::new(recorded)))
}

/// One delivery of an event, keyed by its source and event id (unique per org).
struct Delivery<'a> {
    agent: &'a Agent,
    event: &'a ValidEvent,
}

/// A redelivery: the same body answers as now; another body under the event id is refused.
#[async_trait]
impl Keyed for Delivery<'_> {
    type Stored = SettlementEventRow;
    type Answer = Recorded;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<SettlementEventRow>> {
        let v = self.event;
        Ok(conn
            .settlement_event_by_source(self.agent.org_id, &v.source, &v.observation.event_id)
            .await?)
    }

    fn stored_fingerprint<'s>(&self, existing: &'s SettlementEventRow) -> Option<&'s str> {
        Some(&existing.fingerprint)
    }

    async fn fingerprint(
        &self,
        _: &mut dyn Reader,
        _: &SettlementEventRow,
    ) -> AppResult<Option<String>> {
        Ok(Some(self.event.fingerprint.clone()))
    }

    fn conflict(&self, existing: &SettlementEventRow) -> AppError {
        AppError::IdempotencyConflict(KeyHolder::SettlementEvent(existing.id))
    }

    async fn replay(
        &self,
        conn: &mut dyn Reader,
        existing: SettlementEventRow,
    ) -> AppResult<Recorded> {
        let payment = conn
            .payment_by_id(existing.org_id, existing.payment_id)
            .await?
            .ok_or_else(|| AppError::Internal("event without payment".into()))?;
        recorded(conn, existing, payment).await
    }

    fn vanished(&self) -> AppError {
        AppError::Internal("event vanished after a key conflict".into())
    }
}

#[async_trait]
impl KeyedCreate for Delivery<'_> {
    fn lane(&self) -> Lane {
        Lane::Org(self.agent.org_id)
    }

    // A redelivery with other facts is a conflict, which abandons the unit: this attempt may
    // have inserted a payment for its own payment id, and a refused event writes nothing.
    async fn write(&self, tx: &mut dyn Tx) -> AppResult<Written<Recorded>> {
        self.agent.hold(&mut *tx).await?;
        // First in the transaction, holding nothing else yet: two agents racing on a new source
        // wait on its key, and exactly one owns it.
        let owner = tx
            .claim_settlement_source(self.agent.org_id, &self.event.source, self.agent.id, now())
            .await?;
        owned_source(Some(owner), self.agent)?;
        Ok(match record(&mut *tx, self.agent, self.event).await? {
            Attempt::Written(recorded) => Written::Fresh(*recorded),
            Attempt::Redelivered => Written::KeyTaken,
            Attempt::Retry => Written::Retry,
        })
    }

    fn gave_up(&self) -> AppError {
        AppError::Internal("the invoices of a settlement event kept changing".into())
    }
}

/// A source belongs to its first reporting agent (per organisation); others are refused.
fn owned_source(owner: Option<Uuid>, agent: &Agent) -> AppResult<()> {
    match owner {
        Some(owner) if owner != agent.id => Err(AppError::SourceOwned),
        _ => Ok(()),
    }
}

pub(crate) async fn recorded(
    conn: &mut dyn Reader,
    event: SettlementEventRow,
    payment: PaymentRow,
) -> AppResult<Recorded> {
    let invoice = match payment.invoice_id {
        Some(id) => conn
            .invoice_joined(payment.org_id, id)
            .await?
            .map(joined_view)
            .transpose()?
            .map(standing_of),
        None => None,
    };
    let summary = summary_of(&payment)?;
    Ok(Recorded {
        event: event_view(event, &payment.source_payment_id, &summary)?,
        payment: payment_view(payment)?,
        invoice,
    })
}

pub(crate) fn standing_of(i: InvoiceView) -> InvoiceStanding {
    InvoiceStanding {
        id: i.id,
        number: i.number,
        state: i.state,
        currency: i.current_revision.sealed.currency,
        amount_paid: i.amount_paid,
        amount_paid_minor: i.amount_paid_minor,
        balance: i.balance,
        balance_minor: i.balance_minor,
    }
}

/// The invoice `r` names, if the organisation has it.
pub(crate) async fn resolve(
    tx: &mut dyn Tx,
    org_id: Uuid,
    r: &InvoiceRef,
) -> AppResult<Option<Uuid>> {
    Ok(match r {
        InvoiceRef::Id(id) => tx.invoice_exists(org_id, *id).await?.then_some(*id),
        InvoiceRef::Number(number) => tx.invoice_id_by_number(org_id, number).await?,
    })
}

fn invoice_in(invoices: &[InvoiceRow], id: Uuid) -> AppResult<&InvoiceRow> {
    invoices
        .iter()
        .find(|i| i.id == id)
        .ok_or_else(|| AppError::Internal("a payment's invoice was not locked".into()))
}

pub(crate) fn invoice_mut(invoices: &mut [InvoiceRow], id: Uuid) -> AppResult<&mut InvoiceRow> {
    invoices
        .iter_mut()
        .find(|i| i.id == id)
        .ok_or_else(|| AppError::Internal("a payment's invoice was not locked".into()))
}

/// A payment of one event, before it is matched; its standing is set once it is.
fn new_payment(agent: &Agent, v: &ValidEvent, at: DateTime<Utc>) -> PaymentRow {
    let summary = PaymentSummary::of(&v.observation);
    let mut row = PaymentRow {
        id: Uuid::now_v7(),
        org_id: agent.org_id,
        source: v.source.clone(),
        source_payment_id: v.payment_id.clone(),
        amount_minor: String::new(),
        currency: String::new(),
        invoice_ref_id: None,
        invoice_ref_number: None,
        first_at: at,
        first_event_id: String::new(),
        state: summary.state,
        conflict: false,
        confirmed_at: None,
        invoice_id: None,
        agent_id: agent.id,
        status: PaymentStatus::Unmatched,
        unmatched_reason: Some(Unmatched::UnknownInvoice),
        allocated_minor: "0".to_owned(),
        event_count: 1,
        created_at: at,
        updated_at: at,
        resolution: None,
        resolved_amount_minor: None,
    };
    set_summary(&mut row, &summary);
    row
}

fn both_forms(digits: &str, currency: Currency) -> AppResult<(String, MinorAmount)> {
    let minor = MinorAmount::parse_minor(digits).map_err(|e| AppError::Internal(e.to_string()))?;
    Ok((minor.to_major_string(currency), minor))
}

pub(crate) fn payment_view(p: PaymentRow) -> AppResult<PaymentView> {
    let c = currency(&p.currency)?;
    let (amount, amount_minor) = both_forms(&p.amount_minor, c)?;
    let (allocated, allocated_minor) = both_forms(&p.allocated_minor, c)?;
    let (resolved_amount, resolved_amount_minor) = match p.resolved_amount_minor.as_deref() {
        Some(digits) => {
            let (major, minor) = both_forms(digits, c)?;
            (Some(major), Some(minor))
        }
        None => (None, None),
    };
    Ok(PaymentView {
        resolution: p.resolution.map(ResolveAction::as_str),
        resolved_amount,
        resolved_amount_minor,
        id: p.id,
        source: p.source,
        payment_id: p.source_payment_id,
        invoice_id: p.invoice_ref_id,
        invoice_number: p.invoice_ref_number,
        matched_invoice_id: p.invoice_id,
        amount,
        amount_minor,
        currency: p.currency,
        state: p.state,
        status: p.status,
        unmatched_reason: p.unmatched_reason,
        reversed: p.state == PaymentState::Failed && p.confirmed_at.is_some(),
        allocated,
        allocated_minor,
        event_count: p.event_count,
        created_at: p.created_at,
        updated_at: p.updated_at,
    })
}

fn event_view(
    e: SettlementEventRow,
    payment_id: &str,
    payment: &PaymentSummary,
) -> AppResult<SettlementEventView> {
    let c = currency(&e.currency)?;
    let (amount, amount_minor) = both_forms(&e.amount_minor, c)?;
    let facts = PaymentFacts {
        amount: amount_minor,
        currency: c,
        invoice: stored_ref(e.invoice_ref_id, e.invoice_ref_number.as_deref())?,
    };
    Ok(SettlementEventView {
        id: e.id,
        contradicts: payment.contradicted_by(&facts),
        source: e.source,
        event_id: e.source_event_id,
        payment_id: payment_id.to_owned(),
        invoice_id: e.invoice_ref_id,
        invoice_number: e.invoice_ref_number,
        amount,
        amount_minor,
        currency: e.currency,
        status: e.status,
        occurred_at: e.occurred_at,
        raw: e.raw,
        received_at: e.received_at,
    })
}
