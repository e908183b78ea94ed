//! Webhooks (docs/contract/effects.md §2): approvers register endpoints for their organisation (the
//! signing secret is shown once, at creation and at each rotation), every audited invoice event an
//! endpoint subscribes to becomes one delivery job in the event's own transaction, and the
//! delivery handler (`jobs::webhooks`) reads what to send here and records each attempt. The
//! rules are `domain::webhook`'s; secrets are sealed with the operator's key when there is one.

use crate::actor::Actor;
use crate::app::App;

use crate::audit::{AuditActor, audit};
use crate::clock::now;

use crate::error::{AppError, AppResult, KeyHolder};
use crate::idempotency::{self, Keyed, Replayed};
use crate::jobs::{ClaimedJob, NewJob, enqueue_in_lane};

use crate::lists::PageRequest;
use crate::random::random_32;
use crate::schema::WebhookEventType;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;
use tauros_domain::fingerprint::{fingerprint, key_error, key_is_valid};
use tauros_domain::job::JobState;
use tauros_domain::webhook::{
    self as rules, AllowList, DeliveryStatus, EndpointInput, EventFacts, Health, Outcome,
    SealError, SecretKey, SigningSecret, Subscription,
};
use tauros_store::{
    EndpointHealth, EventRow, Lock, Reader, Tx, WebhookAttemptListed, WebhookAttemptRow,
    WebhookDeliveryRow, WebhookEndpointRow,
};
use utoipa::ToSchema;
use uuid::Uuid;

/// A registration whose field rules the caller checked (the wire's `validator` rules on
/// `CreateWebhookEndpointRequest`); the URL's policy and the event types are the domain's
/// (`check_endpoint`).
#[derive(Clone, Debug)]
pub struct NewWebhookEndpoint {
    pub url: String,
    pub events: Vec<String>,
    /// 1–200 characters of clean text once trimmed; trimmed by the domain.
    pub description: Option<String>,
    /// 1–30; 10 when omitted.
    pub timeout_seconds: Option<i32>,
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
    /// `active`, or `disabled`: it failed without a success for `TAUROS_WEBHOOK_DISABLE_AFTER`;
    /// its deliveries are held until an approver re-enables it
    /// (`POST /v1/webhook-endpoints/{id}/enable`).
    #[schema(example = "active", pattern = "^(active|disabled)$")]
    pub status: &'static str,
    /// When it was disabled; `null` while active.
    pub disabled_at: Option<DateTime<Utc>>,
    /// The first failed attempt since its last success; `null` while the latest answer was a
    /// success (or before any attempt).
    pub failing_since: Option<DateTime<Utc>>,
    /// Its latest 2xx answer.
    pub last_success_at: Option<DateTime<Utc>>,
    /// Deliveries kept, not attempted, while it is disabled; they go out when it is re-enabled.
    pub held_deliveries: i64,
}

impl From<WebhookEndpointRow> for WebhookEndpointView {
    fn from(r: WebhookEndpointRow) -> Self {
        WebhookEndpointView {
            status: if r.disabled_at.is_some() {
                "disabled"
            } else {
                "active"
            },
            disabled_at: r.disabled_at,
            failing_since: r.failing_since,
            last_success_at: r.last_success_at,
            held_deliveries: 0,
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
/// times the secret is shown (and of a replayed keyed creation within a day, while the secret
/// was not rotated: `None` otherwise).
#[derive(Clone, Debug)]
pub struct WithSecret {
    pub endpoint: WebhookEndpointView,
    pub secret: Option<SigningSecret>,
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
    /// Why the attempt failed: `http_status` (an answer other than 2xx: see `status_code`),
    /// `timeout`, `dns_failure` (the host name did not resolve), `address_not_allowed` (the
    /// outbound policy refuses the host or every address it resolved to), `connect_failed`
    /// or `tls`; `null` when delivered. Attempts recorded before migration 0017 may show `null`
    /// for an answer other than 2xx.
    #[schema(
        example = "timeout",
        pattern = "^(http_status|timeout|dns_failure|address_not_allowed|connect_failed|tls)$"
    )]
    pub error_kind: Option<String>,
    /// What went wrong in one fixed sentence per kind (at most 200 characters): never an
    /// address, a host's resolution or a resolver's or socket's message.
    pub error: Option<String>,
    /// From the first byte sent (or the name lookup) to the answer or the failure.
    pub duration_ms: i64,
    /// Whether the endpoint took the event (a 2xx answer).
    pub delivered: bool,
    pub attempted_at: DateTime<Utc>,
    /// When the delivery is tried again: on the latest failed attempt of a delivery that will
    /// be retried; `null` otherwise.
    pub next_retry_at: Option<DateTime<Utc>>,
    /// The delivery (this event to this endpoint) the attempt belongs to:
    /// `POST /v1/webhook-endpoints/{id}/deliveries/{delivery_id}/resend` sends it again.
    pub delivery_id: Uuid,
    /// Where the delivery stands now: `pending` (it will be attempted), `held` (the endpoint
    /// is disabled), `delivered`, or `failed` (its attempts are used up, or its job was
    /// cancelled: nothing sends it unless an approver resends it).
    #[schema(example = "failed", pattern = "^(pending|held|delivered|failed)$")]
    pub delivery_status: &'static str,
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
        let delivery_id = l
            .delivery_id
            .unwrap_or_else(|| rules::delivery_id(a.org_id, a.endpoint_id, a.event_id));
        // An attempt made before deliveries had a record stands on its own job.
        let delivery_status = match l.delivery_id {
            Some(_) => DeliveryStatus::of(
                l.delivery_delivered_at.is_some(),
                l.delivery_held.unwrap_or(false),
                l.delivery_job_state,
            ),
            None => DeliveryStatus::of(
                a.delivered || l.job_state == Some(JobState::Completed),
                false,
                l.job_state,
            ),
        };
        WebhookAttemptView {
            delivery_id,
            delivery_status: delivery_status.as_str(),
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
/// id (endpoint, event) makes each delivery one job however often this runs. A disabled
/// endpoint's delivery is recorded held, without a job: it goes out when the endpoint is
/// re-enabled.
pub(crate) async fn enqueue_deliveries(tx: &mut dyn Tx, event: &EventRow) -> AppResult<()> {
    let endpoints = tx.all_webhook_endpoints(event.org_id).await?;
    failpoint!(event.org_id, EndpointsRead);
    for endpoint in endpoints {
        if !Subscription::from_stored(&endpoint.events).includes(event.action) {
            continue;
        }
        let held = endpoint.disabled_at.is_some();
        let job_id = if held {
            None
        } else {
            Some(enqueue_cycle(tx, event.org_id, endpoint.id, event.id, 1, None).await?)
        };
        let now = now();
        tx.insert_webhook_delivery(&WebhookDeliveryRow {
            id: rules::delivery_id(event.org_id, endpoint.id, event.id),
            org_id: event.org_id,
            endpoint_id: endpoint.id,
            event_id: event.id,
            event_type: rules::event_type(event.action).to_owned(),
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
pub(crate) async fn enqueue_cycle(
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

/// An endpoint's health as the domain's rules read it.
fn health_of(endpoint: &WebhookEndpointRow) -> Health {
    Health {
        failing_since: endpoint.failing_since,
        last_success_at: endpoint.last_success_at,
        disabled_at: endpoint.disabled_at,
    }
}

/// `health` as the store writes it, the endpoint changed at `updated_at`.
fn stored_health(health: Health, updated_at: DateTime<Utc>) -> EndpointHealth {
    EndpointHealth {
        disabled_at: health.disabled_at,
        failing_since: health.failing_since,
        last_success_at: health.last_success_at,
        updated_at,
    }
}

/// Starts a delivery's next job cycle (a fresh attempt budget, the same `webhook-id`) and
/// records it as the delivery's current one: a resend, or a held delivery released by a
/// re-enable. Answers the cycle and its job.
async fn next_cycle(
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

/// A registration with its key: the endpoint an approver's `Idempotency-Key` already names
/// answers a repeat of the same body (its secret shown again only within a day of the creation
/// and while it was not rotated), another body is a conflict.
struct KeyedEndpoint<'a> {
    org_id: Uuid,
    created_by: Uuid,
    key: &'a str,
    request_hash: String,
    secret_key: Option<&'a SecretKey>,
}

#[async_trait]
impl Keyed for KeyedEndpoint<'_> {
    type Stored = WebhookEndpointRow;
    type Answer = WithSecret;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<WebhookEndpointRow>> {
        Ok(conn
            .webhook_endpoint_by_key(self.org_id, self.created_by, self.key)
            .await?)
    }

    fn stored_fingerprint<'s>(&self, stored: &'s WebhookEndpointRow) -> Option<&'s str> {
        stored.request_hash.as_deref()
    }

    async fn fingerprint(
        &self,
        _: &mut dyn Reader,
        _: &WebhookEndpointRow,
    ) -> AppResult<Option<String>> {
        Ok(Some(self.request_hash.clone()))
    }

    fn conflict(&self, stored: &WebhookEndpointRow) -> AppError {
        AppError::IdempotencyConflict(KeyHolder::WebhookEndpoint(stored.id))
    }

    async fn replay(
        &self,
        conn: &mut dyn Reader,
        stored: WebhookEndpointRow,
    ) -> AppResult<WithSecret> {
        let window = chrono::Duration::from_std(rules::SECRET_REPLAY_WINDOW)
            .unwrap_or_else(|_| chrono::Duration::days(1));
        let secret = if stored.secret_rotated_at.is_none() && now() - stored.created_at <= window {
            rules::open_secret(
                &stored.secret,
                self.secret_key,
                &seal_context(stored.org_id, stored.id),
            )
            .ok()
        } else {
            None
        };
        let held = conn
            .count_held_webhook_deliveries(stored.org_id, stored.id)
            .await?;
        let mut endpoint = WebhookEndpointView::from(stored);
        endpoint.held_deliveries = held;
        Ok(WithSecret { endpoint, secret })
    }

    fn vanished(&self) -> AppError {
        AppError::Internal("lost webhook endpoint".into())
    }
}

impl App {
    /// An approver registers an endpoint for the organisation; the answer carries its signing
    /// secret, shown this once. With an idempotency key (scoped to the approver), a repeat of
    /// the same body answers the same endpoint (`replayed`), writing nothing; another body is a
    /// conflict.
    pub async fn create_webhook_endpoint(
        &self,
        actor: &Actor,
        input: NewWebhookEndpoint,
        idempotency_key: Option<&str>,
    ) -> AppResult<Replayed<WithSecret>> {
        let human = actor.human()?.approver()?;
        if idempotency_key.is_some_and(|key| !key_is_valid(key)) {
            return Err(AppError::Validation(vec![key_error()]));
        }
        let checked = rules::check_endpoint(
            EndpointInput {
                url: &input.url,
                events: &input.events,
                description: input.description.as_deref(),
                timeout_seconds: input.timeout_seconds,
            },
            &self.config.webhooks.allow_hosts,
        )
        .map_err(AppError::Validation)?;
        let timeout = checked.timeout_seconds.to_string();
        let events = checked.subscription.to_stored();
        let request_hash = fingerprint(&[
            &checked.url,
            &events,
            checked.description.as_deref().unwrap_or(""),
            &timeout,
        ]);
        let keyed = idempotency_key.map(|key| KeyedEndpoint {
            org_id: human.org_id,
            created_by: human.id,
            key,
            request_hash: request_hash.clone(),
            secret_key: self.config.webhooks.secret_key.as_ref(),
        });
        if let Some(keyed) = &keyed {
            let mut conn = self.store.reader().await?;
            if let Some(replayed) = idempotency::lookup(keyed, &mut *conn).await? {
                return Ok(replayed);
            }
        }
        let mut tx = self.store.begin().await?;
        // The organisation's row lock makes concurrent registrations count one after another,
        // and a concurrent one with the same key that won is visible under it.
        tx.lock_org(human.org_id, Lock::Update)
            .await?
            .ok_or(AppError::Unauthorized)?;
        if let Some(keyed) = &keyed
            && let Some(stored) = keyed.find(&mut *tx).await?
        {
            let answer = idempotency::answer(keyed, &mut *tx, stored).await;
            tx.commit().await?;
            return answer;
        }
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
            disabled_at: None,
            failing_since: None,
            last_success_at: None,
            idempotency_key: idempotency_key.map(str::to_owned),
            request_hash: idempotency_key.map(|_| request_hash),
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
                "keyed": row.idempotency_key.is_some(),
            }),
        )
        .await?;
        tx.commit().await?;
        Ok(Replayed::fresh(WithSecret {
            endpoint: row.into(),
            secret: Some(secret),
        }))
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
        let mut views = Vec::with_capacity(rows.len());
        for row in rows {
            views.push(with_held(&mut *conn, row).await?);
        }
        Ok(views)
    }

    /// One endpoint of the organisation (approvers).
    pub async fn get_webhook_endpoint(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<WebhookEndpointView> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader().await?;
        let row = conn
            .webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        with_held(&mut *conn, row).await
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
        let endpoint = with_held(&mut *tx, row).await?;
        tx.commit().await?;
        Ok(WithSecret {
            endpoint,
            secret: Some(secret),
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

    /// What the delivery of `args` sends now, by `job`: the endpoint as it is (its current
    /// secret, URL and timeout, and this process's outbound policy) and the event's body. A
    /// disabled endpoint's delivery is held instead (kept for its re-enable), and a job that is
    /// no longer its delivery's current cycle sends nothing.
    pub async fn webhook_delivery(
        &self,
        job: &ClaimedJob,
        args: &DeliveryArgs,
    ) -> AppResult<Result<Delivery, DeliveryRefused>> {
        let org_id = job.org_id;
        let mut conn = self.store.reader().await?;
        let Some(endpoint) = conn.webhook_endpoint(org_id, args.endpoint_id).await? else {
            return Ok(Err(DeliveryRefused::EndpointGone));
        };
        let Some(event) = conn.event_by_id(org_id, args.event_id).await? else {
            return Ok(Err(DeliveryRefused::EventGone));
        };
        if let Some(delivery) = conn
            .webhook_delivery_of_event(org_id, endpoint.id, event.id)
            .await?
            && delivery.job_id.is_some_and(|current| current != job.id)
        {
            return Ok(Err(DeliveryRefused::Superseded));
        }
        drop(conn);
        if endpoint.disabled_at.is_some() && self.hold_delivery(job, args).await? {
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

    /// Holds the delivery `job` carries while its endpoint is disabled (under the endpoint's
    /// lock: a re-enable is before or after, never between); false when the endpoint was
    /// re-enabled meanwhile (the delivery goes ahead).
    async fn hold_delivery(&self, job: &ClaimedJob, args: &DeliveryArgs) -> AppResult<bool> {
        let mut tx = self.store.begin().await?;
        let Some(endpoint) = tx
            .lock_webhook_endpoint(job.org_id, args.endpoint_id)
            .await?
        else {
            return Ok(false);
        };
        if endpoint.disabled_at.is_none() {
            return Ok(false);
        }
        let Some(event) = tx.event_by_id(job.org_id, args.event_id).await? else {
            return Ok(false);
        };
        let now = now();
        ensure_delivery(&mut *tx, job, endpoint.id, &event, now).await?;
        tx.hold_webhook_delivery(job.org_id, endpoint.id, event.id, job.id, now)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records one attempt of `job`, its delivery's outcome and the endpoint's health, which
    /// may disable the endpoint (its waiting deliveries then held, with an audit event).
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
        if let Some(event) = tx.event_by_id(job.org_id, delivery.event_id).await? {
            ensure_delivery(&mut *tx, job, endpoint.id, &event, now).await?;
        }
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
        tx.commit().await?;
        Ok(if held {
            AttemptRecorded::Held
        } else {
            AttemptRecorded::Recorded
        })
    }

    /// Deletes delivery attempts older than their retention (30 days), `batch` at a time, until
    /// none is left, then the deliveries (not held) unchanged for as long; how many attempts.
    pub async fn prune_webhook_attempts(&self, batch: i64) -> AppResult<u64> {
        let before = now()
            - chrono::Duration::from_std(rules::ATTEMPT_RETENTION)
                .unwrap_or_else(|_| chrono::Duration::days(30));
        let full = u64::try_from(batch).unwrap_or(0);
        let mut pruned = 0;
        loop {
            let mut tx = self.store.begin().await?;
            let n = tx.prune_webhook_attempts(before, batch).await?;
            tx.commit().await?;
            pruned += n;
            if n < full {
                break;
            }
        }
        loop {
            let mut tx = self.store.begin().await?;
            let n = tx.prune_webhook_deliveries(before, batch).await?;
            tx.commit().await?;
            if n < full {
                return Ok(pruned);
            }
        }
    }
}

/// What recording an attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptRecorded {
    Recorded,
    /// The endpoint is disabled (by this attempt or before): the delivery is held.
    Held,
    /// The endpoint was deleted while the attempt ran: nothing was recorded.
    EndpointGone,
}

/// The endpoint as approvers see it, with how many deliveries it holds.
pub(crate) async fn with_held(
    conn: &mut dyn Reader,
    row: WebhookEndpointRow,
) -> AppResult<WebhookEndpointView> {
    let held = conn
        .count_held_webhook_deliveries(row.org_id, row.id)
        .await?;
    let mut view = WebhookEndpointView::from(row);
    view.held_deliveries = held;
    Ok(view)
}

/// Records the delivery `job` carries when it has no record yet (a job enqueued before
/// deliveries had one, or submitted by hand), with `job` as its current cycle.
async fn ensure_delivery(
    tx: &mut dyn Tx,
    job: &ClaimedJob,
    endpoint_id: Uuid,
    event: &EventRow,
    now: DateTime<Utc>,
) -> AppResult<()> {
    tx.insert_webhook_delivery(&WebhookDeliveryRow {
        id: rules::delivery_id(job.org_id, endpoint_id, event.id),
        org_id: job.org_id,
        endpoint_id,
        event_id: event.id,
        event_type: rules::event_type(event.action).to_owned(),
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

// One delivery as the wire shows it (`WebhookDeliveryResponse` in the OpenAPI document).
/// One delivery: one event to one endpoint, across its job cycles.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = WebhookDeliveryResponse)]
pub struct WebhookDeliveryView {
    pub id: Uuid,
    pub endpoint_id: Uuid,
    /// The invoice event: the `webhook-id` header of every attempt of every cycle.
    pub event_id: Uuid,
    #[schema(value_type = WebhookEventType)]
    pub event_type: String,
    /// `pending`, `held`, `delivered` or `failed` (as on the deliveries list).
    #[schema(example = "pending", pattern = "^(pending|held|delivered|failed)$")]
    pub status: &'static str,
    /// The job of the current cycle (`GET /v1/jobs/{id}`); `null` while held since before its
    /// first job.
    pub job_id: Option<Uuid>,
    /// 1, then one more for each resend or re-enable: each cycle has a fresh attempt budget.
    pub cycle: i32,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

fn delivery_view(row: WebhookDeliveryRow, job: Option<JobState>) -> WebhookDeliveryView {
    WebhookDeliveryView {
        status: DeliveryStatus::of(row.delivered_at.is_some(), row.held, job).as_str(),
        id: row.id,
        endpoint_id: row.endpoint_id,
        event_id: row.event_id,
        event_type: row.event_type,
        job_id: row.job_id,
        cycle: row.cycle,
        delivered_at: row.delivered_at,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

impl App {
    /// Counted attempts of one delivery cycle, as the operator configured them.
    pub fn webhook_max_attempts(&self) -> i32 {
        self.config.webhooks.max_attempts
    }

    /// Sends a delivery that is not going to be attempted (its attempts used up, its job
    /// cancelled or pruned) again (approvers): a new job cycle with a fresh attempt budget and
    /// the same `webhook-id`. A delivery that is pending already is answered as it is
    /// (replayed, nothing written); a delivered one, or one to a disabled endpoint, is refused.
    pub async fn resend_webhook_delivery(
        &self,
        actor: &Actor,
        endpoint_id: Uuid,
        id: Uuid,
    ) -> AppResult<Replayed<WebhookDeliveryView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
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
            }),
        )
        .await?;
        let listed = tx
            .webhook_delivery(human.org_id, endpoint_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        tx.commit().await?;
        Ok(Replayed::fresh(delivery_view(
            listed.delivery,
            listed.job_state,
        )))
    }

    /// Re-enables a disabled endpoint (approvers): a fresh failure window, and each held
    /// delivery goes out in a new job cycle. An endpoint that is enabled already is answered as
    /// it is (replayed, nothing written).
    pub async fn enable_webhook_endpoint(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<Replayed<WebhookEndpointView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let row = tx
            .lock_webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        if row.disabled_at.is_none() {
            let view = with_held(&mut *tx, row).await?;
            return Ok(Replayed::replay(view));
        }
        let now = now();
        let health = health_of(&row).enabled();
        tx.update_webhook_health(human.org_id, id, &stored_health(health, now))
            .await?;
        let held = tx.held_webhook_deliveries(human.org_id, id).await?;
        for delivery in &held {
            next_cycle(&mut *tx, delivery, self.config.webhooks.max_attempts, now).await?;
        }
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "webhook_endpoint.enabled",
            ("webhook_endpoint", id),
            serde_json::json!({
                "url": row.url,
                "disabled_at": row.disabled_at,
                "released_deliveries": held.len(),
            }),
        )
        .await?;
        let row = tx
            .webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let view = with_held(&mut *tx, row).await?;
        tx.commit().await?;
        Ok(Replayed::fresh(view))
    }
}
