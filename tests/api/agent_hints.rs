//! What an LLM agent needs without reading every route: the invoice says why changes were
//! requested, a key conflict names the invoice that holds the key, and the currencies, their
//! exponents and networks can be listed.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, invoice_body};
use reqwest::StatusCode;
use serde_json::{Value, json};

both_backends!(
    the_invoice_carries_its_latest_decision_and_lists_filter_on_it,
    a_key_conflict_names_the_invoice_that_holds_the_key,
    currencies_list_exponents_and_networks,
);

async fn list(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let res = app.get(&format!("/v1/invoices?{query}"), token).await;
    expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

async fn the_invoice_carries_its_latest_decision_and_lists_filter_on_it(app: TestApp) {
    let b = app.billing().await;
    let fresh = app.draft(&b, "undecided").await;
    assert_eq!(fresh["decision"], Value::Null);

    let pending = app.pending(&b, "sent-back").await;
    let id = pending["id"].as_str().unwrap();
    let body = TestApp::decision_body(&pending, Some("Split the workshop line."));
    let res = app
        .post(
            &format!("/v1/invoices/{id}/request-changes"),
            &b.org.approver_token,
            body,
        )
        .await;
    let decided = expect_status(res, StatusCode::OK).await["invoice"].clone();
    assert_eq!(decided["state"], "draft");
    assert_eq!(decided["decision"]["decision"], "changes_requested");
    assert_eq!(decided["decision"]["reason"], "Split the workshop line.");
    assert_eq!(
        decided["decision"]["revision_id"],
        pending["current_revision"]["id"]
    );
    assert!(decided["decision"]["decided_at"].is_string());

    // The agent reads it on a plain GET, and still after it revised (the decision names the
    // older revision then).
    let res = app
        .get(&format!("/v1/invoices/{id}"), &b.org.agent_key)
        .await;
    let read = expect_status(res, StatusCode::OK).await;
    assert_eq!(read["decision"], decided["decision"]);
    let revise = json!({"due_date": "2099-12-31", "reasoning": "Split as asked."});
    let res = app
        .post(
            &format!("/v1/invoices/{id}/revise"),
            &b.org.agent_key,
            revise,
        )
        .await;
    let revised = expect_status(res, StatusCode::OK).await["invoice"].clone();
    assert_eq!(revised["decision"], decided["decision"]);
    assert_ne!(
        revised["current_revision"]["id"],
        decided["decision"]["revision_id"]
    );

    let sent_back = list(&app, &b.org.agent_key, "decision=changes_requested").await;
    let ids: Vec<&Value> = sent_back.iter().map(|i| &i["id"]).collect();
    assert_eq!(ids, [&pending["id"]]);
    assert!(
        list(&app, &b.org.agent_key, "decision=approved")
            .await
            .is_empty()
    );
    let res = app
        .get("/v1/invoices?decision=maybe", &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "decision");
}

async fn a_key_conflict_names_the_invoice_that_holds_the_key(app: TestApp) {
    let b = app.billing().await;
    let original = app.draft(&b, "reused-key").await;
    let mut other = invoice_body(&b);
    other["reasoning"] = json!("Something else entirely.");
    other["lines"][0]["quantity"] = json!("5");
    let res = app
        .create_invoice(&b.org.agent_key, "reused-key", &other)
        .await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "idempotency_conflict").await;
    assert_eq!(problem["invoice_id"], original["id"]);

    let found = list(&app, &b.org.agent_key, "idempotency_key=reused-key").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["id"], original["id"]);
    assert!(
        list(&app, &b.org.agent_key, "idempotency_key=never-used")
            .await
            .is_empty()
    );
}

async fn currencies_list_exponents_and_networks(app: TestApp) {
    let b = app.billing().await;
    let res = app.get("/v1/currencies", &b.org.agent_key).await;
    let items = expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .clone();
    let find = |code: &str| {
        items
            .iter()
            .find(|c| c["code"] == code)
            .unwrap_or_else(|| panic!("{code} listed"))
            .clone()
    };
    assert_eq!(find("EUR")["exponent"], 2);
    assert_eq!(find("EUR")["kind"], "fiat");
    assert_eq!(find("JPY")["exponent"], 0);
    assert_eq!(find("USDC")["kind"], "stablecoin");
    assert!(
        find("USDC")["networks"]
            .as_array()
            .unwrap()
            .contains(&json!("arbitrum"))
    );
    // Every listed currency is one a destination accepts: the list is the registry.
    for currency in &items {
        assert!(
            !currency["networks"].as_array().unwrap().is_empty(),
            "{currency}"
        );
    }
    let res = app
        .client
        .get(app.url("/v1/currencies"))
        .send()
        .await
        .unwrap();
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
}
