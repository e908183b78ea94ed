//! Authority escalation: agents never decide, cancel or write history, and neither
//! does an operator; smuggled fields are refused and write nothing.

use super::identical;
use crate::helpers::{
    IBAN, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body,
    invoice_body_for,
};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

both_backends!(
    agents_never_decide_or_cancel,
    smuggled_fields_are_refused_and_nothing_is_written,
);

async fn agents_never_decide_or_cancel(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let before = app.invoice_rows().await;
    for (action, reason) in [
        ("approve", None),
        ("reject", Some("no")),
        ("request-changes", Some("redo")),
    ] {
        let problem = expect_problem(
            app.command(
                &b.org.agent_key,
                id,
                action,
                TestApp::decision_body(&pending, reason),
            )
            .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        assert!(
            problem.detail.contains("human approver"),
            "the refusal says who may: {problem}"
        );
    }
    // Who may act is answered before what was sent: without a reason, still 403 (and 404 for
    // a stranger, exactly as for a random id), not "reason is required".
    for action in ["reject", "request-changes"] {
        let body = TestApp::decision_body(&pending, None);
        expect_problem(
            app.command(&b.org.agent_key, id, action, body.clone())
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        let stranger = app.org().await;
        let (status, _) = identical(
            app.command(&stranger.approver_token, id, action, body.clone())
                .await,
            app.command(
                &stranger.approver_token,
                &Uuid::new_v4().to_string(),
                action,
                body.clone(),
            )
            .await,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The approver who may decide learns what is missing.
        let problem = expect_problem(
            app.command(&b.org.approver_token, id, action, body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.errors[0].field, "reason");
        assert_eq!(problem.errors[0].code, "required");
    }
    // Decisions, events and revisions cannot be written directly, by anyone: there is no
    // route, and the invoice itself has no generic update.
    let forged = json!({"revision_id": pending["current_revision"]["id"], "decision": "approved",
                        "payload_hash": pending["current_revision"]["payload_hash"],
                        "approver_id": b.org.approver_id, "state": "approved"});
    for token in [&b.org.agent_key, &b.org.approver_token] {
        for suffix in ["/decisions", "/events", "/revisions"] {
            expect_problem(
                app.post(&format!("/v1/invoices/{id}{suffix}"), token, forged.clone())
                    .await,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
            .await;
        }
        expect_problem(
            app.patch(&format!("/v1/invoices/{id}"), token, forged.clone())
                .await,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        )
        .await;
        expect_problem(
            app.delete(&format!("/v1/invoices/{id}"), token).await,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        )
        .await;
    }
    assert_eq!(app.invoice_rows().await, before, "refusals write nothing");
    let now = app.invoice(&b.org.approver_token, id).await;
    assert_eq!(now["state"], "pending_approval");
    assert!(app.decisions(&b.org.approver_token, id).await.is_empty());

    // Approved by the human; the agent still cannot cancel.
    expect_status(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(
            &b.org.agent_key,
            id,
            "cancel",
            json!({"reason": "the agent wants out"}),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.command(&b.org.agent_key, id, "cancel", json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let problem = expect_problem(
        app.command(&b.org.approver_token, id, "cancel", json!({}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "reason");
    // Nor withdraw or revise an approved invoice (state rules, after authority).
    expect_problem(
        app.command(&b.org.agent_key, id, "withdraw", json!({}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(
        app.invoice(&b.org.approver_token, id).await["state"],
        "approved"
    );
    // An operator who owns an agent cannot decide either.
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    let (op_agent, op_key) = app.agent(&operator, "Operator's").await;
    let op_key = op_key.as_str();
    let customer = app.customer(&operator, op_agent, "Op customer").await;
    let destination = app.destination(op_key, "EUR", "iban", IBAN).await;
    let body = invoice_body_for(customer, destination);
    let draft = expect_status(
        app.create_invoice(op_key, "op-1", &body).await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    let pending = expect_status(
        app.command(op_key, id_of(&draft), "submit", json!({}))
            .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    expect_problem(
        app.approve(&operator, &pending).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(app.decisions(&operator, id_of(&pending)).await.is_empty());
}

async fn smuggled_fields_are_refused_and_nothing_is_written(app: TestApp) {
    let b = app.billing().await;
    let draft = app.draft(&b, "inv-1").await;
    let id = id_of(&draft);
    let before = app.invoice_rows().await;
    let smuggled = [
        ("state", json!("approved")),
        ("total_minor", json!(1)),
        (
            "payload_hash",
            json!("0000000000000000000000000000000000000000000000000000000000000000"),
        ),
        ("agent_id", json!(Uuid::new_v4())),
        ("approver_id", json!(b.org.approver_id)),
    ];
    for (field, value) in &smuggled {
        let mut body = invoice_body(&b);
        body[*field] = value.clone();
        let problem = expect_problem(
            app.create_invoice(&b.org.agent_key, &format!("smuggle-{field}"), &body)
                .await,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        )
        .await;
        assert_eq!(problem.body["field"], *field, "{problem}");
        assert!(problem.detail.contains(field));

        let problem = expect_problem(
            app.command(&b.org.agent_key, id, "revise", {
                let mut body = json!({"reasoning": "sneaky"});
                body[*field] = value.clone();
                body
            })
            .await,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        )
        .await;
        assert_eq!(problem.body["field"], *field, "{problem}");
    }
    // Inside a line, the path names the line.
    let mut body = invoice_body(&b);
    body["lines"][1]["amount_minor"] = json!(1);
    let problem = expect_problem(
        app.create_invoice(&b.org.agent_key, "smuggle-line", &body)
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "lines[1].amount_minor");
    // Commands take no state either.
    for (action, smuggled) in [("submit", "approved"), ("withdraw", "draft")] {
        let body = json!({ "state": smuggled });
        let res = app.command(&b.org.agent_key, id, action, body).await;
        let problem = expect_problem(res, StatusCode::BAD_REQUEST, "unknown_field").await;
        assert_eq!(problem.body["field"], "state", "{action}");
    }
    assert_eq!(app.invoice_rows().await, before, "nothing was written");
    let now = app.invoice(&b.org.agent_key, id).await;
    assert_eq!(now["state"], "draft");
    assert_eq!(now["revision_count"], 1);
    assert_eq!(now["agent_id"], b.org.agent_id.to_string());
    assert_eq!(now["current_revision"]["total_minor"], 120000);
}
