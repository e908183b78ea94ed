//! Destination safety: inactive destinations receive nothing; supersede and deactivate rules.

use crate::helpers::{
    IBAN, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body_for, uuid_of,
};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

both_backends!(
    inactive_destinations_receive_nothing,
    supersede_and_deactivate_rules,
);

async fn inactive_destinations_receive_nothing(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;

    // Naming a deactivated destination on create or revise: 422 on payment_destination_id.
    let retired = app.destination(key, "EUR", "iban", IBAN).await;
    app.deactivate(key, retired).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.create_invoice(key, "to-retired", &invoice_body_for(b.customer_id, retired))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "payment_destination_id");
    assert_eq!(problem.errors[0].code, "destination_inactive");
    let draft = app.draft(&b, "draft").await;
    let before_revise = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(
            key,
            id_of(&draft),
            "revise",
            json!({"reasoning": "pay elsewhere", "payment_destination_id": retired}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "payment_destination_id");
    assert_eq!(app.invoice_rows().await, before_revise);
    assert_eq!(
        before[0] + 1,
        before_revise[0],
        "only the good draft was written"
    );

    // A draft whose destination is deactivated before submit.
    let d2 = app.destination(key, "EUR", "iban", IBAN).await;
    let draft = expect_status(
        app.create_invoice(key, "d2", &invoice_body_for(b.customer_id, d2))
            .await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    app.deactivate(approver, d2).await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(key, id_of(&draft), "submit", json!({})).await,
        StatusCode::CONFLICT,
        "destination_inactive",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(app.invoice(key, id_of(&draft)).await["state"], "draft");

    // Pending invoices whose destination is deactivated after submit: approve is refused,
    // reject and request-changes still work.
    let d3 = app.destination(key, "EUR", "iban", IBAN).await;
    let mut pending = Vec::new();
    for n in 0..3 {
        let created = expect_status(
            app.create_invoice(
                key,
                &format!("d3-{n}"),
                &invoice_body_for(b.customer_id, d3),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
        let id = id_of(&created["invoice"]);
        pending.push(
            expect_status(
                app.command(key, id, "submit", json!({})).await,
                StatusCode::OK,
            )
            .await["invoice"]
                .clone(),
        );
    }
    app.deactivate(key, d3).await;
    let before = app.invoice_rows().await;
    for invoice in &pending {
        expect_problem(
            app.approve(approver, invoice).await,
            StatusCode::CONFLICT,
            "destination_inactive",
        )
        .await;
    }
    assert_eq!(app.invoice_rows().await, before);
    let rejected = expect_status(
        app.command(
            approver,
            id_of(&pending[0]),
            "reject",
            TestApp::decision_body(&pending[0], Some("The account is closed.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(rejected["invoice"]["state"], "rejected");
    let sent_back = expect_status(
        app.command(
            approver,
            id_of(&pending[1]),
            "request-changes",
            TestApp::decision_body(&pending[1], Some("Use the new account.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(sent_back["invoice"]["state"], "draft");
    // The agent revises onto an active destination; now it can be approved.
    let revised = expect_status(
        app.command(
            key,
            id_of(&pending[1]),
            "revise",
            json!({"reasoning": "New account.", "payment_destination_id": b.destination_id}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(revised["replayed"], false);
    let resubmitted = expect_status(
        app.command(key, id_of(&pending[1]), "submit", json!({}))
            .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    let approved = expect_status(app.approve(approver, &resubmitted).await, StatusCode::OK).await;
    assert_eq!(approved["invoice"]["state"], "approved");
    assert_eq!(
        app.invoice(approver, id_of(&pending[2])).await["state"],
        "pending_approval"
    );
}

async fn supersede_and_deactivate_rules(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let old = b.destination_id;
    let body = |supersedes: Uuid| {
        json!({"label": "New account", "currency": "EUR", "network": "iban",
               "address": "CH9300762011623852957", "supersedes_id": supersedes})
    };
    let replacement = expect_status(
        app.post("/v1/payment-destinations", key, body(old)).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(replacement["supersedes_id"], old.to_string());
    assert_eq!(replacement["state"], "active");
    let read = expect_status(
        app.get(&format!("/v1/payment-destinations/{old}"), key)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["state"], "superseded");

    // A second replacement of the same destination is refused, nothing written.
    let destinations = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    let problem = expect_problem(
        app.post("/v1/payment-destinations", key, body(old)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "supersedes_id");
    // So is superseding a deactivated one, a random id, or another agent's.
    let other = app.org().await;
    let theirs = app.destination(&other.agent_key, "EUR", "iban", IBAN).await;
    let retired = app.destination(key, "EUR", "iban", IBAN).await;
    app.deactivate(key, retired).await;
    let destinations_then = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    for target in [retired, Uuid::new_v4(), theirs] {
        let problem = expect_problem(
            app.post("/v1/payment-destinations", key, body(target))
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.errors[0].field, "supersedes_id");
    }
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations")
            .await,
        destinations_then
    );
    assert_eq!(
        destinations + 2,
        destinations_then,
        "theirs and retired only"
    );
    // A superseded destination receives nothing new.
    let problem = expect_problem(
        app.create_invoice(key, "to-superseded", &invoice_body_for(b.customer_id, old))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "payment_destination_id");

    // Deactivate is idempotent: 200 twice, one audit event.
    let id = uuid_of(&replacement["id"]);
    let first = app.deactivate(key, id).await;
    assert_eq!(first["state"], "deactivated");
    let second = app.deactivate(&b.org.approver_token, id).await;
    assert_eq!(
        second, first,
        "the second answer is the destination as it is"
    );
    // Deactivating a superseded destination keeps it superseded and writes nothing.
    let still = app.deactivate(key, old).await;
    assert_eq!(still["state"], "superseded");
    assert_eq!(
        app.audit_actions(b.org.org_id, id).await,
        ["destination.created", "destination.deactivated"]
    );
    assert_eq!(
        app.audit_actions(b.org.org_id, old).await,
        ["destination.created", "destination.superseded"]
    );
}
