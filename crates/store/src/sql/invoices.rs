//! `InvoiceRead` and `InvoiceWrite` for every backend's unit.

use super::{Backend, FreeKey, Query, QueryAs, Stored, for_update, query, query_as, query_scalar};
use crate::error::StoreResult;
use crate::invoices::*;
use crate::query::Page;
use async_trait::async_trait;
use std::sync::LazyLock;
use tauros_domain::invoice::InvoiceState;
use uuid::Uuid;

#[async_trait]
impl<U: Backend> InvoiceRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_joined(
        &mut self,
        org_id: Uuid,
        id: Uuid,
    ) -> StoreResult<Option<InvoiceJoined>> {
        query_as(INVOICE_JOINED.as_str())
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_joined_by_key(
        &mut self,
        org_id: Uuid,
        agent_id: Uuid,
        key: &str,
    ) -> StoreResult<Option<InvoiceJoined>> {
        query_as(INVOICE_JOINED_BY_KEY.as_str())
            .bind(org_id)
            .bind(agent_id)
            .bind(key)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoices(
        &mut self,
        org_id: Uuid,
        f: &InvoiceFilter,
        page: Page,
    ) -> StoreResult<Vec<InvoiceJoined>> {
        // One filter, two keyset directions: the approver's inbox reads oldest first.
        let sql = if f.oldest_first {
            INVOICES_OLDEST_FIRST.as_str()
        } else {
            INVOICES_NEWEST_FIRST.as_str()
        };
        query_as(sql)
            .bind_scope(org_id, f.scope)
            .bind_with(|q| bind_list_filter(q, f, page))
            .fetch_all(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_exists(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<bool> {
        let found: Option<(i32,)> =
            query_as("select 1 from invoices where org_id = $1 and id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_optional(self)
                .await?;
        Ok(found.is_some())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_state(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<InvoiceState>> {
        let found: Option<(Stored<InvoiceState>,)> =
            query_as("select state from invoices where org_id = $1 and id = $2")
                .bind(org_id)
                .bind(id)
                .fetch_optional(self)
                .await?;
        Ok(found.map(|(state,)| state.into()))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoices_in_state(
        &mut self,
        state: InvoiceState,
        after: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Vec<(Uuid, Uuid, i32)>> {
        query_as(
            "select org_id, id, issue_version from invoices
             where state = $1 and ($2 is null or id > $2)
             order by id limit $3",
        )
        .bind(state.as_str())
        .bind(after)
        .bind(limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_id_by_number(
        &mut self,
        org_id: Uuid,
        number: &str,
    ) -> StoreResult<Option<Uuid>> {
        query_scalar("select id from invoices where org_id = $1 and number = $2")
            .bind(org_id)
            .bind(number)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn revision_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<RevisionRow>> {
        query_as("select * from invoice_revisions where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn revisions(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<RevisionRow>> {
        query_as(
            "select * from invoice_revisions r where r.org_id = $1 and r.invoice_id = $2
               and ($3 is null or r.number >
                    (select c.number from invoice_revisions c
                     where c.org_id = $1 and c.invoice_id = $2 and c.id = $3))
             order by r.number limit $4",
        )
        .bind(org_id)
        .bind(invoice_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn decision_for_revision(
        &mut self,
        org_id: Uuid,
        revision_id: Uuid,
    ) -> StoreResult<Option<DecisionRow>> {
        query_as("select * from decisions where org_id = $1 and revision_id = $2")
            .bind(org_id)
            .bind(revision_id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn decisions(&mut self, org_id: Uuid, invoice_id: Uuid) -> StoreResult<Vec<DecisionRow>> {
        query_as(
            "select * from decisions where org_id = $1 and invoice_id = $2
             order by decided_at, id",
        )
        .bind(org_id)
        .bind(invoice_id)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn events(
        &mut self,
        org_id: Uuid,
        invoice_id: Uuid,
        page: Page,
    ) -> StoreResult<Vec<EventRow>> {
        query_as(
            "select * from invoice_events e where e.org_id = $1 and e.invoice_id = $2
               and ($3 is null or e.seq >
                    (select c.seq from invoice_events c
                     where c.org_id = $1 and c.invoice_id = $2 and c.id = $3))
             order by e.seq limit $4",
        )
        .bind(org_id)
        .bind(invoice_id)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn event_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<EventRow>> {
        query_as("select * from invoice_events where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }
}

#[async_trait]
impl<U: Backend> InvoiceWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_invoice(&mut self, i: &InvoiceRow) -> StoreResult<bool> {
        let key = FreeKey {
            org_id: i.org_id,
            agent_id: i.agent_id,
            key: i.idempotency_key.clone(),
        };
        if self.key_is_free(&key) {
            // Found free by this unit, which writes alone: sent with its next call.
            query(INSERT_INVOICE)
                .bind_with(|q| invoice_values(q, i))
                .execute_later(self)
                .await?;
            return Ok(true);
        }
        let done = query(INSERT_INVOICE_UNLESS_TAKEN.as_str())
            .bind_with(|q| invoice_values(q, i))
            .execute(self)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_settlement_figures(&mut self, i: &InvoiceRow) -> StoreResult<()> {
        query(
            "update invoices set payment_count = $3, counted_minor = $4
             where org_id = $1 and id = $2",
        )
        .bind(i.org_id)
        .bind(i.id)
        .bind(i.payment_count)
        .bind(&i.counted_minor)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_invoice(&mut self, i: &InvoiceRow) -> StoreResult<()> {
        query(
            "update invoices set state = $3, cancelled_by = $4, number = $5,
                 current_revision_id = $6, revision_count = $7, event_count = $8,
                 last_event_hash = $9, updated_at = $10, last_decision_id = $11,
                 amount_paid_minor = $12, issuing_status = $13, issuing_reason = $14,
                 issuing_job_id = $15, issue_version = $16
             where org_id = $1 and id = $2",
        )
        .bind(i.org_id)
        .bind(i.id)
        .bind(i.state.as_str())
        .bind(i.cancelled_by.map(|a| a.as_str()))
        .bind(&i.number)
        .bind(i.current_revision_id)
        .bind(i.revision_count)
        .bind(i.event_count)
        .bind(&i.last_event_hash)
        .bind(i.updated_at)
        .bind(i.last_decision_id)
        .bind(&i.amount_paid_minor)
        .bind(i.issuing_status.map(|s| s.as_str()))
        .bind(&i.issuing_reason)
        .bind(i.issuing_job_id)
        .bind(i.issue_version)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_invoice(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<InvoiceRow>> {
        query_as(for_update::<U>(
            "select * from invoices where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_revision(&mut self, r: &RevisionRow) -> StoreResult<()> {
        query(
            "insert into invoice_revisions (id, org_id, invoice_id, number, customer_id,
                 payment_destination_id, destination_network, destination_address, currency,
                 due_date, total_minor, reasoning, canonical_payload, payload_hash, created_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        )
        .bind(r.id)
        .bind(r.org_id)
        .bind(r.invoice_id)
        .bind(r.number)
        .bind(r.customer_id)
        .bind(r.payment_destination_id)
        .bind(&r.destination_network)
        .bind(&r.destination_address)
        .bind(&r.currency)
        .bind(r.due_date)
        .bind(&r.total_minor)
        .bind(&r.reasoning)
        .bind(&r.canonical_payload)
        .bind(&r.payload_hash)
        .bind(r.created_at)
        .execute_later(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_decision(&mut self, d: &DecisionRow) -> StoreResult<()> {
        query(
            "insert into decisions (id, org_id, invoice_id, revision_id, approver_id, decision,
                 payload_hash, reason, decided_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(d.id)
        .bind(d.org_id)
        .bind(d.invoice_id)
        .bind(d.revision_id)
        .bind(d.approver_id)
        .bind(d.decision.as_str())
        .bind(&d.payload_hash)
        .bind(&d.reason)
        .bind(d.decided_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_event(&mut self, e: &EventRow) -> StoreResult<()> {
        query(
            "insert into invoice_events (id, org_id, invoice_id, seq, action, from_state,
                 to_state, actor_kind, actor_id, interface, revision_id, payload_hash,
                 idempotency_key, note, occurred_at, prev_hash, hash, four_eyes, shared_review)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                 $18, $19)",
        )
        .bind(e.id)
        .bind(e.org_id)
        .bind(e.invoice_id)
        .bind(e.seq)
        .bind(e.action.as_str())
        .bind(e.from_state.map(|s| s.as_str()))
        .bind(e.to_state.as_str())
        .bind(e.actor_kind.as_str())
        .bind(e.actor_id)
        .bind(e.interface.as_str())
        .bind(e.revision_id)
        .bind(&e.payload_hash)
        .bind(&e.idempotency_key)
        .bind(&e.note)
        .bind(e.occurred_at)
        .bind(&e.prev_hash)
        .bind(&e.hash)
        .bind(e.four_eyes)
        .bind(e.shared_review)
        .execute_later(self)
        .await
    }
}

/// An invoice's insert, every column bound ([`invoice_values`]).
const INSERT_INVOICE: &str = "insert into invoices (id, org_id, agent_id, idempotency_key, state,
         cancelled_by, number, current_revision_id, revision_count, first_payload_hash,
         event_count, last_event_hash, created_at, updated_at,
         last_decision_id, amount_paid_minor, issuing_status, issuing_reason,
         issuing_job_id, issue_version)
     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
         $17, $18, $19, $20)";

/// [`INSERT_INVOICE`] where the key may be taken by a concurrent create: it inserts nothing.
static INSERT_INVOICE_UNLESS_TAKEN: LazyLock<String> = LazyLock::new(|| {
    format!("{INSERT_INVOICE} on conflict (org_id, agent_id, idempotency_key) do nothing")
});

/// The invoice's columns, in [`INSERT_INVOICE`]'s order.
fn invoice_values<'a>(q: Query<'a>, i: &'a InvoiceRow) -> Query<'a> {
    q.bind(i.id)
        .bind(i.org_id)
        .bind(i.agent_id)
        .bind(&i.idempotency_key)
        .bind(i.state.as_str())
        .bind(i.cancelled_by.map(|a| a.as_str()))
        .bind(&i.number)
        .bind(i.current_revision_id)
        .bind(i.revision_count)
        .bind(&i.first_payload_hash)
        .bind(i.event_count)
        .bind(&i.last_event_hash)
        .bind(i.created_at)
        .bind(i.updated_at)
        .bind(i.last_decision_id)
        .bind(&i.amount_paid_minor)
        .bind(i.issuing_status.map(|s| s.as_str()))
        .bind(&i.issuing_reason)
        .bind(i.issuing_job_id)
        .bind(i.issue_version)
}

/// An invoice as [`InvoiceJoined`] reads it, from `source`: the read model's row `v` (its
/// columns are defined once, by the migrations' view `invoice_reads_source`, which the table
/// `invoice_reads` copies column for column), then its issue job and its org's settings, joined
/// live.
fn joined_from(source: &str) -> String {
    format!(
        "select {READ_COLUMNS}, {ORG_SETTINGS} from {source} v join orgs o on o.id = v.org_id {ISSUE_JOB}"
    )
}

/// One invoice from its read model (`invoice_reads`, kept by the writes' own transactions).
/// Filter on `v.org_id` and `v.invoice_id`, or `v.agent_id` and `v.idempotency_key`: both are
/// keys.
static READ_INVOICE: LazyLock<String> = LazyLock::new(|| joined_from("invoice_reads"));

/// Invoices from the read model's definition, the live join: lists filter and order on the
/// invoices' own indexes ([`invoice_list_filters`]).
pub(crate) static JOINED_INVOICE: LazyLock<String> =
    LazyLock::new(|| joined_from("invoice_reads_source"));

/// [`InvoiceJoined`]'s columns but the org's: the read model's row, then its issue job's;
/// [`ORG_SETTINGS`] (or a key's nulls) completes them.
pub(crate) const READ_COLUMNS: &str = "v.*, ij.attempt as issuing_attempts, \
     ij.state as issuing_job_state, ij.last_error_code as issuing_job_error";

/// The org's settings (`o`), [`InvoiceJoined`]'s last columns.
pub(crate) const ORG_SETTINGS: &str = "o.four_eyes, o.shared_review";

/// The issue job of the read model's row `v`, if it has one.
pub(crate) const ISSUE_JOB: &str =
    "left join jobs ij on ij.org_id = v.org_id and ij.id = v.issuing_job_id";

/// One joined invoice by id.
static INVOICE_JOINED: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} where v.org_id = $1 and v.invoice_id = $2",
        *READ_INVOICE
    )
});

/// One joined invoice by its agent's idempotency key.
static INVOICE_JOINED_BY_KEY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} where v.org_id = $1 and v.agent_id = $2 and v.idempotency_key = $3",
        *READ_INVOICE
    )
});

/// A page of the invoice list, oldest first (the approver's inbox).
static INVOICES_OLDEST_FIRST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}{} and ($7 is null or v.invoice_id > $7) order by v.invoice_id asc limit $8",
        *JOINED_INVOICE,
        invoice_list_filters("$1", "$2", "$3")
    )
});

/// A page of the invoice list, newest first.
static INVOICES_NEWEST_FIRST: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}{} and ($7 is null or v.invoice_id < $7) order by v.invoice_id desc limit $8",
        *JOINED_INVOICE,
        invoice_list_filters("$1", "$2", "$3")
    )
});

/// The filters of an invoice list: org (`org`), scope (`agent`, `owner`: expressions, usually
/// binds), state, customer, agent, current decision (`$9`), key (`$10`), overdue (`$11` as of
/// `$12`), issuing (`$13`); `$7`, `$8` are the page's. Overdue is `is_overdue` in SQL: an open
/// balance holds by construction in issued and partially paid, so no money is compared.
pub(crate) fn invoice_list_filters(org: &str, agent: &str, owner: &str) -> String {
    format!(
        " where v.org_id = {org}
   and ({agent} is null or v.agent_id = {agent})
   and ({owner} is null or v.agent_id in
        (select own.id from agents own where own.org_id = {org} and own.owner_id = {owner}))
   and ($4 is null or v.state = $4)
   and ($5 is null or v.customer_id = $5)
   and ($6 is null or v.agent_id = $6)
   and ($9 is null or (v.last_decision = $9 and v.last_decision_revision_id = v.id))
   and ($10 is null or v.idempotency_key = $10)
   and ($11 is null or $11 = (v.state in ('issued', 'partially_paid') and v.due_date < $12))
   and ($13 is null or v.issuing_status = $13)"
    )
}

/// Binds an invoice list's filters ([`invoice_list_filters`]) and page as `$4` to `$12`.
pub(crate) fn bind_list_filter<'a, O>(
    q: QueryAs<'a, O>,
    f: &'a InvoiceFilter,
    page: Page,
) -> QueryAs<'a, O> {
    q.bind(f.state.map(|s| s.as_str()))
        .bind(f.customer_id)
        .bind(f.agent_id)
        .bind(page.after)
        .bind(page.limit)
        .bind(f.decision.map(|k| k.as_str()))
        .bind(&f.idempotency_key)
        .bind(f.overdue)
        .bind(f.today)
        .bind(f.issuing.map(|s| s.as_str()))
}
