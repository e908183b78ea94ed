-- Emails are unique per organisation, no longer across the service (issue 25, Tenancy: no
-- cross-tenant oracles): inviting an email another organisation holds must answer like any
-- invitation. Sign-in looks an email up across organisations (users_email_idx) and picks one
-- (docs/DECISIONS.md). The new key leads with org_id, as every unique key of an
-- organisation-owned table does (DESIGN.md, scaling past one machine).

alter table users drop constraint users_email_key;
alter table users add constraint users_org_email_key unique (org_id, email_normalized);
-- Sign-in: an email's accounts, oldest first.
create index users_email_idx on users (email_normalized, created_at, id);
