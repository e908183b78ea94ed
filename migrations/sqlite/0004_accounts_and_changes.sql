-- Account lifecycle and separation of duties (issue 11):
-- * a human can be deactivated (their sessions and open invitation end in the same transaction);
-- * while four_eyes is on, turning it off or inviting another approver is a proposal that a
--   different approver confirms (org_changes);
-- * a decision event records the org's four_eyes and shared_review in force (null on every
--   other event, and on events written before this migration).

alter table users add column deactivated_at text;

create table org_changes (
    id            blob primary key,
    org_id        blob not null references orgs (id),
    kind          text not null constraint org_changes_kind_check check (kind in ('settings', 'approver_invitation')),
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
    expires_at    text not null
);
create index org_changes_org_idx on org_changes (org_id, id);

alter table invoice_events add column four_eyes integer;
alter table invoice_events add column shared_review integer;

-- Pruning finds expired sessions and finished invitations without a scan.
create index sessions_expires_idx on sessions (expires_at);
create index invitations_expires_idx on invitations (expires_at);
