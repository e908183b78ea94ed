-- Bounds per record (Tenancy): reconciliation keeps running figures on the invoice, so one
-- settlement event costs the same whatever the invoice's history (docs/SETTLEMENT.md).
--
-- payment_count: how many payments are matched to the invoice (the bound is 1,000); kept by
-- every reconciliation, backfilled here.
-- counted_minor: digits of the sum of what each matched payment would count on its own
-- (domain::settlement::counting_amount); null until the invoice's next reconciliation reads
-- its payments once and sets it (a backfill in SQL cannot sum amounts of up to 30 digits on
-- SQLite), after which one event updates it in constant time.
alter table invoices add column payment_count integer not null default 0;
alter table invoices add column counted_minor text;

update invoices set payment_count =
    (select count(*) from payments p where p.org_id = invoices.org_id and p.invoice_id = invoices.id);
