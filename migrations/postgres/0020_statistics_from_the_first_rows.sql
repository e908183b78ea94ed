-- Every table is planned from statistics, from its first rows on (issue #28; docs/DECISIONS.md,
-- "Every table has statistics from its first rows").
--
-- PostgreSQL plans a statement from each table's statistics, which autovacuum gathers once a
-- table has changed by 50 rows plus 10 % of its size (autovacuum_analyze_threshold and
-- autovacuum_analyze_scale_factor). The tables a request joins besides the invoice — its org,
-- the agent and its key, a human and their session, the issue job — stay below 50 changes in a
-- small deployment, so autovacuum never analyses them, and a table never analysed is assumed
-- to hold ten pages of rows. On those guesses PostgreSQL planned a GET's statement with hash
-- joins (a hash table built over the agents and the jobs on every execution) instead of
-- look-ups by key: about a quarter more of PostgreSQL's CPU per GET (docs/PERFORMANCE.md,
-- "Part 10").
--
-- So for every table: a threshold of 0, so autovacuum analyses it once a tenth of its rows
-- changed (on a large table the tenth decides anyway, as before), and statistics now for every
-- table that has none (a new database's tables are empty: instant; an existing database's
-- large tables were analysed by autovacuum already and are left alone). A table created by a
-- later migration sets the threshold in that migration (tests/api/schema.rs checks every table).
do $$
declare
    t regclass;
    never_analysed boolean;
begin
    for t, never_analysed in
        select c.oid::regclass, c.reltuples < 0 from pg_class c
        where c.relkind = 'r' and c.relnamespace = current_schema()::regnamespace
          and c.relname <> '_sqlx_migrations'
        order by c.relname
    loop
        execute format('alter table %s set (autovacuum_analyze_threshold = 0)', t);
        if never_analysed then
            execute format('analyze %s', t);
        end if;
    end loop;
end
$$;
