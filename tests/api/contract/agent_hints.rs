//! What an LLM agent needs without reading every route: the invoice says why changes were
//! requested, a key conflict names the invoice that holds the key, and the currencies, their
//! exponents and networks can be listed, the decision says whether it is about the current
//! revision, and a 404 names an id the caller passed where an invoice's belongs.

use crate::helpers::{
    TestApp, both_backends, expect_problem, expect_status, invoice_body, without_request_id,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

both_backends!(
    the_invoice_carries_its_latest_decision_and_lists_filter_on_it,
    an_id_of_another_kind_is_named_where_an_invoice_id_belongs,
    a_foreign_or_hidden_record_id_is_a_plain_not_found,
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

    assert_eq!(decided["decision"]["current"], true);
    // While the request is open, the agent's to-do list holds the invoice.
    let waiting = list(&app, &b.org.agent_key, "decision=changes_requested").await;
    let ids: Vec<&Value> = waiting.iter().map(|i| &i["id"]).collect();
    assert_eq!(ids, [&pending["id"]]);

    // The agent reads it on a plain GET, and still after it revised: the decision then names
    // the older revision and says it is no longer about the current one.
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
    assert_eq!(revised["decision"]["decision"], "changes_requested");
    assert_eq!(revised["decision"]["reason"], decided["decision"]["reason"]);
    assert_eq!(
        revised["decision"]["revision_id"],
        decided["decision"]["revision_id"]
    );
    assert_ne!(
        revised["current_revision"]["id"],
        decided["decision"]["revision_id"]
    );
    assert_eq!(revised["decision"]["current"], false, "{revised}");
    assert!(
        list(&app, &b.org.agent_key, "decision=changes_requested")
            .await
            .is_empty(),
        "a revised invoice no longer waits for its agent"
    );

    // Resubmitted: still the old decision, still not current, still not waiting.
    let res = app.command(&b.org.agent_key, id, "submit", json!({})).await;
    let resubmitted = expect_status(res, StatusCode::OK).await["invoice"].clone();
    assert_eq!(resubmitted["state"], "pending_approval");
    assert_eq!(resubmitted["decision"]["current"], false);
    assert_eq!(
        app.invoice(&b.org.agent_key, id).await["decision"]["current"],
        false
    );
    assert!(
        list(&app, &b.org.agent_key, "decision=changes_requested")
            .await
            .is_empty()
    );
    assert!(
        list(&app, &b.org.agent_key, "decision=approved")
            .await
            .is_empty()
    );

    // Approved: the new decision is about the revision now current, and the filter finds it.
    let res = app.approve(&b.org.approver_token, &resubmitted).await;
    let approved = expect_status(res, StatusCode::OK).await["invoice"].clone();
    assert_eq!(approved["decision"]["decision"], "approved");
    assert_eq!(
        approved["decision"]["revision_id"],
        approved["current_revision"]["id"]
    );
    assert_eq!(approved["decision"]["current"], true);
    let ids: Vec<Value> = list(&app, &b.org.agent_key, "decision=approved")
        .await
        .iter()
        .map(|i| i["id"].clone())
        .collect();
    assert_eq!(ids, [pending["id"].clone()]);
    let res = app
        .get("/v1/invoices?decision=maybe", &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "decision");
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
    assert_eq!(problem.body["invoice_id"], original["id"]);

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

/// Every invoice route that takes an id, as (method, path suffix, body); `None` is a GET.
fn invoice_routes() -> Vec<(&'static str, Option<Value>)> {
    vec![
        ("", None),
        ("/revisions", None),
        ("/decisions", None),
        ("/events", None),
        ("/submit", Some(json!({}))),
        ("/withdraw", Some(json!({}))),
        ("/revise", Some(json!({"reasoning": "again"}))),
    ]
}

/// The answer of `suffix` on the invoice `id` as `token`.
async fn send(
    app: &TestApp,
    token: &str,
    id: &str,
    suffix: &str,
    body: Option<&Value>,
) -> reqwest::Response {
    let path = format!("/v1/invoices/{id}{suffix}");
    match body {
        None => app.get(&path, token).await,
        Some(body) => app.post(&path, token, body.clone()).await,
    }
}

async fn an_id_of_another_kind_is_named_where_an_invoice_id_belongs(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.draft(&b, "near-identical").await;
    let id = invoice["id"].as_str().unwrap();
    let revision = invoice["current_revision"]["id"].as_str().unwrap();

    for token in [&b.org.agent_key, &b.org.approver_token] {
        for (suffix, body) in invoice_routes() {
            let res = send(&app, token, revision, suffix, body.as_ref()).await;
            let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
            let detail = problem.detail.as_str();
            assert!(
                detail.contains(&format!("revision 1 of invoice {id}")),
                "{suffix}: {problem}"
            );
            assert!(detail.contains("pass the invoice id"), "{problem}");
            assert_eq!(problem.body["id_kind"], "revision", "{problem}");
            assert_eq!(problem.body["invoice_id"], id, "{problem}");
        }
    }
    // The approver's verify and commands name it too.
    let res = app
        .get(
            &format!("/v1/invoices/{revision}/verify"),
            &b.org.approver_token,
        )
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(problem.body["invoice_id"], id, "verify: {problem}");
    let decision = json!({
        "revision_id": revision,
        "payload_hash": invoice["current_revision"]["payload_hash"],
        "reason": "Split the workshop line.",
    });
    for (action, body) in [
        ("approve", decision.clone()),
        ("reject", decision.clone()),
        ("request-changes", decision),
        ("cancel", json!({"reason": "Not needed."})),
        ("issue", json!({})),
    ] {
        let res = app
            .command(&b.org.approver_token, revision, action, body)
            .await;
        let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
        assert_eq!(problem.body["invoice_id"], id, "{action}: {problem}");
    }
    // A second revision is named by its number.
    let res = app
        .command(
            &b.org.agent_key,
            id,
            "revise",
            json!({"due_date": "2099-12-31", "reasoning": "Later."}),
        )
        .await;
    let revised = expect_status(res, StatusCode::OK).await["invoice"].clone();
    let second = revised["current_revision"]["id"].as_str().unwrap();
    let res = app
        .get(&format!("/v1/invoices/{second}"), &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert!(
        problem
            .detail
            .contains(&format!("revision 2 of invoice {id}")),
        "{problem}"
    );

    // An audit event's id, a customer's and a destination's are named as what they are.
    let res = app
        .get(&format!("/v1/invoices/{id}/events"), &b.org.agent_key)
        .await;
    let event = expect_status(res, StatusCode::OK).await["items"][0]["id"].clone();
    let event = event.as_str().unwrap();
    let res = app
        .get(&format!("/v1/invoices/{event}"), &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(problem.body["id_kind"], "event", "{problem}");
    assert_eq!(problem.body["invoice_id"], id, "{problem}");
    let customer = b.customer_id.to_string();
    let res = app
        .get(&format!("/v1/invoices/{customer}"), &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(problem.body["id_kind"], "customer", "{problem}");
    assert!(problem.detail.contains("customer"));
    assert!(problem.body.get("invoice_id").is_none(), "{problem}");
    let destination = b.destination_id.to_string();
    let res = app
        .get(
            &format!("/v1/invoices/{destination}/events"),
            &b.org.agent_key,
        )
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(problem.body["id_kind"], "payment_destination", "{problem}");
}

async fn a_foreign_or_hidden_record_id_is_a_plain_not_found(app: TestApp) {
    let b = app.billing().await;
    let other_agent = app.second_agent(&b).await;
    let theirs = app.draft(&other_agent, "theirs").await;
    let their_revision = theirs["current_revision"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let foreign_org = app.billing().await;
    let foreign = app.draft(&foreign_org, "foreign").await;
    let foreign_revision = foreign["current_revision"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let unknown = Uuid::now_v7().to_string();

    // Another agent's revision, customer and destination (hidden from this agent), and another
    // organisation's revision: each answered exactly as an id that does not exist.
    let hidden = [
        their_revision.clone(),
        other_agent.customer_id.to_string(),
        other_agent.destination_id.to_string(),
        foreign_revision.clone(),
        foreign_org.customer_id.to_string(),
    ];
    for (suffix, body) in invoice_routes() {
        let plain =
            without_request_id(send(&app, &b.org.agent_key, &unknown, suffix, body.as_ref()).await)
                .await;
        assert_eq!(plain.0, StatusCode::NOT_FOUND);
        for id in &hidden {
            let answer =
                without_request_id(send(&app, &b.org.agent_key, id, suffix, body.as_ref()).await)
                    .await;
            assert_eq!(answer, plain, "{suffix} {id}");
        }
    }
    // The approver of this organisation sees the other agent's invoice, but not the foreign
    // organisation's.
    let plain = without_request_id(
        app.get(&format!("/v1/invoices/{unknown}"), &b.org.approver_token)
            .await,
    )
    .await;
    let answer = without_request_id(
        app.get(
            &format!("/v1/invoices/{foreign_revision}"),
            &b.org.approver_token,
        )
        .await,
    )
    .await;
    assert_eq!(answer, plain);
    let res = app
        .get(
            &format!("/v1/invoices/{their_revision}"),
            &b.org.approver_token,
        )
        .await;
    let problem = expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(problem.body["invoice_id"], theirs["id"], "{problem}");
}
