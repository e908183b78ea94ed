//! `WebhookRead` and `WebhookWrite` for every backend's unit.

use super::{Backend, for_update, query, query_as, query_scalar};
use crate::error::StoreResult;
use crate::query::Page;
use crate::webhooks::*;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

#[async_trait]
impl<U: Backend> WebhookRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_endpoint(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookEndpointRow>> {
        query_as("select * from webhook_endpoints where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_endpoints(
        &mut self,
        org_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<WebhookEndpointRow>> {
        query_as(
            "select * from webhook_endpoints
             where org_id = $1 and ($2 is null or id < $2)
             order by id desc limit $3",
        )
        .bind(org_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn all_webhook_endpoints(
        &mut self,
        org_id: Uuid,
    ) -> StoreResult<Vec<WebhookEndpointRow>> {
        query_as("select * from webhook_endpoints where org_id = $1 order by id")
            .bind(org_id)
            .fetch_all(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_webhook_endpoints(&mut self, org_id: Uuid) -> StoreResult<i64> {
        query_scalar("select count(*) from webhook_endpoints where org_id = $1")
            .bind(org_id)
            .fetch_one(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_attempts(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<WebhookAttemptListed>> {
        // The delivery (by endpoint and event) and its current job, within the organisation.
        query_as(
            "select a.*, j.state as job_state, j.attempt as job_attempt,
                 j.run_at as job_run_at, d.id as delivery_id, d.held as delivery_held,
                 d.delivered_at as delivery_delivered_at, dj.state as delivery_job_state
             from webhook_attempts a
             left join jobs j on j.org_id = a.org_id and j.id = a.job_id
             left join webhook_deliveries d on d.org_id = a.org_id
                 and d.endpoint_id = a.endpoint_id and d.event_id = a.event_id
             left join jobs dj on dj.org_id = d.org_id and dj.id = d.job_id
             where a.org_id = $1 and a.endpoint_id = $2 and ($3 is null or a.id < $3)
             order by a.id desc limit $4",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_endpoint_by_key(
        &mut self,
        org_id: Uuid,
        created_by: Uuid,
        key: &str,
    ) -> StoreResult<Option<WebhookEndpointRow>> {
        query_as(
            "select * from webhook_endpoints
             where org_id = $1 and created_by = $2 and idempotency_key = $3",
        )
        .bind(org_id)
        .bind(created_by)
        .bind(key)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_delivery(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookDeliveryListed>> {
        query_as(
            "select d.*, j.state as job_state
             from webhook_deliveries d
             left join jobs j on j.org_id = d.org_id and j.id = d.job_id
             where d.org_id = $1 and d.endpoint_id = $2 and d.id = $3",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_delivery_of_event(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
    ) -> StoreResult<Option<WebhookDeliveryRow>> {
        query_as(
            "select * from webhook_deliveries
             where org_id = $1 and endpoint_id = $2 and event_id = $3",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(event_id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_held_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
    ) -> StoreResult<i64> {
        query_scalar(
            "select count(*) from webhook_deliveries
             where org_id = $1 and endpoint_id = $2 and held",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .fetch_one(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> WebhookWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_webhook_endpoint(&mut self, e: &WebhookEndpointRow) -> StoreResult<()> {
        query(
            "insert into webhook_endpoints (id, org_id, url, events, description,
                 timeout_seconds, secret, created_by, created_at, updated_at,
                 secret_rotated_at, disabled_at, failing_since, last_success_at,
                 idempotency_key, request_hash)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        )
        .bind(e.id)
        .bind(e.org_id)
        .bind(&e.url)
        .bind(&e.events)
        .bind(&e.description)
        .bind(e.timeout_seconds)
        .bind(&e.secret)
        .bind(e.created_by)
        .bind(e.created_at)
        .bind(e.updated_at)
        .bind(e.secret_rotated_at)
        .bind(e.disabled_at)
        .bind(e.failing_since)
        .bind(e.last_success_at)
        .bind(&e.idempotency_key)
        .bind(&e.request_hash)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_webhook_endpoint(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<WebhookEndpointRow>> {
        query_as(for_update::<U>(
            "select * from webhook_endpoints where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_webhook_secret(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        secret: &str,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update webhook_endpoints set secret = $3, secret_rotated_at = $4,
                 updated_at = $4
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(id)
        .bind(secret)
        .bind(at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_webhook_endpoint(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()> {
        query("delete from webhook_endpoints where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .execute(self)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_webhook_attempt(&mut self, a: &WebhookAttemptRow) -> StoreResult<()> {
        query(
            "insert into webhook_attempts (id, org_id, endpoint_id, job_id, event_id,
                 event_type, attempt, status_code, error_kind, error, duration_ms,
                 delivered, attempted_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(a.id)
        .bind(a.org_id)
        .bind(a.endpoint_id)
        .bind(a.job_id)
        .bind(a.event_id)
        .bind(&a.event_type)
        .bind(a.attempt)
        .bind(a.status_code)
        .bind(&a.error_kind)
        .bind(&a.error)
        .bind(a.duration_ms)
        .bind(a.delivered)
        .bind(a.attempted_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_webhook_health(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        h: &EndpointHealth,
    ) -> StoreResult<()> {
        query(
            "update webhook_endpoints set disabled_at = $3, failing_since = $4,
                 last_success_at = $5, updated_at = $6
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(id)
        .bind(h.disabled_at)
        .bind(h.failing_since)
        .bind(h.last_success_at)
        .bind(h.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_webhook_delivery(&mut self, d: &WebhookDeliveryRow) -> StoreResult<bool> {
        let done = query(
            "insert into webhook_deliveries (id, org_id, endpoint_id, event_id, event_type,
                 job_id, cycle, held, delivered_at, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             on conflict do nothing",
        )
        .bind(d.id)
        .bind(d.org_id)
        .bind(d.endpoint_id)
        .bind(d.event_id)
        .bind(&d.event_type)
        .bind(d.job_id)
        .bind(d.cycle)
        .bind(d.held)
        .bind(d.delivered_at)
        .bind(d.created_at)
        .bind(d.updated_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_webhook_delivery_job(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        job_id: Uuid,
        cycle: i32,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update webhook_deliveries set job_id = $3, cycle = $4, held = $5, updated_at = $6,
                 delivered_at = null
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(id)
        .bind(job_id)
        .bind(cycle)
        .bind(false)
        .bind(at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_webhook_delivered(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update webhook_deliveries set delivered_at = coalesce(delivered_at, $4),
                 held = $5, updated_at = $4
             where org_id = $1 and endpoint_id = $2 and event_id = $3",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(event_id)
        .bind(at)
        .bind(false)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn hold_webhook_delivery(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        event_id: Uuid,
        job_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(
            "update webhook_deliveries set held = $5, updated_at = $6
             where org_id = $1 and endpoint_id = $2 and event_id = $3 and job_id = $4
               and delivered_at is null",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(event_id)
        .bind(job_id)
        .bind(true)
        .bind(at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn hold_waiting_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let done = query(
            "update webhook_deliveries set held = $3, updated_at = $4
             where org_id = $1 and endpoint_id = $2 and delivered_at is null and not held
               and job_id in (select id from jobs where org_id = $1
                   and state in ('available', 'scheduled', 'retryable'))",
        )
        .bind(org_id)
        .bind(endpoint_id)
        .bind(true)
        .bind(at)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn held_webhook_deliveries(
        &mut self,
        org_id: Uuid,
        endpoint_id: Uuid,
    ) -> StoreResult<Vec<WebhookDeliveryRow>> {
        query_as(for_update::<U>(
            "select * from webhook_deliveries
             where org_id = $1 and endpoint_id = $2 and held
             order by created_at, id",
        ))
        .bind(org_id)
        .bind(endpoint_id)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_webhook_deliveries(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64> {
        let done = query(
            "delete from webhook_deliveries where (org_id, id) in
                 (select org_id, id from webhook_deliveries where updated_at < $1 and not held
                  order by updated_at limit $2)",
        )
        .bind(before)
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_webhook_attempts(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64> {
        let done = query(
            "delete from webhook_attempts where (org_id, id) in
                 (select org_id, id from webhook_attempts where attempted_at < $1
                  order by attempted_at limit $2)",
        )
        .bind(before)
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}
