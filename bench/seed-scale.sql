-- Scale run: :n synthetic invoices (each with its revision and one event) for the demo's
-- billing agent, so that create and GET are measured against a large table. The rows are
-- shaped like real ones (their payloads read back) but carry placeholder hashes: they exist to
-- size the indexes.
begin;
set constraints all deferred;
insert into invoices (id, org_id, agent_id, idempotency_key, state, cancelled_by, number, current_revision_id, revision_count, first_payload_hash, event_count, last_event_hash, created_at, updated_at)
select ('00000000-0000-7000-b000-' || lpad(to_hex(g), 12, '0'))::uuid, :'org', :'agent', 'scale-' || g, 'draft', null, null, ('00000000-0000-7000-c000-' || lpad(to_hex(g), 12, '0'))::uuid, 1, repeat('a', 64), 1, repeat('b', 64), now(), now()
from generate_series(1, :n) g;
insert into invoice_revisions (id, org_id, invoice_id, number, customer_id, payment_destination_id, destination_network, destination_address, currency, due_date, total_minor, reasoning, canonical_payload, payload_hash, created_at)
select ('00000000-0000-7000-c000-' || lpad(to_hex(g), 12, '0'))::uuid, :'org', ('00000000-0000-7000-b000-' || lpad(to_hex(g), 12, '0'))::uuid, 1, :'customer', :'destination', 'iban', 'DE89370400440532013000', 'EUR', '2099-12-31', '100', 'Scale test row.', '{"currency":"EUR","customer_id":"' || :'customer' || '","destination":{"address":"DE89370400440532013000","id":"' || :'destination' || '","network":"iban"},"due_date":"2099-12-31","lines":[{"description":"Scale","quantity":"1","unit_amount_minor":"100"}],"schema":"tauros.invoice.v1","total_minor":"100"}', repeat('a', 64), now()
from generate_series(1, :n) g;
insert into invoice_events (id, org_id, invoice_id, seq, action, from_state, to_state, actor_kind, actor_id, interface, revision_id, payload_hash, idempotency_key, note, occurred_at, prev_hash, hash)
select ('00000000-0000-7000-d000-' || lpad(to_hex(g), 12, '0'))::uuid, :'org', ('00000000-0000-7000-b000-' || lpad(to_hex(g), 12, '0'))::uuid, 1, 'create_draft', null, 'draft', 'agent', :'agent', 'api', ('00000000-0000-7000-c000-' || lpad(to_hex(g), 12, '0'))::uuid, repeat('a', 64), 'scale-' || g, null, now(), repeat('0', 64), repeat('b', 64)
from generate_series(1, :n) g;
commit;
analyze;
