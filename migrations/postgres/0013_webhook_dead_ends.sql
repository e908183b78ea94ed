-- Webhooks without dead ends (effects.md §6): an endpoint's record of success and failure and
-- whether it is disabled, its creation's idempotency key, and one row per delivery (one event
-- to one endpoint) that outlives its jobs, so a delivery that used up its attempts can be sent
-- again after its job was pruned, and a disabled endpoint's deliveries are held, not lost.

-- When an approver's or the failure window's disable happened; null: enabled.
alter table webhook_endpoints add column disabled_at timestamptz;
-- The first failed attempt since the last success; null while the latest answer succeeded.
alter table webhook_endpoints add column failing_since timestamptz;
alter table webhook_endpoints add column last_success_at timestamptz;
-- The creating approver's Idempotency-Key, and the fingerprint of the body it came with.
alter table webhook_endpoints add column idempotency_key text;
alter table webhook_endpoints add column request_hash text;
create unique index webhook_endpoints_idempotency_key
    on webhook_endpoints (org_id, created_by, idempotency_key) where idempotency_key is not null;

create table webhook_deliveries (
    -- the id of its first job (domain::webhook::delivery_id)
    id           uuid primary key,
    org_id       uuid not null references orgs (id),
    endpoint_id  uuid not null references webhook_endpoints (id) on delete cascade,
    -- the invoice event: the webhook-id header of every attempt of every cycle
    event_id     uuid not null,
    event_type   text not null,
    -- the job of the current cycle; null while held since before its first job
    job_id       uuid,
    -- 1, then one more for each resend or re-enable
    cycle        integer not null constraint webhook_deliveries_cycle_check check (cycle >= 1),
    -- kept, not attempted, until the endpoint is re-enabled
    held         boolean not null,
    delivered_at timestamptz,
    created_at   timestamptz not null,
    updated_at   timestamptz not null,
    constraint webhook_deliveries_event_key unique (org_id, endpoint_id, event_id)
);
create index webhook_deliveries_endpoint_idx on webhook_deliveries (org_id, endpoint_id, id);
create index webhook_deliveries_pruning_idx on webhook_deliveries (updated_at);
