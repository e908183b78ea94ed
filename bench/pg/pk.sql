-- The one-statement bound for a GET: a primary-key select of the invoice row alone (no
-- credential, no revision). What a read costs the database at the very least. The primary
-- key is (org_id, id) since migration 0018 (docs/SCALING.md).
select id, org_id, agent_id, state, current_revision_id, revision_count from invoices where org_id = :org and id = :invoice;
