//! Delivery attempts: recording one (which may disable its endpoint) and listing them.

use super::deliveries::{Delivery, ensure_delivery};
use super::views::WebhookAttemptView;
use super::{health_of, stored_health};
use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::PageRequest;
use crate::queue::ClaimedJob;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tauros_domain::webhook::{self as rules, Outcome};
use tauros_store::Lane;
use tauros_store::WebhookAttemptRow;
use uuid::Uuid;

/// What recording an attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptRecorded {
    Recorded,
    /// The endpoint is disabled (by this attempt or before): the delivery is held.
    Held,
    /// The endpoint was deleted while the attempt ran: nothing was recorded.
    EndpointGone,
}

impl App {
    /// An endpoint's delivery attempts, newest first (approvers).
    pub async fn list_webhook_attempts(
        &self,
        actor: &Actor,
        id: Uuid,
        page: PageRequest,
    ) -> AppResult<Vec<WebhookAttemptView>> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader(actor.lane()).await?;
        conn.webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let rows = conn.webhook_attempts(human.org_id, id, page.into()).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// Records one attempt of `job`, its delivery's outcome and the endpoint's health.
    pub async fn record_webhook_attempt(
        &self,
        job: &ClaimedJob,
        delivery: &Delivery,
        outcome: Outcome,
        error: Option<&str>,
        duration: Duration,
        attempted_at: DateTime<Utc>,
    ) -> AppResult<AttemptRecorded> {
        let row = WebhookAttemptRow {
            id: Uuid::now_v7(),
            org_id: job.org_id,
            endpoint_id: delivery.endpoint_id,
            job_id: job.id,
            event_id: delivery.event_id,
            event_type: delivery.event_type.name().to_owned(),
            attempt: job.attempt,
            status_code: match outcome {
                Outcome::Answered(status) => Some(i32::from(status)),
                _ => None,
            },
            error_kind: outcome.error_kind().map(str::to_owned),
            error: error.map(rules::bounded_error),
            duration_ms: i64::try_from(duration.as_millis()).unwrap_or(i64::MAX),
            delivered: outcome.delivered(),
            attempted_at,
        };
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            // The endpoint's lock orders this attempt's health with the others' and with an
            // approver's re-enable.
            let Some(endpoint) = tx
                .lock_webhook_endpoint(job.org_id, delivery.endpoint_id)
                .await?
            else {
                // The endpoint was deleted while the attempt ran (its attempts went with it).
                return Ok(AttemptRecorded::EndpointGone);
            };
            match tx.insert_webhook_attempt(&row).await {
                Ok(()) => {}
                Err(tauros_store::StoreError::ReferenceGone(_)) => {
                    return Ok(AttemptRecorded::EndpointGone);
                }
                Err(e) => return Err(e.into()),
            }
            let now = now();
            let event = (delivery.event_id, delivery.event_type);
            ensure_delivery(&mut *tx, job, endpoint.id, event, now).await?;
            if row.delivered {
                tx.set_webhook_delivered(job.org_id, endpoint.id, delivery.event_id, now)
                    .await?;
            }
            let health = health_of(&endpoint);
            let (after, disable) = health.after_attempt(
                row.delivered,
                attempted_at,
                self.config.webhooks.disable_after,
            );
            if after != health {
                tx.update_webhook_health(
                    job.org_id,
                    endpoint.id,
                    &stored_health(after, if disable { now } else { endpoint.updated_at }),
                )
                .await?;
            }
            if disable {
                let held = tx
                    .hold_waiting_webhook_deliveries(job.org_id, endpoint.id, now)
                    .await?;
                tx.cancel_waiting_jobs(
                    job.org_id,
                    rules::DELIVERY_KIND,
                    &rules::endpoint_submissions(endpoint.id),
                    now,
                )
                .await?;
                metrics::counter!("tauros_webhook_endpoints_disabled_total").increment(1);
                audit(
                    &mut *tx,
                    job.org_id,
                    AuditActor::job(),
                    "webhook_endpoint.disabled",
                    ("webhook_endpoint", endpoint.id),
                    serde_json::json!({
                        "url": endpoint.url,
                        "failing_since": after.failing_since,
                        "last_success_at": after.last_success_at,
                        "disable_after_ms": u64::try_from(self.config.webhooks.disable_after.as_millis()).unwrap_or(u64::MAX),
                        "held_deliveries": held + u64::from(!row.delivered),
                    }),
                )
                .await?;
            }
            let held = after.disabled_at.is_some()
                && !row.delivered
                && tx
                    .hold_webhook_delivery(job.org_id, endpoint.id, delivery.event_id, job.id, now)
                    .await?;
            Ok(if held {
                AttemptRecorded::Held
            } else {
                AttemptRecorded::Recorded
            })
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}
