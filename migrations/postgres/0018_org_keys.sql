-- Every key of an organisation-owned table includes org_id (docs/SCALING.md, "The schema
-- audit"; DESIGN.md, "Scaling past one machine"). A distributed PostgreSQL (Citus) that
-- distributes these tables by org_id, co-located, requires every unique constraint, primary
-- keys included, to include the distribution column, and every foreign key between two
-- distributed tables to include it on both sides. `orgs` itself has no org_id: it is the
-- reference table every `org_id` points to, and keeps its keys.
--
-- Constraint names do not change (the app recognises a refused write by the name PostgreSQL
-- reports, crates/store/src/error.rs). A reference now also holds only within one
-- organisation, which the app already guaranteed. Three lookups cross organisations by
-- design and keep a plain (non-unique) index: a session and an invitation by their token's
-- hash, an API key by the id embedded in it.

-- 1. The references between organisation-owned tables go first: they depend on the keys.
alter table sessions drop constraint sessions_user_id_fkey;
alter table invitations drop constraint invitations_invited_by_fkey;
alter table invitations drop constraint invitations_user_id_fkey;
alter table agents drop constraint agents_owner_id_fkey;
alter table api_keys drop constraint api_keys_agent_id_fkey;
alter table customers drop constraint customers_agent_id_fkey;
alter table payment_destinations drop constraint payment_destinations_agent_id_fkey;
alter table payment_destinations drop constraint payment_destinations_supersedes_id_fkey;
alter table invoices drop constraint invoices_agent_id_fkey;
alter table invoices drop constraint invoices_current_revision_fk;
alter table invoice_revisions drop constraint invoice_revisions_customer_id_fkey;
alter table invoice_revisions drop constraint invoice_revisions_invoice_id_fkey;
alter table invoice_revisions drop constraint invoice_revisions_payment_destination_id_fkey;
alter table decisions drop constraint decisions_approver_id_fkey;
alter table decisions drop constraint decisions_invoice_id_fkey;
alter table decisions drop constraint decisions_revision_id_fkey;
alter table invoice_events drop constraint invoice_events_invoice_id_fkey;
alter table org_changes drop constraint org_changes_decided_by_fkey;
alter table org_changes drop constraint org_changes_proposed_by_fkey;
alter table org_changes drop constraint org_changes_user_id_fkey;
alter table webhook_endpoints drop constraint webhook_endpoints_created_by_fkey;
alter table webhook_attempts drop constraint webhook_attempts_endpoint_id_fkey;
alter table payments drop constraint payments_agent_id_fkey;
alter table payments drop constraint payments_invoice_id_fkey;
alter table settlement_events drop constraint settlement_events_agent_id_fkey;
alter table settlement_events drop constraint settlement_events_payment_id_fkey;
alter table payment_resolutions drop constraint payment_resolutions_decided_by_fkey;
alter table payment_resolutions drop constraint payment_resolutions_invoice_id_fkey;
alter table payment_resolutions drop constraint payment_resolutions_payment_id_fkey;
alter table payment_resolutions drop constraint payment_resolutions_requested_by_fkey;
alter table webhook_deliveries drop constraint webhook_deliveries_endpoint_id_fkey;
alter table settlement_sources drop constraint settlement_sources_agent_id_fkey;

-- 2. Primary keys: (org_id, id). users' own (org_id, id) key is the primary key now.
alter table users drop constraint users_org_id_id_key;
alter table users drop constraint users_pkey, add constraint users_pkey primary key (org_id, id);
alter table sessions drop constraint sessions_pkey, add constraint sessions_pkey primary key (org_id, id);
alter table invitations drop constraint invitations_pkey, add constraint invitations_pkey primary key (org_id, id);
alter table agents drop constraint agents_pkey, add constraint agents_pkey primary key (org_id, id);
alter table api_keys drop constraint api_keys_pkey, add constraint api_keys_pkey primary key (org_id, id);
alter table audit_events drop constraint audit_events_pkey, add constraint audit_events_pkey primary key (org_id, id);
alter table customers drop constraint customers_pkey, add constraint customers_pkey primary key (org_id, id);
alter table payment_destinations drop constraint payment_destinations_pkey, add constraint payment_destinations_pkey primary key (org_id, id);
alter table invoices drop constraint invoices_pkey, add constraint invoices_pkey primary key (org_id, id);
alter table invoice_revisions drop constraint invoice_revisions_pkey, add constraint invoice_revisions_pkey primary key (org_id, id);
alter table decisions drop constraint decisions_pkey, add constraint decisions_pkey primary key (org_id, id);
alter table invoice_events drop constraint invoice_events_pkey, add constraint invoice_events_pkey primary key (org_id, id);
alter table org_changes drop constraint org_changes_pkey, add constraint org_changes_pkey primary key (org_id, id);
alter table jobs drop constraint jobs_pkey, add constraint jobs_pkey primary key (org_id, id);
alter table job_submissions drop constraint job_submissions_pkey, add constraint job_submissions_pkey primary key (org_id, job_id);
alter table test_job_executions drop constraint test_job_executions_pkey, add constraint test_job_executions_pkey primary key (org_id, id);
alter table webhook_endpoints drop constraint webhook_endpoints_pkey, add constraint webhook_endpoints_pkey primary key (org_id, id);
alter table webhook_attempts drop constraint webhook_attempts_pkey, add constraint webhook_attempts_pkey primary key (org_id, id);
alter table effect_claims drop constraint effect_claims_pkey, add constraint effect_claims_pkey primary key (org_id, id);
alter table payments drop constraint payments_pkey, add constraint payments_pkey primary key (org_id, id);
alter table settlement_events drop constraint settlement_events_pkey, add constraint settlement_events_pkey primary key (org_id, id);
alter table payment_resolutions drop constraint payment_resolutions_pkey, add constraint payment_resolutions_pkey primary key (org_id, id);
alter table webhook_deliveries drop constraint webhook_deliveries_pkey, add constraint webhook_deliveries_pkey primary key (org_id, id);

-- 3. Unique keys: the same names (the app reacts to some), with org_id.
alter table decisions drop constraint decisions_revision_key, add constraint decisions_revision_key unique (org_id, revision_id);
alter table invitations drop constraint invitations_token_hash_key, add constraint invitations_token_hash_key unique (org_id, token_hash);
alter table sessions drop constraint sessions_token_hash_key, add constraint sessions_token_hash_key unique (org_id, token_hash);
alter table invoice_events drop constraint invoice_events_seq_key, add constraint invoice_events_seq_key unique (org_id, invoice_id, seq);
alter table invoice_revisions drop constraint invoice_revisions_number_key, add constraint invoice_revisions_number_key unique (org_id, invoice_id, number);
alter table payment_destinations drop constraint payment_destinations_supersedes_key, add constraint payment_destinations_supersedes_key unique (org_id, supersedes_id);

-- 4. The references again, under their names, pairing org_id with org_id.
alter table sessions add constraint sessions_user_id_fkey
    foreign key (org_id, user_id) references users (org_id, id);
alter table invitations add constraint invitations_invited_by_fkey
    foreign key (org_id, invited_by) references users (org_id, id);
alter table invitations add constraint invitations_user_id_fkey
    foreign key (org_id, user_id) references users (org_id, id);
alter table agents add constraint agents_owner_id_fkey
    foreign key (org_id, owner_id) references users (org_id, id);
alter table api_keys add constraint api_keys_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id) on delete cascade;
alter table customers add constraint customers_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);
alter table payment_destinations add constraint payment_destinations_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);
alter table payment_destinations add constraint payment_destinations_supersedes_id_fkey
    foreign key (org_id, supersedes_id) references payment_destinations (org_id, id);
alter table invoices add constraint invoices_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);
alter table invoices add constraint invoices_current_revision_fk
    foreign key (org_id, current_revision_id) references invoice_revisions (org_id, id) deferrable initially deferred;
alter table invoice_revisions add constraint invoice_revisions_customer_id_fkey
    foreign key (org_id, customer_id) references customers (org_id, id);
alter table invoice_revisions add constraint invoice_revisions_invoice_id_fkey
    foreign key (org_id, invoice_id) references invoices (org_id, id);
alter table invoice_revisions add constraint invoice_revisions_payment_destination_id_fkey
    foreign key (org_id, payment_destination_id) references payment_destinations (org_id, id);
alter table decisions add constraint decisions_approver_id_fkey
    foreign key (org_id, approver_id) references users (org_id, id);
alter table decisions add constraint decisions_invoice_id_fkey
    foreign key (org_id, invoice_id) references invoices (org_id, id);
alter table decisions add constraint decisions_revision_id_fkey
    foreign key (org_id, revision_id) references invoice_revisions (org_id, id);
alter table invoice_events add constraint invoice_events_invoice_id_fkey
    foreign key (org_id, invoice_id) references invoices (org_id, id);
alter table org_changes add constraint org_changes_decided_by_fkey
    foreign key (org_id, decided_by) references users (org_id, id);
alter table org_changes add constraint org_changes_proposed_by_fkey
    foreign key (org_id, proposed_by) references users (org_id, id);
alter table org_changes add constraint org_changes_user_id_fkey
    foreign key (org_id, user_id) references users (org_id, id);
alter table webhook_endpoints add constraint webhook_endpoints_created_by_fkey
    foreign key (org_id, created_by) references users (org_id, id);
alter table webhook_attempts add constraint webhook_attempts_endpoint_id_fkey
    foreign key (org_id, endpoint_id) references webhook_endpoints (org_id, id) on delete cascade;
alter table payments add constraint payments_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);
alter table payments add constraint payments_invoice_id_fkey
    foreign key (org_id, invoice_id) references invoices (org_id, id);
alter table settlement_events add constraint settlement_events_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);
alter table settlement_events add constraint settlement_events_payment_id_fkey
    foreign key (org_id, payment_id) references payments (org_id, id);
alter table payment_resolutions add constraint payment_resolutions_decided_by_fkey
    foreign key (org_id, decided_by) references users (org_id, id);
alter table payment_resolutions add constraint payment_resolutions_invoice_id_fkey
    foreign key (org_id, invoice_id) references invoices (org_id, id);
alter table payment_resolutions add constraint payment_resolutions_payment_id_fkey
    foreign key (org_id, payment_id) references payments (org_id, id);
alter table payment_resolutions add constraint payment_resolutions_requested_by_fkey
    foreign key (org_id, requested_by) references users (org_id, id);
alter table webhook_deliveries add constraint webhook_deliveries_endpoint_id_fkey
    foreign key (org_id, endpoint_id) references webhook_endpoints (org_id, id) on delete cascade;
alter table settlement_sources add constraint settlement_sources_agent_id_fkey
    foreign key (org_id, agent_id) references agents (org_id, id);

-- 5. The lookups that cross organisations (docs/SCALING.md, "Queries across organisations").
-- Authentication: a session by its token's hash, whatever its organisation.
create index sessions_token_hash_idx on sessions (token_hash);
-- Accepting an invitation: by its token's hash, whatever its organisation.
create index invitations_token_hash_idx on invitations (token_hash);
-- Authentication: a key by the id embedded in it, whatever its organisation.
create index api_keys_id_idx on api_keys (id);
