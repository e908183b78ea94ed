-- The stack's floor's table (crates/bench/src/bin/floor.rs, issue #28), in the bench database only: not a
-- migration, Tauros never reads it. One row per invoice of Tauros's own tables: the invoice's
-- columns and every column of its current revision (what get.sql reads of it, r.*), so the
-- floor reads and serialises a row of the width Tauros's GET reads and answers, by its primary
-- key (docs/PERFORMANCE.md, "The stack's floor").
-- Rebuilt by scripts/bench before each floor run from whatever invoices exist then.
set client_min_messages = warning;
drop schema if exists floor cascade;
create schema floor;
create table floor.invoices as
select i.id, i.org_id, i.agent_id, i.idempotency_key, i.state, i.number, i.revision_count,
       i.amount_paid_minor, i.created_at, i.updated_at,
       r.id as revision_id, r.number as revision_number, r.customer_id, r.payment_destination_id,
       r.destination_network, r.destination_address, r.currency, r.due_date,
       r.total_minor, r.reasoning, r.canonical_payload, r.payload_hash,
       r.created_at as revision_created_at
from invoices i join invoice_revisions r on r.org_id = i.org_id and r.id = i.current_revision_id;
alter table floor.invoices add primary key (id);
vacuum analyze floor.invoices;
