//! The port for webhook endpoints and attempts; every statement names its org but retention.

use crate::error::StoreResult;
use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::job::JobState;
use uuid::Uuid;

/// One endpoint.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookEndpointRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub url: String,
    /// Event types, comma-separated (`domain::webhook::Subscription`).
    pub events: String,
    pub description: Option<String>,
    pub timeout_seconds: i32,
    /// Sealed or `plain:` (`domain::webhook::seal_secret`); never leaves the app layer.
    pub secret: String,
    pub created_by: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub secret_rotated_at: Option<DateTime<Utc>>,
    /// Disabled (after failing for the whole window); `None`: enabled.
    pub disabled_at: Option<DateTime<Utc>>,
    /// The first failed attempt since the last success.
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    /// The creating approver's `Idempotency-Key`, and the fingerprint of the body it came with.
    pub idempotency_key: Option<String>,
    pub request_hash: Option<String>,
}

/// What an endpoint's health and switch write.
#[derive(Clone, Copy, Debug)]
pub struct EndpointHealth {
    pub disabled_at: Option<DateTime<Utc>>,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// One delivery: one event to one endpoint, across the job cycles that carry it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookDeliveryRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub endpoint_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    /// The job of the current cycle (`None` while held since before its first job).
    pub job_id: Option<Uuid>,
    pub cycle: i32,
    pub held: bool,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A delivery with its current job's state (`None` once pruned).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookDeliveryListed {
    #[sqlx(flatten)]
    pub delivery: WebhookDeliveryRow,
    #[sqlx(try_from = "crate::sql::StoredOpt<JobState>")]
    pub job_state: Option<JobState>,
}

/// One delivery attempt.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookAttemptRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub endpoint_id: Uuid,
    pub job_id: Uuid,
    pub event_id: Uuid,
    pub event_type: String,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub delivered: bool,
    pub attempted_at: DateTime<Utc>,
}

/// An attempt with its delivery job as it stands now (gone once pruned).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookAttemptListed {
    #[sqlx(flatten)]
    pub attempt: WebhookAttemptRow,
    #[sqlx(try_from = "crate::sql::StoredOpt<JobState>")]
    pub job_state: Option<JobState>,
    /// The job's next counted attempt and when it is due.
    pub job_attempt: Option<i32>,
    pub job_run_at: Option<DateTime<Utc>>,
    /// The attempt's delivery, when it has a record (attempts made before 0013 may not).
    pub delivery_id: Option<Uuid>,
    pub delivery_held: Option<bool>,
    pub delivery_delivered_at: Option<DateTime<Utc>>,
    /// The state of the delivery's current job (`None` once pruned).
    #[sqlx(try_from = "crate::sql::StoredOpt<JobState>")]
    pub delivery_job_state: Option<JobState>,
}

/// Reads of endpoints and attempts.
#[async_trait]
pub trait WebhookRead: Send {
    async fn webhook_endpoint(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookEndpointRow>>;
    /// The org's endpoints by id, descending.
    async fn webhook_endpoints(
        &mut self,
        org_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<WebhookEndpointRow>>;
    /// Every endpoint of the org (at most `domain::webhook::MAX_ENDPOINTS_PER_ORG`).
    async fn all_webhook_endpoints(&mut self, org_id: Uuid)
    -> StoreResult<Vec<WebhookEndpointRow>>;
    /// How many endpoints the org has.
    async fn count_webhook_endpoints(&mut self, org_id: Uuid) -> StoreResult<i64>;
    /// One endpoint's attempts by id, descending, each with its job.
    async fn webhook_attempts(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<WebhookAttemptListed>>;
    /// The endpoint whose creation carried `key` (scoped to the approver who sent it).
    async fn webhook_endpoint_by_key(
        &mut self,
        org_id: Uuid,
        created_by: Uuid,
        key: &str,
    ) -> StoreResult<Option<WebhookEndpointRow>>;
    /// One delivery of an endpoint, with its current job's state.
    async fn webhook_delivery(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookDeliveryListed>>;
    /// The delivery of `event_id` to `endpoint_id`.
    async fn webhook_delivery_of_event(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
    ) -> StoreResult<Option<WebhookDeliveryRow>>;
    /// How many deliveries of the endpoint are held.
    async fn count_held_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
    ) -> StoreResult<i64>;
}

/// Writes and locking reads of endpoints and attempts; only in a write unit of work.
#[async_trait]
pub trait WebhookWrite: WebhookRead {
    async fn insert_webhook_endpoint(&mut self, row: &WebhookEndpointRow) -> StoreResult<()>;
    /// Reads and locks the endpoint (`FOR UPDATE` on PostgreSQL).
    async fn lock_webhook_endpoint(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookEndpointRow>>;
    /// A new secret (stored form) and when it was rotated.
    async fn update_webhook_secret(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        secret: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Deletes the endpoint and (by cascade) its attempts.
    async fn delete_webhook_endpoint(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()>;
    /// Records an attempt; `ReferenceGone` when its endpoint was deleted meanwhile.
    async fn insert_webhook_attempt(&mut self, row: &WebhookAttemptRow) -> StoreResult<()>;
    /// Writes an endpoint's health and switch.
    async fn update_webhook_health(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        health: &EndpointHealth,
    ) -> StoreResult<()>;
    /// Records a delivery unless its (endpoint, event) has one; false when it had.
    async fn insert_webhook_delivery(&mut self, row: &WebhookDeliveryRow) -> StoreResult<bool>;
    /// A delivery's new job cycle: its job and cycle, no longer held nor delivered.
    async fn set_webhook_delivery_job(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        job_id: Uuid,
        cycle: i32,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Marks the delivery whose current job is `job_id` delivered.
    async fn set_webhook_delivered(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Holds the delivery of (endpoint, event) if `job_id` is its current job; false otherwise.
    async fn hold_webhook_delivery(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
        job_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Holds the endpoint's undelivered deliveries whose job waits (then cancelled); how many.
    async fn hold_waiting_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// The endpoint's held deliveries, oldest first, locked.
    async fn held_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
    ) -> StoreResult<Vec<WebhookDeliveryRow>>;
    /// Deletes up to `limit` deliveries not held whose last change was before `before`.
    async fn prune_webhook_deliveries(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64>;
    /// Deletes up to `limit` attempts made before `before` (every org).
    async fn prune_webhook_attempts(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64>;
}
