-- no-transaction
-- Emails are unique per organisation, no longer across the service (issue 25, Tenancy: no
-- cross-tenant oracles): inviting an email another organisation holds must answer like any
-- invitation. Sign-in looks an email up across organisations (users_email_idx) and picks one
-- (docs/DECISIONS.md).
--
-- SQLite cannot drop a table constraint, so `users` is rebuilt (sqlite.org/lang_altertable.html,
-- "other kinds of table schema changes"): foreign keys off (they cannot change inside a
-- transaction, hence `no-transaction` and the explicit BEGIN/COMMIT), copy, drop, rename.
-- Every table referencing users (id) still does: their references name the table, which
-- exists again under the same name with the same ids. Nothing else (trigger, view) refers to
-- users; its one index is created again.
PRAGMA foreign_keys = off;
BEGIN;

create table users_rebuilt (
    id               blob primary key,
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
    constraint users_org_id_id_key unique (org_id, id)
);

insert into users_rebuilt (
    id, org_id, email, email_normalized, role, password_hash, is_bootstrap, created_at,
    updated_at, deactivated_at
)
select
    id, org_id, email, email_normalized, role, password_hash, is_bootstrap, created_at,
    updated_at, deactivated_at
from users;

drop table users;
alter table users_rebuilt rename to users;

-- The database, not a pre-read, decides which of two concurrent bootstrap runs wins.
create unique index users_one_bootstrap_per_org on users (org_id) where is_bootstrap;
-- Sign-in: an email's accounts, oldest first.
create index users_email_idx on users (email_normalized, created_at, id);

COMMIT;
PRAGMA foreign_keys = on;
