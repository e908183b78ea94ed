//! Issuing by the claim protocol (docs/contract/effects.md §3): admit, call the peer, finalise.

use super::chain::{EventInput, next_event, record_event};
use super::commands::{current_revision, locked, unchanged, written};
use super::invalid;
use super::views::InvoiceView;
use crate::actor::Actor;
use crate::app::{App, finish};
use crate::audit::AuditActor;
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::idempotency::Replayed;
use crate::queue::JobView;
use chrono::Datelike;
use serde::Serialize;
use tauros_domain::destination::DestinationState;
use tauros_domain::effect::{self, Admission, ClaimState, IssuingStatus};
use tauros_domain::identity::Capability;
use tauros_domain::invoice::{self as rules, Action, InvoiceState, Transition};
use tauros_domain::job::JobState;
use tauros_store::{ClaimRow, InvoiceRow, JobUpdate, Lane, Lock, RevisionRow, Tx};
use uuid::Uuid;

/// The job kind that issues one approved invoice (args `{"invoice_id": …}`).
pub const ISSUE_JOB: &str = "invoice.issue.v1";
/// The claim kind and version behind the operation key of an issue.
pub(crate) const CLAIM_KIND: &str = "invoice.issue";

/// What the peer receives: the sealed revision's canonical bytes (never re-encoded), its number.
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
    /// Older than the issuer's key memory, or re-admitted after a reap: `Absent` stops at review.
    pub stale: bool,
}

/// Where admitting an issue left the invoice.
#[derive(Clone, Debug)]
pub enum IssueStart {
    /// The claim is admitted (committed): call the peer.
    Admitted(IssueClaim),
    /// Nothing to do: the invoice is already issued (or further), or no longer approved.
    Settled(InvoiceState),
    /// The destination is no longer active: `issue_blocked` recorded once; a human cancels.
    Blocked,
    /// Stopped for a human (rejected, conflict, needs review) until issued again or cancelled.
    Stopped(IssuingStatus),
    /// The job belongs to an earlier operation version: the current version's job issues.
    Superseded,
}

/// Why an attempt stopped for a human instead of finishing.
#[derive(Clone, Debug)]
pub enum IssueStop {
    /// The peer refused definitively (its reason) and holds no record.
    Rejected(String),
    /// The peer holds another request under the key.
    Conflict(effect::Conflict),
    /// The claim is older than the peer remembers keys and the peer holds nothing.
    NeedsReview,
}

/// What `POST /v1/invoices/{id}/issue` did.
#[derive(Clone, Debug)]
pub enum IssueAnswer {
    /// Without an issuer: issued within the request (or a replay of issued).
    Issued(Box<Replayed<InvoiceView>>),
    /// With an issuer: the job that issues it (202), a replay when it was already pending.
    Enqueued(Box<Replayed<JobView>>),
}

/// Where an approver's issue left its unit of work.
enum Issuing {
    Answered(IssueAnswer),
    /// The destination is inactive: `issue_blocked` recorded (when first reached), refused.
    Blocked,
    /// Admitted, without an issuer: finalised in a unit of its own.
    Local(IssueClaim),
}

/// What admission inside a transaction found.
enum Admitted {
    Claim(IssueClaim),
    /// Blocked: `issue_blocked` recorded when first reached (a repeat writes nothing).
    Blocked,
}

/// The issue job of an operation version, named by [`issue_business_key`] on every enqueue.
pub(crate) fn issue_job(org_id: Uuid, invoice_id: Uuid, version: i32) -> crate::queue::NewJob {
    crate::queue::NewJob {
        org_id,
        kind: ISSUE_JOB.to_owned(),
        args: serde_json::json!({ "invoice_id": invoice_id }),
        submission_id: Some(issue_business_key(invoice_id, version)),
        max_attempts: None,
        run_at: None,
    }
}

/// A version's claim business key and job submission id: the invoice id, then `{id}/v{n}`.
pub fn issue_business_key(invoice_id: Uuid, version: i32) -> String {
    if version <= 1 {
        invoice_id.to_string()
    } else {
        format!("{invoice_id}/v{version}")
    }
}

const BLOCKED_NOTE: &str = "the payment destination is no longer active: cancel this invoice, and \
     have the agent propose a new one with an active destination";

fn destination_inactive() -> AppError {
    AppError::Conflict {
        code: "destination_inactive",
        detail: "the invoice's payment destination is no longer active, so it cannot be issued \
                 (an `issue_blocked` event records it): cancel it, and have the agent propose a \
                 new invoice with an active destination"
            .into(),
    }
}

impl App {
    /// An approver issues an approved invoice: within the request without an issuer, else through
    /// the issue job (202); on a stopped issue, "issue again" (docs/EFFECTS.md, "Issue again").
    pub async fn issue(&self, actor: &Actor, id: Uuid) -> AppResult<IssueAnswer> {
        actor.require(Capability::Invoicing)?;
        let audit = AuditActor::of(actor);
        let mut tx = self.store.begin(actor.lane()).await?;
        let step = self.issue_in(&mut *tx, actor, id).await;
        match finish(tx, step).await? {
            Issuing::Answered(answer) => Ok(answer),
            Issuing::Blocked => Err(destination_inactive()),
            Issuing::Local(claim) => {
                let response = effect::local_issue_response(claim.op_key);
                self.finalise_issue(&claim, &response, audit)
                    .await
                    .map(|v| IssueAnswer::Issued(Box::new(v)))
            }
        }
    }

    /// [`App::issue`]'s unit of work.
    async fn issue_in(&self, tx: &mut dyn Tx, actor: &Actor, id: Uuid) -> AppResult<Issuing> {
        let (mut invoice, _) = locked(&mut *tx, actor, id, Action::Issue).await?;
        match rules::transition(Action::Issue, invoice.state, invoice.cancelled_by)
            .map_err(invalid)?
        {
            Transition::Replay => {
                let view = unchanged(&mut *tx, &invoice).await?;
                return Ok(Issuing::Answered(IssueAnswer::Issued(Box::new(view))));
            }
            Transition::Apply { .. } => {}
        }
        let audit = AuditActor::of(actor);
        let again = invoice
            .issuing_status
            .is_some_and(IssuingStatus::awaits_human);
        if again {
            invoice.issue_version += 1;
            invoice.issuing_status = None;
            invoice.issuing_reason = None;
        }
        let revision = current_revision(&mut *tx, &invoice).await?;
        let before = (invoice.number.clone(), invoice.issuing_status);
        let claim = match self
            .admit_in(&mut *tx, &mut invoice, &revision, audit, again)
            .await?
        {
            Admitted::Claim(claim) => claim,
            Admitted::Blocked => return Ok(Issuing::Blocked),
        };
        if !self.issuing_is_automatic() {
            return Ok(Issuing::Local(claim));
        }
        // With an issuer: the job of this operation version, enqueued or re-driven.
        let enqueued = crate::queue::enqueue(
            &mut *tx,
            issue_job(invoice.org_id, invoice.id, invoice.issue_version),
        )
        .await?;
        let mut wrote = !enqueued.replayed
            || again
            || claim.admission == Admission::Execute
            || before != (invoice.number.clone(), invoice.issuing_status);
        let mut redriven = false;
        if enqueued.replayed {
            redriven = redrive(&mut *tx, invoice.org_id, enqueued.id).await?;
            wrote |= redriven;
        }
        if invoice.issuing_status != Some(IssuingStatus::Pending)
            || invoice.issuing_job_id != Some(enqueued.id)
        {
            invoice.issuing_status = Some(IssuingStatus::Pending);
            invoice.issuing_job_id = Some(enqueued.id);
            wrote = true;
        }
        if !wrote {
            // A replay while the job is pending: nothing is written.
            let job = tx
                .job(invoice.org_id, enqueued.id)
                .await?
                .ok_or(AppError::NotFound)?;
            let view = crate::queue::view(job)?;
            let answer = IssueAnswer::Enqueued(Box::new(Replayed::replay(view)));
            return Ok(Issuing::Answered(answer));
        }
        invoice.updated_at = now();
        tx.update_invoice(&invoice).await?;
        // Who asked goes to the org's trail; the invoice's chain records what issuing then does.
        crate::audit::audit(
            &mut *tx,
            invoice.org_id,
            audit,
            "invoice.issue_requested",
            ("invoice", invoice.id),
            serde_json::json!({
                "job_id": enqueued.id,
                "operation_version": invoice.issue_version,
                "issue_again": again,
                "redriven": redriven,
            }),
        )
        .await?;
        let job = tx
            .job(invoice.org_id, enqueued.id)
            .await?
            .ok_or_else(|| AppError::Internal("the issue job vanished".into()))?;
        let view = crate::queue::view(job)?;
        let answer = IssueAnswer::Enqueued(Box::new(Replayed::fresh(view)));
        Ok(Issuing::Answered(answer))
    }

    /// Whether approving enqueues an issue job (an issuer is configured).
    pub fn issuing_is_automatic(&self) -> bool {
        self.config.issuer_configured
    }

    /// The job's admission, committed before any peer call; a superseded `submission` does nothing.
    pub(crate) async fn admit_issue(
        &self,
        org_id: Uuid,
        invoice_id: Uuid,
        submission: Option<&str>,
        actor: AuditActor,
    ) -> AppResult<IssueStart> {
        let mut tx = self.store.begin(Lane::Org(org_id)).await?;
        let start = async {
            let mut invoice = tx
                .lock_invoice(org_id, invoice_id)
                .await?
                .ok_or(AppError::NotFound)?;
            if invoice.state != InvoiceState::Approved {
                return Ok(IssueStart::Settled(invoice.state));
            }
            if submission
                .is_some_and(|s| s != issue_business_key(invoice.id, invoice.issue_version))
            {
                return Ok(IssueStart::Superseded);
            }
            if let Some(status) = invoice.issuing_status.filter(|s| s.awaits_human()) {
                return Ok(IssueStart::Stopped(status));
            }
            let revision = current_revision(&mut *tx, &invoice).await?;
            match self
                .admit_in(&mut *tx, &mut invoice, &revision, actor, false)
                .await?
            {
                Admitted::Claim(claim) => Ok(IssueStart::Admitted(claim)),
                Admitted::Blocked => Ok(IssueStart::Blocked),
            }
        }
        .await;
        finish(tx, start).await
    }
    /// Admits the issue of the locked approved `invoice` in `tx` (the caller commits): destination
    /// re-checked before numbering only, numbered once, claim inserted or found; `again`: no reap.
    async fn admit_in(
        &self,
        tx: &mut dyn Tx,
        invoice: &mut InvoiceRow,
        revision: &RevisionRow,
        actor: AuditActor,
        again: bool,
    ) -> AppResult<Admitted> {
        let org_id = invoice.org_id;
        let invoice_id = invoice.id;
        // The destination is re-checked only before the first admission. Once the invoice has
        // its number, a claim was committed and the peer may hold the invoice: blocking then
        // would strand it, so every later attempt goes on recovering and finalising.
        if invoice.number.is_none() && !destination_active(&mut *tx, org_id, revision).await? {
            if invoice.issuing_status == Some(IssuingStatus::Blocked) {
                return Ok(Admitted::Blocked);
            }
            let event = next_event(
                invoice,
                &EventInput {
                    action: Action::IssueBlocked,
                    from: Some(InvoiceState::Approved),
                    actor,
                    revision: Some(revision),
                    idempotency_key: None,
                    note: Some(BLOCKED_NOTE),
                    settings: None,
                },
            );
            invoice.updated_at = event.occurred_at;
            invoice.issuing_status = Some(IssuingStatus::Blocked);
            invoice.issuing_reason = Some(BLOCKED_NOTE.to_owned());
            tx.update_invoice(invoice).await?;
            record_event(&mut *tx, &event).await?;
            return Ok(Admitted::Blocked);
        }
        if invoice.issuing_status == Some(IssuingStatus::Blocked) {
            // The destination is active again: issuing goes on.
            invoice.issuing_status = self
                .issuing_is_automatic()
                .then_some(IssuingStatus::Pending);
            invoice.issuing_reason = None;
            tx.update_invoice(invoice).await?;
        }
        let numbered_before = invoice.number.is_some();
        let number = match invoice.number.clone() {
            Some(number) => number,
            None => {
                let at = now();
                let sequence = tx.next_invoice_number(org_id, at.year()).await?;
                let number = effect::invoice_number(at, sequence);
                invoice.number = Some(number.clone());
                tx.update_invoice(invoice).await?;
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
        let version = invoice.issue_version.max(1);
        let op_key = effect::operation_key(
            org_id,
            CLAIM_KIND,
            &invoice_id.to_string(),
            u32::try_from(version).unwrap_or(1),
        );
        let admitted_at = now();
        let claim = ClaimRow {
            id: op_key,
            org_id,
            kind: CLAIM_KIND.to_owned(),
            business_key: issue_business_key(invoice_id, version),
            fingerprint: fingerprint.clone(),
            state: ClaimState::Processing.as_str().to_owned(),
            response: None,
            admitted_at,
            completed_at: None,
            retain_until: admitted_at + self.config.claim_retention,
        };
        let (admission, stale) = if tx.insert_claim(&claim).await? {
            // A new claim for an invoice numbered earlier, not opened by an issue-again: the
            // claim was reaped (it was at least a day old, past the peer's memory by default),
            // so recover first and never execute on a bare absence.
            if numbered_before && !again {
                (Admission::Recover, true)
            } else {
                (Admission::Execute, false)
            }
        } else {
            let existing = tx
                .lock_claim(org_id, op_key)
                .await?
                .ok_or_else(|| AppError::Internal("claim vanished during admission".into()))?;
            let state = ClaimState::parse(&existing.state).unwrap_or(ClaimState::Processing);
            let admission =
                effect::admit(Some((state, existing.fingerprint.as_str())), &fingerprint);
            let stale = effect::is_stale(
                existing.admitted_at,
                self.config.issuer_key_retention,
                admitted_at,
            );
            (admission, stale)
        };
        Ok(Admitted::Claim(IssueClaim {
            org_id,
            invoice_id,
            op_key,
            request,
            body,
            admission,
            stale,
        }))
    }

    /// Stops issuing for a human, only while approved with a processing claim: a refusal closes the
    /// claim, a conflict or needs review keeps it processing (the peer may hold something).
    pub(crate) async fn stop_issue(
        &self,
        claim: &IssueClaim,
        stop: &IssueStop,
        actor: AuditActor,
    ) -> AppResult<()> {
        let mut tx = self.store.begin(Lane::Org(claim.org_id)).await?;
        let answer = async {
            let mut invoice = tx
                .lock_invoice(claim.org_id, claim.invoice_id)
                .await?
                .ok_or(AppError::NotFound)?;
            let Some(row) = tx.lock_claim(claim.org_id, claim.op_key).await? else {
                return Ok(());
            };
            if invoice.state != InvoiceState::Approved || row.state != ClaimState::Processing.as_str() {
                return Ok(());
            }
            let (status, action, reason) = match stop {
                IssueStop::Rejected(reason) => {
                    let at = now();
                    if !tx
                        .reject_claim(
                            claim.org_id,
                            claim.op_key,
                            at,
                            effect::retain_until(at, self.config.claim_retention),
                        )
                        .await?
                    {
                        return Ok(());
                    }
                    (
                        IssuingStatus::Rejected,
                        Action::IssueRejected,
                        format!("the issuer refused the invoice: {reason}"),
                    )
                }
                IssueStop::Conflict(c) => (
                    IssuingStatus::Conflict,
                    Action::IssueConflict,
                    format!(
                        "the issuer holds another request under this operation key: it holds {}, \
                         Tauros sent {}",
                        c.theirs, c.ours
                    ),
                ),
                IssueStop::NeedsReview => (
                    IssuingStatus::NeedsReview,
                    Action::IssueNeedsReview,
                    format!(
                        "the claim was admitted longer ago than the issuer remembers keys ({} h) and \
                         the issuer holds nothing under it: check the issuer for invoice {}, then \
                         issue it again or cancel it",
                        self.config.issuer_key_retention.num_hours(),
                        invoice.number.as_deref().unwrap_or("(unnumbered)")
                    ),
                ),
            };
            if invoice.issuing_status != Some(status) {
                let revision = current_revision(&mut *tx, &invoice).await?;
                let event = next_event(
                    &mut invoice,
                    &EventInput {
                        action,
                        from: Some(InvoiceState::Approved),
                        actor,
                        revision: Some(&revision),
                        idempotency_key: None,
                        note: Some(&reason),
                        settings: None,
                    },
                );
                invoice.updated_at = event.occurred_at;
                invoice.issuing_status = Some(status);
                invoice.issuing_reason = Some(reason);
                tx.update_invoice(&invoice).await?;
                record_event(&mut *tx, &event).await?;
            }
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Finalises an issue with the peer's `response` in one transaction, only while the claim is
    /// `processing`; one already complete (another attempt won) answers as a replay.
    pub(crate) async fn finalise_issue(
        &self,
        claim: &IssueClaim,
        response: &serde_json::Value,
        actor: AuditActor,
    ) -> AppResult<Replayed<InvoiceView>> {
        let mut tx = self.store.begin(Lane::Org(claim.org_id)).await?;
        let answer = async {
            // Invoice, then claim: the order admission takes them in.
            let mut invoice = tx
                .lock_invoice(claim.org_id, claim.invoice_id)
                .await?
                .ok_or(AppError::NotFound)?;
            let row = tx
                .lock_claim(claim.org_id, claim.op_key)
                .await?
                .ok_or_else(|| {
                    AppError::Internal("the claim was reaped before finalisation".into())
                })?;
            if row.state == ClaimState::Complete.as_str() {
                return unchanged(&mut *tx, &invoice).await;
            }
            if row.state != ClaimState::Processing.as_str() {
                return Err(AppError::Internal(
                    "the claim was closed as rejected before finalisation".into(),
                ));
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
            written(&mut *tx, &invoice).await
        }
        .await;
        super::commands::committed(tx, claim.org_id, answer).await
    }

    /// Deletes completed claims past their retention, in batches, until none is left.
    pub async fn clean_claims(&self, batch: i64) -> AppResult<u64> {
        let mut total = 0;
        loop {
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = tx.clean_claims(now(), batch).await.map_err(Into::into);
            let n = crate::app::finish(tx, answer).await?;
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }

    /// Deletes processing claims abandoned past `horizon` (at least a day), skipping held ones.
    pub async fn reap_claims(&self, horizon: chrono::Duration, batch: i64) -> AppResult<u64> {
        let horizon = horizon.max(chrono::Duration::days(effect::ABANDON_FLOOR_DAYS));
        let horizon = horizon.to_std().unwrap_or(std::time::Duration::MAX);
        let mut total = 0;
        loop {
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = tx.reap_claims(horizon, batch).await.map_err(Into::into);
            let n = crate::app::finish(tx, answer).await?;
            total += n;
            if n < batch as u64 {
                return Ok(total);
            }
        }
    }

    /// Claims by state, for `/metrics`.
    pub async fn claim_counts(&self) -> AppResult<tauros_store::ClaimCounts> {
        Ok(self
            .store
            .reader(Lane::Unattributed)
            .await?
            .claim_counts()
            .await?)
    }
}

/// Re-drives issue job `id` if it ended without issuing; answers whether it wrote.
async fn redrive(tx: &mut dyn Tx, org_id: Uuid, id: Uuid) -> AppResult<bool> {
    let Some(job) = tx.lock_job(org_id, id).await? else {
        return Ok(false);
    };
    if !matches!(
        job.state,
        JobState::Discarded | JobState::Cancelled | JobState::Completed
    ) {
        return Ok(false);
    }
    let at = now();
    let update = JobUpdate {
        state: JobState::Available,
        attempt: 1,
        interruptions: 0,
        run_at: at,
        finished_at: None,
        last_error: None,
        now: at,
    };
    tx.update_job(org_id, id, &update).await?;
    Ok(true)
}

/// Whether the revision's destination is active, share-locked until this transaction ends.
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
    invoice.issuing_status = None;
    invoice.issuing_reason = None;
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
