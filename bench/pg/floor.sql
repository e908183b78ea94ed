-- The statement the stack's floor (crates/bench/src/bin/floor.rs) sends for one GET: a primary-key select of
-- one row of floor.invoices (bench/floor.sql). Keep in step with crates/bench/src/bin/floor.rs.
select id, org_id, agent_id, idempotency_key, state, number, revision_count, amount_paid_minor, created_at, updated_at, revision_id, revision_number, customer_id, payment_destination_id, destination_network, destination_address, currency, due_date, total_minor, reasoning, canonical_payload, payload_hash, revision_created_at from floor.invoices where id = :invoice;
