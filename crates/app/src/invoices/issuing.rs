//! Issuing an approved invoice through the claim protocol (docs/contract/effects.md §3): admitting
//! the claim in its own committed transaction before any peer call, and finalising it in the same
//! transaction as the invoice's move to `issued`. The peer calls themselves are `effects`';
//! the rules are `domain::effect`'s.

use super::chain::{EventInput, next_event, record_event};
use super::commands::{current_revision, locked, unchanged, written};
use super::invalid;
use super::views::InvoiceView;
use crate::actor::Actor;
use crate::app::App;
use crate::audit::AuditActor;
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::idempotency::Replayed;
use chrono::Datelike;
use serde::Serialize;
use tauros_domain::destination::DestinationState;
use tauros_domain::effect::{self, Admission, ClaimState};
use tauros_domain::identity::Capability;
use tauros_domain::invoice::{self as rules, Action, InvoiceState, Transition};
use tauros_store::{ClaimRow, InvoiceRow, Lock, RevisionRow, Tx};
use uuid::Uuid;

/// The job kind that issues one approved invoice (args `{"invoice_id": …}`).
pub const ISSUE_JOB: &str = "invoice.issue.v1";
/// The claim kind and version behind the operation key of an issue.
pub(crate) const CLAIM_KIND: &str = "invoice.issue";
const CLAIM_VERSION: u32 = 1;

/// What the peer receives: the approved revision exactly as sealed (its canonical bytes as a
/// string, so nothing is re-encoded), and the number it is issued under.
#[derive(Clone, Debug, Serialize)]
pub struct IssueRequest {
    pub invoice_id: Uuid,
    pub number: String,
    pub revision_id: Uuid,
    pub payload_hash: String,
    pub canonical_payload: String,
}

/// An admitted issue: the operation key, what to send, and what admission found.
#[derive(Clone, Debug)]
pub struct IssueClaim {
    pub org_id: Uuid,
    pub invoice_id: Uuid,
    pub op_key: Uuid,
    pub request: IssueRequest,
    /// The request as sent: the bytes the fingerprint covers.
    pub body: serde_json::Value,
    pub admission: Admission,
}

/// Where admitting an issue left the invoice.
#[derive(Clone, Debug)]
pub enum IssueStart {
    /// The claim is admitted (committed): call the peer.
    Admitted(IssueClaim),
    /// Nothing to do: the invoice is already issued (or further), or no longer approved.
    Settled(InvoiceState),
    /// The destination is no longer active: `issue_blocked` was recorded, the invoice stays
    /// approved for a human to cancel.
    Blocked,
}

impl App {
    /// An approver issues an approved invoice within the request, when no issuer is
    /// configured (issuing is then local: numbered and `issued`, one event). Repeating it on an
    /// issued invoice is a replay. With an issuer configured, issuing is the job's (409
    /// `issuer_configured`).
    pub async fn issue(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<InvoiceView>> {
        actor.require(Capability::Invoicing)?;
        {
            let mut tx = self.store.begin().await?;
            let (invoice, _) = locked(&mut *tx, actor, id, Action::Issue).await?;
            match rules::transition(Action::Issue, invoice.state, invoice.cancelled_by)
                .map_err(invalid)?
            {
                Transition::Replay => return unchanged(&mut *tx, &invoice).await,
                Transition::Apply { .. } => {}
            }
        }
        if self.issuing_is_automatic() {
            return Err(AppError::Conflict {
                code: "issuer_configured",
                detail: "an issuer is configured, so approved invoices are issued by the \
                         `invoice.issue.v1` job; see GET /v1/jobs?kind=invoice.issue.v1 (and retry \
                         a discarded one there)"
                    .into(),
            });
        }
        let org_id = actor.org_id();
        match self.admit_issue(org_id, id, AuditActor::of(actor)).await? {
            IssueStart::Admitted(claim) => {
                let response = effect::local_issue_response(claim.op_key);
                self.finalise_issue(&claim, &response, AuditActor::of(actor))
                    .await
            }
            IssueStart::Settled(_) => {
                let mut tx = self.store.begin().await?;
                let invoice = tx
                    .lock_invoice(org_id, id)
                    .await?
                    .ok_or(AppError::NotFound)?;
                unchanged(&mut *tx, &invoice).await
            }
            IssueStart::Blocked => Err(AppError::Conflict {
                code: "destination_inactive",
                detail: "the invoice's payment destination is no longer active, so it cannot be \
                         issued (an `issue_blocked` event records it): cancel it, and have the \
                         agent propose a new invoice with an active destination"
                    .into(),
            }),
        }
    }

    /// Whether approving enqueues an issue job (an issuer is configured).
    pub fn issuing_is_automatic(&self) -> bool {
        self.config.issuer_configured
    }

    /// Admits the issue of an approved invoice in its own transaction, committed before any
    /// peer call: re-checks the destination (first admission only), gives the invoice its
    /// number (once; a rollback gives it back), and inserts the claim or finds the existing one.
    pub(crate) async fn admit_issue(
        &self,
        org_id: Uuid,
        invoice_id: Uuid,
        actor: AuditActor,
    ) -> AppResult<IssueStart> {
        let mut tx = self.store.begin().await?;
        let mut invoice = tx
            .lock_invoice(org_id, invoice_id)
            .await?
            .ok_or(AppError::NotFound)?;
        if invoice.state != InvoiceState::Approved {
            return Ok(IssueStart::Settled(invoice.state));
        }
        let revision = current_revision(&mut *tx, &invoice).await?;
        // The destination is re-checked only before the first admission. Once the invoice has
        // its number, a claim was committed and the peer may hold the invoice: blocking then
        // would strand it (it could be neither issued nor cancelled), so every later attempt
        // goes on recovering and finalising under that claim.
        if invoice.number.is_none() && !destination_active(&mut *tx, org_id, &revision).await? {
            let event = next_event(
                &mut invoice,
                &EventInput {
                    action: Action::IssueBlocked,
                    from: Some(InvoiceState::Approved),
                    actor,
                    revision: Some(&revision),
                    idempotency_key: None,
                    note: Some(
                        "the payment destination is no longer active: cancel this invoice, and \
                         have the agent propose a new one with an active destination",
                    ),
                    settings: None,
                },
            );
            invoice.updated_at = event.occurred_at;
            tx.update_invoice(&invoice).await?;
            record_event(&mut *tx, &event).await?;
            tx.commit().await?;
            return Ok(IssueStart::Blocked);
        }
        let number = match invoice.number.clone() {
            Some(number) => number,
            None => {
                let at = now();
                let sequence = tx.next_invoice_number(org_id, at.year()).await?;
                let number = effect::invoice_number(at, sequence);
                invoice.number = Some(number.clone());
                tx.update_invoice(&invoice).await?;
                number
            }
        };
        let request = IssueRequest {
            invoice_id,
            number,
            revision_id: revision.id,
            payload_hash: revision.payload_hash.clone(),
            canonical_payload: revision.canonical_payload.clone(),
        };
        let bytes = serde_json::to_vec(&request)
            .map_err(|e| AppError::Internal(format!("issue request: {e}")))?;
        let body = serde_json::to_value(&request)
            .map_err(|e| AppError::Internal(format!("issue request: {e}")))?;
        let fingerprint = effect::fingerprint(&bytes);
        let op_key =
            effect::operation_key(org_id, CLAIM_KIND, &invoice_id.to_string(), CLAIM_VERSION);
        let admitted_at = now();
        let claim = ClaimRow {
            id: op_key,
            org_id,
            kind: CLAIM_KIND.to_owned(),
            business_key: invoice_id.to_string(),
            fingerprint: fingerprint.clone(),
            state: ClaimState::Processing.as_str().to_owned(),
            response: None,
            admitted_at,
            completed_at: None,
            retain_until: admitted_at + self.config.claim_retention,
        };
        let existing = if tx.insert_claim(&claim).await? {
            None
        } else {
            Some(
                tx.lock_claim(org_id, op_key)
                    .await?
                    .ok_or_else(|| AppError::Internal("claim vanished during admission".into()))?,
            )
        };
        let state = existing
            .as_ref()
            .map(|c| ClaimState::parse(&c.state).unwrap_or(ClaimState::Processing));
        let admission = effect::admit(
            existing
                .as_ref()
                .zip(state)
                .map(|(c, s)| (s, c.fingerprint.as_str())),
            &fingerprint,
        );
        tx.commit().await?;
        Ok(IssueStart::Admitted(IssueClaim {
            org_id,
            invoice_id,
            op_key,
            request,
            body,
            admission,
        }))
    }

    /// Finalises an issue with the peer's `response`, in one transaction: the invoice moves to
    /// `issued` with its event, and the claim completes, only while it is `processing`. A
    /// claim already complete (another attempt won) answers the invoice as it is, a replay.
    pub(crate) async fn finalise_issue(
        &self,
        claim: &IssueClaim,
        response: &serde_json::Value,
        actor: AuditActor,
    ) -> AppResult<Replayed<InvoiceView>> {
        let mut tx = self.store.begin().await?;
        // Invoice, then claim: the order admission takes them in.
        let mut invoice = tx
            .lock_invoice(claim.org_id, claim.invoice_id)
            .await?
            .ok_or(AppError::NotFound)?;
        let row = tx
            .lock_claim(claim.org_id, claim.op_key)
            .await?
            .ok_or_else(|| AppError::Internal("the claim was reaped before finalisation".into()))?;
        if row.state == ClaimState::Complete.as_str() {
            return unchanged(&mut *tx, &invoice).await;
        }
        let to = match rules::transition(Action::Issue, invoice.state, invoice.cancelled_by)
            .map_err(invalid)?
        {
            Transition::Apply { to } => to,
            Transition::Replay => {
                return Err(AppError::Internal(
                    "an issued invoice with a processing claim".into(),
                ));
            }
        };
        let completed_at = now();
        let stored = serde_json::to_string(response)
            .map_err(|e| AppError::Internal(format!("issue response: {e}")))?;
        let completed = tx
            .complete_claim(
                claim.org_id,
                claim.op_key,
                &stored,
                completed_at,
                effect::retain_until(completed_at, self.config.claim_retention),
            )
            .await?;
        if !completed {
            return Err(AppError::Internal(
                "the claim left processing under its lock".into(),
            ));
        }
        issue_to(&mut *tx, &mut invoice, to, actor).await?;
        // Payments reported before the issue count from now on, in this transaction.
        super::settling::match_at_issue(&mut *tx, &mut invoice, actor).await?;
        written(tx, &invoice).await
    }

    /// Deletes completed claims past their retention, in batches, until none is left.
    pub async fn clean_claims(&self, batch: i64) -> AppResult<u64> {
        let mut total = 0;
        loop {
            let mut tx = self.store.begin().await?;
            let n = tx.clean_claims(now(), batch).await?;
            tx.commit().await?;
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }

    /// Deletes processing claims abandoned longer than `horizon` (never below the one-day
    /// floor) and past their retention, by the database's clock, skipping any a finaliser
    /// holds.
    pub async fn reap_claims(&self, horizon: chrono::Duration, batch: i64) -> AppResult<u64> {
        let horizon = horizon.max(chrono::Duration::days(effect::ABANDON_FLOOR_DAYS));
        let horizon = horizon.to_std().unwrap_or(std::time::Duration::MAX);
        let mut total = 0;
        loop {
            let mut tx = self.store.begin().await?;
            let n = tx.reap_claims(horizon, batch).await?;
            tx.commit().await?;
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }

    /// Claims by state, for `/metrics`.
    pub async fn claim_counts(&self) -> AppResult<tauros_store::ClaimCounts> {
        Ok(self.store.reader().await?.claim_counts().await?)
    }
}

/// Whether the revision's payment destination is still active (share-locked, so it cannot be
/// deactivated before this transaction ends).
async fn destination_active(
    tx: &mut dyn Tx,
    org_id: Uuid,
    revision: &RevisionRow,
) -> AppResult<bool> {
    let destination = tx
        .lock_destination(org_id, revision.payment_destination_id, Lock::Share)
        .await?;
    Ok(destination.is_some_and(|d| d.state == DestinationState::Active))
}

/// Moves the locked invoice to `to` (issued) with its `issue` event.
async fn issue_to(
    tx: &mut dyn Tx,
    invoice: &mut InvoiceRow,
    to: InvoiceState,
    actor: AuditActor,
) -> AppResult<()> {
    let revision = current_revision(&mut *tx, invoice).await?;
    let number = invoice.number.clone();
    let from = invoice.state;
    invoice.state = to;
    invoice.updated_at = now();
    let event = next_event(
        invoice,
        &EventInput {
            action: Action::Issue,
            from: Some(from),
            actor,
            revision: Some(&revision),
            idempotency_key: None,
            note: number.as_deref(),
            settings: None,
        },
    );
    tx.update_invoice(invoice).await?;
    record_event(&mut *tx, &event).await?;
    Ok(())
}
