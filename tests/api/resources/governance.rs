//! Separation of duties that one approver cannot undo (docs/contract/api.md, "Sessions and
//! humans"). The attacks the security review reproduced: an approver with `four_eyes` on switching
//! it off, approving their own agent's invoice and switching it back on; inviting a second approver
//! account they control; and inviting an operator account they control, to own agents whose
//! invoices they then approve as if someone else's. All are proposals now, confirmed only by a
//! different approver; the operator of the machine keeps a way out on the command line.

use crate::helpers::{
    PASSWORD, TestApp, both_backends, expect_problem, expect_status, id_of, parallel, tally,
    uuid_of,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::Command;

both_backends!(
    one_approver_cannot_switch_four_eyes_off_to_approve_their_own_invoice,
    one_approver_cannot_invite_an_approver_they_control,
    one_approver_cannot_invite_an_operator_to_own_agents_for_them,
    turning_four_eyes_on_is_immediate_and_proposals_can_be_withdrawn_or_lapse,
    decision_events_record_the_settings_in_force,
    the_operator_switches_four_eyes_from_the_command_line,
    only_approvers_of_the_org_see_and_decide_proposals,
    concurrent_proposals_and_confirmations_decide_once,
);

fn confirm_path(change: &Value) -> String {
    format!(
        "/v1/organisation/changes/{}/confirm",
        change["id"].as_str().unwrap()
    )
}

fn reject_path(change: &Value) -> String {
    format!(
        "/v1/organisation/changes/{}/reject",
        change["id"].as_str().unwrap()
    )
}

async fn org_settings(app: &TestApp, token: &str) -> (bool, bool) {
    let org = expect_status(app.get("/v1/organisation", token).await, StatusCode::OK).await;
    (
        org["four_eyes"].as_bool().unwrap(),
        org["shared_review"].as_bool().unwrap(),
    )
}

async fn one_approver_cannot_switch_four_eyes_off_to_approve_their_own_invoice(app: TestApp) {
    let b = app.billing().await;
    let a1 = &b.org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let invoice = app.pending(&b, "own-invoice").await;
    expect_problem(
        app.approve(a1, &invoice).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;

    // The attack: switch it off. That is now a proposal, and nothing changes.
    let res = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = &proposed["change"];
    assert_eq!(change["kind"], "settings");
    assert_eq!(change["state"], "pending");
    assert_eq!(change["proposed_by"], b.org.approver_id.to_string());
    assert_eq!(change["four_eyes"], false);
    assert_eq!(org_settings(&app, a1).await, (true, false));
    expect_problem(
        app.approve(a1, &invoice).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;

    // Asking again answers the same proposal and writes nothing.
    let again = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    assert_eq!(
        expect_status(again, StatusCode::ACCEPTED).await["change"]["id"],
        change["id"]
    );
    assert_eq!(app.sql_count("select count(*) from org_changes").await, 1);

    // The proposer cannot confirm their own proposal.
    let refused = expect_problem(
        app.post(&confirm_path(change), a1, json!({})).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;
    assert!(refused.detail.contains("different approver"));
    assert_eq!(org_settings(&app, a1).await, (true, false));

    // A second approver confirms: now it applies, and the trail says who did what.
    let done = expect_status(
        app.post(&confirm_path(change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["change"]["state"], "confirmed");
    assert_eq!(done["change"]["decided_by"], a2_id.to_string());
    assert_eq!(done["organisation"]["four_eyes"], false);
    assert_eq!(done["replayed"], false);
    assert!(done["invitation"].is_null());
    expect_status(app.approve(a1, &invoice).await, StatusCode::OK).await;
    let actions = app
        .audit_actions(b.org.org_id, uuid_of(&change["id"]))
        .await;
    assert_eq!(actions, ["org.change_proposed", "org.change_confirmed"]);
    let settings = app.audit_actions(b.org.org_id, b.org.org_id).await;
    assert_eq!(
        settings,
        ["org.settings_changed", "org.settings_changed"],
        "on by A1, off by A2's confirmation"
    );

    // Confirming again as A2 is a replay; rejecting now is refused.
    let replay = expect_status(
        app.post(&confirm_path(change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(
        app.audit_actions(b.org.org_id, uuid_of(&change["id"]))
            .await
            .len(),
        2,
        "a replay writes nothing"
    );
    expect_problem(
        app.post(&reject_path(change), &a2, json!({})).await,
        StatusCode::CONFLICT,
        "change_decided",
    )
    .await;
}

async fn one_approver_cannot_invite_an_approver_they_control(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let users_before = app.sql_count("select count(*) from users").await;

    // The attack: invite a second approver account. A proposal; no human exists yet.
    let email = format!("sock-puppet-{}@example.com", uuid::Uuid::new_v4().simple());
    let res = app
        .post("/v1/users", a1, json!({"email": email, "role": "approver"}))
        .await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = &proposed["change"];
    assert_eq!(change["kind"], "approver_invitation");
    assert_eq!(change["email"], email.as_str());
    assert_eq!(change["role"], "approver");
    assert!(proposed.get("invitation_token").is_none());
    assert_eq!(
        app.sql_count("select count(*) from users").await,
        users_before
    );
    // The same request again answers the same proposal.
    let again = app
        .post(
            "/v1/users",
            a1,
            json!({"email": email.to_uppercase(), "role": "approver"}),
        )
        .await;
    assert_eq!(
        expect_status(again, StatusCode::ACCEPTED).await["change"]["id"],
        change["id"]
    );
    // An operator is a proposal too under four eyes (see the next test for why).
    let res = app
        .post(
            "/v1/users",
            a1,
            json!({"email": format!("ops-{}@example.com", uuid::Uuid::new_v4().simple()), "role": "operator"}),
        )
        .await;
    let operator = expect_status(res, StatusCode::ACCEPTED).await;
    assert_eq!(operator["change"]["role"], "operator");
    assert_ne!(operator["change"]["id"], change["id"]);
    assert_eq!(
        app.sql_count("select count(*) from users").await,
        users_before
    );
    expect_problem(
        app.post(&confirm_path(change), a1, json!({})).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;
    // A2 confirms: the human is created, and the one-time token goes to A2, not A1.
    let done = expect_status(
        app.post(&confirm_path(change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["change"]["state"], "confirmed");
    let invitation = &done["invitation"];
    assert_eq!(invitation["user"]["email"], email.as_str());
    assert_eq!(invitation["user"]["role"], "approver");
    assert_eq!(invitation["user"]["state"], "invited");
    let user_id = uuid_of(&invitation["user"]["id"]);
    let trail = app.audit_actions(org.org_id, user_id).await;
    assert_eq!(trail, ["user.invited"]);
    let by_a2 = app
        .sql_count(&format!(
            "select count(*) from audit_events where action = 'user.invited' and subject_id = {} and actor_id = {}",
            crate::helpers::sql_uuid(&app.database_url, &user_id.to_string()),
            crate::helpers::sql_uuid(&app.database_url, &a2_id.to_string()),
        ))
        .await;
    assert_eq!(by_a2, 1, "the confirming approver created the human");
    let invited_by = app
        .sql_count(&format!(
            "select count(*) from invitations where invited_by = {} and user_id = {}",
            crate::helpers::sql_uuid(&app.database_url, &org.approver_id.to_string()),
            crate::helpers::sql_uuid(&app.database_url, &user_id.to_string()),
        ))
        .await;
    assert_eq!(invited_by, 1, "the invitation names who asked for it");
    let accepted = app
        .post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": invitation["invitation_token"], "password": PASSWORD}),
        )
        .await;
    let session = expect_status(accepted, StatusCode::CREATED).await;
    assert_eq!(session["user"]["state"], "active");
    // A replayed confirm does not show the token again.
    let replay = expect_status(
        app.post(&confirm_path(change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert!(replay["invitation"].is_null());
}

/// The sock puppet: four eyes refuses an approver the invoices of agents *they* own, and any
/// human may own agents. An operator account the approver controls would own an agent for them;
/// with `shared_review` on, its invoices reach the approver as someone else's. So under four eyes
/// an operator invitation is a proposal too, and its token goes to the confirming approver.
async fn one_approver_cannot_invite_an_operator_to_own_agents_for_them(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    // With four eyes off an operator is invited at once, token and all.
    let early = format!("early-ops-{}@example.com", uuid::Uuid::new_v4().simple());
    let invited = expect_status(
        app.post("/v1/users", a1, json!({"email": early, "role": "operator"}))
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(invited["user"]["role"], "operator");
    assert!(invited["invitation_token"].is_string());

    app.set_org(a1, json!({"four_eyes": true, "shared_review": true}))
        .await;
    let users_before = app.sql_count("select count(*) from users").await;
    let invitations_before = app.sql_count("select count(*) from invitations").await;

    // The attack: A1 invites an operator account, to accept it, create an agent as that
    // operator and approve the agent's invoices. A proposal; no human, no token.
    let puppet = format!("puppet-{}@example.com", uuid::Uuid::new_v4().simple());
    let res = app
        .post(
            "/v1/users",
            a1,
            json!({"email": puppet, "role": "operator"}),
        )
        .await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = &proposed["change"];
    assert_eq!(change["state"], "pending");
    assert_eq!(change["role"], "operator");
    assert_eq!(change["email"], puppet.as_str());
    assert_eq!(change["proposed_by"], org.approver_id.to_string());
    assert!(proposed.get("invitation_token").is_none());
    assert!(proposed.get("user").is_none());
    assert_eq!(
        app.sql_count("select count(*) from users").await,
        users_before
    );
    assert_eq!(
        app.sql_count("select count(*) from invitations").await,
        invitations_before
    );
    let list = expect_status(app.get("/v1/users", a1).await, StatusCode::OK).await;
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["email"] != puppet.as_str()),
        "no account exists that A1 could sign in as"
    );
    // A1 cannot confirm it alone.
    expect_problem(
        app.post(&confirm_path(change), a1, json!({})).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;
    assert_eq!(
        app.sql_count("select count(*) from users").await,
        users_before
    );

    // A2 confirms: the operator exists now, and its one-time token is in A2's answer only.
    let done = expect_status(
        app.post(&confirm_path(change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["change"]["decided_by"], a2_id.to_string());
    let invitation = &done["invitation"];
    assert_eq!(invitation["user"]["email"], puppet.as_str());
    assert_eq!(invitation["user"]["role"], "operator");
    assert_eq!(invitation["user"]["state"], "invited");
    assert!(invitation["invitation_token"].is_string());
}

async fn turning_four_eyes_on_is_immediate_and_proposals_can_be_withdrawn_or_lapse(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (_, a2) = app.human(a1, "approver").await;
    let on = expect_status(
        app.patch("/v1/organisation", a1, json!({"four_eyes": true}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(on["four_eyes"], true);
    // shared_review alone is immediate too.
    let shared = expect_status(
        app.patch("/v1/organisation", a1, json!({"shared_review": true}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        (shared["four_eyes"].clone(), shared["shared_review"].clone()),
        (json!(true), json!(true))
    );

    // The whole request waits when it turns four_eyes off, shared_review included.
    let res = app
        .patch(
            "/v1/organisation",
            a1,
            json!({"four_eyes": false, "shared_review": false}),
        )
        .await;
    let change = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    assert_eq!(change["shared_review"], false);
    assert_eq!(org_settings(&app, a1).await, (true, true));

    // The proposer withdraws it; it can no longer be confirmed.
    let withdrawn = expect_status(
        app.post(&reject_path(&change), a1, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(withdrawn["change"]["state"], "rejected");
    assert_eq!(withdrawn["organisation"]["four_eyes"], true);
    expect_problem(
        app.post(&confirm_path(&change), &a2, json!({})).await,
        StatusCode::CONFLICT,
        "change_decided",
    )
    .await;
    assert_eq!(org_settings(&app, a1).await, (true, true));

    // A proposal nobody confirms lapses after 7 days: it shows as expired and cannot be
    // confirmed. (Its expiry is moved into the past here.)
    let res = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    let lapsing = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    assert_ne!(
        lapsing["id"], change["id"],
        "a withdrawn proposal is not answered again"
    );
    let expires_at = chrono::DateTime::parse_from_rfc3339(lapsing["expires_at"].as_str().unwrap())
        .unwrap()
        - chrono::DateTime::parse_from_rfc3339(lapsing["created_at"].as_str().unwrap()).unwrap();
    assert_eq!(expires_at.num_days(), 7);
    let moved = app
        .sql_exec(&format!(
            "update org_changes set expires_at = '2000-01-01T00:00:00+00:00' where id = {}",
            crate::helpers::sql_uuid(&app.database_url, lapsing["id"].as_str().unwrap())
        ))
        .await;
    assert!(moved);
    let seen = expect_status(
        app.get(
            &format!(
                "/v1/organisation/changes/{}",
                lapsing["id"].as_str().unwrap()
            ),
            a1,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(seen["state"], "expired");
    expect_problem(
        app.post(&confirm_path(&lapsing), &a2, json!({})).await,
        StatusCode::CONFLICT,
        "change_expired",
    )
    .await;
    let ids = |list: Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let expired = expect_status(
        app.get("/v1/organisation/changes?state=expired", a1).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(ids(expired), [lapsing["id"].as_str().unwrap()]);
    let pending = expect_status(
        app.get("/v1/organisation/changes?state=pending", a1).await,
        StatusCode::OK,
    )
    .await;
    assert!(ids(pending).is_empty());
    let all = expect_status(
        app.get("/v1/organisation/changes", a1).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        ids(all),
        [
            lapsing["id"].as_str().unwrap(),
            change["id"].as_str().unwrap()
        ],
        "newest first"
    );
    let bad = expect_problem(
        app.get("/v1/organisation/changes?state=maybe", a1).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(bad.errors[0].field, "state");
    // A lapsed proposal no longer answers a repeated request: a fresh one is made.
    let res = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    let fresh = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    assert_ne!(fresh["id"], lapsing["id"]);
    assert_eq!(fresh["state"], "pending");
}

async fn decision_events_record_the_settings_in_force(app: TestApp) {
    let b = app.billing().await;
    let a1 = &b.org.approver_token;
    let (_, a2) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true, "shared_review": true}))
        .await;
    // A2 decides on A1's agent's invoice under four eyes with shared review.
    let first = app.pending(&b, "under-four-eyes").await;
    expect_status(app.approve(&a2, &first).await, StatusCode::OK).await;
    app.set_org_confirmed(a1, &a2, json!({"four_eyes": false, "shared_review": false}))
        .await;
    let second = app.pending(&b, "without").await;
    let body = TestApp::decision_body(&second, Some("Wrong customer."));
    expect_status(
        app.command(a1, id_of(&second), "reject", body).await,
        StatusCode::OK,
    )
    .await;
    for (invoice, decision, expected) in [
        (&first, "approve", (true, true)),
        (&second, "reject", (false, false)),
    ] {
        let events = expect_status(
            app.get(&format!("/v1/invoices/{}/events", id_of(invoice)), a1)
                .await,
            StatusCode::OK,
        )
        .await;
        for event in events["items"].as_array().unwrap() {
            if event["action"] == decision {
                assert_eq!(
                    (
                        event["four_eyes"].as_bool(),
                        event["shared_review"].as_bool()
                    ),
                    (Some(expected.0), Some(expected.1)),
                    "{event}"
                );
            } else {
                assert!(event["four_eyes"].is_null(), "{event}");
                assert!(event["shared_review"].is_null(), "{event}");
            }
        }
        // The settings are part of the chain: intact, and tampering with them is detected.
        let report = app.verify(a1, id_of(invoice)).await;
        assert_eq!(report["ok"], true, "{report}");
    }
    let tampered = app
        .sql_exec(&format!(
            "update invoice_events set four_eyes = {} where action = 'reject'",
            if app.database_url.starts_with("sqlite") {
                "1"
            } else {
                "true"
            }
        ))
        .await;
    assert!(!tampered, "events are append-only");
}

fn org_set(database_url: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["org", "set"])
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("TAUROS_LOG", "warn")
        .output()
        .expect("run tauros org set")
}

async fn the_operator_switches_four_eyes_from_the_command_line(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    app.set_org(a1, json!({"four_eyes": true})).await;
    // A one-approver organisation: through the API, four eyes can no longer be turned off.
    let res = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    expect_status(res, StatusCode::ACCEPTED).await;
    let name: String = app
        .sql_scalar(&format!(
            "select name from orgs where id = {}",
            crate::helpers::sql_uuid(&app.database_url, &org.org_id.to_string())
        ))
        .await;
    let url = app.database_url.clone();
    let out = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || org_set(&url, &["--org", &name, "--four-eyes", "off"]))
            .await
            .unwrap()
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("four_eyes off"), "{said}");
    assert_eq!(org_settings(&app, a1).await, (false, false));
    let cli: i64 = app
        .sql_count(&format!(
            "select count(*) from audit_events where action = 'org.settings_changed'
             and interface = 'cli' and actor_kind = 'system' and actor_id is null and org_id = {}",
            crate::helpers::sql_uuid(&app.database_url, &org.org_id.to_string())
        ))
        .await;
    assert_eq!(cli, 1);

    // An unknown organisation or no setting: a clear message, a failure exit, nothing changed.
    let url = app.database_url.clone();
    let (unknown, nothing) = tokio::task::spawn_blocking(move || {
        (
            org_set(&url, &["--org", "No Such Org", "--four-eyes", "on"]),
            org_set(&url, &["--org", &name]),
        )
    })
    .await
    .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no organisation is named"));
    assert!(!nothing.status.success());
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("--four-eyes"));
    assert_eq!(org_settings(&app, a1).await, (false, false));
}

async fn only_approvers_of_the_org_see_and_decide_proposals(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (_, operator) = app.human(a1, "operator").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let res = app
        .patch("/v1/organisation", a1, json!({"four_eyes": false}))
        .await;
    let change = expect_status(res, StatusCode::ACCEPTED).await["change"].clone();
    let one = format!(
        "/v1/organisation/changes/{}",
        change["id"].as_str().unwrap()
    );
    for token in [operator.as_str(), org.agent_key.as_str()] {
        for res in [
            app.get("/v1/organisation/changes", token).await,
            app.get(&one, token).await,
            app.post(&confirm_path(&change), token, json!({})).await,
            app.post(&reject_path(&change), token, json!({})).await,
        ] {
            expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
        }
    }
    // Another organisation's approver: the proposal does not exist for them.
    let other = app.org().await;
    for res in [
        app.get(&one, &other.approver_token).await,
        app.post(&confirm_path(&change), &other.approver_token, json!({}))
            .await,
        app.post(&reject_path(&change), &other.approver_token, json!({}))
            .await,
    ] {
        expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    }
    let theirs = expect_status(
        app.get("/v1/organisation/changes", &other.approver_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(theirs["items"], json!([]));
    assert_eq!(org_settings(&app, a1).await, (true, false));
    let state = expect_status(app.get(&one, a1).await, StatusCode::OK).await["state"].clone();
    assert_eq!(state, "pending");
}

async fn concurrent_proposals_and_confirmations_decide_once(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (_, a2) = app.human(a1, "approver").await;
    let (_, a3) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    // Eight identical proposals at once: one proposal.
    let requests = (0..8)
        .map(|_| {
            app.client
                .patch(app.url("/v1/organisation"))
                .bearer_auth(a1)
                .json(&json!({"four_eyes": false}))
        })
        .collect();
    let mut ids = Vec::new();
    for res in parallel(requests).await {
        ids.push(expect_status(res, StatusCode::ACCEPTED).await["change"]["id"].clone());
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(app.sql_count("select count(*) from org_changes").await, 1);
    let change = json!({"id": ids[0]});
    // Two other approvers confirm at once: one applies it, the other hears it is decided.
    let requests = [&a2, &a3]
        .iter()
        .map(|t| app.post_request(&confirm_path(&change), t, &json!({})))
        .collect();
    let answers = parallel(requests).await;
    assert_eq!(
        tally(answers.iter().map(Response::status)),
        BTreeMap::from([(200, 1), (409, 1)])
    );
    assert_eq!(org_settings(&app, a1).await, (false, false));
    let confirmed = app
        .sql_count("select count(*) from audit_events where action = 'org.change_confirmed'")
        .await;
    assert_eq!(confirmed, 1);
}
