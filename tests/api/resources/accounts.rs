//! The account lifecycle (docs/contract/api.md, "Sessions and humans"): approvers list and
//! deactivate humans, humans sign out everywhere and change their password, approvers read the org
//! audit trail, and expired sessions and finished invitations are pruned.

use crate::helpers::{
    Backend, PASSWORD, TestApp, both_backends, expect_problem, expect_status, parallel,
    spawn_app_with, sql_uuid, uuid_of,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tauros_api::HttpConfig;
use tauros_app::AppConfig;
use uuid::Uuid;

both_backends!(
    approvers_list_the_humans_of_their_org_with_their_state,
    a_deactivated_human_is_locked_out_at_once_and_their_agents_keep_working,
    deactivation_ends_invitations_and_proposals_and_is_idempotent,
    no_session_survives_a_deactivation_racing_sign_ins,
    signing_out_everywhere_ends_every_session,
    changing_a_password_ends_the_other_sessions,
    the_org_audit_trail_is_listed_newest_first_for_approvers,
    expired_sessions_and_finished_invitations_are_pruned,
);

both_backends!(backend: wrong_current_passwords_count_as_failed_sign_ins);

fn emails(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            format!(
                "{} {} {}",
                u["email"].as_str().unwrap(),
                u["role"],
                u["state"]
            )
        })
        .collect()
}

/// Invites a human and leaves the invitation open; returns (user id, email, token).
async fn invited(app: &TestApp, approver: &str, role: &str) -> (Uuid, String, String) {
    let email = format!("{role}-{}@example.com", Uuid::new_v4().simple());
    let res = app
        .post("/v1/users", approver, json!({"email": email, "role": role}))
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    (
        uuid_of(&body["user"]["id"]),
        email,
        body["invitation_token"].as_str().unwrap().to_owned(),
    )
}

/// The session `token` no longer works.
async fn signed_out(app: &TestApp, token: &str) {
    let res = app.get("/v1/me", token).await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

/// Signing in with the test password is refused like a wrong password.
async fn sign_in_refused(app: &TestApp, email: &str) {
    let body = json!({"email": email, "password": PASSWORD});
    let res = app.post_public("/v1/sessions", body).await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
}

/// The email of a human, read back through the list.
async fn email_of(app: &TestApp, approver: &str, id: Uuid) -> String {
    let list = expect_status(app.get("/v1/users", approver).await, StatusCode::OK).await;
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == id.to_string())
        .map(|u| u["email"].as_str().unwrap().to_owned())
        .expect("listed")
}

async fn approvers_list_the_humans_of_their_org_with_their_state(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (operator_id, operator) = app.human(a1, "operator").await;
    let operator_email = email_of(&app, a1, operator_id).await;
    let (_, invited_email, _) = invited(&app, a1, "approver").await;
    let approver_email: String = app
        .sql_scalar(&format!(
            "select email from users where id = {}",
            sql_uuid(&app.database_url, &org.approver_id.to_string())
        ))
        .await;
    let list = expect_status(app.get("/v1/users", a1).await, StatusCode::OK).await;
    assert_eq!(
        emails(&list),
        [
            format!("{invited_email} \"approver\" \"invited\""),
            format!("{operator_email} \"operator\" \"active\""),
            format!("{approver_email} \"approver\" \"active\""),
        ],
        "newest first"
    );
    assert!(list["items"][0].get("password_hash").is_none());
    // Pages of one follow the cursor to the end.
    let mut seen = Vec::new();
    let mut path = "/v1/users?limit=1".to_owned();
    loop {
        let page = expect_status(app.get(&path, a1).await, StatusCode::OK).await;
        seen.extend(emails(&page));
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/users?limit=1&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, emails(&list));
    // Operators and agents may not list humans; another org sees only its own.
    for token in [operator.as_str(), org.agent_key.as_str()] {
        expect_problem(
            app.get("/v1/users", token).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    let other = app.org().await;
    let theirs = expect_status(
        app.get("/v1/users", &other.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(theirs["items"].as_array().unwrap().len(), 1);
}

async fn a_deactivated_human_is_locked_out_at_once_and_their_agents_keep_working(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (operator_id, first_session) = app.human(a1, "operator").await;
    let email = email_of(&app, a1, operator_id).await;
    let second_session = app.sign_in(&email, PASSWORD).await;
    let (_, agent_key) = app.agent(&first_session, "Operator's agent").await;

    let path = format!("/v1/users/{operator_id}/deactivate");
    let done = expect_status(app.post(&path, a1, json!({})).await, StatusCode::OK).await;
    assert_eq!(done["state"], "deactivated");
    assert_eq!(done["id"], operator_id.to_string());
    for token in [&first_session, &second_session] {
        signed_out(&app, token).await;
    }
    // Same answer as a wrong password: a deactivated account is not told apart.
    sign_in_refused(&app, &email).await;
    // Their agent keeps working.
    let me = expect_status(app.get("/v1/me", &agent_key).await, StatusCode::OK).await;
    assert_eq!(me["kind"], "agent");
    let sessions = app
        .sql_count(&format!(
            "select count(*) from sessions where user_id = {}",
            sql_uuid(&app.database_url, &operator_id.to_string())
        ))
        .await;
    assert_eq!(sessions, 0, "the sessions are gone, not just refused");
    let actions = app.audit_actions(org.org_id, operator_id).await;
    assert_eq!(actions.last().unwrap(), "user.deactivated");

    // Again: the same answer, nothing written.
    let again = expect_status(app.post(&path, a1, json!({})).await, StatusCode::OK).await;
    assert_eq!(again, done);
    assert_eq!(app.audit_actions(org.org_id, operator_id).await, actions);

    // Not yourself; not as an operator or agent; not across organisations.
    let me = format!("/v1/users/{}/deactivate", org.approver_id);
    let refused = expect_problem(
        app.post(&me, a1, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(refused.detail.contains("themself"));
    let (_, operator2) = app.human(a1, "operator").await;
    expect_problem(
        app.post(&me, &operator2, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.post(&me, &org.agent_key, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let other = app.org().await;
    for id in [org.approver_id, Uuid::now_v7()] {
        expect_problem(
            app.post(
                &format!("/v1/users/{id}/deactivate"),
                &other.approver_token,
                json!({}),
            )
            .await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
    let still = expect_status(app.get("/v1/me", a1).await, StatusCode::OK).await;
    assert_eq!(still["id"], org.approver_id.to_string());
}

async fn deactivation_ends_invitations_and_proposals_and_is_idempotent(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    // An invited human who has not accepted yet: their invitation stops working.
    let (invitee, _, token) = invited(&app, a1, "operator").await;
    let res = app
        .post(&format!("/v1/users/{invitee}/deactivate"), a1, json!({}))
        .await;
    assert_eq!(
        expect_status(res, StatusCode::OK).await["state"],
        "deactivated"
    );
    expect_problem(
        app.post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": token, "password": PASSWORD}),
        )
        .await,
        StatusCode::UNAUTHORIZED,
        "invalid_credentials",
    )
    .await;
    // An approver with a pending proposal: the proposal is rejected with them.
    // Under four eyes deactivating an approver is itself a proposal, which a third approver
    // confirms.
    let (a2_id, a2) = app.human(a1, "approver").await;
    let (a3_id, a3) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let res = app
        .patch("/v1/organisation", &a2, json!({"four_eyes": false}))
        .await;
    let change = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    let res = app
        .post(&format!("/v1/users/{a2_id}/deactivate"), a1, json!({}))
        .await;
    let removal = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    let res = app
        .post(
            &format!(
                "/v1/organisation/changes/{}/confirm",
                removal["id"].as_str().unwrap()
            ),
            &a3,
            json!({}),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
    let seen = expect_status(
        app.get(
            &format!(
                "/v1/organisation/changes/{}",
                change["id"].as_str().unwrap()
            ),
            a1,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(seen["state"], "rejected");
    assert_eq!(seen["decided_by"], a3_id.to_string());
}

async fn no_session_survives_a_deactivation_racing_sign_ins(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (operator_id, _) = app.human(a1, "operator").await;
    let email = email_of(&app, a1, operator_id).await;
    let mut requests: Vec<_> = (0..6)
        .map(|_| {
            app.client
                .post(app.url("/v1/sessions"))
                .json(&json!({"email": email, "password": PASSWORD}))
        })
        .collect();
    requests.insert(
        3,
        app.post_request(
            &format!("/v1/users/{operator_id}/deactivate"),
            a1,
            &json!({}),
        ),
    );
    let mut tokens = Vec::new();
    for (i, res) in parallel(requests).await.into_iter().enumerate() {
        if i == 3 {
            expect_status(res, StatusCode::OK).await;
        } else if res.status() == StatusCode::CREATED {
            tokens.push(
                res.json::<Value>().await.unwrap()["token"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        } else {
            expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
        }
    }
    // Whichever sign-ins won the race, their sessions ended with the deactivation.
    for token in &tokens {
        signed_out(&app, token).await;
    }
    let sessions = app
        .sql_count(&format!(
            "select count(*) from sessions where user_id = {}",
            sql_uuid(&app.database_url, &operator_id.to_string())
        ))
        .await;
    assert_eq!(sessions, 0, "{} sign-ins got a token first", tokens.len());
}

async fn signing_out_everywhere_ends_every_session(app: TestApp) {
    let org = app.org().await;
    let (operator_id, first) = app.human(&org.approver_token, "operator").await;
    let email = email_of(&app, &org.approver_token, operator_id).await;
    let second = app.sign_in(&email, PASSWORD).await;
    let third = app.sign_in(&email, PASSWORD).await;
    let res = app.delete("/v1/sessions", &second).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    for token in [&first, &second, &third] {
        signed_out(&app, token).await;
    }
    // Other humans are not touched; agents have no sessions.
    expect_status(app.get("/v1/me", &org.approver_token).await, StatusCode::OK).await;
    expect_problem(
        app.delete("/v1/sessions", &org.agent_key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    // Signing in again works.
    let fresh = app.sign_in(&email, PASSWORD).await;
    expect_status(app.get("/v1/me", &fresh).await, StatusCode::OK).await;
    let actions = app.audit_actions(org.org_id, operator_id).await;
    assert!(
        actions.contains(&"user.signed_out_everywhere".to_owned()),
        "{actions:?}"
    );
}

async fn changing_a_password_ends_the_other_sessions(app: TestApp) {
    let org = app.org().await;
    let (operator_id, this) = app.human(&org.approver_token, "operator").await;
    let email = email_of(&app, &org.approver_token, operator_id).await;
    let other = app.sign_in(&email, PASSWORD).await;
    let new_password = "a much longer new passphrase";

    let wrong = expect_problem(
        app.post(
            "/v1/me/password",
            &this,
            json!({"current_password": "not it at all", "new_password": new_password}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(wrong.errors[0].field, "current_password");
    assert_eq!(wrong.errors[0].code, "wrong_password");
    let short = expect_problem(
        app.post(
            "/v1/me/password",
            &this,
            json!({"current_password": PASSWORD, "new_password": "short"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(short.errors[0].field, "new_password");
    let missing = expect_problem(
        app.post("/v1/me/password", &this, json!({})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(missing.errors.len(), 2);
    // Nothing changed so far: the other session works, the old password signs in.
    expect_status(app.get("/v1/me", &other).await, StatusCode::OK).await;

    let res = app
        .post(
            "/v1/me/password",
            &this,
            json!({"current_password": PASSWORD, "new_password": new_password}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_status(app.get("/v1/me", &this).await, StatusCode::OK).await;
    signed_out(&app, &other).await;
    sign_in_refused(&app, &email).await;
    app.sign_in(&email, new_password).await;
    expect_problem(
        app.post(
            "/v1/me/password",
            &org.agent_key,
            json!({"current_password": PASSWORD, "new_password": new_password}),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let actions = app.audit_actions(org.org_id, operator_id).await;
    assert!(
        actions.contains(&"user.password_changed".to_owned()),
        "{actions:?}"
    );
    let detail: String = app
        .sql_scalar("select detail from audit_events where action = 'user.password_changed'")
        .await;
    assert!(
        !detail.contains(new_password) && !detail.contains(PASSWORD),
        "{detail}"
    );
}

async fn wrong_current_passwords_count_as_failed_sign_ins(backend: Backend) {
    let config = AppConfig {
        sign_in_failures: 3,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let body =
        json!({"current_password": "guess guess guess", "new_password": "whatever it may be"});
    for _ in 0..3 {
        expect_problem(
            app.post("/v1/me/password", &org.approver_token, body.clone())
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
    }
    let res = app
        .post("/v1/me/password", &org.approver_token, body.clone())
        .await;
    assert!(res.headers().contains_key("retry-after"));
    expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // Even the right password waits now, for this account and address.
    let right = json!({"current_password": PASSWORD, "new_password": "whatever it may be"});
    expect_problem(
        app.post("/v1/me/password", &org.approver_token, right)
            .await,
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
    )
    .await;
}

async fn the_org_audit_trail_is_listed_newest_first_for_approvers(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (operator_id, _) = app.human(a1, "operator").await;
    app.set_org(a1, json!({"shared_review": true})).await;
    let res = app
        .post(
            &format!("/v1/users/{operator_id}/deactivate"),
            a1,
            json!({}),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
    let trail = expect_status(app.get("/v1/audit-events", a1).await, StatusCode::OK).await;
    let items = trail["items"].as_array().unwrap();
    let actions: Vec<&str> = items
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        &actions[..3],
        ["user.deactivated", "org.settings_changed", "user.invited"],
        "newest first: {actions:?}"
    );
    let deactivated = &items[0];
    assert_eq!(deactivated["subject_type"], "user");
    assert_eq!(deactivated["subject_id"], operator_id.to_string());
    assert_eq!(deactivated["actor_kind"], "human");
    assert_eq!(deactivated["actor_id"], org.approver_id.to_string());
    assert_eq!(deactivated["interface"], "api");
    assert_eq!(deactivated["detail"]["sessions_ended"], 1);
    assert_eq!(items[1]["detail"]["shared_review"], true);
    // Pages follow the cursor; no secret is in any detail.
    let mut seen = 0;
    let mut path = "/v1/audit-events?limit=2".to_owned();
    loop {
        let page = expect_status(app.get(&path, a1).await, StatusCode::OK).await;
        for event in page["items"].as_array().unwrap() {
            let text = event.to_string();
            assert!(
                !text.contains("tauros_") && !text.contains(PASSWORD),
                "{text}"
            );
            seen += 1;
        }
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/audit-events?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, items.len());
    // Operators, agents and other organisations do not read it.
    let (_, operator2) = app.human(a1, "operator").await;
    for token in [operator2.as_str(), org.agent_key.as_str()] {
        expect_problem(
            app.get("/v1/audit-events", token).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    let other = app.org().await;
    let theirs = expect_status(
        app.get("/v1/audit-events", &other.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert!(
        theirs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["subject_id"] != operator_id.to_string()),
        "another org's trail"
    );
}

async fn expired_sessions_and_finished_invitations_are_pruned(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (operator_id, live) = app.human(a1, "operator").await;
    let email = email_of(&app, a1, operator_id).await;
    for _ in 0..4 {
        app.sign_in(&email, PASSWORD).await;
    }
    let (_, _, open_token) = invited(&app, a1, "operator").await;
    let (lapsed_user, _, _) = invited(&app, a1, "operator").await;
    let sessions_before = app.sql_count("select count(*) from sessions").await;
    assert_eq!(
        sessions_before, 6,
        "the approver's and five of the operator's"
    );
    // Four of the operator's sessions and one invitation expire (moved into the past here).
    let past = "'2000-01-01T00:00:00+00:00'";
    let user = sql_uuid(&app.database_url, &operator_id.to_string());
    assert!(
        app.sql_exec(&format!(
            "update sessions set expires_at = {past} where user_id = {user}
             and created_at > (select min(created_at) from sessions where user_id = {user})"
        ))
        .await
    );
    // So do four of the operator's five device tokens (one from accepting, four sign-ins).
    assert!(
        app.sql_exec(&format!(
            "update device_tokens set expires_at = {past} where user_id = {user}
             and created_at > (select min(created_at) from device_tokens where user_id = {user})"
        ))
        .await
    );
    assert!(
        app.sql_exec(&format!(
            "update invitations set expires_at = {past} where user_id = {}",
            sql_uuid(&app.database_url, &lapsed_user.to_string())
        ))
        .await
    );
    // Batches of two: the sweep goes on until nothing is left.
    let (tokens, invitations) = app.app.prune_credentials(2).await.unwrap();
    assert_eq!(tokens, 4 + 4, "sessions and device tokens");
    // The accepted invitation of the operator and the lapsed one; the open one stays.
    assert_eq!(invitations, 2);
    assert_eq!(app.sql_count("select count(*) from sessions").await, 2);
    let devices = format!("select count(*) from device_tokens where user_id = {user}");
    assert_eq!(app.sql_count(&devices).await, 1);
    assert_eq!(app.sql_count("select count(*) from invitations").await, 1);
    expect_status(app.get("/v1/me", &live).await, StatusCode::OK).await;
    expect_status(app.get("/v1/me", a1).await, StatusCode::OK).await;
    let accepted = app
        .post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": open_token, "password": PASSWORD}),
        )
        .await;
    expect_status(accepted, StatusCode::CREATED).await;
    // A second sweep finds nothing more but the invitation just used.
    assert_eq!(app.app.prune_credentials(2).await.unwrap(), (0, 1));
}
