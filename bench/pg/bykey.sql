-- The one-statement bound for a replay: the lock-free read of the invoice row by its
-- idempotency key alone (no credential, no revision).
select id, org_id, agent_id, state, current_revision_id, first_payload_hash from invoices where org_id = :org and agent_id = :agent and idempotency_key = :ikey;
