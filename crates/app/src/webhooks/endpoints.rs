//! Endpoints: registration (keyed), listing, reading, deletion, secret rotation, re-enabling.

use super::deliveries::next_cycle;
use super::views::{NewWebhookEndpoint, WebhookEndpointView, WithSecret};
use super::{health_of, seal_context, stored_health};
use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult, KeyHolder};
use crate::idempotency::{self, Keyed, Replayed};
use crate::lists::PageRequest;
use crate::random::random_32;
use async_trait::async_trait;
use tauros_domain::fingerprint::{fingerprint, key_error, key_is_valid};
use tauros_domain::webhook::{self as rules, EndpointInput, SecretKey, SigningSecret};
use tauros_store::{Lock, Reader, WebhookEndpointRow};
use uuid::Uuid;

fn nonce() -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&random_32()[..12]);
    nonce
}

/// A keyed registration: the same body replays its endpoint (the secret shown again only
/// within a day of creation and before any rotation); another body conflicts.
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

/// The endpoint as approvers see it, with how many deliveries it holds.
async fn with_held(
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

impl App {
    /// An approver registers an endpoint; its signing secret is shown this once.
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
            let mut conn = self.store.reader(actor.lane()).await?;
            if let Some(replayed) = idempotency::lookup(keyed, &mut *conn).await? {
                return Ok(replayed);
            }
        }
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            // The org's lock serializes registrations; a same-key winner is visible under it.
            tx.lock_org(human.org_id, Lock::Update)
                .await?
                .ok_or(AppError::Unauthorized)?;
            if let Some(keyed) = &keyed
                && let Some(stored) = keyed.find(&mut *tx).await?
            {
                return idempotency::answer(keyed, &mut *tx, stored).await;
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
            Ok(Replayed::fresh(WithSecret {
                endpoint: row.into(),
                secret: Some(secret),
            }))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// The organisation's endpoints by id, descending (approvers).
    pub async fn list_webhook_endpoints(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> AppResult<Vec<WebhookEndpointView>> {
        let human = actor.human()?.approver()?;
        let mut conn = self.store.reader(actor.lane()).await?;
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
        let mut conn = self.store.reader(actor.lane()).await?;
        let row = conn
            .webhook_endpoint(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        with_held(&mut *conn, row).await
    }

    /// Deletes an endpoint and its attempts (approvers), cancelling its waiting deliveries; one
    /// already running finishes, unrecorded.
    pub async fn delete_webhook_endpoint(&self, actor: &Actor, id: Uuid) -> AppResult<()> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
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
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// A new signing secret (approvers), shown once; signs every later attempt, retries included.
    pub async fn rotate_webhook_secret(&self, actor: &Actor, id: Uuid) -> AppResult<WithSecret> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
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
            Ok(WithSecret {
                endpoint,
                secret: Some(secret),
            })
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Re-enables a disabled endpoint (approvers), releasing its held deliveries; else a replay.
    pub async fn enable_webhook_endpoint(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<Replayed<WebhookEndpointView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
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
            Ok(Replayed::fresh(view))
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}
