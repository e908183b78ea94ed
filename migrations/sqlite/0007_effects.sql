-- Effects on other systems (effects.md §3): the claim protocol's claims, and per-organisation
-- gapless invoice numbers.

-- One claim per effect. `id` is the operation key sent to the peer, derived from
-- (org, kind, business key, version), so it survives a reaped claim or a restored backup.
create table effect_claims (
    id           blob primary key,
    org_id       blob not null references orgs (id),
    kind         text not null,
    business_key text not null,
    -- lowercase hex SHA-256 of the request's canonical bytes
    fingerprint  text not null,
    state        text not null constraint effect_claims_state_check check (state in ('processing', 'complete')),
    -- the peer's answer, stored with the completion (replays answer it)
    response     text,
    admitted_at  text not null,
    completed_at text,
    retain_until text not null,
    constraint effect_claims_key unique (org_id, kind, business_key),
    constraint effect_claims_completion_check check ((state = 'complete') = (response is not null and completed_at is not null)),
    constraint effect_claims_retention_check check (retain_until > admitted_at)
);
create index effect_claims_processing_idx on effect_claims (admitted_at) where state = 'processing';
create index effect_claims_retention_idx on effect_claims (retain_until) where state = 'complete';

-- A row here exists only inside a reaper's transaction (inserted and deleted before it
-- commits; SQLite's single writer keeps every other transaction out meanwhile).
create table effect_claim_reaps (id integer primary key);

-- The delete guard: a completed claim may go once past its retention (cleanup); a processing
-- claim is a live recovery point and may go only inside a sanctioned reap, past its retention
-- and older than the one-day floor. Timestamps are RFC 3339 text, compared as text.
create trigger effect_claims_delete_guard before delete on effect_claims
when not (
    (old.state = 'complete' and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now'))
    or (old.state = 'processing' and exists (select 1 from effect_claim_reaps)
        and old.retain_until < strftime('%Y-%m-%dT%H:%M:%f', 'now')
        and old.admitted_at < strftime('%Y-%m-%dT%H:%M:%f', 'now', '-1 day'))
)
begin
    select raise(abort, 'effect claim may not be deleted');
end;

-- Gapless per organisation and year: the issuing transaction increments it, so a rolled-back
-- issue gives its number back.
create table invoice_numbers (
    org_id      blob not null references orgs (id),
    year        integer not null,
    last_number integer not null,
    primary key (org_id, year)
);
create unique index invoices_number_key on invoices (org_id, number) where number is not null;
