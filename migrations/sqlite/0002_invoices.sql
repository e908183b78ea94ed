-- Customers, payment destinations, invoices and their append-only revisions, decisions and
-- hash-chained events. Money is stored as strings of digits (exact i128 minor units, computed
-- in Rust; SQL never does arithmetic on money).

create table customers (
    id         blob primary key,
    org_id     blob not null references orgs (id),
    agent_id   blob not null references agents (id),
    name       text not null,
    email      text not null,
    created_at text not null,
    updated_at text not null
);
create index customers_agent_idx on customers (org_id, agent_id, id);

create table payment_destinations (
    id              blob primary key,
    org_id          blob not null references orgs (id),
    agent_id        blob not null references agents (id),
    label           text not null,
    currency        text not null,
    network         text not null,
    address         text not null,
    state           text not null
        constraint payment_destinations_state_check check (state in ('active', 'deactivated', 'superseded')),
    supersedes_id   blob references payment_destinations (id),
    idempotency_key text,
    request_hash    text,
    created_at      text not null,
    updated_at      text not null,
    -- at most one replacement per destination
    constraint payment_destinations_supersedes_key unique (supersedes_id),
    constraint payment_destinations_idempotency_key unique (org_id, agent_id, idempotency_key)
);
create index payment_destinations_agent_idx on payment_destinations (org_id, agent_id, id);

create table invoices (
    id                 blob primary key,
    org_id             blob not null references orgs (id),
    agent_id           blob not null references agents (id),
    idempotency_key    text not null,
    state              text not null constraint invoices_state_check check (state in
        ('draft', 'pending_approval', 'approved', 'issued', 'partially_paid', 'paid', 'rejected', 'cancelled')),
    -- which command cancelled it (withdraw or cancel): a replay only counts for the same command
    cancelled_by       text,
    number             text,
    current_revision_id blob references invoice_revisions (id) deferrable initially deferred,
    revision_count     integer not null,
    -- revision 1's hash: what an idempotent create is compared against, in one indexed read
    first_payload_hash text not null,
    event_count        integer not null,
    last_event_hash    text not null,
    created_at         text not null,
    updated_at         text not null,
    constraint invoices_idempotency_key unique (org_id, agent_id, idempotency_key)
);
create index invoices_agent_idx on invoices (org_id, agent_id, id);
create index invoices_state_idx on invoices (org_id, state, id);

create table invoice_revisions (
    id                     blob primary key,
    org_id                 blob not null references orgs (id),
    invoice_id             blob not null references invoices (id),
    number                 integer not null,
    customer_id            blob not null references customers (id),
    payment_destination_id blob not null references payment_destinations (id),
    -- the sealed copy of the destination's immutable details
    destination_network    text not null,
    destination_address    text not null,
    currency               text not null,
    due_date               text not null,
    lines                  text not null,
    total_minor            text not null constraint invoice_revisions_total_check check (total_minor <> '' and total_minor not glob '*[^0-9]*'),
    reasoning              text not null,
    canonical_payload      text not null,
    payload_hash           text not null,
    created_at             text not null,
    constraint invoice_revisions_number_key unique (invoice_id, number)
);
create index invoice_revisions_customer_idx on invoice_revisions (org_id, customer_id);

create table decisions (
    id           blob primary key,
    org_id       blob not null references orgs (id),
    invoice_id   blob not null references invoices (id),
    revision_id  blob not null references invoice_revisions (id),
    approver_id  blob not null references users (id),
    decision     text not null constraint decisions_decision_check check (decision in ('approved', 'rejected', 'changes_requested')),
    payload_hash text not null,
    reason       text,
    decided_at   text not null,
    -- one decision per revision
    constraint decisions_revision_key unique (revision_id)
);
create index decisions_invoice_idx on decisions (org_id, invoice_id);

create table invoice_events (
    id              blob primary key,
    org_id          blob not null references orgs (id),
    invoice_id      blob not null references invoices (id),
    seq             integer not null,
    action          text not null,
    from_state      text,
    to_state        text not null,
    actor_kind      text not null constraint invoice_events_actor_kind_check check (actor_kind in ('human', 'agent', 'system')),
    actor_id        blob,
    interface       text not null constraint invoice_events_interface_check check (interface in ('api', 'mcp', 'ui', 'cli', 'job')),
    revision_id     blob,
    payload_hash    text,
    idempotency_key text,
    note            text,
    occurred_at     text not null,
    prev_hash       text not null,
    hash            text not null,
    constraint invoice_events_seq_key unique (invoice_id, seq)
);

create trigger invoice_revisions_no_update before update on invoice_revisions
begin
    select raise(abort, 'invoice_revisions is append-only');
end;
create trigger invoice_revisions_no_delete before delete on invoice_revisions
begin
    select raise(abort, 'invoice_revisions is append-only');
end;
create trigger decisions_no_update before update on decisions
begin
    select raise(abort, 'decisions is append-only');
end;
create trigger decisions_no_delete before delete on decisions
begin
    select raise(abort, 'decisions is append-only');
end;
create trigger invoice_events_no_update before update on invoice_events
begin
    select raise(abort, 'invoice_events is append-only');
end;
create trigger invoice_events_no_delete before delete on invoice_events
begin
    select raise(abort, 'invoice_events is append-only');
end;
