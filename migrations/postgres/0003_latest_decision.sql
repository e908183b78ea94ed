-- The latest decision on each invoice, so that every read of an invoice carries it in the same
-- joined statement (an agent learns why changes were requested without reading /decisions).
alter table invoices add column last_decision_id uuid;

update invoices set last_decision_id = (
    select d.id from decisions d
    where d.org_id = invoices.org_id and d.invoice_id = invoices.id
    order by d.decided_at desc, d.id desc
    limit 1
);
