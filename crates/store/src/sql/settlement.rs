//! `SettlementRead` and `SettlementWrite` for every backend's unit.

use super::{Backend, Query, for_update, query, query_as};
use crate::error::StoreResult;
use crate::query::Page;
use crate::settlement::*;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

#[async_trait]
impl<U: Backend> SettlementRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn payment_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<PaymentRow>> {
        query_as("select * from payments where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payment_by_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        source_payment_id: &str,
    ) -> StoreResult<Option<PaymentRow>> {
        query_as(
            "select * from payments
             where org_id = $1 and source = $2 and source_payment_id = $3",
        )
        .bind(org_id)
        .bind(source)
        .bind(source_payment_id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payments(
        &mut self,
        org_id: Uuid,
        f: &PaymentFilter,
        page: Page,
    ) -> StoreResult<Vec<PaymentRow>> {
        query_as(
            "select * from payments p
             where p.org_id = $1
               and ($2 is null or p.agent_id = $2)
               and ($3 is null or p.agent_id in
                    (select a.id from agents a where a.org_id = $1 and a.owner_id = $3))
               and ($4 is null or p.status = $4)
               and ($5 is null or p.id < $5)
             order by p.id desc limit $6",
        )
        .bind_scope(org_id, f.scope)
        .bind(f.status.map(|s| s.as_str()))
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payments_of_invoice(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
    ) -> StoreResult<Vec<PaymentRow>> {
        query_as("select * from payments where org_id = $1 and invoice_id = $2 order by id")
            .bind(org_id)
            .bind(invoice_id)
            .fetch_all(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn settlement_event_by_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        source_event_id: &str,
    ) -> StoreResult<Option<SettlementEventRow>> {
        query_as(
            "select * from settlement_events
             where org_id = $1 and source = $2 and source_event_id = $3",
        )
        .bind(org_id)
        .bind(source)
        .bind(source_event_id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn settlement_events(
        &mut self,
        org_id: Uuid,
        payment_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<SettlementEventRow>> {
        query_as(
            "select * from settlement_events where org_id = $1 and payment_id = $2
               and ($3 is null or id > $3)
             order by id limit $4",
        )
        .bind(org_id)
        .bind(payment_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payment_resolution_by_key(
        &mut self,
        org_id: Uuid,
        requested_by: Uuid,
        key: &str,
    ) -> StoreResult<Option<PaymentResolutionRow>> {
        query_as(
            "select * from payment_resolutions
             where org_id = $1 and requested_by = $2 and idempotency_key = $3",
        )
        .bind(org_id)
        .bind(requested_by)
        .bind(key)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payment_resolution_by_id(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<PaymentResolutionRow>> {
        query_as("select * from payment_resolutions where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn payment_resolutions(
        &mut self,
        org_id: Uuid,
        payment_id: Uuid,
    ) -> StoreResult<Vec<PaymentResolutionRow>> {
        query_as(
            "select * from payment_resolutions where org_id = $1 and payment_id = $2
             order by id",
        )
        .bind(org_id)
        .bind(payment_id)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn settlement_source_owner(
        &mut self,
        org_id: Uuid,
        source: &str,
    ) -> StoreResult<Option<Uuid>> {
        let row: Option<(Uuid,)> =
            query_as("select agent_id from settlement_sources where org_id = $1 and source = $2")
                .bind(org_id)
                .bind(source)
                .fetch_optional(self)
                .await?;
        Ok(row.map(|r| r.0))
    }
}

#[async_trait]
impl<U: Backend> SettlementWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_payment_resolution(&mut self, r: &PaymentResolutionRow) -> StoreResult<bool> {
        let done = query(
            "insert into payment_resolutions (id, org_id, payment_id, action, invoice_id,
                 amount_minor, reason, requested_by, idempotency_key, fingerprint, state,
                 change_id, decided_by, created_at, decided_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
             on conflict (org_id, requested_by, idempotency_key) do nothing",
        )
        .bind(r.id)
        .bind(r.org_id)
        .bind(r.payment_id)
        .bind(r.action.as_str())
        .bind(r.invoice_id)
        .bind(&r.amount_minor)
        .bind(&r.reason)
        .bind(r.requested_by)
        .bind(&r.idempotency_key)
        .bind(&r.fingerprint)
        .bind(&r.state)
        .bind(r.change_id)
        .bind(r.decided_by)
        .bind(r.created_at)
        .bind(r.decided_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn decide_payment_resolution(&mut self, r: &PaymentResolutionRow) -> StoreResult<()> {
        query(
            "update payment_resolutions set state = $3, decided_by = $4, decided_at = $5
             where org_id = $1 and id = $2",
        )
        .bind(r.org_id)
        .bind(r.id)
        .bind(&r.state)
        .bind(r.decided_by)
        .bind(r.decided_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim_settlement_source(
        &mut self,
        org_id: Uuid,
        source: &str,
        agent_id: Uuid,
        at: DateTime<Utc>,
    ) -> StoreResult<Uuid> {
        query(
            "insert into settlement_sources (org_id, source, agent_id, created_at)
             values ($1, $2, $3, $4)
             on conflict (org_id, source) do nothing",
        )
        .bind(org_id)
        .bind(source)
        .bind(agent_id)
        .bind(at)
        .execute(&mut *self)
        .await?;
        // A racing first report that committed before this insert was refused is visible to
        // this new statement (read committed; SQLite has one writer).
        let row: (Uuid,) =
            query_as("select agent_id from settlement_sources where org_id = $1 and source = $2")
                .bind(org_id)
                .bind(source)
                .fetch_one(self)
                .await?;
        Ok(row.0)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_payment(&mut self, p: &PaymentRow) -> StoreResult<bool> {
        let done = query(
            "insert into payments (id, org_id, source, source_payment_id, amount_minor,
                 currency, invoice_ref_id, invoice_ref_number, first_at, first_event_id,
                 state, conflict, confirmed_at, invoice_id, agent_id, status,
                 unmatched_reason, allocated_minor, event_count, resolution,
                 resolved_amount_minor, created_at, updated_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 $16, $17, $18, $19, $20, $21, $22, $23)
             on conflict (org_id, source, source_payment_id) do nothing",
        )
        .bind(p.id)
        .bind(p.org_id)
        .bind(&p.source)
        .bind(&p.source_payment_id)
        .bind_with(|q| bind_payment_state(q, p))
        .bind(p.created_at)
        .bind(p.updated_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_payment(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<PaymentRow>> {
        query_as(for_update::<U>(
            "select * from payments where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_payment(&mut self, p: &PaymentRow) -> StoreResult<()> {
        query(
            "update payments set amount_minor = $3, currency = $4, invoice_ref_id = $5,
                 invoice_ref_number = $6, first_at = $7, first_event_id = $8, state = $9,
                 conflict = $10, confirmed_at = $11, invoice_id = $12, agent_id = $13,
                 status = $14, unmatched_reason = $15, allocated_minor = $16,
                 event_count = $17, resolution = $18, resolved_amount_minor = $19,
                 updated_at = $20
             where org_id = $1 and id = $2",
        )
        .bind(p.org_id)
        .bind(p.id)
        .bind_with(|q| bind_payment_state(q, p))
        .bind(p.updated_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_unmatched_by_number(
        &mut self,
        org_id: Uuid,
        number: &str,
    ) -> StoreResult<Vec<PaymentRow>> {
        query_as(for_update::<U>(
            "select * from payments
             where org_id = $1 and invoice_ref_number = $2 and invoice_id is null
             order by id",
        ))
        .bind(org_id)
        .bind(number)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_settlement_event(&mut self, e: &SettlementEventRow) -> StoreResult<bool> {
        let done = query(
            "insert into settlement_events (id, org_id, payment_id, agent_id, source,
                 source_event_id, fingerprint, status, amount_minor, currency,
                 invoice_ref_id, invoice_ref_number, occurred_at, raw, received_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
             on conflict (org_id, source, source_event_id) do nothing",
        )
        .bind(e.id)
        .bind(e.org_id)
        .bind(e.payment_id)
        .bind(e.agent_id)
        .bind(&e.source)
        .bind(&e.source_event_id)
        .bind(&e.fingerprint)
        .bind(e.status.as_str())
        .bind(&e.amount_minor)
        .bind(&e.currency)
        .bind(e.invoice_ref_id)
        .bind(&e.invoice_ref_number)
        .bind(e.occurred_at)
        .bind(&e.raw)
        .bind(e.received_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Binds a payment's mutable columns as the next seventeen arguments, in `payments`' order.
fn bind_payment_state<'a>(q: Query<'a>, p: &'a PaymentRow) -> Query<'a> {
    q.bind(&p.amount_minor)
        .bind(&p.currency)
        .bind(p.invoice_ref_id)
        .bind(&p.invoice_ref_number)
        .bind(p.first_at)
        .bind(&p.first_event_id)
        .bind(p.state.as_str())
        .bind(p.conflict)
        .bind(p.confirmed_at)
        .bind(p.invoice_id)
        .bind(p.agent_id)
        .bind(p.status.as_str())
        .bind(p.unmatched_reason.map(|u| u.as_str()))
        .bind(&p.allocated_minor)
        .bind(p.event_count)
        .bind(p.resolution.map(|r| r.as_str()))
        .bind(&p.resolved_amount_minor)
}
