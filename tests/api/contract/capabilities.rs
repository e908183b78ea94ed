//! Capabilities of a key (docs/contract/domain.md §1): every agent route on customers, destinations
//! and invoices, reads included, needs `invoicing`. A key without it hears 403
//! `missing_capability` naming it, right after authentication: before the record is looked up
//! (an unknown invoice is 403 too, not 404), before the body's rules, and nothing is written.

use crate::helpers::settlement::settlement_key;
use crate::helpers::{IBAN, TestApp, both_backends, expect_problem, expect_status};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

both_backends!(a_settlement_only_key_may_not_touch_invoicing_routes);

async fn a_settlement_only_key_may_not_touch_invoicing_routes(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "capabilities").await;
    let key = settlement_key(&app, &b.org.approver_token).await;
    let tables = [
        "customers",
        "payment_destinations",
        "invoices",
        "invoice_revisions",
        "invoice_events",
        "decisions",
        "audit_events",
    ];
    let mut before = Vec::new();
    for table in tables {
        before.push(
            app.sql_count(&format!("select count(*) from {table}"))
                .await,
        );
    }

    let known = invoice["id"].as_str().unwrap().to_owned();
    let unknown = Uuid::now_v7().to_string();
    let destination =
        json!({"label": "Account", "currency": "EUR", "network": "iban", "address": IBAN});
    let customer = b.customer_id.to_string();
    let mut routes: Vec<(Method, String, Value)> = vec![
        (Method::GET, "/v1/customers".into(), Value::Null),
        (
            Method::GET,
            format!("/v1/customers/{customer}"),
            Value::Null,
        ),
        (
            Method::POST,
            "/v1/customers".into(),
            json!({"agent_id": b.org.agent_id, "name": "X", "email": "x@example.com"}),
        ),
        (
            Method::PATCH,
            format!("/v1/customers/{customer}"),
            json!({"name": "Y"}),
        ),
        (
            Method::DELETE,
            format!("/v1/customers/{customer}"),
            Value::Null,
        ),
        (Method::GET, "/v1/payment-destinations".into(), Value::Null),
        (
            Method::GET,
            format!("/v1/payment-destinations/{}", b.destination_id),
            Value::Null,
        ),
        (Method::POST, "/v1/payment-destinations".into(), destination),
        (
            Method::POST,
            format!("/v1/payment-destinations/{}/deactivate", b.destination_id),
            json!({}),
        ),
        (Method::GET, "/v1/invoices".into(), Value::Null),
        (Method::POST, "/v1/invoices".into(), json!({})),
    ];
    for id in [&known, &unknown] {
        for read in ["", "/revisions", "/decisions", "/events", "/verify"] {
            routes.push((Method::GET, format!("/v1/invoices/{id}{read}"), Value::Null));
        }
        for command in ["revise", "submit", "withdraw", "cancel"] {
            routes.push((
                Method::POST,
                format!("/v1/invoices/{id}/{command}"),
                json!({}),
            ));
        }
        for decision in ["approve", "reject", "request-changes"] {
            routes.push((
                Method::POST,
                format!("/v1/invoices/{id}/{decision}"),
                TestApp::decision_body(&invoice, Some("Not for a bank feed.")),
            ));
        }
    }
    for (method, path, body) in routes {
        let mut req = app
            .client
            .request(method.clone(), app.url(&path))
            .bearer_auth(&key)
            .header("idempotency-key", "settlement-key");
        if !body.is_null() {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let problem = expect_problem(res, StatusCode::FORBIDDEN, "missing_capability").await;
        assert!(
            problem.detail.contains("invoicing"),
            "{method} {path}: {problem}"
        );
    }

    for (table, count) in tables.iter().zip(before) {
        let now = app
            .sql_count(&format!("select count(*) from {table}"))
            .await;
        assert_eq!(now, count, "{table} changed");
    }
    // The same key's agent still authenticates: capabilities are not identity.
    expect_status(app.get("/v1/me", &key).await, StatusCode::OK).await;
}
