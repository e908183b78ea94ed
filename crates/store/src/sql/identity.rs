//! `IdentityRead` and `IdentityWrite` for every backend's unit.

use super::{Backend, locked, query, query_as, query_scalar};
use crate::error::StoreResult;
use crate::identity::*;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An agent by its id (a lock appended where it is held).
pub(super) const AGENT_BY_ID: &str = "select * from agents where org_id = $1 and id = $2";

#[async_trait]
impl<U: Backend> IdentityRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn org_by_id(&mut self, id: Uuid) -> StoreResult<Option<OrgRow>> {
        query_as("select * from orgs where id = $1")
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn org_by_name(&mut self, name: &str) -> StoreResult<Option<OrgRow>> {
        query_as("select * from orgs where name = $1")
            .bind(name)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn users_by_email(
        &mut self,
        email_normalized: &str,
        limit: i64,
    ) -> StoreResult<Vec<UserRow>> {
        query_as(
            "select * from users where email_normalized = $1
             order by created_at, id limit $2",
        )
        .bind(email_normalized)
        .bind(limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invitation_by_hash(&mut self, hash: &[u8]) -> StoreResult<Option<InvitationRow>> {
        query_as("select * from invitations where token_hash = $1")
            .bind(hash)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn user_by_org_email(
        &mut self,
        org_id: Uuid,
        email_normalized: &str,
    ) -> StoreResult<Option<UserRow>> {
        query_as("select * from users where org_id = $1 and email_normalized = $2")
            .bind(org_id)
            .bind(email_normalized)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn user_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<UserRow>> {
        query_as("select * from users where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn session_by_hash(&mut self, hash: &[u8]) -> StoreResult<Option<(SessionRow, UserRow)>> {
        token_by_hash(self, "sessions", hash).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn device_by_hash(
        &mut self,
        hash: &[u8],
    ) -> StoreResult<Option<(DeviceTokenRow, UserRow)>> {
        token_by_hash(self, "device_tokens", hash).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn sign_ins_unlocked_at(
        &mut self,
        email_digest: &[u8],
    ) -> StoreResult<Option<DateTime<Utc>>> {
        query_scalar("select unlocked_at from sign_in_unlocks where email_digest = $1")
            .bind(email_digest)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn agent_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<AgentRow>> {
        query_as("select * from agents where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn agents_by_owner(
        &mut self,
        org_id: Uuid,
        owner_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<AgentRow>> {
        query_as(
            "select * from agents
             where org_id = $1 and owner_id = $2 and ($3 is null or id < $3)
             order by id desc limit $4",
        )
        .bind(org_id)
        .bind(owner_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn agent_has_dependents(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool> {
        let found: Option<(i32,)> = query_as(
            "select 1 from customers where org_id = $1 and agent_id = $2
             union all select 1 from payment_destinations where org_id = $1 and agent_id = $2
             union all select 1 from invoices where org_id = $1 and agent_id = $2
             union all select 1 from settlement_events where org_id = $1 and agent_id = $2
             union all select 1 from payments where org_id = $1 and agent_id = $2
             limit 1",
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await?;
        Ok(found.is_some())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn api_key_by_id(&mut self, id: Uuid) -> StoreResult<Option<(ApiKeyRow, AgentRow)>> {
        // One statement: authentication is on every request's path.
        let row: Option<crate::KeyWithAgent> = query_as(
            "select a.*, k.id as key_id, k.key_hash, k.created_at as key_created_at,
                 k.expires_at as key_expires_at, k.revoked_at as key_revoked_at,
                 k.last_used_at as key_last_used_at
             from api_keys k join agents a on a.org_id = k.org_id and a.id = k.agent_id
             where k.id = $1",
        )
        .bind(id)
        .fetch_optional(self)
        .await?;
        Ok(row.map(crate::KeyWithAgent::split))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn active_key_expiry(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
    ) -> StoreResult<Option<(DateTime<Utc>, Option<DateTime<Utc>>)>> {
        query_as(
            "select expires_at, last_used_at from api_keys
             where org_id = $1 and agent_id = $2 and revoked_at is null
             order by created_at desc limit 1",
        )
        .bind(org_id)
        .bind(agent_id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn audit_for_subject(
        &mut self,
        org_id: Uuid,
        subject_id: Uuid,
    ) -> StoreResult<Vec<AuditRow>> {
        query_as(
            "select * from audit_events where org_id = $1 and subject_id = $2
             order by occurred_at, id",
        )
        .bind(org_id)
        .bind(subject_id)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn users_in_org(&mut self, org_id: Uuid, page: Page) -> StoreResult<Vec<UserRow>> {
        query_as(
            "select * from users
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
    async fn audit_page(&mut self, org_id: Uuid, page: Page) -> StoreResult<Vec<AuditRow>> {
        query_as(
            "select * from audit_events
             where org_id = $1 and ($2 is null or id < $2)
             order by id desc limit $3",
        )
        .bind(org_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> IdentityWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_org(&mut self, org: &OrgRow) -> StoreResult<bool> {
        let done = query(
            "insert into orgs (id, name, four_eyes, shared_review, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6) on conflict (name) do nothing",
        )
        .bind(org.id)
        .bind(&org.name)
        .bind(org.four_eyes)
        .bind(org.shared_review)
        .bind(org.created_at)
        .bind(org.updated_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_org(&mut self, id: Uuid, lock: Lock) -> StoreResult<Option<OrgRow>> {
        query_as(locked::<U>(lock, "select * from orgs where id = $1"))
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_org(&mut self, org: &OrgRow) -> StoreResult<()> {
        query(
            "update orgs set four_eyes = $2, shared_review = $3, updated_at = $4
             where id = $1",
        )
        .bind(org.id)
        .bind(org.four_eyes)
        .bind(org.shared_review)
        .bind(org.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_user(&mut self, user: &UserRow) -> StoreResult<()> {
        query(
            "insert into users (id, org_id, email, email_normalized, role, password_hash,
                 is_bootstrap, created_at, updated_at, deactivated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(user.id)
        .bind(user.org_id)
        .bind(&user.email)
        .bind(&user.email_normalized)
        .bind(&user.role)
        .bind(&user.password_hash)
        .bind(user.is_bootstrap)
        .bind(user.created_at)
        .bind(user.updated_at)
        .bind(user.deactivated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_password(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        password_hash: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update users set password_hash = $3, updated_at = $4
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(user_id)
        .bind(password_hash)
        .bind(now)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_user(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<UserRow>> {
        query_as(locked::<U>(
            lock,
            "select * from users where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn deactivate_user(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update users set deactivated_at = $3, updated_at = $3
             where org_id = $1 and id = $2 and deactivated_at is null",
        )
        .bind(org_id)
        .bind(id)
        .bind(now)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_user_sessions(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        keep: Option<Uuid>,
    ) -> StoreResult<u64> {
        let done = query(
            "delete from sessions
             where org_id = $1 and user_id = $2 and ($3 is null or id <> $3)",
        )
        .bind(org_id)
        .bind(user_id)
        .bind(keep)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_user_invitations(&mut self, org_id: Uuid, user_id: Uuid) -> StoreResult<u64> {
        let done = query("delete from invitations where org_id = $1 and user_id = $2")
            .bind(org_id)
            .bind(user_id)
            .execute(self)
            .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_sessions(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        let done = prune_expired("sessions")
            .bind(now)
            .bind(limit)
            .execute(self)
            .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_device_tokens(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        let done = prune_expired("device_tokens")
            .bind(now)
            .bind(limit)
            .execute(self)
            .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_device_token(&mut self, d: &DeviceTokenRow) -> StoreResult<()> {
        insert_token("device_tokens", d).execute(self).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn keep_newest_device_tokens(
        &mut self,
        org_id: Uuid,
        user_id: Uuid,
        keep: i64,
    ) -> StoreResult<u64> {
        let done = query(
            "delete from device_tokens
             where org_id = $1 and user_id = $2 and id not in
                 (select id from device_tokens where org_id = $1 and user_id = $2
                  order by created_at desc, id desc limit $3)",
        )
        .bind(org_id)
        .bind(user_id)
        .bind(keep)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn record_sign_in_unlock(
        &mut self,
        email_digest: &[u8],
        at: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "insert into sign_in_unlocks (email_digest, unlocked_at) values ($1, $2)
             on conflict (email_digest) do update set unlocked_at = excluded.unlocked_at",
        )
        .bind(email_digest)
        .bind(at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_invitations(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        let done = query(
            "delete from invitations where (org_id, id) in
                 (select org_id, id from invitations
                  where accepted_at is not null or expires_at <= $1 limit $2)",
        )
        .bind(now)
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_session(&mut self, s: &SessionRow) -> StoreResult<()> {
        insert_token("sessions", s).execute(self).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_session(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()> {
        query("delete from sessions where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .execute(self)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_invitation(&mut self, i: &InvitationRow) -> StoreResult<()> {
        query(
            "insert into invitations (id, org_id, user_id, invited_by, token_hash,
                 created_at, expires_at, accepted_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(i.id)
        .bind(i.org_id)
        .bind(i.user_id)
        .bind(i.invited_by)
        .bind(&i.token_hash)
        .bind(i.created_at)
        .bind(i.expires_at)
        .bind(i.accepted_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn accept_invitation(
        &mut self,
        hash: &[u8],
        now: DateTime<Utc>,
    ) -> StoreResult<Option<InvitationRow>> {
        query_as(
            "update invitations set accepted_at = $2
             where token_hash = $1 and accepted_at is null and expires_at > $2
             returning *",
        )
        .bind(hash)
        .bind(now)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_agent(&mut self, a: &AgentRow) -> StoreResult<()> {
        query(
            "insert into agents (id, org_id, owner_id, name, capabilities, created_at,
                 updated_at)
             values ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(a.id)
        .bind(a.org_id)
        .bind(a.owner_id)
        .bind(&a.name)
        .bind(&a.capabilities)
        .bind(a.created_at)
        .bind(a.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_agent(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<AgentRow>> {
        query_as(locked::<U>(lock, AGENT_BY_ID))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_agent(&mut self, a: &AgentRow) -> StoreResult<()> {
        query(
            "update agents set name = $3, capabilities = $4, updated_at = $5
             where org_id = $1 and id = $2",
        )
        .bind(a.org_id)
        .bind(a.id)
        .bind(&a.name)
        .bind(&a.capabilities)
        .bind(a.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_agent(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()> {
        query("delete from agents where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .execute(self)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_api_key(&mut self, k: &ApiKeyRow) -> StoreResult<()> {
        query(
            "insert into api_keys (id, org_id, agent_id, key_hash, created_at, expires_at,
                 revoked_at, last_used_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(k.id)
        .bind(k.org_id)
        .bind(k.agent_id)
        .bind(&k.key_hash)
        .bind(k.created_at)
        .bind(k.expires_at)
        .bind(k.revoked_at)
        .bind(k.last_used_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn revoke_agent_keys(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let done = query(
            "update api_keys set revoked_at = $3
             where org_id = $1 and agent_id = $2 and revoked_at is null",
        )
        .bind(org_id)
        .bind(agent_id)
        .bind(now)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn touch_api_key(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        query("update api_keys set last_used_at = $3 where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .bind(now)
            .execute(self)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_audit(&mut self, e: &AuditRow) -> StoreResult<()> {
        query(
            "insert into audit_events (id, org_id, actor_kind, actor_id, interface, action,
                 subject_type, subject_id, detail, occurred_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(e.id)
        .bind(e.org_id)
        .bind(e.actor_kind.as_str())
        .bind(e.actor_id)
        .bind(e.interface.as_str())
        .bind(&e.action)
        .bind(&e.subject_type)
        .bind(e.subject_id)
        .bind(&e.detail)
        .bind(e.occurred_at)
        .execute(self)
        .await?;
        Ok(())
    }
}

/// The token of `table` (sessions, device tokens) whose hash is `hash`, and its human.
async fn token_by_hash<U: Backend>(
    unit: &mut U,
    table: &str,
    hash: &[u8],
) -> StoreResult<Option<(TokenRow, UserRow)>> {
    let Some(token): Option<TokenRow> =
        query_as(format!("select * from {table} where token_hash = $1"))
            .bind(hash)
            .fetch_optional(&mut *unit)
            .await?
    else {
        return Ok(None);
    };
    let user = unit.user_by_id(token.org_id, token.user_id).await?;
    Ok(user.map(|u| (token, u)))
}

/// Inserts `row` into `table` (sessions, device tokens: the same columns).
fn insert_token<'a>(table: &str, row: &'a TokenRow) -> super::Query<'a> {
    query(format!(
        "insert into {table} (id, org_id, user_id, token_hash, created_at, expires_at)
         values ($1, $2, $3, $4, $5, $6)"
    ))
    .bind(row.id)
    .bind(row.org_id)
    .bind(row.user_id)
    .bind(&row.token_hash)
    .bind(row.created_at)
    .bind(row.expires_at)
}

/// Deletes up to `$2` rows of `table` (sessions, device tokens) that expired before `$1`.
fn prune_expired<'a>(table: &str) -> super::Query<'a> {
    query(format!(
        "delete from {table} where (org_id, id) in
             (select org_id, id from {table} where expires_at <= $1 limit $2)"
    ))
}
