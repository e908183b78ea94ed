-- Issuing without dead ends (effects.md §6): a claim the peer refused definitively is closed as
-- `rejected`; an approved invoice says where its issuing stands (`issuing_status`, indexed for
-- `?issuing=`), why, which job drives it, and under which operation version it is issued.

-- A rejected claim is closed like a complete one (completed_at set, no response) and may be
-- cleaned past its retention.
alter table effect_claims drop constraint effect_claims_state_check;
alter table effect_claims add constraint effect_claims_state_check
    check (state in ('processing', 'complete', 'rejected'));
alter table effect_claims add constraint effect_claims_closed_check
    check ((state = 'processing') = (completed_at is null));
drop index effect_claims_retention_idx;
create index effect_claims_retention_idx on effect_claims (retain_until) where state in ('complete', 'rejected');

create or replace function tauros_effect_claim_delete_guard() returns trigger language plpgsql as $$
begin
    if old.state in ('complete', 'rejected') and old.retain_until < now() then
        return old;
    end if;
    if old.state = 'processing' and coalesce(current_setting('tauros.reap', true), '') = 'on'
       and old.retain_until < now() and old.admitted_at < now() - interval '1 day' then
        return old;
    end if;
    raise exception 'effect claim % may not be deleted (state %)', old.id, old.state
        using errcode = 'restrict_violation';
end;
$$;

alter table invoices add column issuing_status text
    constraint invoices_issuing_status_check check (issuing_status in
        ('pending', 'blocked', 'rejected', 'conflict', 'needs_review'));
alter table invoices add column issuing_reason text;
alter table invoices add column issuing_job_id uuid;
alter table invoices add column issue_version integer not null default 1
    constraint invoices_issue_version_check check (issue_version >= 1);
create index invoices_issuing_idx on invoices (org_id, issuing_status, id) where issuing_status is not null;
