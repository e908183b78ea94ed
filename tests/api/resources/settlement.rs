//! Getting paid (docs/contract/effects.md §4): settlement events from a settlement-only agent, kept
//! once, folded into payments that only move forward, and reconciled against the invoice in the
//! event's transaction; what cannot be applied is listed for humans, never dropped.
//!
//! Every invoice here totals 1200.00 EUR (the helpers' fixture) and is issued by hand
//! (`POST /v1/invoices/{id}/issue`): no issuer is configured.

use crate::helpers::settlement::{
    billing_with_settlement_key, event, issued, send_event, settlement_key,
};
use crate::helpers::{
    Billing, TestApp, both_backends, expect_problem, expect_status, id_of, parallel, sql_uuid,
    tally,
};
use chrono::Datelike;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

both_backends!(
    sixteen_parallel_redeliveries_write_one_event,
    racing_bodies_under_one_event_id_write_one_event_and_one_payment,
    a_redelivery_replays_and_another_body_conflicts,
    confirmed_before_observed_never_moves_back,
    two_partial_payments_pay_the_invoice,
    a_failure_after_confirmation_reverses_paid_to_partially_paid,
    an_overpayment_is_listed,
    wrong_currency_and_unknown_invoices_are_listed_and_never_applied,
    a_contradicting_event_is_listed_as_a_conflict,
    a_contradiction_in_currency_or_invoice_is_a_conflict,
    payments_before_issue_are_matched_at_issue,
    only_a_settlement_key_may_report,
    bad_input_names_the_field_and_floats_are_refused,
    the_same_events_in_any_order_end_alike,
    overdue_is_computed_and_listed,
);

/// A submitted and approved invoice (not issued).
async fn approved(app: &TestApp, b: &Billing, key: &str) -> Value {
    let pending = app.pending(b, key).await;
    let res = app.approve(&b.org.approver_token, &pending).await;
    expect_status(res, StatusCode::OK).await["invoice"].clone()
}

/// Issues an approved invoice as the approver; returns it.
async fn issue(app: &TestApp, b: &Billing, invoice: &Value) -> Value {
    let res = app
        .command(&b.org.approver_token, id_of(invoice), "issue", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await["invoice"].clone()
}

/// Reports a new event (201); returns the answer.
async fn report(app: &TestApp, key: &str, body: &Value) -> Value {
    let res = send_event(app, key, body).await;
    assert_eq!(res.headers()["idempotent-replayed"], "false");
    let recorded = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(recorded["replayed"], false);
    recorded
}

/// The payments `token` sees with `status`.
async fn inbox(app: &TestApp, token: &str, status: &str) -> Vec<Value> {
    let res = app
        .get(&format!("/v1/payments?status={status}"), token)
        .await;
    expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

async fn payment(app: &TestApp, token: &str, id: &Value) -> Value {
    let res = app
        .get(&format!("/v1/payments/{}", id.as_str().unwrap()), token)
        .await;
    expect_status(res, StatusCode::OK).await
}

async fn sixteen_parallel_redeliveries_write_one_event(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "parallel").await;
    let body = event("evt-1", "pay-1", &invoice, "1200.00", "confirmed", 1);
    let requests = (0..16)
        .map(|_| app.post_request("/v1/settlement-events", &key, &body))
        .collect();
    let mut statuses = Vec::new();
    let mut payment_ids = Vec::new();
    for res in parallel(requests).await {
        let status = res.status();
        statuses.push(status);
        let replayed = res.headers()["idempotent-replayed"].clone();
        let answer = expect_status(res, status).await;
        match status {
            StatusCode::CREATED => assert_eq!(replayed, "false"),
            StatusCode::OK => {
                assert_eq!(replayed, "true");
                assert_eq!(answer["replayed"], true);
            }
            other => panic!("unexpected {other}: {answer}"),
        }
        assert_eq!(answer["invoice"]["state"], "paid", "{answer}");
        payment_ids.push(answer["payment"]["id"].clone());
    }
    assert_eq!(tally(statuses), BTreeMap::from([(201, 1), (200, 15)]));
    assert!(payment_ids.iter().all(|id| *id == payment_ids[0]));
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        1
    );
    assert_eq!(app.sql_count("select count(*) from payments").await, 1);
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&invoice))
        .await;
    assert_eq!(
        actions.iter().filter(|a| *a == "payment_applied").count(),
        1,
        "{actions:?}"
    );
}

/// Two bodies race under one event id, each eight times, naming different payments: one
/// event is kept, its body's copies are replays, the other body's are refused, and a refused
/// request leaves no payment of its own behind (not even an empty one in the inbox).
async fn racing_bodies_under_one_event_id_write_one_event_and_one_payment(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "racing-bodies").await;
    let bodies = [
        event("evt-1", "pay-a", &invoice, "1200.00", "confirmed", 1),
        event("evt-1", "pay-b", &invoice, "1200.00", "confirmed", 1),
    ];
    let requests = (0..16)
        .map(|n| app.post_request("/v1/settlement-events", &key, &bodies[n % 2]))
        .collect();
    let mut answers = Vec::new();
    for (n, res) in parallel(requests).await.into_iter().enumerate() {
        let status = res.status();
        let answer = expect_status(res, status).await;
        answers.push((n % 2, status, answer));
    }
    let created: Vec<&(usize, StatusCode, Value)> = answers
        .iter()
        .filter(|(_, status, _)| *status == StatusCode::CREATED)
        .collect();
    assert_eq!(created.len(), 1, "{answers:?}");
    let (winner, _, first) = created[0];
    for (body, status, answer) in &answers {
        match *status {
            StatusCode::CREATED => {}
            StatusCode::OK => {
                assert_eq!(body, winner, "only the kept body replays: {answer}");
                assert_eq!(answer["replayed"], true);
                assert_eq!(answer["event"]["id"], first["event"]["id"]);
                assert_eq!(answer["payment"]["id"], first["payment"]["id"]);
            }
            StatusCode::CONFLICT => {
                assert_ne!(body, winner, "the kept body never conflicts: {answer}");
                assert_eq!(answer["code"], "idempotency_conflict");
                assert_eq!(answer["settlement_event_id"], first["event"]["id"]);
            }
            other => panic!("unexpected {other}: {answer}"),
        }
    }
    assert_eq!(
        tally(answers.iter().map(|(_, status, _)| *status)),
        BTreeMap::from([(201, 1), (200, 7), (409, 8)])
    );
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        1
    );
    assert_eq!(app.sql_count("select count(*) from payments").await, 1);
    // What a human sees: one payment, the kept one, with its one event.
    let res = app.get("/v1/payments", &b.org.approver_token).await;
    let listed = expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], first["payment"]["id"]);
    assert_eq!(listed[0]["payment_id"], bodies[*winner]["payment_id"]);
    assert_eq!(listed[0]["status"], "applied");
    assert_eq!(listed[0]["event_count"], 1);
    let detail = payment(&app, &b.org.approver_token, &listed[0]["id"]).await;
    assert_eq!(detail["events"].as_array().unwrap().len(), 1);
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["state"], "paid");
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&invoice))
        .await;
    assert_eq!(
        actions.iter().filter(|a| *a == "payment_applied").count(),
        1,
        "{actions:?}"
    );
}

async fn a_redelivery_replays_and_another_body_conflicts(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "replays").await;
    let first = report(
        &app,
        &key,
        &event("evt-1", "pay-1", &invoice, "400", "confirmed", 1),
    )
    .await;
    assert_eq!(first["payment"]["status"], "applied");
    assert_eq!(first["invoice"]["state"], "partially_paid");
    // The same event, however the amount is written, is a redelivery: nothing is written.
    let mut same = event("evt-1", "pay-1", &invoice, "400.00", "confirmed", 1);
    same["occurred_at"] = json!("2026-03-01T13:00:01+01:00");
    for body in [same.clone(), {
        let mut minor = same.clone();
        minor.as_object_mut().unwrap().remove("amount");
        minor["amount_minor"] = json!(40000);
        minor
    }] {
        let res = send_event(&app, &key, &body).await;
        assert_eq!(res.headers()["idempotent-replayed"], "true");
        let again = expect_status(res, StatusCode::OK).await;
        assert_eq!(again["replayed"], true);
        assert_eq!(again["event"]["id"], first["event"]["id"]);
        assert_eq!(again["payment"]["event_count"], 1);
    }
    // Another body under the same event id is refused, and nothing is written.
    let changed = event("evt-1", "pay-1", &invoice, "500", "confirmed", 1);
    let problem = expect_problem(
        send_event(&app, &key, &changed).await,
        StatusCode::CONFLICT,
        "idempotency_conflict",
    )
    .await;
    assert_eq!(problem.body["settlement_event_id"], first["event"]["id"]);
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        1
    );
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["amount_paid"], "400.00");
}

async fn confirmed_before_observed_never_moves_back(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "out-of-order").await;
    let confirmed = report(
        &app,
        &key,
        &event("evt-2", "pay-1", &invoice, "1200", "confirmed", 2),
    )
    .await;
    assert_eq!(confirmed["payment"]["state"], "confirmed");
    assert_eq!(confirmed["invoice"]["state"], "paid");
    // The observation made before the confirmation arrives late: recorded, moves nothing.
    let observed = report(
        &app,
        &key,
        &event("evt-1", "pay-1", &invoice, "1200", "observed", 1),
    )
    .await;
    assert_eq!(observed["payment"]["state"], "confirmed");
    assert_eq!(observed["payment"]["status"], "applied");
    assert_eq!(observed["payment"]["event_count"], 2);
    assert_eq!(observed["invoice"]["state"], "paid");
    let detail = payment(&app, &b.org.approver_token, &observed["payment"]["id"]).await;
    let statuses: Vec<&str> = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["confirmed", "observed"]);
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&invoice))
        .await;
    // Paid in full: the move, then `paid` (invoice.paid), once.
    assert_eq!(actions[actions.len() - 2..], ["payment_applied", "paid"]);
    assert_eq!(
        actions.iter().filter(|a| a.starts_with("payment_")).count(),
        1
    );
}

async fn two_partial_payments_pay_the_invoice(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "two-parts").await;
    assert_eq!(invoice["amount_paid"], "0.00");
    assert_eq!(invoice["balance"], "1200.00");
    assert_eq!(invoice["balance_minor"], 120000);
    assert_eq!(invoice["overdue"], false);
    // Observed first: nothing counts yet.
    let seen = report(
        &app,
        &key,
        &event("e1", "pay-1", &invoice, "400", "observed", 1),
    )
    .await;
    assert_eq!(seen["payment"]["status"], "pending");
    assert_eq!(seen["invoice"]["state"], "issued");
    let first = report(
        &app,
        &key,
        &event("e2", "pay-1", &invoice, "400", "confirmed", 2),
    )
    .await;
    assert_eq!(first["invoice"]["state"], "partially_paid");
    // The source sees the invoice's state; its humans read how much is paid.
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["amount_paid"], "400.00");
    assert_eq!(now["balance"], "800.00");
    let mut second = event("e3", "pay-2", &invoice, "", "confirmed", 3);
    second.as_object_mut().unwrap().remove("amount");
    second["amount_minor"] = json!(80000);
    let second = report(&app, &key, &second).await;
    assert_eq!(second["invoice"]["state"], "paid");
    assert_eq!(second["payment"]["amount"], "800.00");
    let detail = payment(&app, &b.org.approver_token, &second["payment"]["id"]).await;
    assert_eq!(detail["payment"]["allocated_minor"], 80000);
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["state"], "paid");
    assert_eq!(now["amount_paid"], "1200.00");
    assert_eq!(now["amount_paid_minor"], 120000);
    assert_eq!(now["balance"], "0.00");
    assert_eq!(now["balance_minor"], 0);
    // The agent that proposed it sees the same.
    let agents = app.invoice(&b.org.agent_key, id_of(&invoice)).await;
    assert_eq!(agents["amount_paid"], "1200.00");
    let res = app
        .get(
            &format!("/v1/invoices/{}/events", id_of(&invoice)),
            &b.org.approver_token,
        )
        .await;
    let events = expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .clone();
    let moves: Vec<(&str, &str, &str)> = events
        .iter()
        .filter(|e| e["action"].as_str().unwrap().starts_with("payment_"))
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["from_state"].as_str().unwrap(),
                e["to_state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            ("payment_applied", "issued", "partially_paid"),
            ("payment_applied", "partially_paid", "paid")
        ]
    );
    // Reaching paid is an event of its own right after the move (`invoice.paid`).
    let (last, applied) = (&events[events.len() - 1], &events[events.len() - 2]);
    assert_eq!(applied["action"], "payment_applied");
    assert_eq!(applied["actor_kind"], "agent");
    assert_eq!(applied["interface"], "api");
    assert!(
        applied["note"]
            .as_str()
            .unwrap()
            .contains("paid 1200.00 of 1200.00 EUR")
    );
    assert_eq!(last["action"], "paid");
    assert_eq!(
        (&last["from_state"], &last["to_state"]),
        (&json!("paid"), &json!("paid"))
    );
    assert_eq!(last["actor_kind"], "agent");
    // The chain still verifies with the settlement events in it.
    assert_eq!(
        app.verify(&b.org.approver_token, id_of(&invoice)).await["ok"],
        true
    );
    // Settlement's writes kept the invoice's read model current (migration 0019).
    assert_eq!(app.read_model_differences().await, 0);
}

async fn a_failure_after_confirmation_reverses_paid_to_partially_paid(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "reversal").await;
    report(
        &app,
        &key,
        &event("e1", "pay-1", &invoice, "400", "confirmed", 1),
    )
    .await;
    let paid = report(
        &app,
        &key,
        &event("e2", "pay-2", &invoice, "800", "confirmed", 2),
    )
    .await;
    assert_eq!(paid["invoice"]["state"], "paid");
    let reversed = report(
        &app,
        &key,
        &event("e3", "pay-2", &invoice, "800", "failed", 3),
    )
    .await;
    assert_eq!(reversed["payment"]["state"], "failed");
    assert_eq!(reversed["payment"]["status"], "failed");
    assert_eq!(reversed["payment"]["reversed"], true);
    let detail = payment(&app, &b.org.approver_token, &reversed["payment"]["id"]).await;
    assert_eq!(detail["payment"]["allocated"], "0.00");
    assert_eq!(reversed["invoice"]["state"], "partially_paid");
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["amount_paid"], "400.00");
    // A confirmation that arrives after the failure does not bring it back.
    let late = report(
        &app,
        &key,
        &event("e4", "pay-2", &invoice, "800", "confirmed", 2),
    )
    .await;
    assert_eq!(late["payment"]["state"], "failed");
    assert_eq!(late["invoice"]["state"], "partially_paid");
    let gone = report(
        &app,
        &key,
        &event("e5", "pay-1", &invoice, "400", "failed", 4),
    )
    .await;
    assert_eq!(gone["invoice"]["state"], "issued");
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["balance"], "1200.00");
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&invoice))
        .await;
    let payments: Vec<&str> = actions
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("payment_"))
        .collect();
    assert_eq!(
        payments,
        [
            "payment_applied",
            "payment_applied",
            "payment_reversed",
            "payment_reversed"
        ]
    );
    // Failed payments need no human: they are not in the inbox.
    for status in ["unmatched", "overpaid", "conflict"] {
        assert!(inbox(&app, &b.org.approver_token, status).await.is_empty());
    }
}

async fn an_overpayment_is_listed(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "overpaid").await;
    report(
        &app,
        &key,
        &event("e1", "pay-1", &invoice, "1000", "confirmed", 1),
    )
    .await;
    let over = report(
        &app,
        &key,
        &event("e2", "pay-2", &invoice, "500", "confirmed", 2),
    )
    .await;
    assert_eq!(over["invoice"]["state"], "paid");
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["amount_paid"], "1200.00");
    assert_eq!(over["payment"]["status"], "overpaid");
    let detail = payment(&app, &b.org.approver_token, &over["payment"]["id"]).await;
    assert_eq!(detail["payment"]["allocated"], "200.00");
    let listed = inbox(&app, &b.org.approver_token, "overpaid").await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], over["payment"]["id"]);
    assert_eq!(listed[0]["matched_invoice_id"], invoice["id"]);
    // When the earlier payment fails, the overpayment covers what it can.
    let reversed = report(
        &app,
        &key,
        &event("e3", "pay-1", &invoice, "1000", "failed", 3),
    )
    .await;
    assert_eq!(reversed["invoice"]["state"], "partially_paid");
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["amount_paid"], "500.00");
    assert!(
        inbox(&app, &b.org.approver_token, "overpaid")
            .await
            .is_empty()
    );
}

async fn wrong_currency_and_unknown_invoices_are_listed_and_never_applied(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "unmatched").await;
    let mut dollars = event("e1", "pay-usd", &invoice, "1200", "confirmed", 1);
    dollars["currency"] = json!("USD");
    let dollars = report(&app, &key, &dollars).await;
    assert_eq!(dollars["payment"]["status"], "unmatched");
    assert_eq!(dollars["payment"]["unmatched_reason"], "wrong_currency");
    assert_eq!(dollars["invoice"]["state"], "issued");
    let mut unknown_id = event("e2", "pay-ghost", &invoice, "10", "confirmed", 2);
    unknown_id["invoice_id"] = json!(Uuid::now_v7());
    let unknown_id = report(&app, &key, &unknown_id).await;
    assert_eq!(unknown_id["payment"]["unmatched_reason"], "unknown_invoice");
    assert_eq!(unknown_id["payment"]["matched_invoice_id"], Value::Null);
    assert_eq!(unknown_id["invoice"], Value::Null);
    let mut unknown_number = event("e3", "pay-number", &invoice, "10", "observed", 3);
    unknown_number.as_object_mut().unwrap().remove("invoice_id");
    unknown_number["invoice_number"] = json!("INV-1999-000001");
    let unknown_number = report(&app, &key, &unknown_number).await;
    assert_eq!(unknown_number["payment"]["status"], "unmatched");
    assert_eq!(
        unknown_number["payment"]["invoice_number"],
        "INV-1999-000001"
    );
    // Another organisation's invoice is as unknown as a random id.
    let other = app.billing().await;
    let other_key = settlement_key(&app, &other.org.approver_token).await;
    let foreign = report(
        &app,
        &other_key,
        &event("e1", "pay-1", &invoice, "1200", "confirmed", 1),
    )
    .await;
    assert_eq!(foreign["payment"]["unmatched_reason"], "unknown_invoice");

    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["state"], "issued");
    assert_eq!(now["amount_paid"], "0.00");
    let listed: Vec<Value> = inbox(&app, &b.org.approver_token, "unmatched")
        .await
        .iter()
        .map(|p| p["payment_id"].clone())
        .collect();
    assert_eq!(
        listed,
        [json!("pay-number"), json!("pay-ghost"), json!("pay-usd")]
    );
    // The other organisation's approver sees only their own.
    let theirs = inbox(&app, &other.org.approver_token, "unmatched").await;
    assert_eq!(theirs.len(), 1);
    let detail = payment(&app, &b.org.approver_token, &dollars["payment"]["id"]).await;
    assert_eq!(detail["payment"]["currency"], "USD");
    assert_eq!(detail["events"][0]["event_id"], "e1");
    assert_eq!(detail["events"][0]["contradicts"], false);
    let res = app
        .get(
            &format!(
                "/v1/payments/{}",
                dollars["payment"]["id"].as_str().unwrap()
            ),
            &other.org.approver_token,
        )
        .await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    let res = app
        .get("/v1/payments?status=lost", &b.org.approver_token)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["status"]);
}

async fn a_contradicting_event_is_listed_as_a_conflict(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "conflict").await;
    let paid = report(
        &app,
        &key,
        &event("e1", "pay-1", &invoice, "1200", "confirmed", 1),
    )
    .await;
    assert_eq!(paid["invoice"]["state"], "paid");
    // The same payment with another amount: kept, listed, and nothing of the payment counts
    // until a human has looked.
    let odd = report(
        &app,
        &key,
        &event("e2", "pay-1", &invoice, "12", "confirmed", 2),
    )
    .await;
    assert_eq!(odd["event"]["contradicts"], true);
    assert_eq!(odd["payment"]["status"], "conflict");
    assert_eq!(odd["payment"]["amount"], "1200.00");
    assert_eq!(odd["invoice"]["state"], "issued");
    let listed = inbox(&app, &b.org.approver_token, "conflict").await;
    assert_eq!(listed.len(), 1);
    let detail = payment(&app, &b.org.approver_token, &listed[0]["id"]).await;
    let contradicts: Vec<&Value> = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["contradicts"])
        .collect();
    assert_eq!(contradicts, [&json!(false), &json!(true)]);
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&invoice))
        .await;
    assert_eq!(actions.last().unwrap(), "payment_reversed");
}

/// A later event that names another currency or another invoice than its payment's first is a
/// contradiction too: kept, listed as a conflict, and nothing of the payment counts, on
/// neither invoice.
async fn a_contradiction_in_currency_or_invoice_is_a_conflict(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let first = issued(&app, &b, "conflict-currency").await;
    let second = issued(&app, &b, "conflict-invoice").await;
    let euros = report(
        &app,
        &key,
        &event("e1", "pay-currency", &first, "500", "confirmed", 1),
    )
    .await;
    assert_eq!(euros["invoice"]["state"], "partially_paid");
    let mut dollars = event("e2", "pay-currency", &first, "500", "confirmed", 2);
    dollars["currency"] = json!("USD");
    let dollars = report(&app, &key, &dollars).await;
    assert_eq!(dollars["event"]["contradicts"], true);
    assert_eq!(dollars["payment"]["status"], "conflict");
    assert_eq!(dollars["payment"]["currency"], "EUR");
    assert_eq!(dollars["invoice"]["state"], "issued");
    assert_eq!(
        app.invoice(&b.org.approver_token, id_of(&first)).await["amount_paid"],
        "0.00"
    );

    let on_second = report(
        &app,
        &key,
        &event("e3", "pay-invoice", &second, "300", "confirmed", 3),
    )
    .await;
    assert_eq!(on_second["invoice"]["state"], "partially_paid");
    // The same payment, now said to be for the first invoice.
    let elsewhere = report(
        &app,
        &key,
        &event("e4", "pay-invoice", &first, "300", "confirmed", 4),
    )
    .await;
    assert_eq!(elsewhere["event"]["contradicts"], true);
    assert_eq!(elsewhere["payment"]["status"], "conflict");
    assert_eq!(elsewhere["payment"]["invoice_id"], second["id"]);
    assert_eq!(elsewhere["payment"]["matched_invoice_id"], second["id"]);
    for invoice in [&first, &second] {
        let now = app.invoice(&b.org.approver_token, id_of(invoice)).await;
        assert_eq!(now["state"], "issued", "{now}");
        assert_eq!(now["amount_paid"], "0.00", "{now}");
    }
    // The first invoice never counted the second payment: only the dollar conflict moved it.
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&first))
        .await;
    let payments: Vec<&str> = actions
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("payment_"))
        .collect();
    assert_eq!(payments, ["payment_applied", "payment_reversed"]);

    let mut listed: Vec<Value> = inbox(&app, &b.org.approver_token, "conflict")
        .await
        .iter()
        .map(|p| p["payment_id"].clone())
        .collect();
    listed.sort_by_key(|v| v.to_string());
    assert_eq!(listed, [json!("pay-currency"), json!("pay-invoice")]);
    for (answer, currencies) in [(&dollars, ["EUR", "USD"]), (&elsewhere, ["EUR", "EUR"])] {
        let detail = payment(&app, &b.org.approver_token, &answer["payment"]["id"]).await;
        let events = detail["events"].as_array().unwrap();
        let seen: Vec<(&Value, &Value)> = events
            .iter()
            .map(|e| (&e["currency"], &e["contradicts"]))
            .collect();
        assert_eq!(
            seen,
            [
                (&json!(currencies[0]), &json!(false)),
                (&json!(currencies[1]), &json!(true))
            ]
        );
    }
    let detail = payment(&app, &b.org.approver_token, &elsewhere["payment"]["id"]).await;
    assert_eq!(detail["events"][0]["invoice_id"], second["id"]);
    assert_eq!(detail["events"][1]["invoice_id"], first["id"]);
}

async fn payments_before_issue_are_matched_at_issue(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let by_id = approved(&app, &b, "early-by-id").await;
    let early = report(
        &app,
        &key,
        &event("e1", "pay-1", &by_id, "1200", "confirmed", 1),
    )
    .await;
    assert_eq!(early["payment"]["status"], "unmatched");
    assert_eq!(early["payment"]["unmatched_reason"], "invoice_not_issued");
    assert_eq!(early["invoice"]["state"], "approved");
    // An invoice's first number this year is INV-<year>-000001: a payment may name it before
    // any invoice has it.
    let year = chrono::Utc::now().year();
    let by_number = approved(&app, &b, "early-by-number").await;
    let mut numbered = event("e2", "pay-2", &by_number, "500", "confirmed", 2);
    numbered.as_object_mut().unwrap().remove("invoice_id");
    numbered["invoice_number"] = json!(format!("INV-{year}-000002"));
    let numbered = report(&app, &key, &numbered).await;
    assert_eq!(numbered["payment"]["unmatched_reason"], "unknown_invoice");
    // Until the issue, both wait in the inbox, each with its reason.
    let mut waiting: Vec<(Value, Value)> = inbox(&app, &b.org.approver_token, "unmatched")
        .await
        .iter()
        .map(|p| (p["payment_id"].clone(), p["unmatched_reason"].clone()))
        .collect();
    waiting.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(
        waiting,
        [
            (json!("pay-1"), json!("invoice_not_issued")),
            (json!("pay-2"), json!("unknown_invoice"))
        ]
    );

    let first = issue(&app, &b, &by_id).await;
    assert_eq!(first["number"], format!("INV-{year}-000001"));
    assert_eq!(first["state"], "paid");
    assert_eq!(first["amount_paid"], "1200.00");
    let actions = app
        .event_actions(&b.org.approver_token, id_of(&by_id))
        .await;
    assert_eq!(
        actions[actions.len() - 3..],
        ["issue", "payment_applied", "paid"]
    );
    let second = issue(&app, &b, &by_number).await;
    assert_eq!(second["number"], format!("INV-{year}-000002"));
    assert_eq!(second["state"], "partially_paid");
    assert_eq!(second["amount_paid"], "500.00");
    let detail = payment(&app, &b.org.approver_token, &numbered["payment"]["id"]).await;
    assert_eq!(detail["payment"]["status"], "applied");
    assert_eq!(detail["payment"]["matched_invoice_id"], by_number["id"]);
    assert!(
        inbox(&app, &b.org.approver_token, "unmatched")
            .await
            .is_empty()
    );
    // Issuing again is a replay: nothing more is applied.
    let again = app
        .command(&b.org.approver_token, id_of(&by_id), "issue", json!({}))
        .await;
    assert_eq!(expect_status(again, StatusCode::OK).await["replayed"], true);
}

async fn only_a_settlement_key_may_report(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "capabilities").await;
    let body = event("e1", "pay-1", &invoice, "100", "observed", 1);
    let problem = expect_problem(
        send_event(&app, &b.org.agent_key, &body).await,
        StatusCode::FORBIDDEN,
        "missing_capability",
    )
    .await;
    assert!(problem.detail.contains("settlement"));
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    for human in [&b.org.approver_token, &operator] {
        expect_problem(
            send_event(&app, human, &body).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    // Before anything else: an empty body still hears 403.
    expect_problem(
        send_event(&app, &b.org.agent_key, &json!({})).await,
        StatusCode::FORBIDDEN,
        "missing_capability",
    )
    .await;
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        0
    );
    assert_eq!(app.sql_count("select count(*) from payments").await, 0);
    report(&app, &key, &body).await;
    // Agents report payments; humans read them.
    for agent in [&key, &b.org.agent_key] {
        expect_problem(
            app.get("/v1/payments", agent).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    assert_eq!(inbox(&app, &operator, "pending").await.len(), 0);
    assert_eq!(inbox(&app, &b.org.approver_token, "pending").await.len(), 1);
}

async fn bad_input_names_the_field_and_floats_are_refused(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let invoice = issued(&app, &b, "bad-input").await;
    let res = send_event(&app, &key, &json!({})).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(
        problem.fields(),
        [
            "source",
            "event_id",
            "payment_id",
            "invoice_id",
            "currency",
            "amount",
            "status",
            "occurred_at"
        ]
    );
    let good = event("e1", "pay-1", &invoice, "400", "confirmed", 1);
    let with = |member: &str, value: Value| {
        let mut body = good.clone();
        body[member] = value;
        body
    };
    for (body, field) in [
        (with("amount", json!(400.5)), "amount"),
        (
            {
                let mut b = good.clone();
                b.as_object_mut().unwrap().remove("amount");
                b["amount_minor"] = json!(40000.0);
                b
            },
            "amount_minor",
        ),
    ] {
        let problem = expect_problem(
            send_event(&app, &key, &body).await,
            StatusCode::BAD_REQUEST,
            "float_not_allowed",
        )
        .await;
        assert_eq!(problem.body["field"], field);
        assert!(problem.detail.contains(&format!("send {field} as")));
    }
    let problem = expect_problem(
        send_event(&app, &key, &with("state", json!("paid"))).await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "state");
    for (body, field, code) in [
        (
            with("amount", json!("10.005")),
            "amount",
            "too_many_decimals",
        ),
        (with("amount", json!("0")), "amount", "amount_not_positive"),
        (
            with("amount_minor", json!(1)),
            "amount",
            "conflicting_fields",
        ),
        (
            with("invoice_number", json!("INV-2026-000001")),
            "invoice_id",
            "conflicting_fields",
        ),
        (
            with("currency", json!("EURO")),
            "currency",
            "unknown_currency",
        ),
        (with("status", json!("paid")), "status", "invalid_value"),
        (
            with("occurred_at", json!("today")),
            "occurred_at",
            "invalid_timestamp",
        ),
        (
            with("event_id", json!(" e1")),
            "event_id",
            "invalid_identifier",
        ),
        (
            with("raw", json!({"note": "x".repeat(20_000)})),
            "raw",
            "too_large",
        ),
    ] {
        let problem = expect_problem(
            send_event(&app, &key, &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.errors[0].field, field, "{body}");
        assert_eq!(problem.errors[0].code, code, "{body}");
    }
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        0
    );
    // A raw record is kept as sent, for a human.
    let kept = report(
        &app,
        &key,
        &with("raw", json!({"bank_ref": "X1", "fee": 0.25})),
    )
    .await;
    assert_eq!(kept["event"]["raw"], json!({"bank_ref": "X1", "fee": 0.25}));
}

/// A small seeded generator (SplitMix64): the permutation test's orders come from one printed
/// seed, so a failing order can be replayed with `TAUROS_TEST_SEED=<seed>`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniformly shuffled copy of `0..n` (Fisher–Yates).
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = usize::try_from(self.next() % (i as u64 + 1)).unwrap();
            order.swap(i, j);
        }
        order
    }
}

/// `TAUROS_TEST_SEED` if set, else one from the clock.
fn test_seed() -> u64 {
    match std::env::var("TAUROS_TEST_SEED") {
        Ok(seed) => seed.parse().expect("TAUROS_TEST_SEED is a u64"),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            now.as_secs() ^ u64::from(now.subsec_nanos()).rotate_left(32)
        }
    }
}

/// The permutation property against the store: one set of events about one invoice — a
/// payment observed then confirmed, one confirmed then reversed, one confirmed beyond the
/// total, one in dollars, one whose second event contradicts its amount, one naming an invoice
/// number nobody has — and the invoice's issue, applied in 12 random orders (seeded, the seed
/// printed), each on an invoice of its own. Every order ends in the same invoice state, amount
/// paid and payment standings. The same property over many more orders runs against the
/// domain's model (`domain::settlement`'s proptest).
async fn the_same_events_in_any_order_end_alike(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let seed = test_seed();
    let mut rng = SplitMix(seed);
    // (payment, amount, status, second, currency, invoice number instead of the invoice's id)
    let script = [
        ("a", "700", "observed", 1, "EUR", None),
        ("a", "700", "confirmed", 2, "EUR", None),
        ("b", "300", "confirmed", 3, "EUR", None),
        ("b", "300", "failed", 6, "EUR", None),
        ("c", "900", "confirmed", 4, "EUR", None),
        ("d", "50", "confirmed", 5, "USD", None),
        ("e", "200", "confirmed", 7, "EUR", None),
        ("e", "250", "observed", 8, "EUR", None),
        ("f", "100", "confirmed", 9, "EUR", Some("INV-1999-000001")),
    ];
    let issue_step = script.len();
    const ORDERS: usize = 12;
    let mut outcomes = Vec::new();
    let mut moves = Vec::new();
    for n in 0..ORDERS {
        let order = rng.permutation(script.len() + 1);
        let invoice = approved(&app, &b, &format!("order-{n}")).await;
        let mut payments = std::collections::BTreeMap::new();
        for &step in &order {
            if step == issue_step {
                issue(&app, &b, &invoice).await;
                continue;
            }
            let (p, amount, status, second, currency, number) = script[step];
            let mut body = event(
                &format!("o{n}-e{step}"),
                &format!("o{n}-{p}"),
                &invoice,
                amount,
                status,
                second,
            );
            body["currency"] = json!(currency);
            if let Some(number) = number {
                body.as_object_mut().unwrap().remove("invoice_id");
                body["invoice_number"] = json!(number);
            }
            let recorded = report(&app, &key, &body).await;
            let id = payments
                .entry(p)
                .or_insert_with(|| recorded["payment"]["id"].clone());
            assert_eq!(*id, recorded["payment"]["id"], "one payment per payment id");
        }
        let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
        let mut standings = Vec::new();
        for (p, id) in &payments {
            let detail = payment(&app, &b.org.approver_token, id).await;
            let d = &detail["payment"];
            standings.push(format!(
                "{p}: {} {} {} {}",
                d["state"].as_str().unwrap(),
                d["status"].as_str().unwrap(),
                d["allocated_minor"],
                d["unmatched_reason"].as_str().unwrap_or("-"),
            ));
        }
        let actions = app
            .event_actions(&b.org.approver_token, id_of(&invoice))
            .await;
        moves.push(actions.iter().filter(|a| a.starts_with("payment_")).count());
        assert_eq!(
            app.verify(&b.org.approver_token, id_of(&invoice)).await["ok"],
            true
        );
        outcomes.push((
            order,
            now["state"].clone(),
            now["amount_paid"].clone(),
            standings,
        ));
    }
    crate::helpers::figures(
        "settlement: events in random orders",
        app.backend,
        &[
            ("seed", seed.to_string()),
            ("orders", ORDERS.to_string()),
            ("steps per order", (script.len() + 1).to_string()),
            (
                "invoice moves per order",
                format!(
                    "{}–{}",
                    moves.iter().min().unwrap(),
                    moves.iter().max().unwrap()
                ),
            ),
        ],
    );
    let (first_order, state, paid, standings) = &outcomes[0];
    for (order, other_state, other_paid, other_standings) in &outcomes[1..] {
        assert_eq!(
            (other_state, other_paid, other_standings),
            (state, paid, standings),
            "seed {seed}: order {order:?} ends unlike order {first_order:?}"
        );
    }
    assert_eq!(state, "paid", "seed {seed}");
    assert_eq!(paid, "1200.00", "seed {seed}");
    assert_eq!(
        *standings,
        [
            "a: confirmed applied 70000 -",
            "b: failed failed 0 -",
            "c: confirmed overpaid 50000 -",
            "d: confirmed unmatched 0 wrong_currency",
            "e: confirmed conflict 0 -",
            "f: confirmed unmatched 0 unknown_invoice",
        ],
        "seed {seed}"
    );
}

async fn overdue_is_computed_and_listed(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let late = issued(&app, &b, "late").await;
    let on_time = issued(&app, &b, "on-time").await;
    // Nothing can be issued with a past due date, so the test moves one back in time (the
    // revisions are append-only: their guard is lifted for this one statement).
    let lift = if app.backend == crate::helpers::Backend::Postgres {
        "alter table invoice_revisions disable trigger invoice_revisions_append_only"
    } else {
        "drop trigger invoice_revisions_no_update"
    };
    assert!(app.sql_exec(lift).await);
    let id = sql_uuid(&app.database_url, id_of(&late));
    assert!(
        app.sql_exec(&format!(
            "update invoice_revisions set due_date = '2020-01-31', canonical_payload = \
             replace(canonical_payload, '\"due_date\":\"' || due_date || '\"', \
             '\"due_date\":\"2020-01-31\"') where invoice_id = {id}"
        ))
        .await
    );
    app.rederive_read_model(&id).await;
    let now = app.invoice(&b.org.approver_token, id_of(&late)).await;
    assert_eq!(now["overdue"], true);
    let ids = |items: &Value| -> Vec<Value> {
        items["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].clone())
            .collect()
    };
    let list = |query: &'static str| {
        let app = &app;
        let token = b.org.approver_token.clone();
        async move { expect_status(app.get(query, &token).await, StatusCode::OK).await }
    };
    assert_eq!(
        ids(&list("/v1/invoices?overdue=true").await),
        [late["id"].clone()]
    );
    assert!(ids(&list("/v1/invoices?overdue=false").await).contains(&on_time["id"]));
    // The proposing agent's list (read through its key, by its own query) filters alike.
    let agents = |query: &'static str| {
        let app = &app;
        let key = b.org.agent_key.clone();
        async move { expect_status(app.get(query, &key).await, StatusCode::OK).await }
    };
    assert_eq!(
        ids(&agents("/v1/invoices?overdue=true").await),
        [late["id"].clone()]
    );
    let not_overdue = ids(&agents("/v1/invoices?overdue=false").await);
    assert!(not_overdue.contains(&on_time["id"]));
    assert!(!not_overdue.contains(&late["id"]));
    // Partly paid it is still overdue; paid in full it is not.
    report(
        &app,
        &key,
        &event("e1", "pay-1", &late, "200", "confirmed", 1),
    )
    .await;
    assert_eq!(
        app.invoice(&b.org.approver_token, id_of(&late)).await["overdue"],
        true
    );
    report(
        &app,
        &key,
        &event("e2", "pay-2", &late, "1000", "confirmed", 2),
    )
    .await;
    let paid = app.invoice(&b.org.approver_token, id_of(&late)).await;
    assert_eq!(paid["state"], "paid");
    assert_eq!(paid["overdue"], false);
    assert!(ids(&list("/v1/invoices?overdue=true").await).is_empty());
    assert!(ids(&agents("/v1/invoices?overdue=true").await).is_empty());
    assert!(ids(&agents("/v1/invoices?overdue=false").await).contains(&late["id"]));
    let res = app
        .get("/v1/invoices?overdue=yes", &b.org.approver_token)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["overdue"]);
}
