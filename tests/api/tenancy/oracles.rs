//! No answer depends on another organisation's data (docs/contract/api.md Tenancy, "No
//! cross-tenant oracles"): emails are unique per organisation, so inviting an email registered
//! elsewhere answers like any invitation, and a human with accounts in several organisations
//! picks one with `organisation` when signing in. And `/metrics` is never served on a
//! non-loopback main listener unless the operator says so ("Errors that leak nothing
//! internal").

use crate::helpers::{
    Backend, PASSWORD, TestApp, both_backends, child_lines, email_of, empty_database,
    expect_problem, expect_status, listening_address, migrate_up_to,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};

both_backends!(backend: accounts_written_before_0014_keep_working_after_it);

both_backends!(
    inviting_an_email_registered_in_another_org_answers_like_any_invitation,
    an_email_in_several_organisations_signs_in_where_organisation_says,
    metrics_are_not_served_on_a_non_loopback_listener_unless_asked,
);

async fn org_name(app: &TestApp, token: &str) -> String {
    let org = expect_status(app.get("/v1/organisation", token).await, StatusCode::OK).await;
    org["name"].as_str().expect("name").to_owned()
}

/// Org B invites the email of org A's approver: 201 with a token that works, exactly as for an
/// email nobody holds (and, with four eyes on, the same 202 proposal). Within B, inviting it a
/// second time is refused as before.
async fn inviting_an_email_registered_in_another_org_answers_like_any_invitation(app: TestApp) {
    let a = app.org().await;
    let b = app.org().await;
    let taken = email_of(&app, &a.approver_token).await;
    let invite = |email: &str| json!({"email": email, "role": "operator"});
    let res = app
        .post("/v1/users", &b.approver_token, invite(&taken))
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(body["user"]["org_id"], b.org_id.to_string());
    assert_eq!(body["user"]["state"], "invited");
    let fresh = app
        .post(
            "/v1/users",
            &b.approver_token,
            invite("nobody.yet@example.com"),
        )
        .await;
    let fresh = expect_status(fresh, StatusCode::CREATED).await;
    let shape = |v: &Value| {
        let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(shape(&body), shape(&fresh));
    assert_eq!(shape(&body["user"]), shape(&fresh["user"]));
    let accept =
        json!({"invitation_token": body["invitation_token"], "password": "b's own password"});
    let session = expect_status(
        app.post_public("/v1/invitations/accept", accept).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(session["user"]["org_id"], b.org_id.to_string());
    // Within B the email is taken now, as any email used twice in one organisation.
    let res = app
        .post(
            "/v1/users",
            &b.approver_token,
            invite(&taken.to_uppercase()),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "email");
    assert_eq!(problem.errors[0].code, "email_taken");
    // With four eyes on, the email of another organisation's human is proposed like any.
    let c = app.org().await;
    app.set_org(&c.approver_token, json!({"four_eyes": true}))
        .await;
    let res = app
        .post("/v1/users", &c.approver_token, invite(&taken))
        .await;
    expect_status(res, StatusCode::ACCEPTED).await;
    // A's approver was not touched.
    app.sign_in(&taken, PASSWORD).await;
}

/// The same email in two organisations, with two passwords. Without `organisation`, the
/// oldest account is the one checked; `organisation` (its name or id) picks the other. A name
/// that is no organisation of this email is the same 401 as a wrong password.
async fn an_email_in_several_organisations_signs_in_where_organisation_says(app: TestApp) {
    let a = app.org().await;
    let b = app.org().await;
    let email = email_of(&app, &a.approver_token).await;
    let res = app
        .post(
            "/v1/users",
            &b.approver_token,
            json!({"email": email, "role": "operator"}),
        )
        .await;
    let token = expect_status(res, StatusCode::CREATED).await["invitation_token"].clone();
    let other_password = "the password in org B";
    let accept = json!({"invitation_token": token, "password": other_password});
    expect_status(
        app.post_public("/v1/invitations/accept", accept).await,
        StatusCode::CREATED,
    )
    .await;
    let sign_in = |body: Value| app.post_public("/v1/sessions", body);
    let session = expect_status(
        sign_in(json!({"email": email, "password": PASSWORD})).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(session["user"]["org_id"], a.org_id.to_string());
    let b_name = org_name(&app, &b.approver_token).await;
    for organisation in [b_name.clone(), b.org_id.to_string()] {
        let session = expect_status(
            sign_in(
                json!({"email": email, "password": other_password, "organisation": organisation}),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
        assert_eq!(session["user"]["org_id"], b.org_id.to_string());
        assert_eq!(session["user"]["role"], "operator");
    }
    let a_name = org_name(&app, &a.approver_token).await;
    let session = expect_status(
        sign_in(json!({"email": email, "password": PASSWORD, "organisation": a_name})).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(session["user"]["org_id"], a.org_id.to_string());
    // Without `organisation`, B's password is not A's: the same 401 as any wrong password.
    let (wrong_org, wrong_password, unknown_org) = (
        sign_in(json!({"email": email, "password": other_password})).await,
        sign_in(json!({"email": email, "password": "not a password of theirs"})).await,
        sign_in(json!({"email": email, "password": PASSWORD, "organisation": "No Such Org"})).await,
    );
    let mut bodies = Vec::new();
    for res in [wrong_org, wrong_password, unknown_org] {
        let mut body = expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials")
            .await
            .body;
        body.as_object_mut().unwrap().remove("request_id");
        bodies.push(body);
    }
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(bodies[1], bodies[2]);
}

/// `tauros serve --bind BIND` (plus `extra` flags) over the test's database; answers its
/// child process and the port it listens on.
fn serve(app: &TestApp, bind: &str, extra: &[&str]) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["serve", "--bind", bind, "--workers", "0"])
        .args(extra)
        .env("DATABASE_URL", &app.database_url)
        .env("TAUROS_LOG", "info")
        .env_remove("TAUROS_METRICS_PUBLIC")
        .env_remove("TAUROS_METRICS_BIND")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros serve");
    let log = child_lines(child.stderr.take().unwrap(), None);
    let address = listening_address(&log);
    let port = address.rsplit(':').next().unwrap().parse().unwrap();
    (child, port)
}

async fn metrics_status(app: &TestApp, port: u16) -> StatusCode {
    let res = app
        .client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("request");
    let status = res.status();
    if status == StatusCode::NOT_FOUND {
        // The same answer as any unknown route.
        expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    }
    status
}

/// The real binary: on a loopback address `/metrics` is served as before; bound to 0.0.0.0 it
/// answers 404 like any unknown route (the API is served); with `--metrics-public` it is
/// served there too.
async fn metrics_are_not_served_on_a_non_loopback_listener_unless_asked(app: TestApp) {
    for (bind, extra, expected) in [
        ("127.0.0.1:0", &[][..], StatusCode::OK),
        ("0.0.0.0:0", &[][..], StatusCode::NOT_FOUND),
        ("0.0.0.0:0", &["--metrics-public"][..], StatusCode::OK),
    ] {
        let (mut child, port) = serve(&app, bind, extra);
        let healthz = app
            .client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .expect("request");
        let status = metrics_status(&app, port).await;
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(healthz.status(), StatusCode::OK);
        assert_eq!(status, expected, "/metrics with --bind {bind} {extra:?}");
    }
}

/// Migration 0014 on a database with data from 0013 (two organisations, a session, an agent,
/// audit rows, all referring to users): every row is kept, every reference still holds and is
/// still enforced, the humans still sign in, and their emails may now be held elsewhere too.
async fn accounts_written_before_0014_keep_working_after_it(backend: Backend) {
    let (url, _cleanup) = empty_database(backend).await;
    migrate_up_to(backend, &url, 13).await;
    let store = tauros_store::connect(&url, tauros_store::PoolSettings::new(4))
        .await
        .expect("open store");
    let app = tauros_app::App::new(
        std::sync::Arc::clone(&store),
        tauros_app::AppConfig::default(),
    );
    let first = app
        .bootstrap_approver("Before A", "first@before.example", PASSWORD.into())
        .await
        .unwrap();
    app.bootstrap_approver("Before B", "second@before.example", PASSWORD.into())
        .await
        .unwrap();
    // A session as 0013's code wrote one (today's sign-in also writes a later table).
    let session = tauros_domain::identity::session_token([7; 32]);
    let mut tx = store.begin(tauros_store::Lane::Unattributed).await.unwrap();
    let now = chrono::Utc::now();
    tx.insert_session(&tauros_store::SessionRow {
        id: uuid::Uuid::now_v7(),
        org_id: first.org_id,
        user_id: first.user_id,
        token_hash: session.hash.to_vec(),
        created_at: now,
        expires_at: now + chrono::Duration::hours(1),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let actor = tauros_app::Actor::Human(tauros_app::Human {
        id: first.user_id,
        org_id: first.org_id,
        email: "first@before.example".into(),
        role: tauros_domain::identity::Role::Approver,
        session_id: uuid::Uuid::nil(),
        interface: tauros_domain::identity::Interface::Api,
    });
    app.create_agent(
        &actor,
        tauros_app::NewAgent {
            name: "Before".into(),
            capabilities: vec![],
        },
    )
    .await
    .unwrap();
    store.migrate().await.expect("0014 on data from 0013");
    let count = |sql: &'static str| {
        let url = url.clone();
        async move {
            if url.starts_with("sqlite") {
                let mut c = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
                    .await
                    .unwrap();
                sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(&mut c)
                    .await
                    .unwrap()
            } else {
                let mut c = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
                    .await
                    .unwrap();
                sqlx::query_scalar::<_, i64>(sql)
                    .fetch_one(&mut c)
                    .await
                    .unwrap()
            }
        }
    };
    assert_eq!(count("select count(*) from users").await, 2);
    assert_eq!(
        count("select count(*) from agents a join users u on u.id = a.owner_id").await,
        1
    );
    assert_eq!(
        count("select count(*) from sessions s join users u on u.id = s.user_id").await,
        1
    );
    if backend == Backend::Sqlite {
        let mut c = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        let broken: Vec<sqlx::sqlite::SqliteRow> = sqlx::query("pragma foreign_key_check")
            .fetch_all(&mut c)
            .await
            .unwrap();
        assert!(broken.is_empty(), "{} broken references", broken.len());
        // The references are still enforced: a session of nobody is refused.
        let orphan = sqlx::query(
            "insert into sessions (id, org_id, user_id, token_hash, created_at, expires_at)
             values (x'00', x'00', x'00', x'00', '2026-01-01', '2026-01-02')",
        )
        .execute(&mut c)
        .await;
        assert!(orphan.is_err(), "a session of no user was accepted");
    }
    // The old session and both passwords still work.
    let who = app
        .authenticate(&session.token, tauros_domain::identity::Interface::Api)
        .await
        .unwrap();
    assert_eq!(who.org_id(), first.org_id);
    app.sign_in("second@before.example", PASSWORD.into(), None, None, None)
        .await
        .unwrap();
    // An email of one organisation may now be an account of another.
    app.bootstrap_approver("After C", "first@before.example", PASSWORD.into())
        .await
        .expect("the same email in another organisation");
    assert_eq!(count("select count(*) from users").await, 3);
}
