//! Jobs whose work can outlive them (docs/JOBS.md, "Jobs that hold work"): an issue job is not
//! cancelled while its claim is `processing`, nor pruned while its invoice is `approved`.

use crate::app::App;
use crate::error::{AppError, AppResult};
use crate::invoices::{ISSUE_CLAIM_KIND, ISSUE_JOB, issue_job};
use tauros_domain::effect::IssuingStatus;
use tauros_domain::invoice::InvoiceState;
use tauros_domain::job as rules;
use tauros_store::{JobRow, Lane, Reader};
use uuid::Uuid;

/// What one issuing redrive sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Redriven {
    /// Approved invoices looked at.
    pub approved: u64,
    /// Issue jobs enqueued for approved invoices that had none.
    pub enqueued: u64,
    /// Invoices whose enqueue failed (logged; the next sweep tries again).
    pub failed: u64,
}

/// Kinds whose finished jobs retention checks one by one ([`work_unfinished`]).
pub(crate) const HOLDING_KINDS: &[&str] = &[ISSUE_JOB];

/// The invoice an issue job issues (its args' `invoice_id`); `None` for other kinds.
fn issued_invoice(row: &JobRow) -> Option<Uuid> {
    if row.kind != ISSUE_JOB {
        return None;
    }
    let args: serde_json::Value = serde_json::from_str(&row.args).ok()?;
    args.get("invoice_id")?.as_str()?.parse().ok()
}

/// Whether the job's work is unfinished: an issue job whose invoice is still `approved`.
pub(crate) async fn work_unfinished(conn: &mut dyn Reader, row: &JobRow) -> AppResult<bool> {
    let Some(invoice_id) = issued_invoice(row) else {
        return Ok(false);
    };
    Ok(conn.invoice_state(row.org_id, invoice_id).await? == Some(InvoiceState::Approved))
}

/// Refuses to cancel an issue job whose claim is `processing`: the peer may hold the effect,
/// and only the job (recover first, then finalise) can bring the invoice level with it.
pub(crate) async fn guard_cancel(conn: &mut dyn Reader, row: &JobRow) -> AppResult<()> {
    let Some(invoice_id) = issued_invoice(row) else {
        return Ok(());
    };
    // The claim's business key: the invoice id, or `{invoice_id}/v{n}` for a later version.
    let key = invoice_id.to_string();
    let prefix = format!("{key}/v");
    if conn
        .processing_claim_exists(row.org_id, ISSUE_CLAIM_KIND, &key, &prefix)
        .await?
    {
        return Err(AppError::Conflict {
            code: "issue_in_progress",
            detail: format!(
                "invoice {invoice_id} is being issued: its claim is processing, so the peer may \
                 already hold the invoice, and cancelling this job would leave the effect with \
                 no one to finish it. Nothing was changed. Retry the job (POST \
                 /v1/jobs/{}/retry) so it recovers the peer's answer and finishes; to stop the \
                 invoice, cancel the invoice once it is settled (docs/JOBS.md, \"A job that \
                 cannot be cancelled\")",
                row.id
            ),
        });
    }
    Ok(())
}

impl App {
    /// The issuing redrive (docs/EFFECTS.md, "A stranded approved invoice"): with an issuer,
    /// enqueues each approved invoice's missing issue job, by id in pages of `batch`, under the
    /// approval's submission id, so a race with an approval or another sweep makes one job.
    pub async fn redrive_issuing(&self, batch: i64) -> AppResult<Redriven> {
        let mut done = Redriven::default();
        if !self.issuing_is_automatic() {
            return Ok(done);
        }
        let batch = batch.max(1);
        let mut after = None;
        loop {
            let page = self
                .store
                .reader(Lane::Unattributed)
                .await?
                .invoices_in_state(InvoiceState::Approved, after, batch)
                .await?;
            let Some(&(_, last, _)) = page.last() else {
                break;
            };
            after = Some(last);
            let full = page.len() as i64 == batch;
            for (org_id, invoice_id, version) in page {
                done.approved += 1;
                let key = crate::invoices::issue_business_key(invoice_id, version);
                let job_id = rules::job_id_for_submission(org_id, ISSUE_JOB, &key);
                if self
                    .store
                    .reader(Lane::Unattributed)
                    .await?
                    .submission(org_id, job_id)
                    .await?
                    .is_some()
                {
                    continue;
                }
                match self.redrive_one(org_id, invoice_id).await {
                    Ok(Some(job)) => {
                        done.enqueued += 1;
                        tracing::info!(invoice = %invoice_id, job = %job, "issue job enqueued for an approved invoice that had none");
                    }
                    Ok(None) => {}
                    Err(e) => {
                        done.failed += 1;
                        tracing::warn!(error = %e, invoice = %invoice_id, "enqueueing the issue job of an approved invoice failed; the next sweep tries again");
                    }
                }
            }
            if !full {
                break;
            }
        }
        Ok(done)
    }

    /// Enqueues one still-approved invoice's issue job as an approval does; its id if made now.
    async fn redrive_one(&self, org_id: Uuid, invoice_id: Uuid) -> AppResult<Option<Uuid>> {
        let mut tx = self.store.begin(Lane::Org(org_id)).await?;
        let answer = async {
            let Some(mut invoice) = tx.lock_invoice(org_id, invoice_id).await? else {
                return Ok(None);
            };
            if invoice.state != InvoiceState::Approved {
                return Ok(None);
            }
            let job = issue_job(org_id, invoice_id, invoice.issue_version);
            let enqueued = crate::queue::enqueue(&mut *tx, job).await?;
            if enqueued.replayed {
                return Ok(None);
            }
            invoice.issuing_status = Some(IssuingStatus::Pending);
            invoice.issuing_job_id = Some(enqueued.id);
            invoice.updated_at = crate::clock::now();
            tx.update_invoice(&invoice).await?;
            Ok(Some(enqueued.id))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Runs [`App::redrive_issuing`] now and every `every`, on its own task (needs an issuer).
    pub fn spawn_issuing_redrive(&self, every: Option<std::time::Duration>, batch: i64) {
        if !self.issuing_is_automatic() {
            return;
        }
        let app = self.clone();
        tokio::spawn(async move {
            loop {
                match app.redrive_issuing(batch).await {
                    Ok(r) if r.enqueued + r.failed > 0 => {
                        tracing::info!(
                            approved = r.approved,
                            enqueued = r.enqueued,
                            failed = r.failed,
                            "issuing redrive swept approved invoices"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "issuing redrive failed; the next sweep tries again");
                    }
                }
                let Some(every) = every else { return };
                tokio::time::sleep(every).await;
            }
        });
    }
}
