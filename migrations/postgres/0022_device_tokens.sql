-- Device tokens and sign-in unlocks (docs/SECURITY.md, "Nobody can lock a human out").
--
-- A device token is what a browser keeps after a sign-in, so that its next sign-in is known
-- as coming from a device of that human: the failures counted for an email across addresses
-- do not stop it. Only the token's hash is stored; it is looked up by that hash whatever its
-- organisation, as a session is.
create table device_tokens (
    id         uuid not null,
    org_id     uuid not null references orgs (id),
    user_id    uuid not null,
    token_hash bytea not null,
    created_at timestamptz not null,
    expires_at timestamptz not null,
    constraint device_tokens_pkey primary key (org_id, id),
    constraint device_tokens_token_hash_key unique (org_id, token_hash),
    constraint device_tokens_user_id_fkey foreign key (org_id, user_id) references users (org_id, id)
);
create index device_tokens_token_hash_idx on device_tokens (token_hash);
create index device_tokens_user_idx on device_tokens (org_id, user_id, created_at);
create index device_tokens_expires_idx on device_tokens (expires_at);

-- `tauros user unlock --email`: when an operator last cleared an email's failed sign-ins. Keyed
-- by the normalized email's SHA-256, as the in-memory count is; a running server reads it when
-- that count refuses a sign-in, and forgets the failures counted before it.
create table sign_in_unlocks (
    email_digest bytea primary key,
    unlocked_at  timestamptz not null
);

-- Statistics from the first rows, as every table has (0020).
alter table device_tokens set (autovacuum_analyze_threshold = 0);
alter table sign_in_unlocks set (autovacuum_analyze_threshold = 0);
analyze device_tokens;
analyze sign_in_unlocks;
