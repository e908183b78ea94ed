//! The fixtures of getting paid (docs/contract/effects.md §4), shared by every file that reports
//! settlement events: a settlement-only key, an issued invoice to pay, the events about it and
//! the rows they leave. Invoices are the helpers' fixture (1200.00 EUR) and are issued by hand
//! (`POST /v1/invoices/{id}/issue`), as no issuer is configured.

use super::{Billing, TestApp, expect_status, id_of, invoice_body};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

/// `POST /v1/agents` as `token` for a settlement-only agent named `name`: the answer, as it
/// is (a grant can be refused, or be a proposal under four eyes).
pub async fn settlement_agent(app: &TestApp, token: &str, name: &str) -> Response {
    app.post(
        "/v1/agents",
        token,
        json!({"name": name, "capabilities": ["settlement"]}),
    )
    .await
}

/// The key of a new settlement-only agent named `name` of `token`'s human (201 required).
pub async fn settlement_key_named(app: &TestApp, token: &str, name: &str) -> String {
    let res = settlement_agent(app, token, name).await;
    expect_status(res, StatusCode::CREATED).await["api_key"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The key of a new settlement-only agent, "Bank feed", of `token`'s human (201 required).
pub async fn settlement_key(app: &TestApp, token: &str) -> String {
    settlement_key_named(app, token, "Bank feed").await
}

/// An organisation ready for invoices, and a settlement-only key of its approver.
pub async fn billing_with_settlement_key(app: &TestApp) -> (Billing, String) {
    let b = app.billing().await;
    let key = settlement_key(app, &b.org.approver_token).await;
    (b, key)
}

/// An issued invoice made from `body` under the agent's idempotency key `key`: created (201),
/// submitted by the agent, approved and issued by the approver (200 each); the answer.
pub async fn issued_from(app: &TestApp, b: &Billing, key: &str, body: &Value) -> Value {
    let res = app.create_invoice(&b.org.agent_key, key, body).await;
    let draft = expect_status(res, StatusCode::CREATED).await["invoice"].clone();
    let res = app
        .command(&b.org.agent_key, id_of(&draft), "submit", json!({}))
        .await;
    let pending = expect_status(res, StatusCode::OK).await["invoice"].clone();
    let res = app.approve(&b.org.approver_token, &pending).await;
    let approved = expect_status(res, StatusCode::OK).await["invoice"].clone();
    let res = app
        .command(&b.org.approver_token, id_of(&approved), "issue", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await["invoice"].clone()
}

/// An issued invoice of the fixture's body (1200.00 EUR) under the agent's idempotency key
/// `key`.
pub async fn issued(app: &TestApp, b: &Billing, key: &str) -> Value {
    issued_from(app, b, key, &invoice_body(b)).await
}

/// An event of the source `bank` about `payment` for `invoice` (its `id`), in EUR, `n` seconds
/// past noon on 2026-03-01 (so events numbered in order happen in that order).
pub fn event(
    id: &str,
    payment: &str,
    invoice: &Value,
    amount: &str,
    status: &str,
    n: usize,
) -> Value {
    event_from("bank", id, payment, invoice, amount, status, n)
}

/// [`event`], of the source `source`.
pub fn event_from(
    source: &str,
    id: &str,
    payment: &str,
    invoice: &Value,
    amount: &str,
    status: &str,
    n: usize,
) -> Value {
    json!({
        "source": source,
        "event_id": id,
        "payment_id": payment,
        "invoice_id": invoice["id"],
        "amount": amount,
        "currency": "EUR",
        "status": status,
        "occurred_at": format!("2026-03-01T12:{:02}:{:02}Z", (n / 60) % 60, n % 60),
    })
}

/// `POST /v1/settlement-events` with `body` as `key`: the answer, as it is.
pub async fn send_event(app: &TestApp, key: &str, body: &Value) -> Response {
    app.post("/v1/settlement-events", key, body.clone()).await
}

/// Rows of `settlement_events` and of `payments`, in that order.
pub async fn settlement_rows(app: &TestApp) -> [i64; 2] {
    [
        app.sql_count("select count(*) from settlement_events")
            .await,
        app.sql_count("select count(*) from payments").await,
    ]
}
