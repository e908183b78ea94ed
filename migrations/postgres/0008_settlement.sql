-- Settlement (effects.md §4): payments as settlement sources report them, every event kept as
-- sent, and what confirmed payments cover of each invoice. Money is strings of digits (exact
-- minor units, computed in Rust; SQL never does arithmetic on money). 0006 is the webhooks'.

-- How much of the total confirmed payments cover, written under the invoice's lock by the
-- reconciliation that moves the invoice (never more than the total; overpayments stay on their
-- payments). Overdue is computed from the state and due date, never stored.
alter table invoices add column amount_paid_minor text not null default '0'
    constraint invoices_amount_paid_check check (amount_paid_minor ~ '^[0-9]+$');

-- One payment per (org, source, the source's payment id). Its facts (amount, currency, the
-- invoice as the source named it) are those of its earliest event; `conflict` says another
-- event contradicts them. `state` is the furthest any event reported. `status`,
-- `unmatched_reason` and `allocated_minor` are the reconciliation's answer.
create table payments (
    id                 uuid primary key,
    org_id             uuid not null references orgs (id),
    source             text not null,
    source_payment_id  text not null,
    amount_minor       text not null constraint payments_amount_check check (amount_minor ~ '^[0-9]+$'),
    currency           text not null,
    invoice_ref_id     uuid,
    invoice_ref_number text,
    first_at           timestamptz not null,
    first_event_id     text not null,
    state              text not null constraint payments_state_check check (state in ('observed', 'confirmed', 'failed')),
    conflict           boolean not null,
    confirmed_at       timestamptz,
    -- the invoice it is matched to: the one it names, once that is known
    invoice_id         uuid references invoices (id),
    -- whose humans see it: the invoice's agent, or the settlement agent that reported it
    agent_id           uuid not null references agents (id),
    status             text not null constraint payments_status_check check (status in
        ('pending', 'applied', 'overpaid', 'unmatched', 'conflict', 'failed')),
    unmatched_reason   text constraint payments_unmatched_reason_check check (unmatched_reason in
        ('unknown_invoice', 'wrong_currency', 'invoice_not_issued')),
    allocated_minor    text not null constraint payments_allocated_check check (allocated_minor ~ '^[0-9]+$'),
    event_count        integer not null,
    created_at         timestamptz not null,
    updated_at         timestamptz not null,
    constraint payments_source_key unique (org_id, source, source_payment_id),
    constraint payments_invoice_ref_check check ((invoice_ref_id is null) <> (invoice_ref_number is null))
);
create index payments_list_idx on payments (org_id, id);
create index payments_status_idx on payments (org_id, status, id);
create index payments_invoice_idx on payments (org_id, invoice_id);
-- payments that name an invoice by a number no invoice had yet: matched when it is issued
create index payments_unmatched_number_idx on payments (org_id, invoice_ref_number) where invoice_id is null;

-- Every event as sent, once per (org, source, the source's event id): the unique key, not a
-- read, decides that parallel redeliveries write one row. Append-only.
create table settlement_events (
    id                 uuid primary key,
    org_id             uuid not null references orgs (id),
    payment_id         uuid not null references payments (id),
    -- the settlement agent that reported it
    agent_id           uuid not null references agents (id),
    source             text not null,
    source_event_id    text not null,
    -- lowercase hex SHA-256 of the normalized body: what a redelivery must match
    fingerprint        text not null,
    status             text not null constraint settlement_events_status_check check (status in ('observed', 'confirmed', 'failed')),
    amount_minor       text not null constraint settlement_events_amount_check check (amount_minor ~ '^[0-9]+$'),
    currency           text not null,
    invoice_ref_id     uuid,
    invoice_ref_number text,
    occurred_at        timestamptz not null,
    raw                text,
    received_at        timestamptz not null,
    constraint settlement_events_source_key unique (org_id, source, source_event_id),
    constraint settlement_events_invoice_ref_check check ((invoice_ref_id is null) <> (invoice_ref_number is null))
);
create index settlement_events_payment_idx on settlement_events (org_id, payment_id, id);
create index settlement_events_agent_idx on settlement_events (org_id, agent_id);
create trigger settlement_events_append_only before update or delete on settlement_events
    for each row execute function tauros_append_only();
