//! `GovernanceRead` and `GovernanceWrite` for every backend's unit.

use super::{Backend, locked, query, query_as};
use crate::error::StoreResult;
use crate::governance::*;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::governance::{ChangeKind, ChangeState};
use uuid::Uuid;

#[async_trait]
impl<U: Backend> GovernanceRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn change_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<OrgChangeRow>> {
        query_as("select * from org_changes where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn changes(
        &mut self,
        org_id: Uuid,
        state: Option<ChangeState>,
        lapsed: Option<bool>,
        now: DateTime<Utc>,
        page: Page,
    ) -> StoreResult<Vec<OrgChangeRow>> {
        query_as(
            "select * from org_changes
             where org_id = $1 and ($2 is null or state = $2)
               and ($5 is null or (expires_at <= $6) = $5)
               and ($3 is null or id < $3)
             order by id desc limit $4",
        )
        .bind(org_id)
        .bind(state.map(ChangeState::as_str))
        .bind(page.after)
        .bind(page.limit)
        .bind(lapsed)
        .bind(now)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn open_changes_by(
        &mut self,
        org_id: Uuid,
        proposed_by: Uuid,
        kind: ChangeKind,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<OrgChangeRow>> {
        query_as(
            "select * from org_changes
             where org_id = $1 and proposed_by = $2 and kind = $3
               and state = 'pending' and expires_at > $4
             order by id",
        )
        .bind(org_id)
        .bind(proposed_by)
        .bind(kind.as_str())
        .bind(now)
        .fetch_all(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> GovernanceWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_change(&mut self, c: &OrgChangeRow) -> StoreResult<()> {
        query(
            "insert into org_changes (id, org_id, kind, proposed_by, state, four_eyes,
                 shared_review, email, role, decided_by, decided_at, created_at, expires_at,
                 payment_resolution_id, payment_id, user_id, agent_name, agent_id)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                 $17, $18)",
        )
        .bind(c.id)
        .bind(c.org_id)
        .bind(c.kind.as_str())
        .bind(c.proposed_by)
        .bind(c.state.as_str())
        .bind(c.four_eyes)
        .bind(c.shared_review)
        .bind(&c.email)
        .bind(c.role.map(|r| r.as_str()))
        .bind(c.decided_by)
        .bind(c.decided_at)
        .bind(c.created_at)
        .bind(c.expires_at)
        .bind(c.payment_resolution_id)
        .bind(c.payment_id)
        .bind(c.user_id)
        .bind(&c.agent_name)
        .bind(c.agent_id)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_change(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<OrgChangeRow>> {
        query_as(locked::<U>(
            lock,
            "select * from org_changes where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn decide_change(&mut self, c: &OrgChangeRow) -> StoreResult<()> {
        query(
            "update org_changes set state = $3, decided_by = $4, decided_at = $5, agent_id = $6
             where org_id = $1 and id = $2 and state = 'pending'",
        )
        .bind(c.org_id)
        .bind(c.id)
        .bind(c.state.as_str())
        .bind(c.decided_by)
        .bind(c.decided_at)
        .bind(c.agent_id)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn reject_changes_by(
        &mut self,
        org_id: Uuid,
        proposed_by: Uuid,
        by: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let done = query(
            "update org_changes set state = 'rejected', decided_by = $3, decided_at = $4
             where org_id = $1 and proposed_by = $2 and state = 'pending'",
        )
        .bind(org_id)
        .bind(proposed_by)
        .bind(by)
        .bind(now)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}
