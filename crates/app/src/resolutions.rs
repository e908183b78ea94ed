//! Resolving a payment by hand (docs/contract/effects.md §6; docs/SETTLEMENT.md, "Resolving a
//! payment"): `accept`, `allocate` or `void`, a proposal while four eyes is on. It takes a
//! settlement event's locks: the org's row (shared: four eyes cannot change meanwhile), the
//! invoices by id, then the payment. Every request is kept, the record that holds its key.

use crate::actor::{Actor, Human};
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult, KeyHolder};
use crate::idempotency::{self, Keyed, KeyedCreate, Replayed, Written};
use crate::invoices::{caller, invoice_facts, joined_view, reconcile_invoice, stored_amount};
use crate::payments::{currency, effective_summary, set_standing};
use crate::proposals::{ChangeView, pending};
use crate::settlement::{
    InvoiceStanding, PaymentView, invoice_mut, org_settings, payment_view, standing_of,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_domain::error::FieldError;
use tauros_domain::fingerprint::{KEY_FIELD, key_error, key_is_valid};
use tauros_domain::governance::{ChangeKind, ChangeState};
use tauros_domain::money::MinorAmount;
use tauros_domain::resolution::{
    self as rules, ResolveAction, ResolveInput, ValidResolve, check_allocation, check_status,
};
use tauros_domain::settlement::standing_without_invoice;
use tauros_domain::visibility::Scope;
use tauros_store::{InvoiceRow, Lane, Lock, PaymentResolutionRow, PaymentRow, Reader, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

/// `applied`: in force. `proposed`: waiting for a second approver (four eyes).
const APPLIED: &str = "applied";
const PROPOSED: &str = "proposed";
const REJECTED: &str = "rejected";
/// Shown only: a proposal that lapsed before anyone confirmed it.
const EXPIRED: &str = "expired";

/// One resolution an approver asked for on a payment.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = PaymentResolutionResponse)]
pub struct PaymentResolutionView {
    pub id: Uuid,
    /// The payment (`/v1/payments/{id}`).
    pub payment_id: Uuid,
    /// `accept`, `allocate` or `void`.
    #[schema(value_type = String, example = "accept")]
    pub action: &'static str,
    /// `allocate`: the invoice it counts toward.
    pub invoice_id: Option<Uuid>,
    /// `accept` and `allocate`: the amount it counts at, with exactly the currency's decimals.
    pub amount: Option<String>,
    /// `amount` in minor units.
    #[schema(value_type = Option<u128>)]
    pub amount_minor: Option<MinorAmount>,
    /// Why, in the approver's words.
    pub reason: String,
    /// `applied` (in force), `proposed` (four eyes: waiting for another approver to confirm
    /// `change_id`), `rejected` (the proposal was rejected or withdrawn; nothing changed) or
    /// `expired` (the proposal lapsed; nothing changed).
    #[schema(example = "applied")]
    pub state: &'static str,
    /// The approver who asked for it.
    pub requested_by: Uuid,
    /// The proposal, when four eyes was on.
    pub change_id: Option<Uuid>,
    /// Who confirmed or rejected the proposal.
    pub decided_by: Option<Uuid>,
    /// When it was asked for (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When the proposal was confirmed or rejected.
    pub decided_at: Option<DateTime<Utc>>,
}

/// What a resolution answers: it, its payment and invoice as now, and any proposal.
#[derive(Clone, Debug)]
pub struct ResolveOutcome {
    pub resolution: PaymentResolutionView,
    pub payment: PaymentView,
    pub invoice: Option<InvoiceStanding>,
    /// The pending proposal (four eyes); `None` when the resolution applied at once.
    pub change: Option<ChangeView>,
}

impl App {
    /// An approver resolves a payment (a proposal under four eyes); a keyed repeat replays.
    pub async fn resolve_payment(
        &self,
        actor: &Actor,
        payment_id: Uuid,
        input: ResolveInput,
        key: Option<&str>,
    ) -> AppResult<Replayed<ResolveOutcome>> {
        let approver = actor.human()?.approver()?;
        // The payment first (one 404 for unknown and invisible), then every broken member at once.
        let mut conn = self.store.reader(actor.lane()).await?;
        let payment = visible_payment(&mut *conn, actor, payment_id).await?;
        let mut errors = Vec::new();
        match key {
            None => errors.push(FieldError::plain(
                KEY_FIELD,
                "required",
                "send an idempotency key (1–200 characters, a UUID makes a good one): a retry \
                 with the same key and body is answered without resolving twice",
            )),
            Some(k) if !key_is_valid(k) => errors.push(key_error()),
            Some(_) => {}
        }
        let valid = rules::validate_resolve(&input, payment.id, currency(&payment.currency)?);
        let (valid, key) = match (valid, key) {
            (Ok(valid), Some(key)) if errors.is_empty() => (valid, key),
            (valid, _) => {
                errors.extend(valid.err().unwrap_or_default());
                return Err(AppError::Validation(errors));
            }
        };
        let request = Request {
            actor,
            approver,
            payment_id,
            key,
            valid: &valid,
        };
        if let Some(replayed) = idempotency::lookup(&request, &mut *conn).await? {
            return Ok(replayed);
        }
        drop(conn);
        idempotency::create(&self.store, &request).await
    }

    /// Every resolution asked for on a payment the human may see, oldest first.
    pub async fn payment_resolutions(
        &self,
        actor: &Actor,
        payment_id: Uuid,
    ) -> AppResult<Vec<PaymentResolutionView>> {
        let mut conn = self.store.reader(actor.lane()).await?;
        let payment = visible_payment(&mut *conn, actor, payment_id).await?;
        let rows = conn.payment_resolutions(payment.org_id, payment.id).await?;
        let c = currency(&payment.currency)?;
        let mut views = Vec::with_capacity(rows.len());
        for r in rows {
            let state = seen_state(&mut *conn, &r).await?;
            views.push(view(r, c, state)?);
        }
        Ok(views)
    }
}

/// The payment, if the human may see it (unknown and invisible are the same 404).
async fn visible_payment(conn: &mut dyn Reader, actor: &Actor, id: Uuid) -> AppResult<PaymentRow> {
    let human = actor.human()?;
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
    Ok(payment)
}

async fn sees_invoice(
    conn: &mut dyn Reader,
    actor: &Actor,
    invoice: &InvoiceRow,
) -> AppResult<bool> {
    let human = actor.human()?;
    let settings = org_settings(&mut *conn, human.org_id).await?;
    let Some(agent) = conn.agent_by_id(human.org_id, invoice.agent_id).await? else {
        return Ok(false);
    };
    Ok(Scope::of_invoices(caller(actor), settings.shared_review)
        .includes(invoice.agent_id, agent.owner_id))
}

/// The payment and the invoices a resolution touches, locked.
struct Locked {
    payment: PaymentRow,
    invoices: Vec<InvoiceRow>,
}

impl Locked {
    fn invoice(&self, id: Uuid) -> Option<&InvoiceRow> {
        self.invoices.iter().find(|i| i.id == id)
    }
}

/// Locks the invoices the resolution touches by id, then the payment (settlement's order);
/// `None` when the payment moved to another invoice meanwhile: start again.
async fn lock(
    tx: &mut dyn Tx,
    org_id: Uuid,
    payment_id: Uuid,
    valid: &ValidResolve,
) -> AppResult<Option<Locked>> {
    let read = tx
        .payment_by_id(org_id, payment_id)
        .await?
        .ok_or(AppError::NotFound)?;
    let mut ids: Vec<Uuid> = read
        .invoice_id
        .into_iter()
        .chain(valid.invoice_id)
        .collect();
    ids.sort();
    ids.dedup();
    let mut invoices = Vec::with_capacity(ids.len());
    for id in &ids {
        if let Some(invoice) = tx.lock_invoice(org_id, *id).await? {
            invoices.push(invoice);
        }
    }
    let payment = tx
        .lock_payment(org_id, payment_id)
        .await?
        .ok_or(AppError::NotFound)?;
    if payment.invoice_id.is_some_and(|id| !ids.contains(&id)) {
        return Ok(None);
    }
    Ok(Some(Locked { payment, invoices }))
}

/// Checks the resolution against the locked rows; the amount it counts at (`None` for void).
async fn check(
    tx: &mut dyn Tx,
    locked: &mut Locked,
    valid: &ValidResolve,
) -> AppResult<Option<MinorAmount>> {
    check_status(valid.action, locked.payment.status).map_err(|e| AppError::Conflict {
        code: "payment_not_resolvable",
        detail: e.detail,
    })?;
    match valid.action {
        ResolveAction::Accept => Ok(valid.amount),
        ResolveAction::Void => Ok(None),
        ResolveAction::Allocate => {
            let target = valid
                .invoice_id
                .ok_or_else(|| AppError::Internal("allocate without an invoice".into()))?;
            let invoice = locked.invoice(target).cloned().ok_or_else(|| {
                AppError::field(
                    "invoice_id",
                    "unknown_invoice",
                    "no invoice you can see has that id; send the id of an issued invoice of \
                     your organisation",
                )
            })?;
            let facts = invoice_facts(&mut *tx, &invoice).await?;
            let summary = effective_summary(&locked.payment)?;
            check_allocation(
                summary.facts.amount,
                summary.facts.currency,
                &facts,
                stored_amount(&invoice.amount_paid_minor)?,
                valid.amount,
            )
            .map(Some)
            .map_err(|e| AppError::Validation(vec![e]))
        }
    }
}

/// Puts the resolution in force and reconciles every invoice it counted or counts toward.
async fn apply(
    tx: &mut dyn Tx,
    locked: &mut Locked,
    row: &PaymentResolutionRow,
    amount: Option<MinorAmount>,
    actor: AuditActor,
) -> AppResult<()> {
    let payment = &mut locked.payment;
    let was_matched_to = payment.invoice_id;
    payment.resolution = Some(row.action);
    payment.resolved_amount_minor = amount.map(|a| a.to_string());
    if let Some(target) = row.invoice_id {
        let (agent_id, matched) = locked
            .invoices
            .iter()
            .find(|i| i.id == target)
            .map(|i| (i.agent_id, i.payment_count))
            .ok_or_else(|| AppError::Internal("allocated invoice not locked".into()))?;
        // Bounds per record: allocating does not take an invoice past its 1,000 payments.
        if was_matched_to != Some(target) {
            tauros_domain::bounds::admit_payment(
                usize::try_from(matched).unwrap_or(usize::MAX),
                tauros_domain::bounds::MAX_PAYMENTS_PER_INVOICE,
            )?;
        }
        payment.invoice_id = Some(target);
        payment.agent_id = agent_id;
    }
    payment.updated_at = now();
    if payment.invoice_id.is_none() {
        let agent_id = payment.agent_id;
        let standing = standing_without_invoice(&effective_summary(payment)?);
        set_standing(payment, standing, agent_id);
    }
    tx.update_payment(payment).await?;
    let cause = format!(
        "payment {}/{} {} by an approver: {}",
        payment.source,
        payment.source_payment_id,
        match row.action {
            ResolveAction::Accept => "accepted",
            ResolveAction::Allocate => "allocated",
            ResolveAction::Void => "voided",
        },
        row.reason
    );
    let mut touched: Vec<Uuid> = was_matched_to
        .into_iter()
        .chain(payment.invoice_id)
        .collect();
    touched.sort();
    touched.dedup();
    for id in touched {
        let invoice = invoice_mut(&mut locked.invoices, id)?;
        reconcile_invoice(&mut *tx, invoice, actor, &cause).await?;
    }
    Ok(())
}

/// Confirms a proposed resolution in the confirm's transaction: checked again, then applied.
pub(crate) async fn confirm(
    tx: &mut dyn Tx,
    resolution_id: Uuid,
    approver: &Human,
    at: DateTime<Utc>,
) -> AppResult<()> {
    let mut row = tx
        .payment_resolution_by_id(approver.org_id, resolution_id)
        .await?
        .ok_or_else(|| AppError::Internal("proposal without its resolution".into()))?;
    let valid = ValidResolve {
        action: row.action,
        invoice_id: row.invoice_id,
        amount: row.amount_minor.as_deref().map(stored_amount).transpose()?,
        reason: row.reason.clone(),
        fingerprint: row.fingerprint.clone(),
    };
    let mut locked = lock(&mut *tx, row.org_id, row.payment_id, &valid)
        .await?
        .ok_or_else(|| AppError::Conflict {
            code: "payment_changed",
            detail: "the payment moved to another invoice while this was confirmed; confirm \
                     again"
                .into(),
        })?;
    if valid
        .invoice_id
        .is_some_and(|id| locked.invoice(id).is_none())
    {
        return Err(AppError::field(
            "invoice_id",
            "unknown_invoice",
            "the invoice this resolution allocates to no longer exists; reject the proposal",
        ));
    }
    let amount = check(&mut *tx, &mut locked, &valid).await?;
    let actor = AuditActor::human(approver);
    apply(&mut *tx, &mut locked, &row, amount, actor).await?;
    row.state = APPLIED.to_owned();
    row.decided_by = Some(approver.id);
    row.decided_at = Some(at);
    tx.decide_payment_resolution(&row).await?;
    audit(
        &mut *tx,
        row.org_id,
        actor,
        "payment.resolved",
        ("payment", row.payment_id),
        resolution_detail(&row),
    )
    .await
}

/// Records that a proposed resolution was rejected: nothing of it applies.
pub(crate) async fn reject(
    tx: &mut dyn Tx,
    resolution_id: Uuid,
    approver: &Human,
    at: DateTime<Utc>,
) -> AppResult<()> {
    let mut row = tx
        .payment_resolution_by_id(approver.org_id, resolution_id)
        .await?
        .ok_or_else(|| AppError::Internal("proposal without its resolution".into()))?;
    row.state = REJECTED.to_owned();
    row.decided_by = Some(approver.id);
    row.decided_at = Some(at);
    tx.decide_payment_resolution(&row).await?;
    Ok(())
}

fn resolution_detail(row: &PaymentResolutionRow) -> serde_json::Value {
    serde_json::json!({
        "payment_resolution_id": row.id,
        "action": row.action.as_str(),
        "invoice_id": row.invoice_id,
        "amount_minor": row.amount_minor,
        "reason": row.reason,
        "state": row.state,
        "change_id": row.change_id,
    })
}

/// The answer: the resolution, its payment and invoice as they are now, and the proposal.
async fn outcome(
    conn: &mut dyn Reader,
    row: PaymentResolutionRow,
    change: Option<ChangeView>,
) -> AppResult<ResolveOutcome> {
    let payment = conn
        .payment_by_id(row.org_id, row.payment_id)
        .await?
        .ok_or_else(|| AppError::Internal("resolution without its payment".into()))?;
    let invoice = match payment.invoice_id {
        Some(id) => conn
            .invoice_joined(payment.org_id, id)
            .await?
            .map(joined_view)
            .transpose()?
            .map(standing_of),
        None => None,
    };
    let c = currency(&payment.currency)?;
    let state = seen_state(&mut *conn, &row).await?;
    Ok(ResolveOutcome {
        resolution: view(row, c, state)?,
        payment: payment_view(payment)?,
        invoice,
        change,
    })
}

/// Where a resolution stands as a reader sees it: a proposal rejected without passing through
/// `reject` (its proposer was deactivated) is `rejected`, one that lapsed is `expired`.
async fn seen_state(conn: &mut dyn Reader, r: &PaymentResolutionRow) -> AppResult<&'static str> {
    Ok(match r.state.as_str() {
        APPLIED => APPLIED,
        PROPOSED => match r.change_id {
            Some(id) => match conn.change_by_id(r.org_id, id).await? {
                Some(c) => match c.state.seen(c.expires_at, now()) {
                    ChangeState::Pending => PROPOSED,
                    ChangeState::Expired => EXPIRED,
                    ChangeState::Rejected => REJECTED,
                    // Confirmed marks the resolution applied in the same transaction.
                    ChangeState::Confirmed => APPLIED,
                },
                None => PROPOSED,
            },
            None => PROPOSED,
        },
        _ => REJECTED,
    })
}

fn view(
    r: PaymentResolutionRow,
    c: tauros_domain::currency::Currency,
    state: &'static str,
) -> AppResult<PaymentResolutionView> {
    let amount_minor = r.amount_minor.as_deref().map(stored_amount).transpose()?;
    Ok(PaymentResolutionView {
        id: r.id,
        payment_id: r.payment_id,
        action: r.action.as_str(),
        invoice_id: r.invoice_id,
        amount: amount_minor.map(|a| a.to_major_string(c)),
        amount_minor,
        reason: r.reason,
        state,
        requested_by: r.requested_by,
        change_id: r.change_id,
        decided_by: r.decided_by,
        created_at: r.created_at,
        decided_at: r.decided_at,
    })
}

/// One resolution request, keyed by its approver's idempotency key.
struct Request<'a> {
    actor: &'a Actor,
    approver: &'a Human,
    payment_id: Uuid,
    key: &'a str,
    valid: &'a ValidResolve,
}

#[async_trait]
impl Keyed for Request<'_> {
    type Stored = PaymentResolutionRow;
    type Answer = ResolveOutcome;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<PaymentResolutionRow>> {
        Ok(conn
            .payment_resolution_by_key(self.approver.org_id, self.approver.id, self.key)
            .await?)
    }

    fn stored_fingerprint<'s>(&self, stored: &'s PaymentResolutionRow) -> Option<&'s str> {
        Some(&stored.fingerprint)
    }

    async fn fingerprint(
        &self,
        _: &mut dyn Reader,
        _: &PaymentResolutionRow,
    ) -> AppResult<Option<String>> {
        Ok(Some(self.valid.fingerprint.clone()))
    }

    fn conflict(&self, stored: &PaymentResolutionRow) -> AppError {
        AppError::IdempotencyConflict(KeyHolder::PaymentResolution(stored.id))
    }

    async fn replay(
        &self,
        conn: &mut dyn Reader,
        stored: PaymentResolutionRow,
    ) -> AppResult<ResolveOutcome> {
        let change = match stored.change_id {
            Some(id) => conn
                .change_by_id(stored.org_id, id)
                .await?
                .map(|c| ChangeView::of(c, now())),
            None => None,
        };
        outcome(conn, stored, change).await
    }

    fn vanished(&self) -> AppError {
        AppError::Internal("resolution vanished after a key conflict".into())
    }
}

/// The resolution under the org's and the payment's locks: applied, or proposed under four eyes.
#[async_trait]
impl KeyedCreate for Request<'_> {
    fn lane(&self) -> Lane {
        self.actor.lane()
    }

    async fn write(&self, tx: &mut dyn Tx) -> AppResult<Written<ResolveOutcome>> {
        // The org first, shared: four eyes cannot change until this commits.
        let org = tx
            .lock_org(self.approver.org_id, Lock::Share)
            .await?
            .ok_or(AppError::NotFound)?;
        let Some(mut locked) =
            lock(&mut *tx, self.approver.org_id, self.payment_id, self.valid).await?
        else {
            return Ok(Written::Retry);
        };
        // A parallel request with this key that won is visible under the locks.
        if self.find(&mut *tx).await?.is_some() {
            return Ok(Written::KeyTaken);
        }
        if let Some(target) = self.valid.invoice_id {
            let visible = match locked.invoice(target) {
                Some(invoice) => sees_invoice(&mut *tx, self.actor, invoice).await?,
                None => false,
            };
            if !visible {
                return Err(AppError::field(
                    "invoice_id",
                    "unknown_invoice",
                    "no invoice you can see has that id; send the id of an issued invoice \
                     of your organisation",
                ));
            }
        }
        let amount = check(&mut *tx, &mut locked, self.valid).await?;
        let at = now();
        let mut row = PaymentResolutionRow {
            id: Uuid::now_v7(),
            org_id: self.approver.org_id,
            payment_id: self.payment_id,
            action: self.valid.action,
            invoice_id: self.valid.invoice_id,
            amount_minor: amount.map(|a| a.to_string()),
            reason: self.valid.reason.clone(),
            requested_by: self.approver.id,
            idempotency_key: self.key.to_owned(),
            fingerprint: self.valid.fingerprint.clone(),
            state: APPLIED.to_owned(),
            change_id: None,
            decided_by: None,
            created_at: at,
            decided_at: None,
        };
        let mut change = None;
        if org.four_eyes {
            let proposal = tauros_store::OrgChangeRow {
                payment_resolution_id: Some(row.id),
                payment_id: Some(self.payment_id),
                ..pending(self.approver, ChangeKind::PaymentResolution, at)
            };
            row.state = PROPOSED.to_owned();
            row.change_id = Some(proposal.id);
            change = Some(proposal);
        }
        if !tx.insert_payment_resolution(&row).await? {
            // A parallel request with this self.key won: answer as its replay, read afresh.
            return Ok(Written::KeyTakenUnitEnded);
        }
        let actor_audit = AuditActor::human(self.approver);
        match &change {
            Some(proposal) => {
                tx.insert_change(proposal).await?;
                audit(
                    &mut *tx,
                    self.approver.org_id,
                    actor_audit,
                    "org.change_proposed",
                    ("org_change", proposal.id),
                    serde_json::json!({
                        "kind": proposal.kind.as_str(),
                        "self.payment_id": self.payment_id,
                        "payment_resolution_id": row.id,
                    }),
                )
                .await?;
            }
            None => apply(&mut *tx, &mut locked, &row, amount, actor_audit).await?,
        }
        audit(
            &mut *tx,
            self.approver.org_id,
            actor_audit,
            if change.is_some() {
                "payment.resolution_proposed"
            } else {
                "payment.resolved"
            },
            ("payment", self.payment_id),
            resolution_detail(&row),
        )
        .await?;
        let outcome = outcome(&mut *tx, row, change.map(|c| ChangeView::of(c, at))).await?;
        Ok(Written::Fresh(outcome))
    }

    fn gave_up(&self) -> AppError {
        AppError::Internal("the invoices of a payment kept changing".into())
    }
}
