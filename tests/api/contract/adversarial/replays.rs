//! Replay rules: only the same command by the same caller replays.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, id_of};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(replays_count_only_for_the_same_command,);

async fn replays_count_only_for_the_same_command(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;

    // Submit twice, withdraw twice: the second is a replay, with no event.
    let pending = app.pending(&b, "withdrawn").await;
    let id = id_of(&pending);
    let replay = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(
        replay["invoice"]["updated_at"], pending["updated_at"],
        "a replay changes nothing, not even updated_at"
    );
    let first = expect_status(
        app.command(key, id, "withdraw", json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(first["replayed"], false);
    let res = app.command(approver, id, "withdraw", json!({})).await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let second = expect_status(res, StatusCode::OK).await;
    assert_eq!(second["replayed"], true);
    assert_eq!(second["invoice"]["state"], "cancelled");
    assert_eq!(
        app.event_actions(key, id).await,
        ["create_draft", "submit", "withdraw"]
    );
    // Cancel on a withdrawn invoice is not a replay.
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(approver, id, "cancel", json!({"reason": "Cancel it too."}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem.body["from"], &problem.body["action"]),
        (&json!("cancelled"), &json!("cancel"))
    );
    assert_eq!(app.invoice_rows().await, before);

    // Approve, then cancel twice; withdraw on the cancelled invoice is not a replay.
    let pending = app.pending(&b, "cancelled").await;
    let id = id_of(&pending);
    let approved = expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    assert_eq!(approved["replayed"], false);
    // The same approver approving again: a replay.
    let again = expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["invoice"]["state"], "approved");
    // Another approver (who sees it through shared_review): already decided.
    let (_, other) = app.human(approver, "approver").await;
    app.set_org(approver, json!({"shared_review": true})).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(&other, &pending).await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert!(problem.detail.contains("approved"));
    // The same approver with another decision on the same revision: already decided too.
    expect_problem(
        app.command(
            approver,
            id,
            "reject",
            TestApp::decision_body(&pending, Some("Changed my mind.")),
        )
        .await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    let cancelled = expect_status(
        app.command(
            approver,
            id,
            "cancel",
            json!({"reason": "Customer went bust."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["state"], "cancelled");
    let again = expect_status(
        app.command(
            approver,
            id,
            "cancel",
            json!({"reason": "Customer went bust."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["replayed"], true);
    let before = app.invoice_rows().await;
    for token in [key, approver] {
        let problem = expect_problem(
            app.command(token, id, "withdraw", json!({})).await,
            StatusCode::CONFLICT,
            "invalid_transition",
        )
        .await;
        assert_eq!(
            (&problem.body["from"], &problem.body["action"]),
            (&json!("cancelled"), &json!("withdraw"))
        );
    }
    assert_eq!(app.invoice_rows().await, before);
    let events = expect_status(
        app.get(&format!("/v1/invoices/{id}/events"), approver)
            .await,
        StatusCode::OK,
    )
    .await;
    let last = events["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "cancel");
    assert_eq!(last["note"], "Customer went bust.");
    assert_eq!(
        app.event_actions(key, id).await,
        ["create_draft", "submit", "approve", "cancel"]
    );
}
