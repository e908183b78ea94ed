-- The invoice as its readers see it, one row per invoice (issue #28; docs/DECISIONS.md, "One
-- invoice is read from its read model"): the invoice, its current revision, its agent's owner
-- and its latest decision, kept in the transaction that writes any of them, so a GET and an
-- idempotent replay read one row by its key instead of joining four tables. The two facts that
-- change outside the invoice's transactions stay joined at read time: the org's review
-- settings and the issue job's progress (one primary-key look-up each).
--
-- `invoice_reads_source` is the definition; `invoice_reads` is that view materialised. Only the
-- triggers below write it, each in the transaction of the write that fired it, after the
-- invoice's own row lock (every invoice write locks or inserts the invoice row first), so the
-- copy never lags and never takes a lock the writes did not already order. Revisions and
-- decisions are append-only and an agent's owner never changes, so an insert or an update of
-- the invoice, a revision or a decision is every event that can change a row of the view.

create view invoice_reads_source as
select r.id, i.org_id, i.id as invoice_id, r.number, r.customer_id, r.payment_destination_id,
       r.destination_network, r.destination_address, r.currency, r.due_date, r.lines,
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

-- The same columns in the same order as the view (the refresh copies `select *`).
create table invoice_reads (
    id                        uuid not null,
    org_id                    uuid not null,
    invoice_id                uuid not null,
    number                    integer not null,
    customer_id               uuid not null,
    payment_destination_id    uuid not null,
    destination_network       text not null,
    destination_address       text not null,
    currency                  text not null,
    due_date                  date not null,
    lines                     text not null,
    total_minor               text not null,
    reasoning                 text not null,
    canonical_payload         text not null,
    payload_hash              text not null,
    created_at                timestamptz not null,
    agent_id                  uuid not null,
    idempotency_key           text not null,
    state                     text not null,
    cancelled_by              text,
    invoice_number            text,
    revision_count            integer not null,
    first_payload_hash        text not null,
    invoice_created_at        timestamptz not null,
    invoice_updated_at        timestamptz not null,
    amount_paid_minor         text not null,
    issuing_status            text,
    issuing_reason            text,
    issuing_job_id            uuid,
    agent_owner_id            uuid not null,
    last_decision             text,
    last_decision_reason      text,
    last_decision_revision_id uuid,
    last_decided_at           timestamptz,
    constraint invoice_reads_pkey primary key (org_id, invoice_id),
    constraint invoice_reads_invoice_id_fkey foreign key (org_id, invoice_id)
        references invoices (org_id, id),
    constraint invoice_reads_idempotency_key unique (org_id, agent_id, idempotency_key)
);

-- Each trigger replaces the invoice's row by what the view says now: none while the invoice's
-- current revision is not inserted yet (its reference is deferred; the revision's insert then
-- writes the row). A new invoice has no row to replace. The statements are written out in each
-- function rather than called through a third: a call per refresh is measurable in a create.
create function tauros_invoice_read_on_invoice() returns trigger language plpgsql as $$
begin
    if tg_op = 'UPDATE' then
        delete from invoice_reads where org_id = new.org_id and invoice_id = new.id;
    end if;
    insert into invoice_reads
        select * from invoice_reads_source where org_id = new.org_id and invoice_id = new.id;
    return null;
end;
$$;

create function tauros_invoice_read_on_part() returns trigger language plpgsql as $$
begin
    delete from invoice_reads where org_id = new.org_id and invoice_id = new.invoice_id;
    insert into invoice_reads
        select * from invoice_reads_source
        where org_id = new.org_id and invoice_id = new.invoice_id;
    return null;
end;
$$;

-- An update of only the invoice's settlement figures or its audit chain's head (columns the
-- view does not read) refreshes nothing.
create trigger invoice_reads_on_invoice
    after insert or update of agent_id, idempotency_key, state, cancelled_by, number,
        current_revision_id, revision_count, first_payload_hash, created_at, updated_at,
        amount_paid_minor, issuing_status, issuing_reason, issuing_job_id, last_decision_id
    on invoices for each row execute function tauros_invoice_read_on_invoice();
create trigger invoice_reads_on_revision after insert on invoice_revisions
    for each row execute function tauros_invoice_read_on_part();
create trigger invoice_reads_on_decision after insert on decisions
    for each row execute function tauros_invoice_read_on_part();

insert into invoice_reads select * from invoice_reads_source;
