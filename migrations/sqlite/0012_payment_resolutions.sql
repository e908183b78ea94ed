-- Payments without dead ends (effects.md §6, "Payments"): an approver resolves what settlement
-- cannot (accept a contradicted payment at a stated amount, allocate an unmatched one to an
-- invoice, void one), through POST /v1/payments/{id}/resolve; while four eyes is on a
-- resolution is a proposal (org_changes kind payment_resolution) another approver confirms.

-- The resolution in force on a payment (null: none). Reconciliation reads it: `accept` and
-- `allocate` count the payment at `resolved_amount_minor` whatever its events disagree about,
-- `allocate` keeps it on the invoice it was allocated to (`invoice_id`), `void` counts nothing.
alter table payments add column resolution text
    constraint payments_resolution_check check (resolution in ('accept', 'allocate', 'void'));
alter table payments add column resolved_amount_minor text
    constraint payments_resolved_amount_check check (resolved_amount_minor <> '' and resolved_amount_minor not glob '*[^0-9]*');

-- A proposal of kind payment_resolution names the resolution it would apply, and its payment.
-- SQLite cannot
-- change a check constraint in place: org_changes is rebuilt (no table references it, so the
-- copy, drop and rename keep every row and every foreign key).
create table org_changes_new (
    id            blob primary key,
    org_id        blob not null references orgs (id),
    kind          text not null constraint org_changes_kind_check check (kind in ('settings', 'approver_invitation', 'payment_resolution')),
    proposed_by   blob not null references users (id),
    state         text not null constraint org_changes_state_check check (state in ('pending', 'confirmed', 'rejected')),
    -- kind = settings: the values asked for (null: unchanged)
    four_eyes     integer,
    shared_review integer,
    -- kind = approver_invitation: who is invited, with which role
    email         text,
    role          text,
    decided_by    blob references users (id),
    decided_at    text,
    created_at    text not null,
    expires_at    text not null,
    -- kind = payment_resolution: the resolution it would apply, and its payment
    payment_resolution_id blob,
    payment_id            blob
);
insert into org_changes_new (id, org_id, kind, proposed_by, state, four_eyes, shared_review,
    email, role, decided_by, decided_at, created_at, expires_at)
    select id, org_id, kind, proposed_by, state, four_eyes, shared_review, email, role,
        decided_by, decided_at, created_at, expires_at
    from org_changes;
drop table org_changes;
alter table org_changes_new rename to org_changes;
create index org_changes_org_idx on org_changes (org_id, id);

-- Every resolution asked for, applied or proposed: the payment's audited trail of human
-- decisions, and the record that holds the caller's idempotency key (unique per org and human;
-- the unique key, not a read, decides between parallel requests with one key).
create table payment_resolutions (
    id              blob primary key,
    org_id          blob not null references orgs (id),
    payment_id      blob not null references payments (id),
    action          text not null constraint payment_resolutions_action_check check (action in ('accept', 'allocate', 'void')),
    -- allocate: the invoice it is allocated to
    invoice_id      blob references invoices (id),
    -- accept and allocate: the amount that counts, in the payment's currency
    amount_minor    text constraint payment_resolutions_amount_check check (amount_minor <> '' and amount_minor not glob '*[^0-9]*'),
    reason          text not null,
    requested_by    blob not null references users (id),
    idempotency_key text not null,
    -- lowercase hex SHA-256 of the normalized request: what a replay must match
    fingerprint     text not null,
    -- applied, or proposed (four eyes) until another approver confirms (applied) or rejects it
    state           text not null constraint payment_resolutions_state_check check (state in ('applied', 'proposed', 'rejected')),
    -- the proposal, when four eyes was on
    change_id       blob,
    decided_by      blob references users (id),
    created_at      text not null,
    decided_at      text,
    constraint payment_resolutions_key unique (org_id, requested_by, idempotency_key)
);
create index payment_resolutions_payment_idx on payment_resolutions (org_id, payment_id, id);
