-- Effects on other systems (effects.md §3): the claim protocol's claims, and per-organisation
-- gapless invoice numbers.

-- One claim per effect. `id` is the operation key sent to the peer, derived from
-- (org, kind, business key, version), so it survives a reaped claim or a restored backup.
create table effect_claims (
    id           uuid primary key,
    org_id       uuid not null references orgs (id),
    kind         text not null,
    business_key text not null,
    -- lowercase hex SHA-256 of the request's canonical bytes
    fingerprint  text not null,
    state        text not null constraint effect_claims_state_check check (state in ('processing', 'complete')),
    -- the peer's answer, stored with the completion (replays answer it)
    response     text,
    admitted_at  timestamptz not null,
    completed_at timestamptz,
    retain_until timestamptz not null,
    constraint effect_claims_key unique (org_id, kind, business_key),
    constraint effect_claims_completion_check check ((state = 'complete') = (response is not null and completed_at is not null)),
    constraint effect_claims_retention_check check (retain_until > admitted_at)
);
create index effect_claims_processing_idx on effect_claims (admitted_at) where state = 'processing';
create index effect_claims_retention_idx on effect_claims (retain_until) where state = 'complete';

-- The delete guard: a completed claim may go once past its retention (cleanup); a processing
-- claim is a live recovery point and may go only inside a sanctioned reap (the reaper sets
-- `tauros.reap` for its transaction), past its retention and older than the one-day floor.
create function tauros_effect_claim_delete_guard() returns trigger language plpgsql as $$
begin
    if old.state = 'complete' and old.retain_until < now() then
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
create trigger effect_claims_delete_guard before delete on effect_claims
    for each row execute function tauros_effect_claim_delete_guard();

-- Gapless per organisation and year: the row is locked by the issuing transaction, so a
-- rolled-back issue gives its number back.
create table invoice_numbers (
    org_id      uuid not null references orgs (id),
    year        integer not null,
    last_number bigint not null,
    primary key (org_id, year)
);
create unique index invoices_number_key on invoices (org_id, number) where number is not null;
