-- no-transaction
-- Every key of an organisation-owned table includes org_id (docs/SCALING.md, "The schema
-- audit"; the PostgreSQL migration 0018 says why). Constraint names are those of PostgreSQL;
-- SQLite reports a refused unique write by its columns (crates/store/src/error.rs).
--
-- SQLite cannot change a primary key or a foreign key in place, so every
-- organisation-owned table whose keys change is rebuilt as 0014 rebuilt `users`
-- (sqlite.org/lang_altertable.html, "other kinds of table schema changes"): foreign keys off
-- (they cannot change inside a transaction, hence `no-transaction` and the explicit
-- BEGIN/COMMIT), create the new table, copy, drop, rename, then every index and trigger of
-- the table again, verbatim. Each new table is the old one's text from sqlite_master after
-- 0017, every column, default, check and comment kept, with these changes only:
-- * `id blob primary key` is `id blob not null` and the table's primary key is (org_id, id)
--   (job_submissions: (org_id, job_id));
-- * a column's `references <table> (id)` is a table constraint
--   `foreign key (org_id, <column>) references <table> (org_id, id)`, its actions kept;
-- * the unique keys without org_id include it; users loses its (org_id, id) key, which is
--   the primary key now;
-- * plain indexes for the lookups that cross organisations: sessions and invitations by
--   token hash, API keys by id.
-- invoice_numbers, job_turns (already keyed by org_id) and orgs are not touched. Every
-- reference into a rebuilt table names the table, which exists again under the same name.
PRAGMA foreign_keys = off;
BEGIN;

-- agents
create table agents_rebuilt (
    id           blob not null,
    org_id       blob not null references orgs (id),
    owner_id     blob not null,
    name         text not null,
    capabilities text not null,
    created_at   text not null,
    updated_at   text not null,
    constraint agents_pkey primary key (org_id, id),
    constraint agents_owner_id_fkey foreign key (org_id, owner_id) references users (org_id, id)
);
insert into agents_rebuilt (id, org_id, owner_id, name, capabilities, created_at, updated_at)
select id, org_id, owner_id, name, capabilities, created_at, updated_at from agents;
drop table agents;
alter table agents_rebuilt rename to agents;
CREATE INDEX agents_owner_idx on agents (org_id, owner_id, id);

-- api_keys
create table api_keys_rebuilt (
    -- the id embedded in the key string: lookup is one primary-key read
    id           blob not null,
    org_id       blob not null references orgs (id),
    agent_id     blob not null,
    key_hash     blob not null,
    created_at   text not null,
    expires_at   text not null,
    revoked_at   text,
    last_used_at text,
    constraint api_keys_pkey primary key (org_id, id),
    constraint api_keys_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id) on delete cascade
);
insert into api_keys_rebuilt (id, org_id, agent_id, key_hash, created_at, expires_at, revoked_at, last_used_at)
select id, org_id, agent_id, key_hash, created_at, expires_at, revoked_at, last_used_at from api_keys;
drop table api_keys;
alter table api_keys_rebuilt rename to api_keys;
CREATE INDEX api_keys_agent_idx on api_keys (agent_id);
-- Authentication: a key by the id embedded in it, whatever its organisation.
create index api_keys_id_idx on api_keys (id);

-- audit_events
create table audit_events_rebuilt (
    id          blob not null,
    org_id      blob not null references orgs (id),
    actor_kind  text not null constraint audit_events_actor_kind_check check (actor_kind in ('human', 'agent', 'system')),
    actor_id    blob,
    interface   text not null constraint audit_events_interface_check check (interface in ('api', 'mcp', 'ui', 'cli', 'job')),
    action      text not null,
    subject_type text not null,
    subject_id  blob not null,
    detail      text not null,
    occurred_at text not null,
    constraint audit_events_pkey primary key (org_id, id)
);
insert into audit_events_rebuilt (id, org_id, actor_kind, actor_id, interface, action, subject_type, subject_id, detail, occurred_at)
select id, org_id, actor_kind, actor_id, interface, action, subject_type, subject_id, detail, occurred_at from audit_events;
drop table audit_events;
alter table audit_events_rebuilt rename to audit_events;
CREATE INDEX audit_events_org_idx on audit_events (org_id, occurred_at, id);
CREATE TRIGGER audit_events_no_delete before delete on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;
CREATE TRIGGER audit_events_no_update before update on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;

-- customers
create table customers_rebuilt (
    id         blob not null,
    org_id     blob not null references orgs (id),
    agent_id   blob not null,
    name       text not null,
    email      text not null,
    created_at text not null,
    updated_at text not null,
    constraint customers_pkey primary key (org_id, id),
    constraint customers_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id)
);
insert into customers_rebuilt (id, org_id, agent_id, name, email, created_at, updated_at)
select id, org_id, agent_id, name, email, created_at, updated_at from customers;
drop table customers;
alter table customers_rebuilt rename to customers;
CREATE INDEX customers_agent_idx on customers (org_id, agent_id, id);

-- decisions
create table decisions_rebuilt (
    id           blob not null,
    org_id       blob not null references orgs (id),
    invoice_id   blob not null,
    revision_id  blob not null,
    approver_id  blob not null,
    decision     text not null constraint decisions_decision_check check (decision in ('approved', 'rejected', 'changes_requested')),
    payload_hash text not null,
    reason       text,
    decided_at   text not null,
    -- one decision per revision
    constraint decisions_revision_key unique (org_id, revision_id),
    constraint decisions_pkey primary key (org_id, id),
    constraint decisions_invoice_id_fkey foreign key (org_id, invoice_id) references invoices (org_id, id),
    constraint decisions_revision_id_fkey foreign key (org_id, revision_id) references invoice_revisions (org_id, id),
    constraint decisions_approver_id_fkey foreign key (org_id, approver_id) references users (org_id, id)
);
insert into decisions_rebuilt (id, org_id, invoice_id, revision_id, approver_id, decision, payload_hash, reason, decided_at)
select id, org_id, invoice_id, revision_id, approver_id, decision, payload_hash, reason, decided_at from decisions;
drop table decisions;
alter table decisions_rebuilt rename to decisions;
CREATE INDEX decisions_invoice_idx on decisions (org_id, invoice_id);
CREATE TRIGGER decisions_no_delete before delete on decisions
begin
    select raise(abort, 'decisions is append-only');
end;
CREATE TRIGGER decisions_no_update before update on decisions
begin
    select raise(abort, 'decisions is append-only');
end;

-- effect_claims
create table effect_claims_rebuilt (
    id           blob not null,
    org_id       blob not null references orgs (id),
    kind         text not null,
    business_key text not null,
    fingerprint  text not null,
    state        text not null constraint effect_claims_state_check check (state in ('processing', 'complete', 'rejected')),
    response     text,
    admitted_at  text not null,
    completed_at text,
    retain_until text not null,
    constraint effect_claims_key unique (org_id, kind, business_key),
    constraint effect_claims_completion_check check ((state = 'complete') = (response is not null and completed_at is not null)),
    constraint effect_claims_closed_check check ((state = 'processing') = (completed_at is null)),
    constraint effect_claims_retention_check check (retain_until > admitted_at),
    constraint effect_claims_pkey primary key (org_id, id)
);
insert into effect_claims_rebuilt (id, org_id, kind, business_key, fingerprint, state, response, admitted_at, completed_at, retain_until)
select id, org_id, kind, business_key, fingerprint, state, response, admitted_at, completed_at, retain_until from effect_claims;
drop table effect_claims;
alter table effect_claims_rebuilt rename to effect_claims;
CREATE INDEX effect_claims_processing_idx on effect_claims (admitted_at) where state = 'processing';
CREATE INDEX effect_claims_retention_idx on effect_claims (retain_until) where state in ('complete', 'rejected');
CREATE TRIGGER effect_claims_delete_guard before delete on effect_claims
when not (
    (old.state in ('complete', 'rejected') and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now'))
    or (old.state = 'processing' and exists (select 1 from effect_claim_reaps)
        and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now')
        and old.admitted_at < strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 day'))
)
begin
    select raise(abort, 'effect claim may not be deleted');
end;

-- invitations
create table invitations_rebuilt (
    id          blob not null,
    org_id      blob not null references orgs (id),
    user_id     blob not null,
    invited_by  blob not null,
    token_hash  blob not null,
    created_at  text not null,
    expires_at  text not null,
    accepted_at text,
    constraint invitations_token_hash_key unique (org_id, token_hash),
    constraint invitations_pkey primary key (org_id, id),
    constraint invitations_user_id_fkey foreign key (org_id, user_id) references users (org_id, id),
    constraint invitations_invited_by_fkey foreign key (org_id, invited_by) references users (org_id, id)
);
insert into invitations_rebuilt (id, org_id, user_id, invited_by, token_hash, created_at, expires_at, accepted_at)
select id, org_id, user_id, invited_by, token_hash, created_at, expires_at, accepted_at from invitations;
drop table invitations;
alter table invitations_rebuilt rename to invitations;
CREATE INDEX invitations_expires_idx on invitations (expires_at);
-- Accepting an invitation: by its token's hash, whatever its organisation.
create index invitations_token_hash_idx on invitations (token_hash);

-- invoice_events
create table invoice_events_rebuilt (
    id              blob not null,
    org_id          blob not null references orgs (id),
    invoice_id      blob not null,
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
    hash            text not null, four_eyes integer, shared_review integer,
    constraint invoice_events_seq_key unique (org_id, invoice_id, seq),
    constraint invoice_events_pkey primary key (org_id, id),
    constraint invoice_events_invoice_id_fkey foreign key (org_id, invoice_id) references invoices (org_id, id)
);
insert into invoice_events_rebuilt (id, org_id, invoice_id, seq, action, from_state, to_state, actor_kind, actor_id, interface, revision_id, payload_hash, idempotency_key, note, occurred_at, prev_hash, hash, four_eyes, shared_review)
select id, org_id, invoice_id, seq, action, from_state, to_state, actor_kind, actor_id, interface, revision_id, payload_hash, idempotency_key, note, occurred_at, prev_hash, hash, four_eyes, shared_review from invoice_events;
drop table invoice_events;
alter table invoice_events_rebuilt rename to invoice_events;
CREATE TRIGGER invoice_events_no_delete before delete on invoice_events
begin
    select raise(abort, 'invoice_events is append-only');
end;
CREATE TRIGGER invoice_events_no_update before update on invoice_events
begin
    select raise(abort, 'invoice_events is append-only');
end;

-- invoice_revisions
create table invoice_revisions_rebuilt (
    id                     blob not null,
    org_id                 blob not null references orgs (id),
    invoice_id             blob not null,
    number                 integer not null,
    customer_id            blob not null,
    payment_destination_id blob not null,
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
    constraint invoice_revisions_number_key unique (org_id, invoice_id, number),
    constraint invoice_revisions_pkey primary key (org_id, id),
    constraint invoice_revisions_invoice_id_fkey foreign key (org_id, invoice_id) references invoices (org_id, id),
    constraint invoice_revisions_customer_id_fkey foreign key (org_id, customer_id) references customers (org_id, id),
    constraint invoice_revisions_payment_destination_id_fkey foreign key (org_id, payment_destination_id) references payment_destinations (org_id, id)
);
insert into invoice_revisions_rebuilt (id, org_id, invoice_id, number, customer_id, payment_destination_id, destination_network, destination_address, currency, due_date, lines, total_minor, reasoning, canonical_payload, payload_hash, created_at)
select id, org_id, invoice_id, number, customer_id, payment_destination_id, destination_network, destination_address, currency, due_date, lines, total_minor, reasoning, canonical_payload, payload_hash, created_at from invoice_revisions;
drop table invoice_revisions;
alter table invoice_revisions_rebuilt rename to invoice_revisions;
CREATE INDEX invoice_revisions_customer_idx on invoice_revisions (org_id, customer_id);
CREATE TRIGGER invoice_revisions_no_delete before delete on invoice_revisions
begin
    select raise(abort, 'invoice_revisions is append-only');
end;
CREATE TRIGGER invoice_revisions_no_update before update on invoice_revisions
begin
    select raise(abort, 'invoice_revisions is append-only');
end;

-- invoices
create table invoices_rebuilt (
    id                 blob not null,
    org_id             blob not null references orgs (id),
    agent_id           blob not null,
    idempotency_key    text not null,
    state              text not null constraint invoices_state_check check (state in
        ('draft', 'pending_approval', 'approved', 'issued', 'partially_paid', 'paid', 'rejected', 'cancelled')),
    -- which command cancelled it (withdraw or cancel): a replay only counts for the same command
    cancelled_by       text,
    number             text,
    current_revision_id blob,
    revision_count     integer not null,
    -- revision 1's hash: what an idempotent create is compared against, in one indexed read
    first_payload_hash text not null,
    event_count        integer not null,
    last_event_hash    text not null,
    created_at         text not null,
    updated_at         text not null, last_decision_id blob, amount_paid_minor text not null default '0'
    constraint invoices_amount_paid_check check (amount_paid_minor <> '' and amount_paid_minor not glob '*[^0-9]*'), issuing_status text
    constraint invoices_issuing_status_check check (issuing_status in
        ('pending', 'blocked', 'rejected', 'conflict', 'needs_review')), issuing_reason text, issuing_job_id blob, issue_version integer not null default 1
    constraint invoices_issue_version_check check (issue_version >= 1), payment_count integer not null default 0, counted_minor text,
    constraint invoices_idempotency_key unique (org_id, agent_id, idempotency_key),
    constraint invoices_pkey primary key (org_id, id),
    constraint invoices_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id),
    constraint invoices_current_revision_fk foreign key (org_id, current_revision_id) references invoice_revisions (org_id, id) deferrable initially deferred
);
insert into invoices_rebuilt (id, org_id, agent_id, idempotency_key, state, cancelled_by, number, current_revision_id, revision_count, first_payload_hash, event_count, last_event_hash, created_at, updated_at, last_decision_id, amount_paid_minor, issuing_status, issuing_reason, issuing_job_id, issue_version, payment_count, counted_minor)
select id, org_id, agent_id, idempotency_key, state, cancelled_by, number, current_revision_id, revision_count, first_payload_hash, event_count, last_event_hash, created_at, updated_at, last_decision_id, amount_paid_minor, issuing_status, issuing_reason, issuing_job_id, issue_version, payment_count, counted_minor from invoices;
drop table invoices;
alter table invoices_rebuilt rename to invoices;
CREATE INDEX invoices_agent_idx on invoices (org_id, agent_id, id);
CREATE INDEX invoices_current_revision_idx on invoices (current_revision_id);
CREATE INDEX invoices_issuing_idx on invoices (org_id, issuing_status, id) where issuing_status is not null;
CREATE UNIQUE INDEX invoices_number_key on invoices (org_id, number) where number is not null;
CREATE INDEX invoices_state_idx on invoices (org_id, state, id);

-- job_submissions
create table job_submissions_rebuilt (
    job_id          blob not null,
    org_id          blob not null references orgs (id),
    kind            text not null,
    submission_id   text not null,
    definition_hash text not null,
    created_at      text not null,
    constraint job_submissions_key unique (org_id, kind, submission_id),
    constraint job_submissions_pkey primary key (org_id, job_id)
);
insert into job_submissions_rebuilt (job_id, org_id, kind, submission_id, definition_hash, created_at)
select job_id, org_id, kind, submission_id, definition_hash, created_at from job_submissions;
drop table job_submissions;
alter table job_submissions_rebuilt rename to job_submissions;

-- jobs
create table jobs_rebuilt (
    id                 blob not null,
    org_id             blob not null references orgs (id),
    -- versioned kind, e.g. invoice.issue.v1
    kind               text not null,
    -- canonical JSON object, at most 64 KiB (checked in Rust)
    args               text not null,
    submission_id      text,
    definition_hash    text not null,
    state              text not null constraint jobs_state_check check (state in
        ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    -- the counted attempt the next (or current) execution is; expired leases do not count
    attempt            integer not null constraint jobs_attempt_check check (attempt >= 1),
    max_attempts       integer not null constraint jobs_max_attempts_check check (max_attempts between 1 and 1000),
    -- every claim, counted or not
    executions         integer not null constraint jobs_executions_check check (executions >= 0),
    -- executions that ended by an expired lease
    interruptions      integer not null constraint jobs_interruptions_check check (interruptions >= 0),
    -- when it may run (enqueued for, or the stored, jittered retry time)
    run_at             text not null,
    lease_token        blob,
    lease_expires_at   text,
    -- the process and task that holds (or last held) it
    worker             text,
    last_error_code    text,
    last_error_message text,
    created_at         text not null,
    updated_at         text not null,
    started_at         text,
    finished_at        text, lane text,
    -- a running job has a lease, and nothing else has one
    constraint jobs_lease_check check
        ((state = 'running') = (lease_token is not null and lease_expires_at is not null)),
    constraint jobs_pkey primary key (org_id, id)
);
insert into jobs_rebuilt (id, org_id, kind, args, submission_id, definition_hash, state, attempt, max_attempts, executions, interruptions, run_at, lease_token, lease_expires_at, worker, last_error_code, last_error_message, created_at, updated_at, started_at, finished_at, lane)
select id, org_id, kind, args, submission_id, definition_hash, state, attempt, max_attempts, executions, interruptions, run_at, lease_token, lease_expires_at, worker, last_error_code, last_error_message, created_at, updated_at, started_at, finished_at, lane from jobs;
drop table jobs;
alter table jobs_rebuilt rename to jobs;
CREATE INDEX jobs_due_idx on jobs (run_at, id) where state in ('available', 'scheduled', 'retryable');
CREATE INDEX jobs_fair_idx on jobs (org_id, kind, run_at, id)
    where state in ('available', 'scheduled', 'retryable');
CREATE INDEX jobs_finished_idx on jobs (state, finished_at) where state in ('completed', 'discarded', 'cancelled');
CREATE INDEX jobs_lane_idx on jobs (org_id, lane) where state = 'running' and lane is not null;
CREATE INDEX jobs_lease_idx on jobs (lease_expires_at) where state = 'running';
CREATE INDEX jobs_org_idx on jobs (org_id, id);
CREATE INDEX jobs_org_state_idx on jobs (org_id, state, id);

-- org_changes
create table org_changes_rebuilt (
    id            blob not null,
    org_id        blob not null references orgs (id),
    kind          text not null constraint org_changes_kind_check check (kind in ('settings', 'approver_invitation', 'payment_resolution', 'settlement_agent', 'approver_deactivation')),
    proposed_by   blob not null,
    state         text not null constraint org_changes_state_check check (state in ('pending', 'confirmed', 'rejected')),
    -- kind = settings: the values asked for (null: unchanged)
    four_eyes     integer,
    shared_review integer,
    -- kind = approver_invitation: who is invited, with which role
    email         text,
    role          text,
    decided_by    blob,
    decided_at    text,
    created_at    text not null,
    expires_at    text not null,
    -- kind = payment_resolution: the resolution it would apply, and its payment
    payment_resolution_id blob,
    payment_id            blob,
    -- kind = approver_deactivation: the human it deactivates
    user_id       blob,
    -- kind = settlement_agent: the new agent's name; once confirmed, the agent
    agent_name    text,
    agent_id      blob,
    constraint org_changes_pkey primary key (org_id, id),
    constraint org_changes_proposed_by_fkey foreign key (org_id, proposed_by) references users (org_id, id),
    constraint org_changes_decided_by_fkey foreign key (org_id, decided_by) references users (org_id, id),
    constraint org_changes_user_id_fkey foreign key (org_id, user_id) references users (org_id, id)
);
insert into org_changes_rebuilt (id, org_id, kind, proposed_by, state, four_eyes, shared_review, email, role, decided_by, decided_at, created_at, expires_at, payment_resolution_id, payment_id, user_id, agent_name, agent_id)
select id, org_id, kind, proposed_by, state, four_eyes, shared_review, email, role, decided_by, decided_at, created_at, expires_at, payment_resolution_id, payment_id, user_id, agent_name, agent_id from org_changes;
drop table org_changes;
alter table org_changes_rebuilt rename to org_changes;
CREATE INDEX org_changes_org_idx on org_changes (org_id, id);

-- payment_destinations
create table payment_destinations_rebuilt (
    id              blob not null,
    org_id          blob not null references orgs (id),
    agent_id        blob not null,
    label           text not null,
    currency        text not null,
    network         text not null,
    address         text not null,
    state           text not null
        constraint payment_destinations_state_check check (state in ('active', 'deactivated', 'superseded')),
    supersedes_id   blob,
    idempotency_key text,
    request_hash    text,
    created_at      text not null,
    updated_at      text not null,
    -- at most one replacement per destination
    constraint payment_destinations_supersedes_key unique (org_id, supersedes_id),
    constraint payment_destinations_idempotency_key unique (org_id, agent_id, idempotency_key),
    constraint payment_destinations_pkey primary key (org_id, id),
    constraint payment_destinations_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id),
    constraint payment_destinations_supersedes_id_fkey foreign key (org_id, supersedes_id) references payment_destinations (org_id, id)
);
insert into payment_destinations_rebuilt (id, org_id, agent_id, label, currency, network, address, state, supersedes_id, idempotency_key, request_hash, created_at, updated_at)
select id, org_id, agent_id, label, currency, network, address, state, supersedes_id, idempotency_key, request_hash, created_at, updated_at from payment_destinations;
drop table payment_destinations;
alter table payment_destinations_rebuilt rename to payment_destinations;
CREATE INDEX payment_destinations_agent_idx on payment_destinations (org_id, agent_id, id);

-- payment_resolutions
create table payment_resolutions_rebuilt (
    id              blob not null,
    org_id          blob not null references orgs (id),
    payment_id      blob not null,
    action          text not null constraint payment_resolutions_action_check check (action in ('accept', 'allocate', 'void')),
    -- allocate: the invoice it is allocated to
    invoice_id      blob,
    -- accept and allocate: the amount that counts, in the payment's currency
    amount_minor    text constraint payment_resolutions_amount_check check (amount_minor <> '' and amount_minor not glob '*[^0-9]*'),
    reason          text not null,
    requested_by    blob not null,
    idempotency_key text not null,
    -- lowercase hex SHA-256 of the normalized request: what a replay must match
    fingerprint     text not null,
    -- applied, or proposed (four eyes) until another approver confirms (applied) or rejects it
    state           text not null constraint payment_resolutions_state_check check (state in ('applied', 'proposed', 'rejected')),
    -- the proposal, when four eyes was on
    change_id       blob,
    decided_by      blob,
    created_at      text not null,
    decided_at      text,
    constraint payment_resolutions_key unique (org_id, requested_by, idempotency_key),
    constraint payment_resolutions_pkey primary key (org_id, id),
    constraint payment_resolutions_payment_id_fkey foreign key (org_id, payment_id) references payments (org_id, id),
    constraint payment_resolutions_invoice_id_fkey foreign key (org_id, invoice_id) references invoices (org_id, id),
    constraint payment_resolutions_requested_by_fkey foreign key (org_id, requested_by) references users (org_id, id),
    constraint payment_resolutions_decided_by_fkey foreign key (org_id, decided_by) references users (org_id, id)
);
insert into payment_resolutions_rebuilt (id, org_id, payment_id, action, invoice_id, amount_minor, reason, requested_by, idempotency_key, fingerprint, state, change_id, decided_by, created_at, decided_at)
select id, org_id, payment_id, action, invoice_id, amount_minor, reason, requested_by, idempotency_key, fingerprint, state, change_id, decided_by, created_at, decided_at from payment_resolutions;
drop table payment_resolutions;
alter table payment_resolutions_rebuilt rename to payment_resolutions;
CREATE INDEX payment_resolutions_payment_idx on payment_resolutions (org_id, payment_id, id);

-- payments
create table payments_rebuilt (
    id                 blob not null,
    org_id             blob not null references orgs (id),
    source             text not null,
    source_payment_id  text not null,
    amount_minor       text not null constraint payments_amount_check check (amount_minor <> '' and amount_minor not glob '*[^0-9]*'),
    currency           text not null,
    invoice_ref_id     blob,
    invoice_ref_number text,
    first_at           text not null,
    first_event_id     text not null,
    state              text not null constraint payments_state_check check (state in ('observed', 'confirmed', 'failed')),
    conflict           integer not null,
    confirmed_at       text,
    -- the invoice it is matched to: the one it names, once that is known
    invoice_id         blob,
    -- whose humans see it: the invoice's agent, or the settlement agent that reported it
    agent_id           blob not null,
    status             text not null constraint payments_status_check check (status in
        ('pending', 'applied', 'overpaid', 'unmatched', 'conflict', 'failed')),
    unmatched_reason   text constraint payments_unmatched_reason_check check (unmatched_reason in
        ('unknown_invoice', 'wrong_currency', 'invoice_not_issued')),
    allocated_minor    text not null constraint payments_allocated_check check (allocated_minor <> '' and allocated_minor not glob '*[^0-9]*'),
    event_count        integer not null,
    created_at         text not null,
    updated_at         text not null, resolution text
    constraint payments_resolution_check check (resolution in ('accept', 'allocate', 'void')), resolved_amount_minor text
    constraint payments_resolved_amount_check check (resolved_amount_minor <> '' and resolved_amount_minor not glob '*[^0-9]*'),
    constraint payments_source_key unique (org_id, source, source_payment_id),
    constraint payments_invoice_ref_check check ((invoice_ref_id is null) <> (invoice_ref_number is null)),
    constraint payments_pkey primary key (org_id, id),
    constraint payments_invoice_id_fkey foreign key (org_id, invoice_id) references invoices (org_id, id),
    constraint payments_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id)
);
insert into payments_rebuilt (id, org_id, source, source_payment_id, amount_minor, currency, invoice_ref_id, invoice_ref_number, first_at, first_event_id, state, conflict, confirmed_at, invoice_id, agent_id, status, unmatched_reason, allocated_minor, event_count, created_at, updated_at, resolution, resolved_amount_minor)
select id, org_id, source, source_payment_id, amount_minor, currency, invoice_ref_id, invoice_ref_number, first_at, first_event_id, state, conflict, confirmed_at, invoice_id, agent_id, status, unmatched_reason, allocated_minor, event_count, created_at, updated_at, resolution, resolved_amount_minor from payments;
drop table payments;
alter table payments_rebuilt rename to payments;
CREATE INDEX payments_invoice_idx on payments (org_id, invoice_id);
CREATE INDEX payments_list_idx on payments (org_id, id);
CREATE INDEX payments_status_idx on payments (org_id, status, id);
CREATE INDEX payments_unmatched_number_idx on payments (org_id, invoice_ref_number) where invoice_id is null;

-- sessions
create table sessions_rebuilt (
    id         blob not null,
    org_id     blob not null references orgs (id),
    user_id    blob not null,
    token_hash blob not null,
    created_at text not null,
    expires_at text not null,
    constraint sessions_token_hash_key unique (org_id, token_hash),
    constraint sessions_pkey primary key (org_id, id),
    constraint sessions_user_id_fkey foreign key (org_id, user_id) references users (org_id, id)
);
insert into sessions_rebuilt (id, org_id, user_id, token_hash, created_at, expires_at)
select id, org_id, user_id, token_hash, created_at, expires_at from sessions;
drop table sessions;
alter table sessions_rebuilt rename to sessions;
CREATE INDEX sessions_expires_idx on sessions (expires_at);
CREATE INDEX sessions_user_idx on sessions (org_id, user_id);
-- Authentication: a session by its token's hash, whatever its organisation.
create index sessions_token_hash_idx on sessions (token_hash);

-- settlement_events
create table settlement_events_rebuilt (
    id                 blob not null,
    org_id             blob not null references orgs (id),
    payment_id         blob not null,
    -- the settlement agent that reported it
    agent_id           blob not null,
    source             text not null,
    source_event_id    text not null,
    -- lowercase hex SHA-256 of the normalized body: what a redelivery must match
    fingerprint        text not null,
    status             text not null constraint settlement_events_status_check check (status in ('observed', 'confirmed', 'failed')),
    amount_minor       text not null constraint settlement_events_amount_check check (amount_minor <> '' and amount_minor not glob '*[^0-9]*'),
    currency           text not null,
    invoice_ref_id     blob,
    invoice_ref_number text,
    occurred_at        text not null,
    raw                text,
    received_at        text not null,
    constraint settlement_events_source_key unique (org_id, source, source_event_id),
    constraint settlement_events_invoice_ref_check check ((invoice_ref_id is null) <> (invoice_ref_number is null)),
    constraint settlement_events_pkey primary key (org_id, id),
    constraint settlement_events_payment_id_fkey foreign key (org_id, payment_id) references payments (org_id, id),
    constraint settlement_events_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id)
);
insert into settlement_events_rebuilt (id, org_id, payment_id, agent_id, source, source_event_id, fingerprint, status, amount_minor, currency, invoice_ref_id, invoice_ref_number, occurred_at, raw, received_at)
select id, org_id, payment_id, agent_id, source, source_event_id, fingerprint, status, amount_minor, currency, invoice_ref_id, invoice_ref_number, occurred_at, raw, received_at from settlement_events;
drop table settlement_events;
alter table settlement_events_rebuilt rename to settlement_events;
CREATE INDEX settlement_events_agent_idx on settlement_events (org_id, agent_id);
CREATE INDEX settlement_events_payment_idx on settlement_events (org_id, payment_id, id);
CREATE TRIGGER settlement_events_no_delete before delete on settlement_events
begin
    select raise(abort, 'settlement_events is append-only');
end;
CREATE TRIGGER settlement_events_no_update before update on settlement_events
begin
    select raise(abort, 'settlement_events is append-only');
end;

-- settlement_sources
create table settlement_sources_rebuilt (
    org_id     blob not null references orgs (id),
    source     text not null,
    agent_id   blob not null,
    created_at text not null,
    primary key (org_id, source),
    constraint settlement_sources_agent_id_fkey foreign key (org_id, agent_id) references agents (org_id, id)
);
insert into settlement_sources_rebuilt (org_id, source, agent_id, created_at)
select org_id, source, agent_id, created_at from settlement_sources;
drop table settlement_sources;
alter table settlement_sources_rebuilt rename to settlement_sources;
CREATE INDEX settlement_sources_agent_idx on settlement_sources (org_id, agent_id);

-- test_job_executions
create table test_job_executions_rebuilt (
    id          blob not null,
    org_id      blob not null references orgs (id),
    job_id      blob not null,
    lease_token blob not null,
    worker      text not null,
    attempt     integer not null,
    outcome     text not null,
    started_at  text not null,
    finished_at text not null,
    constraint test_job_executions_pkey primary key (org_id, id)
);
insert into test_job_executions_rebuilt (id, org_id, job_id, lease_token, worker, attempt, outcome, started_at, finished_at)
select id, org_id, job_id, lease_token, worker, attempt, outcome, started_at, finished_at from test_job_executions;
drop table test_job_executions;
alter table test_job_executions_rebuilt rename to test_job_executions;
CREATE INDEX test_job_executions_job_idx on test_job_executions (org_id, job_id, started_at);

-- users
create table users_rebuilt (
    id               blob not null,
    org_id           blob not null references orgs (id),
    email            text not null,
    -- lowercased email: unique within an organisation; sign-in may name the organisation
    email_normalized text not null,
    role             text not null constraint users_role_check check (role in ('operator', 'approver')),
    password_hash    text,
    -- the first approver created by `bootstrap-approver`; at most one per org (see index below)
    is_bootstrap     integer not null default 0,
    created_at       text not null,
    updated_at       text not null,
    deactivated_at   text,
    constraint users_org_email_key unique (org_id, email_normalized),
    constraint users_pkey primary key (org_id, id)
);
insert into users_rebuilt (id, org_id, email, email_normalized, role, password_hash, is_bootstrap, created_at, updated_at, deactivated_at)
select id, org_id, email, email_normalized, role, password_hash, is_bootstrap, created_at, updated_at, deactivated_at from users;
drop table users;
alter table users_rebuilt rename to users;
CREATE INDEX users_email_idx on users (email_normalized, created_at, id);
CREATE UNIQUE INDEX users_one_bootstrap_per_org on users (org_id) where is_bootstrap;

-- webhook_attempts
create table webhook_attempts_rebuilt (
    id           blob not null,
    org_id       blob not null references orgs (id),
    endpoint_id  blob not null,
    -- the delivery job (not a foreign key: finished jobs are pruned before their attempts)
    job_id       blob not null,
    -- the invoice event delivered: the webhook-id header
    event_id     blob not null,
    event_type   text not null,
    -- the job's counted attempt this was
    attempt      integer not null,
    -- the answer's status, or null when none arrived (then error_kind says why)
    status_code  integer,
    -- timeout, dns, address_refused or network; null when an answer arrived
    error_kind   text,
    -- at most 200 characters, no secret or body
    error        text,
    duration_ms  bigint not null,
    delivered    integer not null,
    attempted_at text not null,
    constraint webhook_attempts_pkey primary key (org_id, id),
    constraint webhook_attempts_endpoint_id_fkey foreign key (org_id, endpoint_id) references webhook_endpoints (org_id, id) on delete cascade
);
insert into webhook_attempts_rebuilt (id, org_id, endpoint_id, job_id, event_id, event_type, attempt, status_code, error_kind, error, duration_ms, delivered, attempted_at)
select id, org_id, endpoint_id, job_id, event_id, event_type, attempt, status_code, error_kind, error, duration_ms, delivered, attempted_at from webhook_attempts;
drop table webhook_attempts;
alter table webhook_attempts_rebuilt rename to webhook_attempts;
CREATE INDEX webhook_attempts_endpoint_idx on webhook_attempts (org_id, endpoint_id, id);
CREATE INDEX webhook_attempts_pruning_idx on webhook_attempts (attempted_at);

-- webhook_deliveries
create table webhook_deliveries_rebuilt (
    -- the id of its first job (domain::webhook::delivery_id)
    id           blob not null,
    org_id       blob not null references orgs (id),
    endpoint_id  blob not null,
    -- the invoice event: the webhook-id header of every attempt of every cycle
    event_id     blob not null,
    event_type   text not null,
    -- the job of the current cycle; null while held since before its first job
    job_id       blob,
    -- 1, then one more for each resend or re-enable
    cycle        integer not null constraint webhook_deliveries_cycle_check check (cycle >= 1),
    -- kept, not attempted, until the endpoint is re-enabled
    held         integer not null,
    delivered_at text,
    created_at   text not null,
    updated_at   text not null,
    constraint webhook_deliveries_event_key unique (org_id, endpoint_id, event_id),
    constraint webhook_deliveries_pkey primary key (org_id, id),
    constraint webhook_deliveries_endpoint_id_fkey foreign key (org_id, endpoint_id) references webhook_endpoints (org_id, id) on delete cascade
);
insert into webhook_deliveries_rebuilt (id, org_id, endpoint_id, event_id, event_type, job_id, cycle, held, delivered_at, created_at, updated_at)
select id, org_id, endpoint_id, event_id, event_type, job_id, cycle, held, delivered_at, created_at, updated_at from webhook_deliveries;
drop table webhook_deliveries;
alter table webhook_deliveries_rebuilt rename to webhook_deliveries;
CREATE INDEX webhook_deliveries_endpoint_idx on webhook_deliveries (org_id, endpoint_id, id);
CREATE INDEX webhook_deliveries_pruning_idx on webhook_deliveries (updated_at);

-- webhook_endpoints
create table webhook_endpoints_rebuilt (
    id                blob not null,
    org_id            blob not null references orgs (id),
    -- http or https, normal form (checked in Rust against the outbound policy)
    url               text not null,
    -- event types, comma-separated, e.g. invoice.submitted,invoice.approved
    events            text not null,
    description       text,
    timeout_seconds   integer not null
        constraint webhook_endpoints_timeout_check check (timeout_seconds between 1 and 30),
    -- the signing secret: 'v1:' + base64(nonce ‖ ChaCha20-Poly1305 ciphertext) under
    -- TAUROS_SECRET_KEY, or 'plain:whsec_…' when no key is configured (docs/SECURITY.md)
    secret            text not null,
    created_by        blob not null,
    created_at        text not null,
    updated_at        text not null,
    secret_rotated_at text
, disabled_at text, failing_since text, last_success_at text, idempotency_key text, request_hash text,
    constraint webhook_endpoints_pkey primary key (org_id, id),
    constraint webhook_endpoints_created_by_fkey foreign key (org_id, created_by) references users (org_id, id)
);
insert into webhook_endpoints_rebuilt (id, org_id, url, events, description, timeout_seconds, secret, created_by, created_at, updated_at, secret_rotated_at, disabled_at, failing_since, last_success_at, idempotency_key, request_hash)
select id, org_id, url, events, description, timeout_seconds, secret, created_by, created_at, updated_at, secret_rotated_at, disabled_at, failing_since, last_success_at, idempotency_key, request_hash from webhook_endpoints;
drop table webhook_endpoints;
alter table webhook_endpoints_rebuilt rename to webhook_endpoints;
CREATE UNIQUE INDEX webhook_endpoints_idempotency_key
    on webhook_endpoints (org_id, created_by, idempotency_key) where idempotency_key is not null;
CREATE INDEX webhook_endpoints_org_idx on webhook_endpoints (org_id, id);

COMMIT;
PRAGMA foreign_keys = on;
