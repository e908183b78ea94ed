//! Revision safety: a revision must change something, and a decided revision is revised
//! before it is submitted again.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body};
use reqwest::StatusCode;
use serde_json::{Value, json};

both_backends!(revisions_must_change_something_and_be_revised_after_changes,);

async fn revisions_must_change_something_and_be_revised_after_changes(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let before = app.invoice_rows().await;

    // The same payload (amounts written another way, reworded reasoning): nothing happens, and
    // a pending invoice stays pending.
    let mut same = invoice_body(&b);
    same.as_object_mut().unwrap().remove("customer_id");
    same["lines"][0]["unit_amount"] = json!("400.00");
    same["lines"][1] = json!({"description": "Implementation days", "quantity": "2.000", "unit_amount_minor": 40000});
    for body in [
        json!({"reasoning": "Monthly retainer agreed in the signed statement of work."}),
        json!({"reasoning": "Reworded: the retainer from the signed SOW."}),
        {
            let mut b = same.clone();
            b["reasoning"] = json!("Same money, written differently.");
            b
        },
    ] {
        let res = app.command(key, id, "revise", body).await;
        assert_eq!(res.headers()["idempotent-replayed"], "true");
        let replay = expect_status(res, StatusCode::OK).await;
        assert_eq!(replay["replayed"], true);
        assert_eq!(replay["invoice"]["state"], "pending_approval");
        assert_eq!(replay["invoice"]["revision_count"], 1);
        assert_eq!(
            replay["invoice"]["current_revision"]["reasoning"],
            "Monthly retainer agreed in the signed statement of work.",
            "the stored reasoning is kept"
        );
    }
    assert_eq!(app.invoice_rows().await, before, "no revision, no event");
    assert_eq!(app.event_actions(key, id).await, ["create_draft", "submit"]);

    // After request-changes, submit needs a new revision first.
    expect_status(
        app.command(
            approver,
            id,
            "request-changes",
            TestApp::decision_body(&pending, Some("Split the days per week.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "revision_already_decided",
    )
    .await;
    // Revising to the same payload is not a new revision either.
    let replay = expect_status(
        app.command(key, id, "revise", json!({"reasoning": "As you asked."}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "revision_already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    // A real revision, then submit and approve revision 2.
    expect_status(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "Split per week.", "lines": [
                {"description": "Discovery workshop", "quantity": "1", "unit_amount": "400"},
                {"description": "Implementation, week 1", "quantity": "1", "unit_amount": "400"},
                {"description": "Implementation, week 2", "quantity": "1", "unit_amount": "400"}
            ]}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let r2 = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    assert_eq!(r2["current_revision"]["number"], 2);
    assert_eq!(r2["current_revision"]["total_minor"], 120000);
    expect_status(app.approve(approver, &r2).await, StatusCode::OK).await;
    let decided: Vec<Value> = app
        .decisions(key, id)
        .await
        .iter()
        .map(|d| d["decision"].clone())
        .collect();
    assert_eq!(decided, [json!("changes_requested"), json!("approved")]);
    assert_eq!(
        app.event_actions(key, id).await,
        [
            "create_draft",
            "submit",
            "request_changes",
            "revise",
            "submit",
            "approve"
        ]
    );
}
