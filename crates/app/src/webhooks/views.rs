//! What approvers see of endpoints, attempts and deliveries, and what a registration carries.

use crate::schema::WebhookEventType;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_domain::job::JobState;
use tauros_domain::webhook::{self as rules, DeliveryStatus, SigningSecret, Subscription};
use tauros_store::{WebhookAttemptListed, WebhookDeliveryRow, WebhookEndpointRow};
use utoipa::ToSchema;
use uuid::Uuid;

/// A registration the caller checked (`CreateWebhookEndpointRequest`); the domain the rest.
#[derive(Clone, Debug)]
pub struct NewWebhookEndpoint {
    pub url: String,
    pub events: Vec<String>,
    /// 1–200 characters of clean text once trimmed; trimmed by the domain.
    pub description: Option<String>,
    /// 1–30; 10 when omitted.
    pub timeout_seconds: Option<i32>,
}

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

/// An endpoint with its signing secret: answered at creation and rotation, and by a keyed
/// replay within a day before any rotation (else `None`).
#[derive(Clone, Debug)]
pub struct WithSecret {
    pub endpoint: WebhookEndpointView,
    pub secret: Option<SigningSecret>,
}

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

pub(super) fn delivery_view(row: WebhookDeliveryRow, job: Option<JobState>) -> WebhookDeliveryView {
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
