-- A revision's sealed content is stored once: its canonical payload, which the app reads back
-- (`domain::payload::decode`). The `lines` column was a second copy of the payload's lines and
-- goes, from the revisions and from the read model (docs/DECISIONS.md, "Sealed content is
-- stored once"). The query columns (customer, destination, currency, due date, total) stay:
-- SQL filters and sums them, and `verify` checks each against the payload.
--
-- The view reads the column, so it is dropped and made again as migration 0019 made it, without
-- `lines`; the triggers' functions name the view and read it afresh.

drop view invoice_reads_source;

alter table invoice_reads drop column lines;
alter table invoice_revisions drop column lines;

create view invoice_reads_source as
select r.id, i.org_id, i.id as invoice_id, r.number, r.customer_id, r.payment_destination_id,
       r.destination_network, r.destination_address, r.currency, r.due_date,
       r.total_minor, r.reasoning, r.canonical_payload, r.payload_hash, r.created_at,
       i.agent_id, i.idempotency_key, i.state, i.cancelled_by, i.number as invoice_number,
       i.revision_count, i.first_payload_hash, i.created_at as invoice_created_at,
       i.updated_at as invoice_updated_at, i.amount_paid_minor, i.issuing_status,
       i.issuing_reason, i.issuing_job_id, a.owner_id as agent_owner_id,
       d.decision as last_decision, d.reason as last_decision_reason,
       d.revision_id as last_decision_revision_id, d.decided_at as last_decided_at
from invoices i
join invoice_revisions r on r.org_id = i.org_id and r.id = i.current_revision_id
join agents a on a.org_id = i.org_id and a.id = i.agent_id
left join decisions d on d.org_id = i.org_id and d.id = i.last_decision_id;
