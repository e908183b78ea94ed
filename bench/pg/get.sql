-- The statements Tauros executes for one GET /v1/invoices/{id} by its agent. Keep in step
-- with src/store/sql/*.rs.
select a.*, k.id as key_id, k.key_hash, k.created_at as key_created_at, k.expires_at as key_expires_at, k.revoked_at as key_revoked_at, k.last_used_at as key_last_used_at from api_keys k join agents a on a.org_id = k.org_id and a.id = k.agent_id where k.id = :key_id;
select r.*, i.agent_id, i.idempotency_key, i.state, i.cancelled_by, i.number as invoice_number, i.revision_count, i.first_payload_hash, i.created_at as invoice_created_at, i.updated_at as invoice_updated_at from invoices i join invoice_revisions r on r.id = i.current_revision_id where i.org_id = :org and i.id = :invoice;
select * from agents where org_id = :org and id = :agent;
select * from orgs where id = :org;
