-- The one-statement bound for a GET: a primary-key select of the invoice row alone (no
-- credential, no revision). What a read costs the database at the very least.
select id, org_id, agent_id, state, current_revision_id, revision_count from invoices where id = :invoice;
