//! Customers and payment destinations.

/// Implements `PartyRead` and `PartyWrite` for one backend's unit of work `$unit`.
///
/// Scoped reads bind `$2` (one agent) and `$3` (the agents of one owner); `None` widens the
/// scope, and `org_id` always narrows it to one organisation. `$for_update` and `$for_share`
/// are appended to reads that lock the row they return.
macro_rules! impl_party_store {
    ($unit:ty, for_update = $for_update:literal, for_share = $for_share:literal, map_err = $map_err:path) => {
        const _: () = {
            use ::chrono::{DateTime, Utc};
            use ::uuid::Uuid;
            use $crate::{Lock, Page, StoreResult};
            use tauros_domain::destination::DestinationState;
            use tauros_domain::visibility::Scope;
            use $crate::parties::*;

            #[::async_trait::async_trait]
            impl PartyRead for $unit {
                #[::tracing::instrument(level = "debug", skip_all)]
                async fn customer_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<CustomerRow>> {
                    ::sqlx::query_as("select * from customers where org_id = $1 and id = $2")
                        .bind(org_id)
                        .bind(id)
                        .fetch_optional(self.0.conn())
                        .await
                        .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn customers(
                    &mut self,
                    org_id: Uuid,
                    scope: Scope,
                    page: Page,
                ) -> StoreResult<Vec<CustomerRow>> {
                    let (agent, owner) = $crate::sql::scope_binds(scope);
                    ::sqlx::query_as(
                        "select * from customers c
                         where c.org_id = $1
                           and ($2 is null or c.agent_id = $2)
                           and ($3 is null or c.agent_id in
                                (select a.id from agents a where a.org_id = $1 and a.owner_id = $3))
                           and ($4 is null or c.id < $4)
                         order by c.id desc limit $5",
                    )
                    .bind(org_id)
                    .bind(agent)
                    .bind(owner)
                    .bind(page.after)
                    .bind(page.limit)
                    .fetch_all(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn customer_is_referenced(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool> {
                    let found: Option<(i32,)> = ::sqlx::query_as(
                        "select 1 from invoice_revisions where org_id = $1 and customer_id = $2 limit 1",
                    )
                    .bind(org_id)
                    .bind(id)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(found.is_some())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn destination_by_id(
                    &mut self,
                    org_id: Uuid,
                    id: Uuid,
                ) -> StoreResult<Option<DestinationRow>> {
                    ::sqlx::query_as("select * from payment_destinations where org_id = $1 and id = $2")
                        .bind(org_id)
                        .bind(id)
                        .fetch_optional(self.0.conn())
                        .await
                        .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn destination_by_key(
                    &mut self,
                    org_id: Uuid,
                    agent_id: Uuid,
                    key: &str,
                ) -> StoreResult<Option<DestinationRow>> {
                    ::sqlx::query_as(
                        "select * from payment_destinations
                         where org_id = $1 and agent_id = $2 and idempotency_key = $3",
                    )
                    .bind(org_id)
                    .bind(agent_id)
                    .bind(key)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn destinations(
                    &mut self,
                    org_id: Uuid,
                    scope: Scope,
                    state: Option<DestinationState>,
                    page: Page,
                ) -> StoreResult<Vec<DestinationRow>> {
                    let (agent, owner) = $crate::sql::scope_binds(scope);
                    ::sqlx::query_as(
                        "select * from payment_destinations d
                         where d.org_id = $1
                           and ($2 is null or d.agent_id = $2)
                           and ($3 is null or d.agent_id in
                                (select a.id from agents a where a.org_id = $1 and a.owner_id = $3))
                           and ($4 is null or d.state = $4)
                           and ($5 is null or d.id < $5)
                         order by d.id desc limit $6",
                    )
                    .bind(org_id)
                    .bind(agent)
                    .bind(owner)
                    .bind(state.map(|s| s.as_str()))
                    .bind(page.after)
                    .bind(page.limit)
                    .fetch_all(self.0.conn())
                    .await
                    .map_err($map_err)
                }
            }

            #[::async_trait::async_trait]
            impl PartyWrite for $unit {
                #[::tracing::instrument(level = "debug", skip_all)]
                async fn insert_customer(&mut self, c: &CustomerRow) -> StoreResult<()> {
                    ::sqlx::query(
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
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn lock_customer(
                    &mut self,
                    org_id: Uuid,
                    id: Uuid,
                    lock: Lock,
                ) -> StoreResult<Option<CustomerRow>> {
                    ::sqlx::query_as($crate::sql::locked_select!(
                        lock,
                        $for_share,
                        $for_update,
                        "select * from customers where org_id = $1 and id = $2"
                    ))
                    .bind(org_id)
                    .bind(id)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn update_customer(&mut self, c: &CustomerRow) -> StoreResult<()> {
                    ::sqlx::query(
                        "update customers set name = $3, email = $4, updated_at = $5
                         where org_id = $1 and id = $2",
                    )
                    .bind(c.org_id)
                    .bind(c.id)
                    .bind(&c.name)
                    .bind(&c.email)
                    .bind(c.updated_at)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn delete_customer(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<()> {
                    ::sqlx::query("delete from customers where org_id = $1 and id = $2")
                        .bind(org_id)
                        .bind(id)
                        .execute(self.0.conn())
                        .await
                        .map_err($map_err)?;
                    Ok(())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn insert_destination(&mut self, d: &DestinationRow) -> StoreResult<()> {
                    ::sqlx::query(
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
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn lock_destination(
                    &mut self,
                    org_id: Uuid,
                    id: Uuid,
                    lock: Lock,
                ) -> StoreResult<Option<DestinationRow>> {
                    ::sqlx::query_as($crate::sql::locked_select!(
                        lock,
                        $for_share,
                        $for_update,
                        "select * from payment_destinations where org_id = $1 and id = $2"
                    ))
                    .bind(org_id)
                    .bind(id)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn set_destination_state(
                    &mut self,
                    org_id: Uuid,
                    id: Uuid,
                    state: DestinationState,
                    now: DateTime<Utc>,
                ) -> StoreResult<()> {
                    ::sqlx::query(
                        "update payment_destinations set state = $3, updated_at = $4
                         where org_id = $1 and id = $2",
                    )
                    .bind(org_id)
                    .bind(id)
                    .bind(state.as_str())
                    .bind(now)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(())
                }
            }
        };
    };
}

pub(crate) use impl_party_store;

/// The agent and owner binds of a scoped read (see [`Scope`](tauros_domain::visibility::Scope)).
pub(crate) fn scope_binds(
    scope: tauros_domain::visibility::Scope,
) -> (Option<uuid::Uuid>, Option<uuid::Uuid>) {
    use tauros_domain::visibility::Scope;
    match scope {
        Scope::Agent(id) => (Some(id), None),
        Scope::Owner(id) => (None, Some(id)),
        Scope::Org => (None, None),
    }
}
