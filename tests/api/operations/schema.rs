//! The schema audit of docs/SCALING.md, asserted on the catalog after every migration: each
//! organisation-owned table (one with an `org_id` column) could be distributed by `org_id`
//! (Citus), which requires every unique index, primary keys included, to include the
//! distribution column, and every foreign key between two such tables to include it on both
//! sides. `orgs` itself (no `org_id`) is the reference table they point to.

use crate::helpers::{
    Backend, Billing, TestApp, both_backends, email_of, empty_database, expect_status, id_of,
    spawn_app_migrated_to,
};
use crate::resources::jobs::{echo, in_process_workers, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Row;
use std::time::Duration;
use tauros_domain::job::JobState;
use uuid::Uuid;

both_backends!(
    backend: every_unique_index_and_reference_of_an_org_owned_table_includes_org_id,
    data_written_before_0018_keeps_working_after_it,
    the_read_model_copies_its_definition_column_for_column,
);

/// The read model's triggers copy `select * from invoice_reads_source` into `invoice_reads`
/// by position, and the app reads `v.*` by position: a migration that places a column at one
/// place in the view and another in the table would copy values into the wrong columns, so the
/// two must list the same names in the same order.
async fn the_read_model_copies_its_definition_column_for_column(backend: Backend) {
    let app = crate::helpers::spawn_app(backend).await;
    let columns = |relation: &str| match backend {
        Backend::Sqlite => format!("select name from pragma_table_info('{relation}') order by cid"),
        Backend::Postgres => format!(
            "select column_name::text from information_schema.columns \
             where table_schema = current_schema() and table_name = '{relation}' \
             order by ordinal_position"
        ),
    };
    let table: Vec<(String,)> = app.sql_rows(&columns("invoice_reads")).await;
    let view: Vec<(String,)> = app.sql_rows(&columns("invoice_reads_source")).await;
    assert!(
        table.len() > 30,
        "the read model has its columns: {table:?}"
    );
    assert_eq!(table, view);
}

/// A unique index: its table, name and columns (an expression column is named `<expr>`).
struct Unique {
    table: String,
    name: String,
    columns: Vec<String>,
}

/// A foreign key: its table, name, its columns and the table and columns it references.
struct Reference {
    table: String,
    name: String,
    columns: Vec<String>,
    parent: String,
    parent_columns: Vec<String>,
}

async fn catalog_postgres(url: &str) -> (Vec<String>, Vec<Unique>, Vec<Reference>) {
    let mut c = <sqlx::PgConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    let owned: Vec<String> = sqlx::query_scalar(
        "select c.relname::text from pg_class c
         join pg_attribute a on a.attrelid = c.oid and a.attname = 'org_id' and not a.attisdropped
         where c.relkind = 'r' and c.relnamespace = 'public'::regnamespace
         order by 1",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let uniques = sqlx::query(
        "select t.relname::text as tbl, i.relname::text as idx,
                array(select coalesce(a.attname::text, '<expr>')
                      from unnest(x.indkey::int2[]) with ordinality k (attnum, n)
                      left join pg_attribute a on a.attrelid = t.oid and a.attnum = k.attnum
                      order by k.n) as cols
         from pg_index x
         join pg_class t on t.oid = x.indrelid
         join pg_class i on i.oid = x.indexrelid
         where x.indisunique and t.relnamespace = 'public'::regnamespace
         order by 1, 2",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
    .into_iter()
    .map(|r| Unique {
        table: r.get("tbl"),
        name: r.get("idx"),
        columns: r.get("cols"),
    })
    .collect();
    let references = sqlx::query(
        "select t.relname::text as tbl, f.conname::text as con, p.relname::text as parent,
                array(select a.attname::text from unnest(f.conkey) with ordinality k (attnum, n)
                      join pg_attribute a on a.attrelid = f.conrelid and a.attnum = k.attnum
                      order by k.n) as cols,
                array(select a.attname::text from unnest(f.confkey) with ordinality k (attnum, n)
                      join pg_attribute a on a.attrelid = f.confrelid and a.attnum = k.attnum
                      order by k.n) as parent_cols
         from pg_constraint f
         join pg_class t on t.oid = f.conrelid
         join pg_class p on p.oid = f.confrelid
         where f.contype = 'f' and f.connamespace = 'public'::regnamespace
         order by 1, 2",
    )
    .fetch_all(&mut c)
    .await
    .unwrap()
    .into_iter()
    .map(|r| Reference {
        table: r.get("tbl"),
        name: r.get("con"),
        columns: r.get("cols"),
        parent: r.get("parent"),
        parent_columns: r.get("parent_cols"),
    })
    .collect();
    (owned, uniques, references)
}

async fn catalog_sqlite(url: &str) -> (Vec<String>, Vec<Unique>, Vec<Reference>) {
    let mut c = <sqlx::SqliteConnection as sqlx::Connection>::connect(url)
        .await
        .unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "select name from sqlite_master where type = 'table'
         and name not like 'sqlite_%' and name not like '_sqlx_%' order by name",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let (mut owned, mut uniques, mut references) = (vec![], vec![], vec![]);
    for table in &tables {
        let columns: Vec<String> = sqlx::query("select name from pragma_table_info(?)")
            .bind(table)
            .fetch_all(&mut c)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get("name"))
            .collect();
        if columns.iter().any(|c| c == "org_id") {
            owned.push(table.clone());
        }
        // index_list names every unique index: declared ones, the autoindexes of unique
        // and primary key constraints (origin `u`, `pk`); a rowid primary key has none.
        let indexes = sqlx::query("select name, \"unique\" as uniq from pragma_index_list(?)")
            .bind(table)
            .fetch_all(&mut c)
            .await
            .unwrap();
        for index in indexes {
            if index.get::<i64, _>("uniq") == 0 {
                continue;
            }
            let name: String = index.get("name");
            let columns = sqlx::query("select name from pragma_index_info(?) order by seqno")
                .bind(&name)
                .fetch_all(&mut c)
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    r.get::<Option<String>, _>("name")
                        .unwrap_or_else(|| "<expr>".into())
                })
                .collect();
            uniques.push(Unique {
                table: table.clone(),
                name,
                columns,
            });
        }
        let keys = sqlx::query(
            "select id, seq, \"table\" as parent, \"from\" as col, \"to\" as parent_col
             from pragma_foreign_key_list(?) order by id, seq",
        )
        .bind(table)
        .fetch_all(&mut c)
        .await
        .unwrap();
        let mut by_id: Vec<(i64, Reference)> = vec![];
        for key in keys {
            let id: i64 = key.get("id");
            if by_id.last().map(|(last, _)| *last) != Some(id) {
                by_id.push((
                    id,
                    Reference {
                        table: table.clone(),
                        name: format!("foreign key #{id}"),
                        columns: vec![],
                        parent: key.get("parent"),
                        parent_columns: vec![],
                    },
                ));
            }
            let reference = &mut by_id.last_mut().unwrap().1;
            reference.columns.push(key.get("col"));
            reference.parent_columns.push(
                key.get::<Option<String>, _>("parent_col")
                    .unwrap_or_default(),
            );
        }
        references.extend(by_id.into_iter().map(|(_, r)| r));
    }
    (owned, uniques, references)
}

/// Every unique index (primary keys included) of an organisation-owned table includes
/// `org_id`, and every foreign key from one organisation-owned table to another pairs
/// `org_id` with `org_id`: the audit table of docs/SCALING.md, "Distributed by org_id".
async fn every_unique_index_and_reference_of_an_org_owned_table_includes_org_id(backend: Backend) {
    let (url, _cleanup) = empty_database(backend).await;
    let store = tauros_store::connect(&url, tauros_store::PoolSettings::new(2))
        .await
        .expect("open store");
    store.migrate().await.expect("migrations");
    let (owned, uniques, references) = match backend {
        Backend::Postgres => catalog_postgres(&url).await,
        Backend::Sqlite => catalog_sqlite(&url).await,
    };
    // The audit covers the tables it should: all but the distribution root are owned.
    assert!(owned.len() >= 26, "organisation-owned tables: {owned:?}");
    assert!(!owned.iter().any(|t| t == "orgs"));
    let mut offences = vec![];
    let mut checked = 0;
    for unique in uniques.iter().filter(|u| owned.contains(&u.table)) {
        checked += 1;
        if !unique.columns.iter().any(|c| c == "org_id") {
            offences.push(format!(
                "table {}: unique index {} on ({}) does not include org_id",
                unique.table,
                unique.name,
                unique.columns.join(", ")
            ));
        }
    }
    for reference in references
        .iter()
        .filter(|r| owned.contains(&r.table) && owned.contains(&r.parent))
    {
        checked += 1;
        let paired = reference
            .columns
            .iter()
            .zip(&reference.parent_columns)
            .any(|(c, p)| c == "org_id" && p == "org_id");
        if !paired {
            offences.push(format!(
                "table {}: foreign key {} ({}) references {} ({}) without org_id on both sides",
                reference.table,
                reference.name,
                reference.columns.join(", "),
                reference.parent,
                reference.parent_columns.join(", ")
            ));
        }
    }
    assert!(checked > 40, "only {checked} constraints were read");
    // The constraints the app recognises a refused write by are still there, under the name
    // PostgreSQL reports or with the columns SQLite names (crates/store/src/error.rs).
    for constraint in tauros_store::Constraint::ALL {
        let found = match backend {
            Backend::Postgres => uniques.iter().any(|u| u.name == constraint.name()),
            Backend::Sqlite => uniques.iter().any(|u| {
                let named: Vec<String> = u
                    .columns
                    .iter()
                    .map(|c| format!("{}.{c}", u.table))
                    .collect();
                named.join(", ") == constraint.sqlite_columns()
            }),
        };
        assert!(found, "no unique index is the constraint {constraint:?}");
    }
    assert!(
        offences.is_empty(),
        "{} constraints of organisation-owned tables do not include org_id:\n{}",
        offences.len(),
        offences.join("\n")
    );
}

/// What one organisation wrote at 0017: its billing, a draft, a pending and an approved
/// invoice, and a job that has not run yet.
struct Before {
    b: Billing,
    invoices: Vec<String>,
    pending: Value,
    job: Uuid,
}

async fn write_at_0017(app: &TestApp, n: usize) -> Before {
    let b = app.billing().await;
    let draft = app.draft(&b, &format!("draft-{n}")).await;
    let pending = app.pending(&b, &format!("pending-{n}")).await;
    let approved = app.pending(&b, &format!("approved-{n}")).await;
    expect_status(
        app.approve(&b.org.approver_token, &approved).await,
        StatusCode::OK,
    )
    .await;
    let job = app
        .app
        .submit_job(echo(b.org.org_id, json!({"note": format!("org {n}")})))
        .await
        .unwrap()
        .id;
    let invoices = [&draft, &pending, &approved]
        .iter()
        .map(|i| id_of(i).to_owned())
        .collect();
    Before {
        b,
        invoices,
        pending,
        job,
    }
}

/// The ids of an organisation's invoices as its approver lists them, oldest first.
async fn listed(app: &TestApp, token: &str) -> Vec<String> {
    let page = expect_status(app.get("/v1/invoices", token).await, StatusCode::OK).await;
    let mut ids: Vec<String> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| id_of(i).to_owned())
        .collect();
    ids.sort();
    ids
}

/// The code under test reads invoices from their read model (migration 0019), which a
/// database at 0017 does not have. For the writes at 0017 a stand-in is installed: 0019's own
/// statements without its reference to the invoices' `(org_id, id)` key, which only 0018 makes
/// unique on SQLite, and without `lines`, which the code no longer reads or writes (0021 drops
/// the column; until then the revisions' defaults to an empty text); and 0022's tables, which
/// every sign-in writes.
async fn install_read_model_stand_in(app: &TestApp) {
    app.sql_script(match app.backend {
        Backend::Sqlite => {
            "alter table invoice_revisions drop column lines;
             alter table invoice_revisions add column lines text not null default '';"
        }
        Backend::Postgres => "alter table invoice_revisions alter column lines set default '';",
    })
    .await;
    let path = app.backend.migrations_dir().join("0019_invoice_reads.sql");
    let script = std::fs::read_to_string(&path).expect("migration 0019");
    let script = script
        .replace(
            "constraint invoice_reads_invoice_id_fkey foreign key (org_id, invoice_id)",
            "",
        )
        .replace("references invoices (org_id, id),", "");
    app.sql_script(&script).await;
    // The read model as 0021 leaves it (the code reads its columns, `v.*`), the revisions' own
    // `lines` kept for the real 0019 to read.
    let path = app
        .backend
        .migrations_dir()
        .join("0021_sealed_content_once.sql");
    let script = std::fs::read_to_string(&path).expect("migration 0021");
    app.sql_script(&script.replace("alter table invoice_revisions drop column lines;", ""))
        .await;
    // Sign-ins write device tokens (0022), without the reference to the users' `(org_id, id)`
    // key, which only 0018 makes.
    let path = app.backend.migrations_dir().join("0022_device_tokens.sql");
    let script = std::fs::read_to_string(&path).expect("migration 0022");
    app.sql_script(&script.replace(
        ",\n    constraint device_tokens_user_id_fkey foreign key (org_id, user_id) references users (org_id, id)",
        "",
    ))
    .await;
}

/// Removes the stand-in before the real migrations run, so that 0019 fills the read model from
/// the data written before it (and 0022 creates its tables; the device tokens of the sign-ins
/// at 0017 go with the stand-in, as a release before 0022 never wrote them).
async fn remove_read_model_stand_in(app: &TestApp) {
    let removal = match app.backend {
        Backend::Sqlite => {
            "drop trigger invoice_reads_on_invoice_insert;
             drop trigger invoice_reads_on_invoice_update;
             drop trigger invoice_reads_on_revision;
             drop trigger invoice_reads_on_decision;
             drop table invoice_reads;
             drop view invoice_reads_source;
             drop table device_tokens;
             drop table sign_in_unlocks;"
        }
        Backend::Postgres => {
            "drop function tauros_invoice_read_on_invoice() cascade;
             drop function tauros_invoice_read_on_part() cascade;
             drop table invoice_reads;
             drop view invoice_reads_source;
             drop table device_tokens;
             drop table sign_in_unlocks;"
        }
    };
    app.sql_script(removal).await;
}

/// Migration 0018 (every key of an organisation-owned table includes org_id: each table is
/// rebuilt on SQLite, its keys replaced on PostgreSQL) on a database with data from 0017:
/// three organisations with invoices in three states, sessions, API keys and a job waiting.
/// After it every row is kept and every reference holds; the old sessions and keys still
/// authenticate, each organisation lists exactly its invoices and not another's, each
/// invoice's hash chain still verifies, a pending invoice is approved, a replayed create
/// answers the same invoice, and the waiting jobs run.
async fn data_written_before_0018_keeps_working_after_it(backend: Backend) {
    let app = spawn_app_migrated_to(backend, 17).await;
    install_read_model_stand_in(&app).await;
    let mut orgs = vec![];
    for n in 0..3 {
        orgs.push(write_at_0017(&app, n).await);
    }
    let tables = [
        "orgs",
        "users",
        "sessions",
        "agents",
        "api_keys",
        "customers",
        "payment_destinations",
        "invoices",
        "invoice_revisions",
        "decisions",
        "invoice_events",
        "jobs",
        "job_submissions",
        "audit_events",
        "effect_claims",
    ];
    let mut counts = vec![];
    for table in tables {
        counts.push(
            app.sql_count(&format!("select count(*) from {table}"))
                .await,
        );
    }
    remove_read_model_stand_in(&app).await;
    // The upgrade: the release stops, migrates, and starts again on the same database.
    app.app
        .store()
        .migrate()
        .await
        .expect("0018 on data from 0017");
    let app = app.restarted().await;
    // 0019 filled the read model from the data; it equals its definition.
    assert_eq!(app.read_model_differences().await, 0);
    for (table, before) in tables.iter().zip(&counts) {
        let after = app
            .sql_count(&format!("select count(*) from {table}"))
            .await;
        assert_eq!(after, *before, "rows of {table}");
    }
    if backend == Backend::Sqlite {
        let mut c = <sqlx::SqliteConnection as sqlx::Connection>::connect(&app.database_url)
            .await
            .unwrap();
        let broken: Vec<sqlx::sqlite::SqliteRow> = sqlx::query("pragma foreign_key_check")
            .fetch_all(&mut c)
            .await
            .unwrap();
        assert!(broken.is_empty(), "{} broken references", broken.len());
    }
    // A reference now holds within one organisation only: a customer of org 0's agent in
    // org 1 is refused by the database itself.
    let (zero, one) = (&orgs[0].b.org, &orgs[1].b.org);
    let crossed = format!(
        "insert into customers (id, org_id, agent_id, name, email, created_at, updated_at)
         values ({}, {}, {}, 'x', 'x@example.com', '2026-01-01', '2026-01-01')",
        crate::helpers::sql_uuid(&app.database_url, &Uuid::new_v4().to_string()),
        crate::helpers::sql_uuid(&app.database_url, &one.org_id.to_string()),
        crate::helpers::sql_uuid(&app.database_url, &zero.agent_id.to_string()),
    );
    assert!(
        !app.sql_exec(&crossed).await,
        "a customer of another organisation's agent was accepted"
    );
    for (n, before) in orgs.iter().enumerate() {
        let b = &before.b;
        let mut expected = before.invoices.clone();
        expected.sort();
        // The old session and the old API key still authenticate.
        assert_eq!(
            listed(&app, &b.org.approver_token).await,
            expected,
            "org {n}"
        );
        assert_eq!(listed(&app, &b.org.agent_key).await, expected, "org {n}");
        for id in &before.invoices {
            assert_eq!(app.verify(&b.org.approver_token, id).await["ok"], true);
        }
        // Another organisation's invoice is unknown here, as before.
        let other = &orgs[(n + 1) % orgs.len()].invoices[0];
        let res = app
            .get(&format!("/v1/invoices/{other}"), &b.org.approver_token)
            .await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        // A decision on a revision written before 0018.
        let res = app.approve(&b.org.approver_token, &before.pending).await;
        let approved = expect_status(res, StatusCode::OK).await;
        assert_eq!(approved["invoice"]["state"], "approved");
        // A replayed create answers the invoice created before (the same idempotency key).
        let res = app
            .create_invoice(
                &b.org.agent_key,
                &format!("draft-{n}"),
                &crate::helpers::invoice_body(b),
            )
            .await;
        let replay = expect_status(res, StatusCode::OK).await;
        assert_eq!(id_of(&replay["invoice"]), before.invoices[0]);
        // A new invoice, its revision and events, with the new keys.
        let fresh = app.pending(b, &format!("after-{n}")).await;
        assert_eq!(fresh["state"], "pending_approval");
        // Signing in again makes a new session.
        let token = app
            .sign_in(
                &email_of(&app, &b.org.approver_token).await,
                crate::helpers::PASSWORD,
            )
            .await;
        assert_eq!(listed(&app, &token).await.len(), 4);
    }
    // The jobs enqueued before 0018 are claimed and run after it.
    let workers = in_process_workers(&app, 2);
    for before in &orgs {
        let job = wait_for(
            &app,
            before.b.org.org_id,
            before.job,
            Duration::from_secs(30),
            |j| j.finished_at.is_some(),
        )
        .await;
        assert_eq!(job.state, JobState::Completed, "{job:?}");
    }
    assert!(workers.shutdown(Duration::from_secs(10)).await);
}

/// Every table is planned from statistics from its first rows (migration 0020): autovacuum
/// analyses it once a tenth of its rows changed, however few (threshold 0, where PostgreSQL's
/// default waits for 50 changes), and a table has statistics from the migration on. Without
/// them PostgreSQL guesses ten pages of rows for a table it never analysed, and planned a GET's
/// statement with hash joins over the agents and the jobs (docs/PERFORMANCE.md, "Part 10").
/// A table added later without the setting fails this test.
///
/// PostgreSQL only (README, "Tests that run on one backend"): SQLite has no autovacuum and
/// plans without statistics by its indexes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_has_statistics_from_its_first_rows() {
    let app = crate::helpers::spawn_app(Backend::Postgres).await;
    let mut c = <sqlx::PgConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .unwrap();
    let tables: Vec<(String, f32, Vec<String>)> = sqlx::query_as(
        "select c.relname::text, c.reltuples, coalesce(c.reloptions::text[], '{}')
         from pg_class c
         where c.relkind = 'r' and c.relnamespace = 'public'::regnamespace
           and c.relname <> '_sqlx_migrations'
         order by 1",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    for name in [
        "orgs",
        "agents",
        "api_keys",
        "sessions",
        "users",
        "jobs",
        "invoice_reads",
    ] {
        assert!(
            tables.iter().any(|(t, ..)| t == name),
            "{name} is not among the tables: {tables:?}"
        );
    }
    for (table, reltuples, options) in &tables {
        assert!(
            options
                .iter()
                .any(|o| o == "autovacuum_analyze_threshold=0"),
            "{table}: autovacuum analyses it only after 50 changes (reloptions {options:?})"
        );
        assert!(
            *reltuples >= 0.0,
            "{table}: never analysed, so planned on a guess of ten pages"
        );
    }
}
