-- A revision's sealed content is stored once: its canonical payload, which the app reads back
-- (`domain::payload::decode`). The `lines` column was a second copy of the payload's lines and
-- goes, from the revisions and from the read model (docs/DECISIONS.md, "Sealed content is
-- stored once"). The query columns (customer, destination, currency, due date, total) stay:
-- SQL filters and sums them, and `verify` checks each against the payload.
--
-- SQLite refuses to drop a column a view or trigger reads: the read model's view and triggers
-- are dropped, then made again as migration 0019 made them, without `lines`.

drop trigger invoice_reads_on_invoice_insert;
drop trigger invoice_reads_on_invoice_update;
drop trigger invoice_reads_on_revision;
drop trigger invoice_reads_on_decision;
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

create trigger invoice_reads_on_invoice_insert after insert on invoices
begin
    insert into invoice_reads
        select * from invoice_reads_source where org_id = new.org_id and invoice_id = new.id;
end;

-- An update of only the invoice's settlement figures or its audit chain's head (columns the
-- view does not read) refreshes nothing.
create trigger invoice_reads_on_invoice_update
    after update of agent_id, idempotency_key, state, cancelled_by, number,
        current_revision_id, revision_count, first_payload_hash, created_at, updated_at,
        amount_paid_minor, issuing_status, issuing_reason, issuing_job_id, last_decision_id
    on invoices
begin
    delete from invoice_reads where org_id = new.org_id and invoice_id = new.id;
    insert into invoice_reads
        select * from invoice_reads_source where org_id = new.org_id and invoice_id = new.id;
end;

create trigger invoice_reads_on_revision after insert on invoice_revisions
begin
    delete from invoice_reads where org_id = new.org_id and invoice_id = new.invoice_id;
    insert into invoice_reads
        select * from invoice_reads_source where org_id = new.org_id and invoice_id = new.invoice_id;
end;

create trigger invoice_reads_on_decision after insert on decisions
begin
    delete from invoice_reads where org_id = new.org_id and invoice_id = new.invoice_id;
    insert into invoice_reads
        select * from invoice_reads_source where org_id = new.org_id and invoice_id = new.invoice_id;
end;
