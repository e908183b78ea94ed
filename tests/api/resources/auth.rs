//! Credentials: every way a bearer token can be wrong answers the same 401; sign-in does not
//! reveal which emails exist; invitations work once.

use crate::helpers::{
    Backend, PASSWORD, TestApp, both_backends, expect_problem, expect_status, invoice_body,
    spawn_app_with,
};
use reqwest::StatusCode;
use serde_json::json;
use tauros_api::HttpConfig;
use tauros_app::AppConfig;

both_backends!(
    missing_garbage_and_basic_credentials_are_401,
    rotated_key_is_401_and_new_key_works,
    signed_out_session_is_401_and_other_sessions_survive,
    wrong_password_and_unknown_email_are_indistinguishable,
    me_describes_agents_and_humans,
    invitation_works_once,
    invitation_requires_a_long_password_and_an_approver,
    key_use_is_tracked,
    a_replay_records_a_stale_key_use_and_still_replays,
);

async fn assert_401(app: &TestApp, auth: Option<&str>) {
    let mut req = app.client.get(app.url("/v1/me"));
    if let Some(value) = auth {
        req = req.header("authorization", value);
    }
    let res = req.send().await.unwrap();
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer"),
        "401 must carry WWW-Authenticate: Bearer"
    );
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

async fn missing_garbage_and_basic_credentials_are_401(app: TestApp) {
    let org = app.org().await;
    assert_401(&app, None).await;
    assert_401(&app, Some("Bearer")).await;
    assert_401(&app, Some("Bearer garbage")).await;
    assert_401(&app, Some("Bearer tauros_abc_def")).await;
    assert_401(&app, Some("Bearer tsess_doesnotexist")).await;
    // A real key under the wrong scheme.
    assert_401(&app, Some(&format!("Basic {}", org.agent_key))).await;
    // A real key with one character changed.
    let mut tampered = org.agent_key.clone().into_bytes();
    let i = tampered.len() / 2;
    tampered[i] = if tampered[i] == b'A' { b'B' } else { b'A' };
    assert_401(
        &app,
        Some(&format!("Bearer {}", String::from_utf8(tampered).unwrap())),
    )
    .await;
    // The real key works, with any case of the scheme.
    let res = app
        .client
        .get(app.url("/v1/me"))
        .header("authorization", format!("bearer {}", org.agent_key))
        .send()
        .await
        .unwrap();
    expect_status(res, StatusCode::OK).await;
}

async fn rotated_key_is_401_and_new_key_works(app: TestApp) {
    let org = app.org().await;
    let path = format!("/v1/agents/{}/rotate-key", org.agent_id);
    let body = expect_status(
        app.post(&path, &org.approver_token, json!({})).await,
        StatusCode::OK,
    )
    .await;
    let new_key = body["api_key"].as_str().unwrap().to_owned();
    assert_ne!(new_key, org.agent_key);
    assert_401(&app, Some(&format!("Bearer {}", org.agent_key))).await;
    let me = expect_status(app.get("/v1/me", &new_key).await, StatusCode::OK).await;
    assert_eq!(me["id"], org.agent_id.to_string());
    // Rotating again revokes the second key too.
    let body = expect_status(
        app.post(&path, &org.approver_token, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_401(&app, Some(&format!("Bearer {new_key}"))).await;
    let third = body["api_key"].as_str().unwrap();
    expect_status(app.get("/v1/me", third).await, StatusCode::OK).await;
}

async fn signed_out_session_is_401_and_other_sessions_survive(app: TestApp) {
    let org = app.org().await;
    let me = expect_status(app.get("/v1/me", &org.approver_token).await, StatusCode::OK).await;
    let email = me["email"].as_str().unwrap().to_owned();
    let second = app.sign_in(&email, PASSWORD).await;
    let res = app
        .delete("/v1/sessions/current", &org.approver_token)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert_401(&app, Some(&format!("Bearer {}", org.approver_token))).await;
    expect_status(app.get("/v1/me", &second).await, StatusCode::OK).await;
    // An agent has no session to end.
    expect_problem(
        app.delete("/v1/sessions/current", &org.agent_key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
}

async fn wrong_password_and_unknown_email_are_indistinguishable(app: TestApp) {
    let org = app.org().await;
    let me = expect_status(app.get("/v1/me", &org.approver_token).await, StatusCode::OK).await;
    let email = me["email"].as_str().unwrap();
    let wrong_password = app
        .post_public(
            "/v1/sessions",
            json!({"email": email, "password": "not the password"}),
        )
        .await;
    let unknown_email = app
        .post_public(
            "/v1/sessions",
            json!({"email": "nobody@example.com", "password": "not the password"}),
        )
        .await;
    let mut a = expect_problem(
        wrong_password,
        StatusCode::UNAUTHORIZED,
        "invalid_credentials",
    )
    .await
    .body;
    let mut b = expect_problem(
        unknown_email,
        StatusCode::UNAUTHORIZED,
        "invalid_credentials",
    )
    .await
    .body;
    a.as_object_mut().unwrap().remove("request_id");
    b.as_object_mut().unwrap().remove("request_id");
    assert_eq!(
        a, b,
        "the two failures must be identical apart from the request id"
    );
    // Email is case-insensitive.
    app.sign_in(&email.to_uppercase(), PASSWORD).await;
}

async fn me_describes_agents_and_humans(app: TestApp) {
    let org = app.org().await;
    let agent = expect_status(app.get("/v1/me", &org.agent_key).await, StatusCode::OK).await;
    assert_eq!(agent["kind"], "agent");
    assert_eq!(agent["id"], org.agent_id.to_string());
    assert_eq!(agent["org_id"], org.org_id.to_string());
    assert_eq!(agent["name"], "Agent A");
    assert_eq!(agent["capabilities"], json!(["invoicing"]));
    let human = expect_status(app.get("/v1/me", &org.approver_token).await, StatusCode::OK).await;
    assert_eq!(human["kind"], "human");
    assert_eq!(human["id"], org.approver_id.to_string());
    assert_eq!(human["role"], "approver");
    assert!(human.get("capabilities").is_none());
}

async fn invitation_works_once(app: TestApp) {
    let org = app.org().await;
    let res = app
        .post(
            "/v1/users",
            &org.approver_token,
            json!({"email": "new.person@example.com", "role": "operator"}),
        )
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(body["user"]["role"], "operator");
    let token = body["invitation_token"].as_str().unwrap().to_owned();
    // Before accepting, the human cannot sign in.
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "new.person@example.com", "password": PASSWORD}),
        )
        .await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    let accept = json!({"invitation_token": token, "password": PASSWORD});
    let first = expect_status(
        app.post_public("/v1/invitations/accept", accept.clone())
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(first["user"]["email"], "new.person@example.com");
    let session = first["token"].as_str().unwrap();
    expect_status(app.get("/v1/me", session).await, StatusCode::OK).await;
    // Reuse is refused, even with another password.
    let again = json!({"invitation_token": token, "password": "another long password"});
    expect_problem(
        app.post_public("/v1/invitations/accept", again).await,
        StatusCode::UNAUTHORIZED,
        "invalid_credentials",
    )
    .await;
    // The first password still works, the second never took.
    app.sign_in("new.person@example.com", PASSWORD).await;
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "new.person@example.com", "password": "another long password"}),
        )
        .await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    // The same email cannot be invited twice.
    let res = app
        .post(
            "/v1/users",
            &org.approver_token,
            json!({"email": "NEW.person@example.com", "role": "operator"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "email");
}

async fn invitation_requires_a_long_password_and_an_approver(app: TestApp) {
    let org = app.org().await;
    let res = app
        .post(
            "/v1/users",
            &org.approver_token,
            json!({"email": "short@example.com", "role": "approver"}),
        )
        .await;
    let token = expect_status(res, StatusCode::CREATED).await["invitation_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = app
        .post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": token, "password": "elevenchars"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "password");
    // The short attempt did not use up the invitation.
    let res = app
        .post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": token, "password": "twelve chars"}),
        )
        .await;
    expect_status(res, StatusCode::CREATED).await;
    // Operators and agents may not invite.
    let (_, operator) = app.human(&org.approver_token, "operator").await;
    let invite = json!({"email": "x@example.com", "role": "operator"});
    expect_problem(
        app.post("/v1/users", &operator, invite.clone()).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.post("/v1/users", &org.agent_key, invite).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    // An unknown role is a validation error naming `role`.
    let res = app
        .post(
            "/v1/users",
            &org.approver_token,
            json!({"email": "y@example.com", "role": "admin"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "role");
}

async fn key_use_is_tracked(app: TestApp) {
    let org = app.org().await;
    let path = format!("/v1/agents/{}", org.agent_id);
    let before = expect_status(app.get(&path, &org.approver_token).await, StatusCode::OK).await;
    assert!(before["key_last_used_at"].is_null());
    assert!(before["key_expires_at"].is_string());
    expect_status(app.get("/v1/me", &org.agent_key).await, StatusCode::OK).await;
    let after = expect_status(app.get(&path, &org.approver_token).await, StatusCode::OK).await;
    assert!(after["key_last_used_at"].is_string(), "{after}");
}

/// A replay checks the key and compares the payload on one connection, except when the key's
/// use must be recorded first (a write, never made while holding a reader): that path answers
/// the same replay and records the use.
async fn a_replay_records_a_stale_key_use_and_still_replays(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let res = app
        .create_invoice(&b.org.agent_key, "stale-use", &body)
        .await;
    let created = expect_status(res, StatusCode::CREATED).await;
    let path = format!("/v1/agents/{}", b.org.agent_id);
    let last_used = || async {
        expect_status(app.get(&path, &b.org.approver_token).await, StatusCode::OK).await
            ["key_last_used_at"]
            .clone()
    };
    assert!(last_used().await.is_string());
    // The key's use is as stale as a key unused for a while.
    assert!(
        app.sql_exec("update api_keys set last_used_at = null")
            .await
    );
    assert!(last_used().await.is_null());
    let res = app
        .create_invoice(&b.org.agent_key, "stale-use", &body)
        .await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replayed = expect_status(res, StatusCode::OK).await;
    assert_eq!(replayed["replayed"], true, "{replayed}");
    assert_eq!(replayed["invoice"]["id"], created["invoice"]["id"]);
    assert!(
        last_used().await.is_string(),
        "the replay recorded the key's use"
    );
    // With the use fresh, the next replay takes the one-connection path: the same answer.
    let res = app
        .create_invoice(&b.org.agent_key, "stale-use", &body)
        .await;
    assert_eq!(expect_status(res, StatusCode::OK).await, replayed);
}

/// Expired keys and sessions: a configuration whose lifetimes are already over.
async fn expired_credentials_are_401(backend: Backend) {
    let config = AppConfig {
        session_ttl: chrono::Duration::seconds(-1),
        api_key_ttl: chrono::Duration::seconds(-1),
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let email = "expired@example.com";
    app.app
        .bootstrap_approver("Expired", email, PASSWORD.into())
        .await
        .unwrap();
    // Sign-in succeeds but the session it hands out is already expired.
    let token = app.sign_in(email, PASSWORD).await;
    assert_401(&app, Some(&format!("Bearer {token}"))).await;
    // Keys: create an agent through the app layer (sessions are unusable here).
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let user = conn.users_by_email(email, 1).await.unwrap().pop().unwrap();
    drop(conn);
    let actor = tauros_app::Actor::Human(tauros_app::Human {
        id: user.id,
        org_id: user.org_id,
        email: user.email,
        role: tauros_domain::identity::Role::Approver,
        session_id: uuid::Uuid::nil(),
        interface: tauros_domain::identity::Interface::Api,
    });
    let tauros_app::AgentCreated::Done(_, key) = app
        .app
        .create_agent(
            &actor,
            tauros_app::NewAgent {
                name: "Old".into(),
                capabilities: vec![],
            },
        )
        .await
        .unwrap()
    else {
        panic!("an invoicing agent is created at once")
    };
    assert_401(&app, Some(&format!("Bearer {key}"))).await;
}

#[tokio::test]
async fn expired_credentials_are_401_sqlite() {
    expired_credentials_are_401(Backend::Sqlite).await;
}

#[tokio::test]
async fn expired_credentials_are_401_postgres() {
    expired_credentials_are_401(Backend::Postgres).await;
}
