-- Device tokens and sign-in unlocks (the PostgreSQL migration 0022 says what they are).
create table device_tokens (
    id         blob not null,
    org_id     blob not null references orgs (id),
    user_id    blob not null,
    token_hash blob not null,
    created_at text not null,
    expires_at text not null,
    constraint device_tokens_pkey primary key (org_id, id),
    constraint device_tokens_token_hash_key unique (org_id, token_hash),
    constraint device_tokens_user_id_fkey foreign key (org_id, user_id) references users (org_id, id)
);
create index device_tokens_token_hash_idx on device_tokens (token_hash);
create index device_tokens_user_idx on device_tokens (org_id, user_id, created_at);
create index device_tokens_expires_idx on device_tokens (expires_at);

create table sign_in_unlocks (
    email_digest blob primary key,
    unlocked_at  text not null
);
