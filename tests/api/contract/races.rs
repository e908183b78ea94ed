//! Deletes racing the writes that depend on what they delete (docs/contract/api.md Errors: no race
//! between inputs may produce a 500). Each round fires the two requests at once; whatever order the
//! database picks, the pair of answers is one that a serial order gives, and no row is left
//! orphaned.

use crate::helpers::{
    Billing, IBAN, TestApp, both_backends, expect_status, invoice_body_for, parallel,
};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::json;
use uuid::Uuid;

const ROUNDS: usize = 12;

both_backends!(
    deleting_an_agent_while_its_key_registers_a_destination,
    deleting_an_agent_while_its_owner_creates_a_customer_for_it,
    deleting_a_customer_while_an_invoice_naming_it_is_created,
    deleting_a_customer_while_a_revise_names_it,
);

/// A fresh agent of the billing org's approver: (id, key).
async fn new_agent(app: &TestApp, b: &Billing, name: &str) -> (Uuid, String) {
    let res = app
        .post("/v1/agents", &b.org.approver_token, json!({"name": name}))
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    (
        body["agent"]["id"].as_str().unwrap().parse().unwrap(),
        body["api_key"].as_str().unwrap().to_owned(),
    )
}

/// Rows whose parent is gone (the foreign keys should make this impossible; the count proves
/// the answers were not bought by dropping a check).
async fn orphans(app: &TestApp) -> i64 {
    app.sql_count(
        "select count(*) from payment_destinations d where not exists
           (select 1 from agents a where a.id = d.agent_id)",
    )
    .await
        + app
            .sql_count(
                "select count(*) from customers c where not exists
               (select 1 from agents a where a.id = c.agent_id)",
            )
            .await
        + app
            .sql_count(
                "select count(*) from invoice_revisions r where not exists
               (select 1 from customers c where c.id = r.customer_id)",
            )
            .await
}

/// One round: the delete and the dependent write at once. Either the delete came first (204,
/// and the write hears `refused`, leaving no row), or the write did (`written`, one row, and
/// the delete hears 409 `has_dependents`). `rows` counts what the write would have made.
async fn race(
    app: &TestApp,
    round: usize,
    delete: RequestBuilder,
    write: RequestBuilder,
    (written, refused): (StatusCode, StatusCode),
    rows: &str,
) {
    let responses = parallel(vec![delete, write]).await;
    let outcome = (responses[0].status(), responses[1].status());
    let rows = app.sql_count(rows).await;
    if outcome == (StatusCode::NO_CONTENT, refused) {
        assert_eq!(
            rows, 0,
            "round {round}: the delete won, yet the write left a row"
        );
    } else if outcome == (StatusCode::CONFLICT, written) {
        assert_eq!(rows, 1, "round {round}: the write won, yet left no row");
    } else {
        panic!("round {round}: not a serial outcome: {outcome:?}");
    }
}

async fn deleting_an_agent_while_its_key_registers_a_destination(app: TestApp) {
    let b = app.billing().await;
    for round in 0..ROUNDS {
        let (agent_id, key) = new_agent(&app, &b, &format!("Racer {round}")).await;
        let label = format!("Racer {round}");
        let body = json!({"label": label, "currency": "EUR", "network": "iban", "address": IBAN});
        // Deleted first, the key no longer authenticates anyone.
        race(
            &app,
            round,
            app.client
                .delete(app.url(&format!("/v1/agents/{agent_id}")))
                .bearer_auth(&b.org.approver_token),
            app.client
                .post(app.url("/v1/payment-destinations"))
                .bearer_auth(&key)
                .json(&body),
            (StatusCode::CREATED, StatusCode::UNAUTHORIZED),
            &format!("select count(*) from payment_destinations where label = '{label}'"),
        )
        .await;
    }
    assert_eq!(orphans(&app).await, 0);
}

async fn deleting_an_agent_while_its_owner_creates_a_customer_for_it(app: TestApp) {
    let b = app.billing().await;
    for round in 0..ROUNDS {
        let (agent_id, _key) = new_agent(&app, &b, &format!("Racer {round}")).await;
        let name = format!("Acme {round}");
        let body = json!({"agent_id": agent_id, "name": name, "email": "billing@example.com"});
        // Deleted first, the agent is unknown: a field error on agent_id.
        race(
            &app,
            round,
            app.client
                .delete(app.url(&format!("/v1/agents/{agent_id}")))
                .bearer_auth(&b.org.approver_token),
            app.client
                .post(app.url("/v1/customers"))
                .bearer_auth(&b.org.approver_token)
                .json(&body),
            (StatusCode::CREATED, StatusCode::UNPROCESSABLE_ENTITY),
            &format!("select count(*) from customers where name = '{name}'"),
        )
        .await;
    }
    assert_eq!(orphans(&app).await, 0);
}

async fn deleting_a_customer_while_an_invoice_naming_it_is_created(app: TestApp) {
    let b = app.billing().await;
    for round in 0..ROUNDS {
        let customer_id = app
            .customer(&b.org.approver_token, b.org.agent_id, "Short-lived")
            .await;
        // Deleted first, the draft names an unknown customer.
        race(
            &app,
            round,
            app.client
                .delete(app.url(&format!("/v1/customers/{customer_id}")))
                .bearer_auth(&b.org.approver_token),
            app.client
                .post(app.url("/v1/invoices"))
                .bearer_auth(&b.org.agent_key)
                .header("idempotency-key", format!("race-{round}"))
                .json(&invoice_body_for(customer_id, b.destination_id)),
            (StatusCode::CREATED, StatusCode::UNPROCESSABLE_ENTITY),
            &format!("select count(*) from invoices where idempotency_key = 'race-{round}'"),
        )
        .await;
    }
    assert_eq!(orphans(&app).await, 0);
}

async fn deleting_a_customer_while_a_revise_names_it(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.draft(&b, "revised-while-deleting").await;
    let id = invoice["id"].as_str().unwrap().to_owned();
    for round in 0..ROUNDS {
        let customer_id = app
            .customer(&b.org.approver_token, b.org.agent_id, "Short-lived")
            .await;
        let revise = json!({"customer_id": customer_id, "reasoning": format!("Round {round}.")});
        race(
            &app,
            round,
            app.client
                .delete(app.url(&format!("/v1/customers/{customer_id}")))
                .bearer_auth(&b.org.approver_token),
            app.client
                .post(app.url(&format!("/v1/invoices/{id}/revise")))
                .bearer_auth(&b.org.agent_key)
                .json(&revise),
            (StatusCode::OK, StatusCode::UNPROCESSABLE_ENTITY),
            &format!("select count(*) from invoice_revisions where reasoning = 'Round {round}.'"),
        )
        .await;
    }
    assert_eq!(orphans(&app).await, 0);
    // The invoice itself is intact: every revision re-seals and the chain holds.
    let res = app
        .get(&format!("/v1/invoices/{id}/verify"), &b.org.approver_token)
        .await;
    assert_eq!(expect_status(res, StatusCode::OK).await["ok"], true);
}
