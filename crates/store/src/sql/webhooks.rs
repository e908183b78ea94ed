//! Webhook endpoints and their delivery attempts: `WebhookRead` and `WebhookWrite` for every
//! backend's unit of work.

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
        // The job is joined within the organisation (its id and org_id).
        query_as(
            "select a.*, j.state as job_state, j.attempt as job_attempt,
                 j.run_at as job_run_at
             from webhook_attempts a
             left join jobs j on j.org_id = a.org_id and j.id = a.job_id
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
}

#[async_trait]
impl<U: Backend> WebhookWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_webhook_endpoint(&mut self, e: &WebhookEndpointRow) -> StoreResult<()> {
        query(
            "insert into webhook_endpoints (id, org_id, url, events, description,
                 timeout_seconds, secret, created_by, created_at, updated_at,
                 secret_rotated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
    async fn prune_webhook_attempts(
        &mut self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<u64> {
        let done = query(
            "delete from webhook_attempts where id in
                 (select id from webhook_attempts where attempted_at < $1
                  order by attempted_at limit $2)",
        )
        .bind(before)
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}
