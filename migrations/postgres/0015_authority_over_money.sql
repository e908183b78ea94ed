-- Authority over money (docs/contract/api.md, "Tenancy").
--
-- 1. A settlement `source` belongs to the agent that first reported under it, per organisation:
--    the first event under a source inserts its row in the event's own transaction, and the
--    primary key, not a read, decides between two agents racing on a new source. Another agent
--    reporting under it is refused (403 source_owned). Sources reported before this migration
--    belong to the agent of their earliest event.
create table settlement_sources (
    org_id     uuid not null references orgs (id),
    source     text not null,
    agent_id   uuid not null references agents (id),
    created_at timestamptz not null,
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
--    (approver_deactivation: the human it deactivates).
alter table org_changes drop constraint org_changes_kind_check;
alter table org_changes add constraint org_changes_kind_check
    check (kind in ('settings', 'approver_invitation', 'payment_resolution', 'settlement_agent',
                    'approver_deactivation'));
alter table org_changes add column user_id uuid references users (id);
alter table org_changes add column agent_name text;
alter table org_changes add column agent_id uuid;
