-- Issuing without dead ends (effects.md §6): a claim the peer refused definitively is closed as
-- `rejected`; an approved invoice says where its issuing stands (`issuing_status`, indexed for
-- `?issuing=`), why, which job drives it, and under which operation version it is issued.

-- SQLite cannot alter a check constraint: the claims table is rebuilt with `rejected` allowed,
-- and its indexes and delete guard are created again. A rejected claim is closed like a
-- complete one (completed_at set, no response) and may be cleaned past its retention.
create table effect_claims_0010 (
    id           blob primary key,
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
    constraint effect_claims_retention_check check (retain_until > admitted_at)
);
insert into effect_claims_0010 select id, org_id, kind, business_key, fingerprint, state, response,
    admitted_at, completed_at, retain_until from effect_claims;
drop table effect_claims;
alter table effect_claims_0010 rename to effect_claims;
create index effect_claims_processing_idx on effect_claims (admitted_at) where state = 'processing';
create index effect_claims_retention_idx on effect_claims (retain_until) where state in ('complete', 'rejected');

create trigger effect_claims_delete_guard before delete on effect_claims
when not (
    (old.state in ('complete', 'rejected') and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now'))
    or (old.state = 'processing' and exists (select 1 from effect_claim_reaps)
        and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now')
        and old.admitted_at < strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 day'))
)
begin
    select raise(abort, 'effect claim may not be deleted');
end;

alter table invoices add column issuing_status text
    constraint invoices_issuing_status_check check (issuing_status in
        ('pending', 'blocked', 'rejected', 'conflict', 'needs_review'));
alter table invoices add column issuing_reason text;
alter table invoices add column issuing_job_id blob;
alter table invoices add column issue_version integer not null default 1
    constraint invoices_issue_version_check check (issue_version >= 1);
create index invoices_issuing_idx on invoices (org_id, issuing_status, id) where issuing_status is not null;
