-- Identities: organisations, humans, sessions, invitations, agents, API keys, org audit trail.
-- Every business table carries org_id (the future shard key); nothing is ever joined across orgs.

create table orgs (
    id            blob primary key,
    name          text not null,
    four_eyes     integer not null default 0,
    shared_review integer not null default 0,
    created_at    text not null,
    updated_at    text not null,
    constraint orgs_name_key unique (name)
);

create table users (
    id               blob primary key,
    org_id           blob not null references orgs (id),
    email            text not null,
    -- lowercased email: sign-in names no org, so email is unique across the service
    email_normalized text not null,
    role             text not null constraint users_role_check check (role in ('operator', 'approver')),
    password_hash    text,
    -- the first approver created by `bootstrap-approver`; at most one per org (see index below)
    is_bootstrap     integer not null default 0,
    created_at       text not null,
    updated_at       text not null,
    constraint users_email_key unique (email_normalized),
    constraint users_org_id_id_key unique (org_id, id)
);
-- The database, not a pre-read, decides which of two concurrent bootstrap runs wins.
create unique index users_one_bootstrap_per_org on users (org_id) where is_bootstrap;

create table sessions (
    id         blob primary key,
    org_id     blob not null references orgs (id),
    user_id    blob not null references users (id),
    token_hash blob not null,
    created_at text not null,
    expires_at text not null,
    constraint sessions_token_hash_key unique (token_hash)
);
create index sessions_user_idx on sessions (org_id, user_id);

create table invitations (
    id          blob primary key,
    org_id      blob not null references orgs (id),
    user_id     blob not null references users (id),
    invited_by  blob not null references users (id),
    token_hash  blob not null,
    created_at  text not null,
    expires_at  text not null,
    accepted_at text,
    constraint invitations_token_hash_key unique (token_hash)
);

create table agents (
    id           blob primary key,
    org_id       blob not null references orgs (id),
    owner_id     blob not null references users (id),
    name         text not null,
    capabilities text not null,
    created_at   text not null,
    updated_at   text not null
);
create index agents_owner_idx on agents (org_id, owner_id, id);

create table api_keys (
    -- the id embedded in the key string: lookup is one primary-key read
    id           blob primary key,
    org_id       blob not null references orgs (id),
    agent_id     blob not null references agents (id) on delete cascade,
    key_hash     blob not null,
    created_at   text not null,
    expires_at   text not null,
    revoked_at   text,
    last_used_at text
);
create index api_keys_agent_idx on api_keys (agent_id);

create table audit_events (
    id          blob primary key,
    org_id      blob not null references orgs (id),
    actor_kind  text not null constraint audit_events_actor_kind_check check (actor_kind in ('human', 'agent', 'system')),
    actor_id    blob,
    interface   text not null constraint audit_events_interface_check check (interface in ('api', 'mcp', 'ui', 'cli', 'job')),
    action      text not null,
    subject_type text not null,
    subject_id  blob not null,
    detail      text not null,
    occurred_at text not null
);
create index audit_events_org_idx on audit_events (org_id, occurred_at, id);

create trigger audit_events_no_update before update on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;
create trigger audit_events_no_delete before delete on audit_events
begin
    select raise(abort, 'audit_events is append-only');
end;
