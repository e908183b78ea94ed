-- Webhooks (effects.md §2): the endpoints an organisation's approvers register, and every
-- delivery attempt (what the endpoint's deliveries list shows). A delivery itself is a job of
-- kind webhook.deliver.v1 (0005), enqueued in the transaction of the invoice event it carries.

create table webhook_endpoints (
    id                uuid primary key,
    org_id            uuid not null references orgs (id),
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
    created_by        uuid not null references users (id),
    created_at        timestamptz not null,
    updated_at        timestamptz not null,
    secret_rotated_at timestamptz
);
create index webhook_endpoints_org_idx on webhook_endpoints (org_id, id);

-- One row per attempt. Removed with their endpoint; pruned after 30 days.
create table webhook_attempts (
    id           uuid primary key,
    org_id       uuid not null references orgs (id),
    endpoint_id  uuid not null references webhook_endpoints (id) on delete cascade,
    -- the delivery job (not a foreign key: finished jobs are pruned before their attempts)
    job_id       uuid not null,
    -- the invoice event delivered: the webhook-id header
    event_id     uuid not null,
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
    delivered    boolean not null,
    attempted_at timestamptz not null
);
create index webhook_attempts_endpoint_idx on webhook_attempts (org_id, endpoint_id, id);
create index webhook_attempts_pruning_idx on webhook_attempts (attempted_at);
