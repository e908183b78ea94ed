//! State manipulation: illegal moves are `invalid_transition`; a decision names one exact
//! revision and its hash.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, id_of};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

both_backends!(
    illegal_moves_are_invalid_transitions,
    a_decision_names_one_exact_revision_and_hash,
);

async fn illegal_moves_are_invalid_transitions(app: TestApp) {
    let b = app.billing().await;
    let approver = &b.org.approver_token;
    let key = &b.org.agent_key;

    // Approving a draft.
    let draft = app.draft(&b, "draft").await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(approver, &draft).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(problem.body["from"], "draft");
    assert_eq!(problem.body["action"], "approve");
    assert!(
        problem
            .detail
            .contains("`approve` is not allowed while the invoice is `draft`"),
        "{problem}"
    );
    assert_eq!(app.invoice_rows().await, before);

    // Revising, submitting or withdrawing an approved invoice.
    let pending = app.pending(&b, "approved").await;
    let id = id_of(&pending);
    expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "one more change", "due_date": (chrono::Utc::now() + chrono::Duration::days(60)).date_naive().to_string()}),
        )
        .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem.body["from"], &problem.body["action"]),
        (&json!("approved"), &json!("revise"))
    );
    for action in ["submit", "withdraw"] {
        let problem = expect_problem(
            app.command(key, id, action, json!({})).await,
            StatusCode::CONFLICT,
            "invalid_transition",
        )
        .await;
        assert_eq!(problem.body["from"], "approved");
        assert_eq!(problem.body["action"], action);
    }
    assert_eq!(app.invoice_rows().await, before);

    // Approving a rejected invoice: the revision is decided, and it stays rejected.
    let pending = app.pending(&b, "rejected").await;
    let id = id_of(&pending);
    expect_status(
        app.command(
            approver,
            id,
            "reject",
            TestApp::decision_body(&pending, Some("Not agreed.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.approve(approver, &pending).await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(app.invoice(approver, id).await["state"], "rejected");
    let problem = expect_problem(
        app.command(key, id, "revise", json!({"reasoning": "try again"}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(problem.body["from"], "rejected");

    // Approving, submitting or revising a withdrawn invoice (a stale copy after withdraw).
    let pending = app.pending(&b, "withdrawn").await;
    let id = id_of(&pending);
    expect_status(
        app.command(key, id, "withdraw", json!({})).await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(approver, &pending).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem.body["from"], &problem.body["action"]),
        (&json!("cancelled"), &json!("approve"))
    );
    let problem = expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem.body["from"], &problem.body["action"]),
        (&json!("cancelled"), &json!("submit"))
    );
    expect_problem(
        app.command(key, id, "revise", json!({"reasoning": "again"}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
}

async fn a_decision_names_one_exact_revision_and_hash(app: TestApp) {
    let b = app.billing().await;
    let approver = &b.org.approver_token;
    let key = &b.org.agent_key;
    let r1 = app.pending(&b, "inv-1").await;
    let id = id_of(&r1);
    // Revise (back to draft, revision 2) and submit again.
    let revised = expect_status(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "Workshop ran long.", "lines": [{"description": "Discovery workshop", "quantity": "1", "unit_amount": "1250.00"}]}),
        )
        .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    assert_eq!(revised["state"], "draft");
    assert_eq!(revised["current_revision"]["number"], 2);
    let r2 = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    let other = app.pending(&b, "inv-2").await;
    let before = app.invoice_rows().await;

    // The reviewer's copy of revision 1 is stale.
    let problem = expect_problem(
        app.approve(approver, &r1).await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    assert!(
        problem
            .detail
            .contains(r2["current_revision"]["id"].as_str().unwrap()),
        "the detail names the current revision: {problem}"
    );
    // The current revision with revision 1's hash, or any other well-formed hash.
    for hash in [
        r1["current_revision"]["payload_hash"].clone(),
        json!("0".repeat(64)),
    ] {
        expect_problem(
            app.command(
                approver,
                id,
                "approve",
                json!({"revision_id": r2["current_revision"]["id"], "payload_hash": hash}),
            )
            .await,
            StatusCode::CONFLICT,
            "payload_mismatch",
        )
        .await;
    }
    // Something that is not a hash as Tauros writes it (even the right one in upper case) is a
    // field error, never mistaken for a mismatch.
    let upper = r2["current_revision"]["payload_hash"]
        .as_str()
        .unwrap()
        .to_uppercase();
    for hash in ["not a hash", "", &upper] {
        let problem = expect_problem(
            app.command(
                approver,
                id,
                "reject",
                json!({"revision_id": r2["current_revision"]["id"], "payload_hash": hash}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        let fields = problem.fields();
        assert_eq!(fields, ["payload_hash", "reason"], "all at once: {problem}");
    }
    // A revision (and its hash) of another invoice.
    expect_problem(
        app.command(
            approver,
            id,
            "approve",
            TestApp::decision_body(&other, None),
        )
        .await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    // A revision id that exists nowhere.
    expect_problem(
        app.command(
            approver,
            id,
            "approve",
            json!({"revision_id": Uuid::new_v4(), "payload_hash": r2["current_revision"]["payload_hash"]}),
        )
        .await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    assert_eq!(
        app.invoice_rows().await,
        before,
        "no refused decision wrote anything"
    );
    assert!(app.decisions(approver, id).await.is_empty());

    // The exact current revision and hash: approved; the decision records them.
    let approved = expect_status(app.approve(approver, &r2).await, StatusCode::OK).await;
    assert_eq!(approved["invoice"]["state"], "approved");
    let decided = app.decisions(approver, id).await;
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["revision_id"], r2["current_revision"]["id"]);
    assert_eq!(
        decided[0]["payload_hash"],
        r2["current_revision"]["payload_hash"]
    );
    assert_eq!(decided[0]["approver_id"], b.org.approver_id.to_string());
}
