//! A PostgreSQL formation's URL (docs/OPERATIONS.md, "A formation"): several hosts, writes only
//! where writes are accepted, a failover followed, 503 `unavailable` while no host accepts
//! writes, and TLS to the database.
//!
//! PostgreSQL only, by nature (README, "Tests that run on one backend"): SQLite has no hosts.
//! The two nodes are two throwaway clusters of the test servers; a node "is a standby" when its
//! database refuses writes (`default_transaction_read_only`, which is what
//! `show transaction_read_only` — libpq's `target_session_attrs=read-write` check — reads on
//! a hot standby too), and "is demoted" when, in addition, its sessions are ended, as a real
//! demotion restarts the server. `scripts/ha` runs the same against a real pg_auto_failover
//! formation, with replication and forced failovers under load.

use crate::helpers::postgres::{
    admin_url, create_database, create_named_database_on, second_admin_url,
    second_server_certificate,
};
use crate::helpers::{expect_problem, expect_status, spawn_app_on, until};
use reqwest::StatusCode;
use sqlx::Connection;
use std::time::Duration;
use tauros_app::AppError;
use tauros_store::PoolSettings;

/// `sql` on the server of `admin` (its `postgres` database).
async fn admin(admin: &str, sql: &str) {
    let mut conn = sqlx::PgConnection::connect(admin)
        .await
        .expect("connect to the test server");
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .expect("admin statement");
    let _ = conn.close().await;
}

/// A connection to database `db` of the server of `admin_url`.
async fn on_node(admin_url: &str, db: &str) -> sqlx::PgConnection {
    let base = admin_url.rsplit_once('/').map_or(admin_url, |(b, _)| b);
    sqlx::PgConnection::connect(&format!("{base}/{db}"))
        .await
        .expect("connect to the node")
}

/// Organisations named `name` in database `db` of the server of `admin_url`.
async fn orgs_named(admin_url: &str, db: &str, name: &str) -> i64 {
    let mut conn = on_node(admin_url, db).await;
    let (n,): (i64,) = sqlx::query_as("select count(*) from orgs where name = $1")
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .expect("count orgs");
    let _ = conn.close().await;
    n
}

/// `host:port` of a test server's admin URL.
fn host_of(url: &str) -> &str {
    let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

/// Makes database `db` of a node refuse writes (`on`) or accept them, for new sessions; with
/// `demote`, also ends its current sessions, as a demotion's restart does.
async fn set_read_only(node: &str, db: &str, on: bool, demote: bool) {
    let setting = if on {
        format!("alter database {db} set default_transaction_read_only = on")
    } else {
        format!("alter database {db} reset default_transaction_read_only")
    };
    admin(node, &setting).await;
    if demote {
        admin(
            node,
            &format!(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                 where datname = '{db}' and pid <> pg_backend_pid()"
            ),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_only_to_the_writable_host_and_follow_a_failover() {
    let (primary_url, db) = create_database().await;
    let standby_url = create_named_database_on(second_admin_url(), &db).await;
    // The same schema on both nodes (replication would have copied it), then node 2 a standby.
    for url in [&primary_url, &standby_url] {
        let store = tauros_store::connect(url, PoolSettings::new(2))
            .await
            .expect("open node");
        store.migrate().await.expect("migrate node");
    }
    set_read_only(second_admin_url(), &db, true, false).await;

    // The URL a formation hands out: a host that does not answer, the standby, the primary.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let url = format!(
        "postgres://postgres@127.0.0.1:{closed},{},{}/{db}?target_session_attrs=read-write",
        host_of(second_admin_url()),
        host_of(admin_url())
    );
    let settings = PoolSettings {
        acquire_timeout: Duration::from_secs(1),
        ..PoolSettings::new(4)
    };
    let app = spawn_app_on(url, &db, settings).await;
    let org = app.org().await;
    let before = org_name(&db, org.org_id).await;
    assert_eq!(
        (
            orgs_named(admin_url(), &db, &before).await,
            orgs_named(second_admin_url(), &db, &before).await
        ),
        (1, 0),
        "the organisation was written on the writable host only"
    );

    // A failover begins: the primary is demoted, the standby not yet promoted.
    set_read_only(admin_url(), &db, true, true).await;
    let ready = app
        .client
        .get(app.url("/readyz"))
        .send()
        .await
        .expect("readyz");
    expect_problem(ready, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    let res = app
        .post(
            "/v1/customers",
            &org.agent_key,
            serde_json::json!({"agent_id": org.agent_id, "name": "During", "email": "billing@example.com"}),
        )
        .await;
    expect_problem(res, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    let during = app
        .app
        .bootstrap_approver("Org during", "during@example.com", "a long password".into())
        .await;
    assert!(
        matches!(during, Err(AppError::Unavailable(_))),
        "a write with no writable host is unavailable (safe to retry), not an error: {during:?}"
    );

    // The standby is promoted: writes follow it, without a restart of Tauros.
    set_read_only(second_admin_url(), &db, false, false).await;
    let unavailable = std::cell::Cell::new(0);
    let _written = until(
        "a write on the promoted host",
        Duration::from_secs(30),
        || {
            let app = app.app.clone();
            async move {
                app.bootstrap_approver("Org after", "after@example.com", "a long password".into())
                    .await
                    .map(|_| ())
            }
        },
        |answer| match answer {
            Ok(()) => true,
            Err(AppError::Unavailable(_)) => {
                unavailable.set(unavailable.get() + 1);
                false
            }
            Err(other) => panic!("only `unavailable` may answer during a failover: {other:?}"),
        },
    )
    .await;
    assert_eq!(
        (
            orgs_named(admin_url(), &db, "Org after").await,
            orgs_named(second_admin_url(), &db, "Org after").await,
            orgs_named(admin_url(), &db, "Org during").await
                + orgs_named(second_admin_url(), &db, "Org during").await,
        ),
        (0, 1, 0),
        "after the failover writes land on the promoted host only; nothing was written during it"
    );
    let ready = app
        .client
        .get(app.url("/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::OK);
    crate::helpers::figures(
        "formation failover",
        crate::helpers::Backend::Postgres,
        &[(
            "writes refused as unavailable before the promotion was seen",
            unavailable.get().to_string(),
        )],
    );
}

/// A pooled connection that the server ended while it sat idle (a restart, a proxy's idle
/// cut) is pinged and replaced before it is handed out again: the next request after a pause
/// is answered, not refused as unavailable. Connections used within the last second are
/// handed out unpinged (`PING_AFTER_IDLE` in crates/store/src/postgres.rs, docs/DECISIONS.md);
/// sqlx's own ping on release closes one that a request found dead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_ended_while_idle_is_replaced_before_use() {
    let (url, db) = create_database().await;
    let app = spawn_app_on(url, &db, PoolSettings::new(2)).await;
    let org = app.org().await;
    for _ in 0..2 {
        expect_status(app.get("/v1/me", &org.agent_key).await, StatusCode::OK).await;
    }
    admin(
        admin_url(),
        &format!(
            "select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = '{db}' and pid <> pg_backend_pid()"
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for _ in 0..3 {
        expect_status(app.get("/v1/me", &org.agent_key).await, StatusCode::OK).await;
    }
}

/// A unit of work dropped with its transaction open (an error, or a request gone mid-way) is
/// rolled back before its connection is lent again: the store lends a connection back as it
/// is, without sqlx's ping on release, only when nothing is left open on it
/// (`crates/store/src/postgres/lender.rs`). With one connection, the unit that comes next gets
/// the same one, and the server sees it out of any transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_dropped_with_its_transaction_open_is_rolled_back_before_its_connection_is_lent_again()
 {
    let (url, db) = create_database().await;
    let app = spawn_app_on(url, &db, PoolSettings::new(1)).await;
    let store = app.app.store();
    // Sessions of the store in a transaction (its migrations' connection, closed by now,
    // may linger a moment as an idle session: it is not counted).
    let in_transaction = || async {
        let mut conn = on_node(admin_url(), &db).await;
        let (n,): (i64,) = sqlx::query_as(
            "select count(*) from pg_stat_activity \
             where datname = $1 and application_name = 'tauros' \
               and state = 'idle in transaction'",
        )
        .bind(&db)
        .fetch_one(&mut conn)
        .await
        .expect("the store's sessions");
        let _ = conn.close().await;
        n
    };
    for round in 0..3 {
        let tx = store
            .begin(tauros_store::Lane::Unattributed)
            .await
            .expect("a unit of work");
        assert_eq!(
            in_transaction().await,
            1,
            "round {round}: the unit's transaction is open on the pool's one connection"
        );
        drop(tx);
        let reader = store
            .reader(tauros_store::Lane::Unattributed)
            .await
            .expect("the connection, lent again");
        assert_eq!(
            in_transaction().await,
            0,
            "round {round}: the dropped unit's transaction was rolled back before the next unit"
        );
        drop(reader);
    }
}

/// The name of organisation `org_id`, read on the (first) primary.
async fn org_name(db: &str, org_id: uuid::Uuid) -> String {
    let mut conn = on_node(admin_url(), db).await;
    let (name,): (String,) = sqlx::query_as("select name from orgs where id = $1")
        .bind(org_id)
        .fetch_one(&mut conn)
        .await
        .expect("the organisation");
    let _ = conn.close().await;
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_used_when_asked_and_verify_full_checks_the_certificate() {
    let name = format!("tauros_tls_{}", uuid::Uuid::new_v4().simple());
    create_named_database_on(second_admin_url(), &name).await;
    let port = host_of(second_admin_url())
        .rsplit_once(':')
        .map(|(_, p)| p.to_owned())
        .expect("port");
    let connect = |host: &str, query: String| {
        let url = format!("postgres://postgres@{host}:{port}/{name}?{query}");
        async move { tauros_store::connect(&url, PoolSettings::new(2)).await }
    };

    let store = connect("127.0.0.1", "sslmode=require".into())
        .await
        .expect("sslmode=require connects to a server with a certificate");
    store.migrate().await.expect("migrate over TLS");
    let mut conn = sqlx::PgConnection::connect(second_admin_url())
        .await
        .expect("admin");
    let (encrypted,): (i64,) = sqlx::query_as(
        "select count(*) from pg_stat_ssl s join pg_stat_activity a using (pid) \
         where a.datname = $1 and a.application_name = 'tauros' and s.ssl",
    )
    .bind(&name)
    .fetch_one(&mut conn)
    .await
    .expect("pg_stat_ssl");
    assert!(encrypted > 0, "Tauros's sessions are encrypted");
    drop(store);

    let unknown_issuer = connect("localhost", "sslmode=verify-full".into()).await;
    assert!(
        unknown_issuer.is_err(),
        "verify-full refuses a certificate whose authority it was not told to trust"
    );
    let cert = second_server_certificate();
    let trusted = format!("sslmode=verify-full&sslrootcert={}", cert.display());
    connect("localhost", trusted.clone())
        .await
        .expect("verify-full accepts the trusted certificate for its host name");
    let wrong_name = connect("127.0.0.1", trusted).await;
    assert!(
        wrong_name.is_err(),
        "verify-full refuses a certificate for another host name (localhost, not 127.0.0.1)"
    );
    let _ = conn.close().await;
}
