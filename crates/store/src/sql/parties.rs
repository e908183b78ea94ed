//! `PartyRead` and `PartyWrite` for every backend's unit; `None` scopes widen within `org_id`.

use super::identity::AGENT_BY_ID;
use super::{Backend, FreeKey, Together, locked, query, query_as};
use crate::error::StoreResult;
use crate::identity::AgentRow;
use crate::parties::*;
use crate::query::{Lock, Page};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::destination::DestinationState;
use tauros_domain::visibility::Scope;
use uuid::Uuid;

const CUSTOMER_BY_ID: &str = "select * from customers where org_id = $1 and id = $2";
const DESTINATION_BY_ID: &str = "select * from payment_destinations where org_id = $1 and id = $2";

#[async_trait]
impl<U: Backend> PartyRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn customer_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<CustomerRow>> {
        query_as(CUSTOMER_BY_ID)
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn customers(
        &mut self,
        org_id: Uuid,
        scope: Scope,
        page: Page,
    ) -> StoreResult<Vec<CustomerRow>> {
        query_as(
            "select * from customers c
             where c.org_id = $1
               and ($2 is null or c.agent_id = $2)
               and ($3 is null or c.agent_id in
                    (select a.id from agents a where a.org_id = $1 and a.owner_id = $3))
               and ($4 is null or c.id < $4)
             order by c.id desc limit $5",
        )
        .bind_scope(org_id, scope)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn customer_is_referenced(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool> {
        let found: Option<(i32,)> = query_as(
            "select 1 from invoice_revisions where org_id = $1 and customer_id = $2 limit 1",
        )
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await?;
        Ok(found.is_some())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn destination_by_id(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<DestinationRow>> {
        query_as(DESTINATION_BY_ID)
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn destination_by_key(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<DestinationRow>> {
        query_as(
            "select * from payment_destinations
             where org_id = $1 and agent_id = $2 and idempotency_key = $3",
        )
        .bind(org_id)
        .bind(agent_id)
        .bind(key)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn destinations(
        &mut self,
        org_id: Uuid,
        scope: Scope,
        state: Option<DestinationState>,
        page: Page,
    ) -> StoreResult<Vec<DestinationRow>> {
        query_as(
            "select * from payment_destinations d
             where d.org_id = $1
               and ($2 is null or d.agent_id = $2)
               and ($3 is null or d.agent_id in
                    (select a.id from agents a where a.org_id = $1 and a.owner_id = $3))
               and ($4 is null or d.state = $4)
               and ($5 is null or d.id < $5)
             order by d.id desc limit $6",
        )
        .bind_scope(org_id, scope)
        .bind(state.map(|s| s.as_str()))
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> PartyWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_customer(&mut self, c: &CustomerRow) -> StoreResult<()> {
        query(
            "insert into customers (id, org_id, agent_id, name, email, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(c.id)
        .bind(c.org_id)
        .bind(c.agent_id)
        .bind(&c.name)
        .bind(&c.email)
        .bind(c.created_at)
        .bind(c.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_customer(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<CustomerRow>> {
        query_as(locked::<U>(lock, CUSTOMER_BY_ID))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_customer(&mut self, c: &CustomerRow) -> StoreResult<()> {
        query(
            "update customers set name = $3, email = $4, updated_at = $5
             where org_id = $1 and id = $2",
        )
        .bind(c.org_id)
        .bind(c.id)
        .bind(&c.name)
        .bind(&c.email)
        .bind(c.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_customer(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()> {
        query("delete from customers where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .execute(self)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_destination(&mut self, d: &DestinationRow) -> StoreResult<()> {
        query(
            "insert into payment_destinations (id, org_id, agent_id, label, currency, network,
                 address, state, supersedes_id, idempotency_key, request_hash, created_at,
                 updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(d.id)
        .bind(d.org_id)
        .bind(d.agent_id)
        .bind(&d.label)
        .bind(&d.currency)
        .bind(&d.network)
        .bind(&d.address)
        .bind(d.state.as_str())
        .bind(d.supersedes_id)
        .bind(&d.idempotency_key)
        .bind(&d.request_hash)
        .bind(d.created_at)
        .bind(d.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_destination(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        lock: Lock,
    ) -> StoreResult<Option<DestinationRow>> {
        query_as(locked::<U>(lock, DESTINATION_BY_ID))
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_draft_parties(
        &mut self,
        org_id: Uuid,
        reads: DraftReads<'_>,
        lock: Lock,
    ) -> StoreResult<DraftParties> {
        let mut together = Together::default();
        let proposer = reads.proposer;
        if let Some(p) = proposer {
            query_as::<AgentRow>(locked::<U>(lock, AGENT_BY_ID))
                .bind(org_id)
                .bind(p.agent_id)
                .along(&mut together);
        }
        query_as::<CustomerRow>(locked::<U>(lock, CUSTOMER_BY_ID))
            .bind(org_id)
            .bind(reads.customer_id)
            .along(&mut together);
        query_as::<DestinationRow>(locked::<U>(lock, DESTINATION_BY_ID))
            .bind(org_id)
            .bind(reads.destination_id)
            .along(&mut together);
        // Where the unit writes alone, a key found free here stays free: the create's insert
        // then needs no conflict check of its own (`insert_invoice`).
        let key = proposer
            .filter(|_| U::WRITES_ALONE)
            .map(|p| (p.agent_id, p.key));
        if let Some((agent_id, key)) = key {
            query_as::<(Uuid,)>(
                "select id from invoices
                 where org_id = $1 and agent_id = $2 and idempotency_key = $3",
            )
            .bind(org_id)
            .bind(agent_id)
            .bind(key)
            .along(&mut together);
        }
        let mut firsts = together.fetch(self).await?;
        let parties = DraftParties {
            agent: match proposer {
                Some(_) => firsts.next()?,
                None => None,
            },
            customer: firsts.next()?,
            destination: firsts.next()?,
            key_taken: match key {
                Some(_) => firsts.next::<(Uuid,)>()?.is_some(),
                None => false,
            },
        };
        if let Some((agent_id, key)) = key
            && !parties.key_taken
        {
            self.key_found_free(FreeKey {
                org_id,
                agent_id,
                key: key.to_owned(),
            });
        }
        Ok(parties)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_destination_state(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        state: DestinationState,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        query(
            "update payment_destinations set state = $3, updated_at = $4
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(id)
        .bind(state.as_str())
        .bind(now)
        .execute(self)
        .await?;
        Ok(())
    }
}
