//! A repeated command succeeds whatever happened since (docs/contract/domain.md §7): the replay is
//! recognised before any rule about parties, dates or destinations is checked again, answers 200
//! with `replayed: true` and the invoice as it is now, and writes no event.

use crate::helpers::{IBAN, TestApp, both_backends, expect_problem, expect_status, invoice_body};
use reqwest::StatusCode;
use serde_json::{Value, json};

both_backends!(
    an_identical_revise_replays_after_its_destination_was_retired,
    a_repeated_submit_replays_after_its_destination_was_retired,
    a_repeated_decision_replays_after_its_destination_was_retired,
    a_malformed_key_is_named_as_each_route_takes_it,
);

/// The number of events of an invoice.
async fn event_count(app: &TestApp, token: &str, id: &str) -> usize {
    let res = app.get(&format!("/v1/invoices/{id}/events"), token).await;
    expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .len()
}

async fn retire(app: &TestApp, key: &str, destination_id: impl std::fmt::Display) {
    let res = app
        .post(
            &format!("/v1/payment-destinations/{destination_id}/deactivate"),
            key,
            json!({}),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
}

/// Sends a command and asserts it was answered as a replay: 200, the header and the body agree.
async fn replayed(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let res = app.post(path, token, body).await;
    assert_eq!(
        res.headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["replayed"], true, "{body}");
    body["invoice"].clone()
}

async fn an_identical_revise_replays_after_its_destination_was_retired(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.draft(&b, "revise-then-retire").await;
    let id = invoice["id"].as_str().unwrap();
    let path = format!("/v1/invoices/{id}/revise");
    let revise = json!({
        "lines": [{"description": "Discovery workshop", "quantity": "3", "unit_amount": "400"}],
        "reasoning": "Three workshop days after all."
    });
    let res = app.post(&path, &b.org.agent_key, revise.clone()).await;
    let revised = expect_status(res, StatusCode::OK).await["invoice"].clone();
    let events = event_count(&app, &b.org.agent_key, id).await;

    retire(&app, &b.org.agent_key, b.destination_id).await;
    let again = replayed(&app, &b.org.agent_key, &path, revise).await;
    assert_eq!(again["current_revision"], revised["current_revision"]);
    assert_eq!(again["revision_count"], 2);
    assert_eq!(event_count(&app, &b.org.agent_key, id).await, events);

    // A revise that changes something still meets the retired destination.
    let other = json!({"due_date": "2099-01-01", "reasoning": "Later."});
    let res = app.post(&path, &b.org.agent_key, other).await;
    let problem = expect_status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(problem["errors"][0]["code"], "destination_inactive");
}

async fn a_repeated_submit_replays_after_its_destination_was_retired(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "submit-then-retire").await;
    let id = invoice["id"].as_str().unwrap();
    let events = event_count(&app, &b.org.agent_key, id).await;
    retire(&app, &b.org.agent_key, b.destination_id).await;
    let again = replayed(
        &app,
        &b.org.agent_key,
        &format!("/v1/invoices/{id}/submit"),
        json!({}),
    )
    .await;
    assert_eq!(again["state"], "pending_approval");
    assert_eq!(event_count(&app, &b.org.agent_key, id).await, events);
}

async fn a_repeated_decision_replays_after_its_destination_was_retired(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "approve-then-retire").await;
    let id = invoice["id"].as_str().unwrap();
    let path = format!("/v1/invoices/{id}/approve");
    let body = TestApp::decision_body(&invoice, None);
    let res = app.post(&path, &b.org.approver_token, body.clone()).await;
    expect_status(res, StatusCode::OK).await;
    let events = event_count(&app, &b.org.approver_token, id).await;
    retire(&app, &b.org.agent_key, b.destination_id).await;
    let again = replayed(&app, &b.org.approver_token, &path, body).await;
    assert_eq!(again["state"], "approved");
    assert_eq!(event_count(&app, &b.org.approver_token, id).await, events);
}

/// A key that breaks the rule is named the way the route took it (the destination's header by
/// the header's name, the invoice's key and the list filter as `idempotency_key`), and the rule
/// is worded the same everywhere, naming no surface's spelling of the key.
async fn a_malformed_key_is_named_as_each_route_takes_it(app: TestApp) {
    const RULE: &str = "send an idempotency key of 1–200 characters, without surrounding spaces \
                        or control characters";
    let b = app.billing().await;
    // A header's surrounding spaces never arrive; a key that is too long does.
    let long = "k".repeat(201);
    let destination = json!({"label": "A", "currency": "EUR", "network": "iban", "address": IBAN});
    let res = app
        .create_destination_request(&b.org.agent_key, &long, &destination)
        .send()
        .await
        .expect("request");
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(
        problem.detail,
        "fix these fields and send the request again: Idempotency-Key"
    );
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "Idempotency-Key");
    assert_eq!(problem.errors[0].code, "invalid_idempotency_key");
    assert_eq!(problem.errors[0].detail, RULE);

    let res = app
        .create_invoice(&b.org.agent_key, &long, &invoice_body(&b))
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "idempotency_key");
    assert_eq!(problem.errors[0].code, "invalid_idempotency_key");
    assert_eq!(problem.errors[0].detail, RULE);

    let res = app
        .get("/v1/invoices?idempotency_key=%20padded", &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "idempotency_key");
    assert_eq!(problem.errors[0].code, "invalid_idempotency_key");
    assert_eq!(problem.errors[0].detail, RULE);
}
