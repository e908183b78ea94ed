-- `invoices.current_revision_id` is a deferred foreign key to `invoice_revisions`: a create
-- inserts the invoice first (one deferred violation), then its revision 1. While a deferred
-- violation is outstanding, SQLite checks each new `invoice_revisions` row against every
-- `invoices` row that references it, and without an index on the child column that check
-- is a scan of the whole `invoices` table: a create cost grew with the number of invoices
-- (1.75 ms for the revision insert alone at ~30,000 invoices). PostgreSQL checks the
-- constraint at commit through the parent's key and needs no such index.
create index invoices_current_revision_idx on invoices (current_revision_id);
