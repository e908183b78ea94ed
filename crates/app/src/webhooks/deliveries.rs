//! Deliveries: fanned out in the event's transaction, sent, held while disabled, resent.

use super::seal_context;
use super::views::{WebhookDeliveryView, delivery_view};
use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::idempotency::Replayed;
use crate::queue::{ClaimedJob, NewJob, enqueue_in_lane};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tauros_domain::webhook::{
    self as rules, AllowList, DeliveryStatus, Event, EventFacts, EventType, SealError,
    SigningSecret, Subscription,
};
use tauros_store::{EventRow, Lane, Reader, Tx, WebhookDeliveryRow};
use uuid::Uuid;

/// What one delivery sends, and where.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub endpoint_id: Uuid,
    pub url: String,
    /// The endpoint's limit for one attempt, DNS included.
    pub timeout: Duration,
    pub secret: SigningSecret,
    /// The `webhook-id` header.
    pub event_id: Uuid,
    pub event_type: EventType,
    /// The same bytes on every attempt.
    pub body: String,
    /// The outbound policy in force now.
    pub allow_hosts: AllowList,
}

/// Why a delivery cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryRefused {
    #[error("the endpoint was deleted")]
    EndpointGone,
    #[error("the event does not exist")]
    EventGone,
    #[error("the endpoint is disabled: the delivery is held until an approver re-enables it")]
    EndpointDisabled,
    #[error("a newer cycle of this delivery (a resend or a re-enable) has its own job")]
    Superseded,
    #[error("{0}")]
    Secret(SealError),
}

/// The job args of a delivery.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryArgs {
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
}

/// An event's immutable record, in its subject's table: what a delivery sends.
enum Recorded {
    Invoice(EventRow),
}

impl Recorded {
    /// The event `id`, of the type its delivery recorded; `None` (a job older than delivery
    /// rows) reads an invoice's, the only events there were then.
    async fn read(
        conn: &mut dyn Reader,
        org_id: Uuid,
        id: Uuid,
        event_type: Option<&str>,
    ) -> AppResult<Option<Recorded>> {
        match event_type.map(EventType::parse) {
            Some(Some(EventType::Invoice(_))) | None => {
                Ok(conn.event_by_id(org_id, id).await?.map(Recorded::Invoice))
            }
            // A type this build does not know: a newer release's event.
            Some(None) => Ok(None),
        }
    }

    fn event(&self) -> Event<'_> {
        match self {
            Recorded::Invoice(event) => Event::Invoice(EventFacts {
                event_id: event.id,
                invoice_id: event.invoice_id,
                action: event.action,
                seq: event.seq,
                from_state: event.from_state,
                to_state: event.to_state,
                revision_id: event.revision_id,
                payload_hash: event.payload_hash.as_deref(),
                occurred_at: event.occurred_at,
            }),
        }
    }
}

/// Enqueues one delivery per subscribing endpoint in the event's transaction, one job per
/// (endpoint, event) however often this runs; a disabled endpoint's is recorded held. Any
/// subject's event: `event_id` is its `webhook-id`.
pub(crate) async fn enqueue_deliveries(
    tx: &mut dyn Tx,
    org_id: Uuid,
    event_id: Uuid,
    event_type: EventType,
) -> AppResult<()> {
    let endpoints = tx.all_webhook_endpoints(org_id).await?;
    failpoint!(org_id, EndpointsRead);
    for endpoint in endpoints {
        if !Subscription::from_stored(&endpoint.events).includes(event_type) {
            continue;
        }
        let held = endpoint.disabled_at.is_some();
        let job_id = if held {
            None
        } else {
            Some(enqueue_cycle(tx, org_id, endpoint.id, event_id, 1, None).await?)
        };
        let now = now();
        tx.insert_webhook_delivery(&WebhookDeliveryRow {
            id: rules::delivery_id(org_id, endpoint.id, event_id),
            org_id,
            endpoint_id: endpoint.id,
            event_id,
            event_type: event_type.name().to_owned(),
            job_id,
            cycle: 1,
            held,
            delivered_at: None,
            created_at: now,
            updated_at: now,
        })
        .await?;
    }
    Ok(())
}

/// Enqueues the job of one cycle of a delivery; its id.
async fn enqueue_cycle(
    tx: &mut dyn Tx,
    org_id: Uuid,
    endpoint_id: Uuid,
    event_id: Uuid,
    cycle: i32,
    max_attempts: Option<i32>,
) -> AppResult<Uuid> {
    let args = DeliveryArgs {
        endpoint_id,
        event_id,
    };
    let args = serde_json::to_value(&args)
        .map_err(|e| AppError::Internal(format!("delivery args: {e}")))?;
    let enqueued = enqueue_in_lane(
        tx,
        NewJob {
            org_id,
            kind: rules::DELIVERY_KIND.to_owned(),
            args,
            submission_id: Some(rules::cycle_submission(endpoint_id, event_id, cycle)),
            max_attempts,
            run_at: None,
        },
        Some(rules::delivery_lane(endpoint_id)),
    )
    .await?;
    Ok(enqueued.id)
}

/// Starts a delivery's next job cycle (fresh budget, same `webhook-id`) as its current one.
pub(super) async fn next_cycle(
    tx: &mut dyn Tx,
    delivery: &WebhookDeliveryRow,
    max_attempts: i32,
    now: DateTime<Utc>,
) -> AppResult<(i32, Uuid)> {
    let cycle = rules::next_cycle(delivery.cycle, delivery.job_id.is_some());
    let job_id = enqueue_cycle(
        tx,
        delivery.org_id,
        delivery.endpoint_id,
        delivery.event_id,
        cycle,
        Some(max_attempts),
    )
    .await?;
    tx.set_webhook_delivery_job(delivery.org_id, delivery.id, job_id, cycle, now)
        .await?;
    Ok((cycle, job_id))
}

/// Records the delivery `job` carries if it has none yet (an older or hand-submitted job).
pub(super) async fn ensure_delivery(
    tx: &mut dyn Tx,
    job: &ClaimedJob,
    endpoint_id: Uuid,
    (event_id, event_type): (Uuid, EventType),
    now: DateTime<Utc>,
) -> AppResult<()> {
    tx.insert_webhook_delivery(&WebhookDeliveryRow {
        id: rules::delivery_id(job.org_id, endpoint_id, event_id),
        org_id: job.org_id,
        endpoint_id,
        event_id,
        event_type: event_type.name().to_owned(),
        job_id: Some(job.id),
        cycle: 1,
        held: false,
        delivered_at: None,
        created_at: now,
        updated_at: now,
    })
    .await?;
    Ok(())
}

impl App {
    /// Counted attempts of one delivery cycle, as the operator configured them.
    pub fn webhook_max_attempts(&self) -> i32 {
        self.config.webhooks.max_attempts
    }

    /// What the delivery of `args` sends now: the endpoint as it is and the event's body; held if
    /// the endpoint is disabled, nothing if `job` is no longer the delivery's current cycle.
    pub async fn webhook_delivery(
        &self,
        job: &ClaimedJob,
        args: &DeliveryArgs,
    ) -> AppResult<Result<Delivery, DeliveryRefused>> {
        let org_id = job.org_id;
        let mut conn = self.store.reader(Lane::Org(job.org_id)).await?;
        let Some(endpoint) = conn.webhook_endpoint(org_id, args.endpoint_id).await? else {
            return Ok(Err(DeliveryRefused::EndpointGone));
        };
        let delivery = conn
            .webhook_delivery_of_event(org_id, endpoint.id, args.event_id)
            .await?;
        if let Some(delivery) = &delivery
            && delivery.job_id.is_some_and(|current| current != job.id)
        {
            return Ok(Err(DeliveryRefused::Superseded));
        }
        let event_type = delivery.as_ref().map(|d| d.event_type.as_str());
        let Some(recorded) = Recorded::read(&mut *conn, org_id, args.event_id, event_type).await?
        else {
            return Ok(Err(DeliveryRefused::EventGone));
        };
        drop(conn);
        let event = recorded.event();
        let event_ref = (event.id(), event.event_type());
        if endpoint.disabled_at.is_some() && self.hold_delivery(job, endpoint.id, event_ref).await?
        {
            return Ok(Err(DeliveryRefused::EndpointDisabled));
        }
        let secret = match rules::open_secret(
            &endpoint.secret,
            self.config.webhooks.secret_key.as_ref(),
            &seal_context(org_id, endpoint.id),
        ) {
            Ok(secret) => secret,
            Err(e) => return Ok(Err(DeliveryRefused::Secret(e))),
        };
        Ok(Ok(Delivery {
            endpoint_id: endpoint.id,
            url: endpoint.url,
            timeout: Duration::from_secs(
                u64::try_from(endpoint.timeout_seconds)
                    .unwrap_or(rules::DEFAULT_TIMEOUT_SECONDS.unsigned_abs().into()),
            ),
            secret,
            event_id: event.id(),
            event_type: event.event_type(),
            body: rules::payload(&event),
            allow_hosts: self.config.webhooks.allow_hosts.clone(),
        }))
    }

    /// Holds `job`'s delivery while its endpoint is disabled, under the endpoint's lock (a
    /// re-enable is before or after, never between); false when re-enabled meanwhile.
    async fn hold_delivery(
        &self,
        job: &ClaimedJob,
        endpoint_id: Uuid,
        event: (Uuid, EventType),
    ) -> AppResult<bool> {
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            let Some(endpoint) = tx.lock_webhook_endpoint(job.org_id, endpoint_id).await? else {
                return Ok(false);
            };
            if endpoint.disabled_at.is_none() {
                return Ok(false);
            }
            let now = now();
            ensure_delivery(&mut *tx, job, endpoint.id, event, now).await?;
            tx.hold_webhook_delivery(job.org_id, endpoint.id, event.0, job.id, now)
                .await?;
            Ok(true)
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Sends a delivery again in a new job cycle (approvers): one not going to be attempted, or a
    /// delivered one the receiver lost; a pending one replays, a disabled endpoint refuses.
    pub async fn resend_webhook_delivery(
        &self,
        actor: &Actor,
        endpoint_id: Uuid,
        id: Uuid,
    ) -> AppResult<Replayed<WebhookDeliveryView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            // The endpoint's lock orders concurrent resends, re-enables and the attempts' records:
            // the second of two resends sees the first's job pending.
            let endpoint = tx
                .lock_webhook_endpoint(human.org_id, endpoint_id)
                .await?
                .ok_or(AppError::NotFound)?;
            let listed = tx
                .webhook_delivery(human.org_id, endpoint_id, id)
                .await?
                .ok_or(AppError::NotFound)?;
            let delivery = listed.delivery;
            let status = DeliveryStatus::of(
                delivery.delivered_at.is_some(),
                delivery.held,
                listed.job_state,
            );
            match rules::resend(status, endpoint.disabled_at.is_some()) {
                Err(refused) => {
                    return Err(AppError::Conflict {
                        code: refused.code(),
                        detail: refused.to_string(),
                    });
                }
                Ok(rules::Resend::AlreadyPending) => {
                    return Ok(Replayed::replay(delivery_view(delivery, listed.job_state)));
                }
                Ok(rules::Resend::NewCycle) => {}
            }
            let (cycle, job_id) = next_cycle(
                &mut *tx,
                &delivery,
                self.config.webhooks.max_attempts,
                now(),
            )
            .await?;
            audit(
                &mut *tx,
                human.org_id,
                AuditActor::human(human),
                "webhook_delivery.resent",
                ("webhook_endpoint", endpoint_id),
                serde_json::json!({
                    "delivery_id": delivery.id,
                    "event_id": delivery.event_id,
                    "cycle": cycle,
                    "job_id": job_id,
                    "previous_job_id": delivery.job_id,
                    "previously_delivered_at": delivery.delivered_at,
                }),
            )
            .await?;
            let listed = tx
                .webhook_delivery(human.org_id, endpoint_id, id)
                .await?
                .ok_or(AppError::NotFound)?;
            Ok(Replayed::fresh(delivery_view(
                listed.delivery,
                listed.job_state,
            )))
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}
