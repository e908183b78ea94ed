//! The port for webhook endpoints and their delivery attempts. Every statement names its
//! organisation, except the retention of attempts (a delete by age, joining nothing).

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
    /// Deletes up to `limit` attempts made before `before` (every org).
    async fn prune_webhook_attempts(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64>;
}
