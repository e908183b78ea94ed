-- Authority over money (docs/contract/api.md, "Tenancy").
--
-- 1. A settlement `source` belongs to the agent that first reported under it, per organisation:
--    the first event under a source inserts its row in the event's own transaction, and the
--    primary key, not a read, decides between two agents racing on a new source. Another agent
--    reporting under it is refused (403 source_owned). Sources reported before this migration
--    belong to the agent of their earliest event.
create table settlement_sources (
    org_id     blob not null references orgs (id),
    source     text not null,
    agent_id   blob not null references agents (id),
    created_at text not null,
    primary key (org_id, source)
);
create index settlement_sources_agent_idx on settlement_sources (org_id, agent_id);
insert into settlement_sources (org_id, source, agent_id, created_at)
    select e.org_id, e.source, e.agent_id, e.received_at
    from settlement_events e
    where e.id = (select f.id from settlement_events f
                  where f.org_id = e.org_id and f.source = e.source
                  order by f.received_at, f.id limit 1);

-- 2. Two new proposals under four eyes: granting `settlement` (settlement_agent: the agent's
--    name; once confirmed, the agent it created) and deactivating an approver
--    (approver_deactivation: the human it deactivates). SQLite cannot change a check
--    constraint in place: org_changes is rebuilt (no table references it, so the copy, drop
--    and rename keep every row and every foreign key).
create table org_changes_new (
    id            blob primary key,
    org_id        blob not null references orgs (id),
    kind          text not null constraint org_changes_kind_check check (kind in ('settings', 'approver_invitation', 'payment_resolution', 'settlement_agent', 'approver_deactivation')),
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
    payment_id            blob,
    -- kind = approver_deactivation: the human it deactivates
    user_id       blob references users (id),
    -- kind = settlement_agent: the new agent's name; once confirmed, the agent
    agent_name    text,
    agent_id      blob
);
insert into org_changes_new (id, org_id, kind, proposed_by, state, four_eyes, shared_review,
    email, role, decided_by, decided_at, created_at, expires_at, payment_resolution_id,
    payment_id)
    select id, org_id, kind, proposed_by, state, four_eyes, shared_review, email, role,
        decided_by, decided_at, created_at, expires_at, payment_resolution_id, payment_id
    from org_changes;
drop table org_changes;
alter table org_changes_new rename to org_changes;
create index org_changes_org_idx on org_changes (org_id, id);
