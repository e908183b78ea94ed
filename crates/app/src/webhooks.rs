//! Webhooks (docs/contract/effects.md §2): approvers register endpoints for their organisation (the
//! signing secret is shown once, at creation and at each rotation), every audited invoice event an
//! endpoint subscribes to becomes one delivery job in the event's own transaction, and the
//! delivery handler (`jobs::webhooks`) reads what to send here and records each attempt. The
//! rules are `domain::webhook`'s; secrets are sealed with the operator's key when there is one.

use crate::actor::Actor;
use crate::app::App;

use crate::audit::{AuditActor, audit};
use crate::clock::now;

use crate::error::{AppError, AppResult};
use crate::jobs::{ClaimedJob, NewJob, enqueue};

use crate::lists::PageRequest;
use crate::random::random_32;
use crate::schema::WebhookEventType;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;
use tauros_domain::webhook::{
    self as rules, AllowList, EndpointInput, EventFacts, Outcome, SealError, SigningSecret,
    Subscription,
};
use tauros_store::{
    EventRow, Lock, Tx, WebhookAttemptListed, WebhookAttemptRow, WebhookEndpointRow,
};
use utoipa::ToSchema;
use uuid::Uuid;

/// A registration as sent.
#[derive(Clone, Debug, Default)]
pub struct NewWebhookEndpoint {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    pub timeout_seconds: Option<i64>,
}

// An endpoint as approvers see it, as the wire shows it (`WebhookEndpointResponse` in the
// OpenAPI document).
/// A webhook endpoint (never its secret).
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = WebhookEndpointResponse)]
pub struct WebhookEndpointView {
    pub id: Uuid,
    /// Where deliveries are POSTed (normalised: lowercase host).
    pub url: String,
    /// The event types it receives.
    #[schema(value_type = Vec<WebhookEventType>)]
    pub events: Vec<&'static str>,
    /// A note for humans.
    pub description: Option<String>,
    /// Seconds one attempt may take.
    pub timeout_seconds: i32,
    /// The approver who registered it.
    pub created_by: Uuid,
    pub created_at: DateTime<Utc>,
    /// When it last changed (its secret was rotated), or `created_at`.
    pub updated_at: DateTime<Utc>,
    /// When its secret was last rotated.
    pub secret_rotated_at: Option<DateTime<Utc>>,
}

impl From<WebhookEndpointRow> for WebhookEndpointView {
    fn from(r: WebhookEndpointRow) -> Self {
        WebhookEndpointView {
            id: r.id,
            url: r.url,
            events: Subscription::from_stored(&r.events).names(),
            description: r.description,
            timeout_seconds: r.timeout_seconds,
            created_by: r.created_by,
            created_at: r.created_at,
            updated_at: r.updated_at,
            secret_rotated_at: r.secret_rotated_at,
        }
    }
}

/// An endpoint with its signing secret: the answer of a creation or a rotation, the only two
/// times the secret is shown.
#[derive(Clone, Debug)]
pub struct WithSecret {
    pub endpoint: WebhookEndpointView,
    pub secret: SigningSecret,
}

// One delivery attempt, with what its job will do next, as the wire shows it
// (`WebhookAttemptResponse` in the OpenAPI document).
/// One delivery attempt.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = WebhookAttemptResponse)]
pub struct WebhookAttemptView {
    pub id: Uuid,
    /// The invoice event delivered: the `webhook-id` header, the same on every attempt.
    pub event_id: Uuid,
    #[schema(value_type = WebhookEventType)]
    pub event_type: String,
    /// The delivery's job (`GET /v1/jobs/{id}`; retry a discarded one there).
    pub job_id: Uuid,
    /// The delivery's counted attempt this was, from 1.
    pub attempt: i32,
    /// The endpoint's answer, when one arrived (2xx: delivered).
    pub status_code: Option<i32>,
    /// Why no answer arrived: `timeout`, `dns`, `address_refused` (the host resolved to an
    /// address the outbound policy refuses) or `network`.
    pub error_kind: Option<String>,
    /// What went wrong, at most 200 characters.
    pub error: Option<String>,
    /// From the first byte sent (or the name lookup) to the answer or the failure.
    pub duration_ms: i64,
    /// Whether the endpoint took the event (a 2xx answer).
    pub delivered: bool,
    pub attempted_at: DateTime<Utc>,
    /// When the delivery is tried again: on the latest failed attempt of a delivery that will
    /// be retried; `null` otherwise.
    pub next_retry_at: Option<DateTime<Utc>>,
}

impl From<WebhookAttemptListed> for WebhookAttemptView {
    fn from(l: WebhookAttemptListed) -> Self {
        let a = l.attempt;
        // After a failed attempt n, a job that waits to run again is at attempt n + 1; an
        // interrupted run keeps its attempt, and an operator's new cycle starts at 1.
        let next_retry_at = match (l.job_state, l.job_attempt, l.job_run_at) {
            (Some(state), Some(next), Some(run_at))
                if !a.delivered && state.is_claimable() && next == a.attempt + 1 =>
            {
                Some(run_at)
            }
            _ => None,
        };
        WebhookAttemptView {
            id: a.id,
            event_id: a.event_id,
            event_type: a.event_type,
            job_id: a.job_id,
            attempt: a.attempt,
            status_code: a.status_code,
            error_kind: a.error_kind,
            error: a.error,
            duration_ms: a.duration_ms,
            delivered: a.delivered,
            attempted_at: a.attempted_at,
            next_retry_at,
        }
    }
}

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
    pub event_type: &'static str,
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
    #[error("the invoice event does not exist")]
    EventGone,
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

/// Binds a sealed secret to its row: another row's sealed value does not open here.
fn seal_context(org_id: Uuid, endpoint_id: Uuid) -> Vec<u8> {
    [org_id.as_bytes().as_slice(), endpoint_id.as_bytes()].concat()
}

fn nonce() -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&random_32()[..12]);
    nonce
}

/// Enqueues one delivery per endpoint of the event's organisation that subscribes to it,
/// inside the event's transaction: a command that rolls back leaves no delivery. The submission
/// id (endpoint, event) makes each delivery one job however often this runs.
pub(crate) async fn enqueue_deliveries(tx: &mut dyn Tx, event: &EventRow) -> AppResult<()> {
    let endpoints = tx.all_webhook_endpoints(event.org_id).await?;
    failpoint!(event.org_id, EndpointsRead);
    for endpoint in endpoints {
        if !Subscription::from_stored(&endpoint.events).includes(event.action) {
            continue;
        }
        let args = DeliveryArgs {
            endpoint_id: endpoint.id,
            event_id: event.id,
        };
        let args = serde_json::to_value(&args)
            .map_err(|e| AppError::Internal(format!("delivery args: {e}")))?;
        enqueue(
            tx,
            NewJob {
                org_id: event.org_id,
                kind: rules::DELIVERY_KIND.to_owned(),
                args,
                submission_id: Some(rules::delivery_submission(endpoint.id, event.id)),
                max_attempts: None,
                run_at: None,
            },
        )
        .await?;
    }
    Ok(())
}

impl App {
    /// An approver registers an endpoint for the organisation; the answer carries its signing
    /// secret, shown this once.
    pub async fn create_webhook_endpoint(
        &self,
        actor: &Actor,
        input: NewWebhookEndpoint,
    ) -> AppResult<WithSecret> {
        let human = actor.human()?.approver()?;
        let checked = rules::check_endpoint(
            EndpointInput {
                url: input.url.as_deref(),
                events: input.events.as_deref(),
                description: input.description.as_deref(),
                timeout_seconds: input.timeout_seconds,
            },
            &self.config.webhooks.allow_hosts,
        )
        .map_err(AppError::Validation)?;
        let mut tx = self.store.begin().await?;
        // The organisation's row lock makes concurrent registrations count one after another.
        tx.lock_org(human.org_id, Lock::Update)
            .await?
            .ok_or(AppError::Unauthorized)?;
        if tx.count_webhook_endpoints(human.org_id).await? >= rules::MAX_ENDPOINTS_PER_ORG {
            return Err(AppError::Conflict {
                code: "too_many_endpoints",
                detail: format!(
                    "an organisation may register at most {} webhook endpoints; delete one \
                     (DELETE /v1/webhook-endpoints/{{id}}) first",
                    rules::MAX_ENDPOINTS_PER_ORG
                ),
            });
        }
        let now = now();
        let id = Uuid::now_v7();
        let secret = SigningSecret::from_random(random_32());
        let row = WebhookEndpointRow {
            id,
            org_id: human.org_id,
            url: checked.url,
            events: checked.subscription.to_stored(),
            description: checked.description,
            timeout_seconds: checked.timeout_seconds,
            secret: rules::seal_secret(
                &secret,
                self.config.webhooks.secret_key.as_ref(),
                nonce(),
                &seal_context(human.org_id, id),
            ),
            created_by: human.id,
            created_at: now,
            updated_at: now,
            secret_rotated_at: None,
        };
        tx.insert_webhook_endpoint(&row).await?;
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "webhook_endpoint.created",
            ("webhook_endpoint", id),
            serde_json::json!({
                "url": row.url,
                "events": checked.subscription.names(),
                "timeout_seconds": row.timeout_seconds,
            }),
        )
        .await?;
        tx.commit().await?;
        Ok(WithSecret {
            endpoint: row.into(),
            secret,
        })
    }

    /// The organisation's endpoints by id, descending (approvers).
    pub async fn list_webhook_endpoints(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> AppResult<Vec<WebhookEndpointView>> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader().await?;
        let rows = conn.webhook_endpoints(human.org_id, page.into()).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// One endpoint of the organisation (approvers).
    pub async fn get_webhook_endpoint(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<WebhookEndpointView> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader().await?;
        let row = conn.webhook_endpoint(human.org_id, id).await?;
        Ok(row.ok_or(AppError::NotFound)?.into())
    }

    /// Deletes an endpoint and its attempts (approvers). Its deliveries that wait to run are
    /// cancelled in the same transaction; one already running finishes its attempt, which is
    /// then not recorded.
    pub async fn delete_webhook_endpoint(&self, actor: &Actor, id: Uuid) -> AppResult<()> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let row = tx
            .lock_webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let cancelled = tx
            .cancel_waiting_jobs(
                human.org_id,
                rules::DELIVERY_KIND,
                &rules::endpoint_submissions(id),
                now(),
            )
            .await?;
        tx.delete_webhook_endpoint(human.org_id, id).await?;
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "webhook_endpoint.deleted",
            ("webhook_endpoint", id),
            serde_json::json!({ "url": row.url, "cancelled_deliveries": cancelled }),
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A new signing secret for an endpoint (approvers), shown this once; every attempt from
    /// now on is signed with it, retries of earlier events included.
    pub async fn rotate_webhook_secret(&self, actor: &Actor, id: Uuid) -> AppResult<WithSecret> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let mut row = tx
            .lock_webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let now = now();
        let secret = SigningSecret::from_random(random_32());
        row.secret = rules::seal_secret(
            &secret,
            self.config.webhooks.secret_key.as_ref(),
            nonce(),
            &seal_context(human.org_id, id),
        );
        row.secret_rotated_at = Some(now);
        row.updated_at = now;
        tx.update_webhook_secret(human.org_id, id, &row.secret, now)
            .await?;
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "webhook_endpoint.secret_rotated",
            ("webhook_endpoint", id),
            serde_json::json!({ "url": row.url }),
        )
        .await?;
        tx.commit().await?;
        Ok(WithSecret {
            endpoint: row.into(),
            secret,
        })
    }

    /// An endpoint's delivery attempts, newest first (approvers).
    pub async fn list_webhook_attempts(
        &self,
        actor: &Actor,
        id: Uuid,
        page: PageRequest,
    ) -> AppResult<Vec<WebhookAttemptView>> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader().await?;
        conn.webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let rows = conn.webhook_attempts(human.org_id, id, page.into()).await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// What the delivery of `args` sends now: the endpoint as it is (its current secret, URL
    /// and timeout, and this process's outbound policy) and the event's body.
    pub async fn webhook_delivery(
        &self,
        org_id: Uuid,
        args: &DeliveryArgs,
    ) -> AppResult<Result<Delivery, DeliveryRefused>> {
        let mut conn = self.store.reader().await?;
        let Some(endpoint) = conn.webhook_endpoint(org_id, args.endpoint_id).await? else {
            return Ok(Err(DeliveryRefused::EndpointGone));
        };
        let Some(event) = conn.event_by_id(org_id, args.event_id).await? else {
            return Ok(Err(DeliveryRefused::EventGone));
        };
        let secret = match rules::open_secret(
            &endpoint.secret,
            self.config.webhooks.secret_key.as_ref(),
            &seal_context(org_id, endpoint.id),
        ) {
            Ok(secret) => secret,
            Err(e) => return Ok(Err(DeliveryRefused::Secret(e))),
        };
        let body = rules::payload(&EventFacts {
            event_id: event.id,
            invoice_id: event.invoice_id,
            action: event.action,
            seq: event.seq,
            from_state: event.from_state,
            to_state: event.to_state,
            revision_id: event.revision_id,
            payload_hash: event.payload_hash.as_deref(),
            occurred_at: event.occurred_at,
        });
        Ok(Ok(Delivery {
            endpoint_id: endpoint.id,
            url: endpoint.url,
            timeout: Duration::from_secs(
                u64::try_from(endpoint.timeout_seconds)
                    .unwrap_or(rules::DEFAULT_TIMEOUT_SECONDS.unsigned_abs().into()),
            ),
            secret,
            event_id: event.id,
            event_type: rules::event_type(event.action),
            body,
            allow_hosts: self.config.webhooks.allow_hosts.clone(),
        }))
    }

    /// Records one attempt of `job`; false when its endpoint was deleted meanwhile (nothing is
    /// recorded then).
    pub async fn record_webhook_attempt(
        &self,
        job: &ClaimedJob,
        delivery: &Delivery,
        outcome: Outcome,
        error: Option<&str>,
        duration: Duration,
        attempted_at: DateTime<Utc>,
    ) -> AppResult<bool> {
        let row = WebhookAttemptRow {
            id: Uuid::now_v7(),
            org_id: job.org_id,
            endpoint_id: delivery.endpoint_id,
            job_id: job.id,
            event_id: delivery.event_id,
            event_type: delivery.event_type.to_owned(),
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
        let mut tx = self.store.begin().await?;
        match tx.insert_webhook_attempt(&row).await {
            Ok(()) => {}
            // The endpoint was deleted while the attempt ran (its attempts went with it).
            Err(tauros_store::StoreError::ReferenceGone(_)) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes delivery attempts older than their retention (30 days), `batch` at a time, until
    /// none is left; how many.
    pub async fn prune_webhook_attempts(&self, batch: i64) -> AppResult<u64> {
        let before = now()
            - chrono::Duration::from_std(rules::ATTEMPT_RETENTION)
                .unwrap_or_else(|_| chrono::Duration::days(30));
        let mut pruned = 0;
        loop {
            let mut tx = self.store.begin().await?;
            let n = tx.prune_webhook_attempts(before, batch).await?;
            tx.commit().await?;
            pruned += n;
            if n < u64::try_from(batch).unwrap_or(0) {
                return Ok(pruned);
            }
        }
    }
}
