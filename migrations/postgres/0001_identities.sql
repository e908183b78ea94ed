-- Identities: organisations, humans, sessions, invitations, agents, API keys, org audit trail.
-- Every business table carries org_id (the future shard key); nothing is ever joined across orgs.

create table orgs (
    id            uuid primary key,
    name          text not null,
    four_eyes     boolean not null default false,
    shared_review boolean not null default false,
    created_at    timestamptz not null,
    updated_at    timestamptz not null,
    constraint orgs_name_key unique (name)
);

create table users (
    id               uuid primary key,
    org_id           uuid not null references orgs (id),
    email            text not null,
    -- lowercased email: sign-in names no org, so email is unique across the service
    email_normalized text not null,
    role             text not null constraint users_role_check check (role in ('operator', 'approver')),
    password_hash    text,
    -- the first approver created by `bootstrap-approver`; at most one per org (see index below)
    is_bootstrap     boolean not null default false,
    created_at       timestamptz not null,
    updated_at       timestamptz not null,
    constraint users_email_key unique (email_normalized),
    constraint users_org_id_id_key unique (org_id, id)
);
-- The database, not a pre-read, decides which of two concurrent bootstrap runs wins.
create unique index users_one_bootstrap_per_org on users (org_id) where is_bootstrap;

create table sessions (
    id         uuid primary key,
    org_id     uuid not null references orgs (id),
    user_id    uuid not null references users (id),
    token_hash bytea not null,
    created_at timestamptz not null,
    expires_at timestamptz not null,
    constraint sessions_token_hash_key unique (token_hash)
);
create index sessions_user_idx on sessions (org_id, user_id);

create table invitations (
    id          uuid primary key,
    org_id      uuid not null references orgs (id),
    user_id     uuid not null references users (id),
    invited_by  uuid not null references users (id),
    token_hash  bytea not null,
    created_at  timestamptz not null,
    expires_at  timestamptz not null,
    accepted_at timestamptz,
    constraint invitations_token_hash_key unique (token_hash)
);

create table agents (
    id           uuid primary key,
    org_id       uuid not null references orgs (id),
    owner_id     uuid not null references users (id),
    name         text not null,
    capabilities text not null,
    created_at   timestamptz not null,
    updated_at   timestamptz not null
);
create index agents_owner_idx on agents (org_id, owner_id, id);

create table api_keys (
    -- the id embedded in the key string: lookup is one primary-key read
    id           uuid primary key,
    org_id       uuid not null references orgs (id),
    agent_id     uuid not null references agents (id) on delete cascade,
    key_hash     bytea not null,
    created_at   timestamptz not null,
    expires_at   timestamptz not null,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
create index api_keys_agent_idx on api_keys (agent_id);

create table audit_events (
    id          uuid primary key,
    org_id      uuid not null references orgs (id),
    actor_kind  text not null constraint audit_events_actor_kind_check check (actor_kind in ('human', 'agent', 'system')),
    actor_id    uuid,
    interface   text not null constraint audit_events_interface_check check (interface in ('api', 'mcp', 'ui', 'cli', 'job')),
    action      text not null,
    subject_type text not null,
    subject_id  uuid not null,
    detail      text not null,
    occurred_at timestamptz not null
);
create index audit_events_org_idx on audit_events (org_id, occurred_at, id);

create function audit_events_append_only() returns trigger language plpgsql as $$
begin
    raise exception 'audit_events is append-only' using errcode = 'restrict_violation';
end;
$$;
create trigger audit_events_no_update before update or delete on audit_events
    for each row execute function audit_events_append_only();
