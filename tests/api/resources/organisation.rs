//! The organisation's settings: humans read them, approvers change them, changes are audited.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(
    approvers_change_settings_and_changes_are_audited,
    operators_and_agents_may_not_change_settings
);

async fn approvers_change_settings_and_changes_are_audited(app: TestApp) {
    let org = app.org().await;
    let read = expect_status(
        app.get("/v1/organisation", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["id"], org.org_id.to_string());
    assert_eq!(read["four_eyes"], false);
    assert_eq!(read["shared_review"], false);
    let changed = app
        .set_org(&org.approver_token, json!({"four_eyes": true}))
        .await;
    assert_eq!(changed["four_eyes"], true);
    assert_eq!(
        changed["shared_review"], false,
        "omitted settings keep their value"
    );
    // The same change again writes nothing.
    app.set_org(&org.approver_token, json!({"four_eyes": true}))
        .await;
    let changed = app
        .set_org(&org.approver_token, json!({"shared_review": true}))
        .await;
    assert_eq!(changed["four_eyes"], true);
    assert_eq!(changed["shared_review"], true);
    let read = expect_status(
        app.get("/v1/organisation", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read, changed);
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let trail = conn
        .audit_for_subject(org.org_id, org.org_id)
        .await
        .unwrap();
    assert_eq!(trail.len(), 2, "one event per actual change");
    assert!(
        trail
            .iter()
            .all(|e| e.action == "org.settings_changed" && e.actor_id == Some(org.approver_id))
    );
    // Floats, strings and unknown settings are refused.
    let problem = expect_problem(
        app.patch(
            "/v1/organisation",
            &org.approver_token,
            json!({"four_eyes": "yes"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(problem.body["field"], "four_eyes");
    let problem = expect_problem(
        app.patch(
            "/v1/organisation",
            &org.approver_token,
            json!({"name": "Evil"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "name");
}

async fn operators_and_agents_may_not_change_settings(app: TestApp) {
    let org = app.org().await;
    let (_, operator) = app.human(&org.approver_token, "operator").await;
    expect_status(app.get("/v1/organisation", &operator).await, StatusCode::OK).await;
    expect_problem(
        app.patch("/v1/organisation", &operator, json!({"four_eyes": true}))
            .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.get("/v1/organisation", &org.agent_key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.patch(
            "/v1/organisation",
            &org.agent_key,
            json!({"four_eyes": true}),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let read = expect_status(
        app.get("/v1/organisation", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["four_eyes"], false);
    // Another org's approver sees only their own organisation.
    let other = app.org().await;
    let theirs = expect_status(
        app.get("/v1/organisation", &other.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(theirs["id"], other.org_id.to_string());
}
