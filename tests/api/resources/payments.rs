//! Payments without dead ends (docs/contract/effects.md §6, "Payments"; docs/SETTLEMENT.md,
//! "Resolving a payment"): every payment settlement cannot decide has a way out through
//! `POST /v1/payments/{id}/resolve` — accept a contradicted one at a stated amount, allocate an
//! unmatched one to an invoice, void one — audited on the payment and, where money moves, on
//! the invoice; four eyes makes a resolution a proposal; replays and parallel duplicates apply
//! once; reaching `paid` writes an `invoice.paid` event, once per time it is reached.
//!
//! Invoices total 1200.00 (the helpers' fixture) and are issued by hand (no issuer configured).

use crate::helpers::settlement::{billing_with_settlement_key, event, issued, issued_from};
use crate::helpers::{
    TestApp, both_backends, expect_problem, expect_status, figures, id_of, invoice_body, parallel,
    tally, uuid_of,
};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use uuid::Uuid;

both_backends!(
    a_contradicted_payment_is_accepted_at_a_stated_amount,
    an_unmatched_payment_is_allocated_to_an_invoice,
    allocation_refuses_another_currency_a_settled_invoice_and_too_much,
    a_voided_payment_moves_the_invoice_back,
    four_eyes_makes_a_resolution_a_proposal_another_approver_confirms,
    a_replayed_resolution_writes_nothing,
    parallel_duplicate_resolutions_apply_once,
    invoice_paid_is_written_once_per_reaching_paid,
    refused_resolutions_name_the_field_and_write_nothing,
);

/// Reports a new event; returns its payment.
async fn report(app: &TestApp, key: &str, body: Value) -> Value {
    let res = app.post("/v1/settlement-events", key, body).await;
    expect_status(res, StatusCode::CREATED).await["payment"].clone()
}

fn resolve_request(
    app: &TestApp,
    token: &str,
    payment: &Value,
    key: &str,
    body: &Value,
) -> RequestBuilder {
    let path = format!("/v1/payments/{}/resolve", id_of(payment));
    app.post_request(&path, token, body)
        .header("idempotency-key", key)
}

async fn resolve(app: &TestApp, token: &str, payment: &Value, key: &str, body: Value) -> Response {
    resolve_request(app, token, payment, key, &body)
        .send()
        .await
        .expect("request")
}

async fn detail(app: &TestApp, token: &str, payment: &Value) -> Value {
    let res = app
        .get(&format!("/v1/payments/{}", id_of(payment)), token)
        .await;
    expect_status(res, StatusCode::OK).await
}

async fn actions(app: &TestApp, token: &str, invoice: &Value) -> Vec<String> {
    app.event_actions(token, id_of(invoice)).await
}

/// What a refusal must leave as it was: resolutions, proposals, invoice events, audit rows,
/// and the payments' standing.
async fn footprint(app: &TestApp) -> Vec<i64> {
    let mut counts = Vec::new();
    for sql in [
        "select count(*) from payment_resolutions",
        "select count(*) from org_changes",
        "select count(*) from invoice_events",
        "select count(*) from audit_events",
        "select count(*) from payments where resolution is not null",
    ] {
        counts.push(app.sql_count(sql).await);
    }
    counts
}

/// A payment of 400.00 confirmed for `invoice`, then contradicted by an event saying 500.00.
async fn contradicted(app: &TestApp, key: &str, invoice: &Value, payment: &str) -> Value {
    report(
        app,
        key,
        event(
            &format!("{payment}-a"),
            payment,
            invoice,
            "400.00",
            "confirmed",
            1,
        ),
    )
    .await;
    let p = report(
        app,
        key,
        event(
            &format!("{payment}-b"),
            payment,
            invoice,
            "500.00",
            "confirmed",
            2,
        ),
    )
    .await;
    assert_eq!(p["status"], "conflict");
    p
}

async fn a_contradicted_payment_is_accepted_at_a_stated_amount(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "contradicted").await;
    let p = contradicted(&app, &key, &invoice, "pay-1").await;
    // The contradiction took the 400.00 back: nothing of it counts until a human decides.
    let now = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(now["state"], "issued");
    assert_eq!(
        actions(&app, token, &invoice).await[4..],
        ["payment_applied", "payment_reversed"]
    );

    let res = resolve(
        &app,
        token,
        &p,
        "accept-1",
        json!({"action": "accept", "amount": "500.00", "reason": "the bank confirmed 500.00 by phone"}),
    )
    .await;
    assert_eq!(res.headers()["idempotent-replayed"], "false");
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["replayed"], false);
    assert_eq!(answer["resolution"]["action"], "accept");
    assert_eq!(answer["resolution"]["state"], "applied");
    assert_eq!(answer["resolution"]["amount"], "500.00");
    assert!(answer["change"].is_null());
    assert_eq!(answer["payment"]["status"], "applied");
    assert_eq!(answer["payment"]["resolution"], "accept");
    assert_eq!(answer["payment"]["resolved_amount_minor"], 50000);
    assert_eq!(answer["payment"]["allocated"], "500.00");
    assert_eq!(answer["invoice"]["state"], "partially_paid");
    assert_eq!(answer["invoice"]["amount_paid"], "500.00");

    // One invoice event by the approver, naming the payment and the reason.
    let events = app
        .get(&format!("/v1/invoices/{}/events", id_of(&invoice)), token)
        .await;
    let events = expect_status(events, StatusCode::OK).await;
    let last = events["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "payment_applied");
    assert_eq!(last["actor_kind"], "human");
    let note = last["note"].as_str().unwrap();
    assert!(
        note.contains("bank/pay-1 accepted by an approver"),
        "{note}"
    );
    assert!(
        note.contains("the bank confirmed 500.00 by phone"),
        "{note}"
    );
    // On the payment: the resolution, and the audit trail.
    let d = detail(&app, token, &p).await;
    assert_eq!(d["resolutions"].as_array().unwrap().len(), 1);
    assert_eq!(
        d["resolutions"][0]["reason"],
        "the bank confirmed 500.00 by phone"
    );
    assert_eq!(
        app.audit_actions(b.org.org_id, uuid_of(&p["id"])).await,
        ["payment.resolved"]
    );
    // Out of the conflict inbox; a later contradiction does not put it back.
    report(
        &app,
        &key,
        event("pay-1-c", "pay-1", &invoice, "450.00", "confirmed", 3),
    )
    .await;
    let d = detail(&app, token, &p).await;
    assert_eq!(d["payment"]["status"], "applied");
    assert_eq!(d["payment"]["allocated"], "500.00");
    assert_eq!(
        app.invoice(token, id_of(&invoice)).await["amount_paid"],
        "500.00"
    );
    // Accepting again is refused: it is no longer in conflict.
    let before = footprint(&app).await;
    let res = resolve(
        &app,
        token,
        &p,
        "accept-2",
        json!({"action": "accept", "amount": "500.00", "reason": "again"}),
    )
    .await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "payment_not_resolvable").await;
    assert!(problem.detail.contains("`action` accept"));
    assert_eq!(footprint(&app).await, before);
}

async fn an_unmatched_payment_is_allocated_to_an_invoice(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "target").await;
    // Unknown invoice: an id no invoice has.
    let stray = report(
        &app,
        &key,
        event(
            "e-1",
            "pay-stray",
            &json!({"id": Uuid::now_v7()}),
            "400.00",
            "confirmed",
            1,
        ),
    )
    .await;
    assert_eq!(stray["status"], "unmatched");
    assert_eq!(stray["unmatched_reason"], "unknown_invoice");
    let res = resolve(
        &app,
        token,
        &stray,
        "alloc-1",
        json!({"action": "allocate", "invoice_id": invoice["id"], "reason": "customer mistyped the reference"}),
    )
    .await;
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["payment"]["status"], "applied");
    assert_eq!(answer["payment"]["matched_invoice_id"], invoice["id"]);
    assert_eq!(answer["payment"]["unmatched_reason"], Value::Null);
    assert_eq!(answer["invoice"]["state"], "partially_paid");
    assert_eq!(answer["invoice"]["amount_paid"], "400.00");
    assert_eq!(
        actions(&app, token, &invoice).await.last().unwrap(),
        "payment_applied"
    );

    // Wrong currency: CHF paid against the EUR invoice, allocated to the customer's CHF one.
    let chf = app
        .destination(&b.org.agent_key, "CHF", "iban", "CH9300762011623852957")
        .await;
    let mut body = invoice_body(&b);
    body["currency"] = json!("CHF");
    body["payment_destination_id"] = json!(chf);
    let francs = issued_from(&app, &b, "francs", &body).await;
    let mut wrong = event("e-2", "pay-chf", &invoice, "1200.00", "confirmed", 2);
    wrong["currency"] = json!("CHF");
    let wrong = report(&app, &key, wrong).await;
    assert_eq!(wrong["unmatched_reason"], "wrong_currency");
    let res = resolve(
        &app,
        token,
        &wrong,
        "alloc-2",
        json!({"action": "allocate", "invoice_id": francs["id"], "reason": "paid the CHF invoice"}),
    )
    .await;
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["payment"]["status"], "applied");
    assert_eq!(answer["invoice"]["id"], francs["id"]);
    assert_eq!(answer["invoice"]["state"], "paid");
    assert_eq!(
        actions(&app, token, &francs).await[4..],
        ["payment_applied", "paid"]
    );
    // The EUR invoice is untouched, and a later event of the payment keeps it where it was
    // allocated.
    assert_eq!(
        app.invoice(token, id_of(&invoice)).await["amount_paid"],
        "400.00"
    );
    let mut later = event("e-3", "pay-chf", &invoice, "1200.00", "confirmed", 3);
    later["currency"] = json!("CHF");
    let p = report(&app, &key, later).await;
    assert_eq!(p["matched_invoice_id"], francs["id"]);
    assert_eq!(p["status"], "applied");
    assert!(
        app.get("/v1/payments?status=unmatched", token)
            .await
            .json::<Value>()
            .await
            .unwrap()["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

async fn allocation_refuses_another_currency_a_settled_invoice_and_too_much(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "half").await;
    report(
        &app,
        &key,
        event("e-0", "pay-0", &invoice, "400.00", "confirmed", 1),
    )
    .await;
    let stray = report(
        &app,
        &key,
        event(
            "e-1",
            "pay-1",
            &json!({"id": Uuid::now_v7()}),
            "1000.00",
            "confirmed",
            2,
        ),
    )
    .await;
    let before = footprint(&app).await;
    let allocate = |extra: Value| {
        let mut body = json!({"action": "allocate", "invoice_id": invoice["id"], "reason": "r"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    // 1000.00 against an open balance of 800.00: never an overpayment by hand.
    let res = resolve(&app, token, &stray, "k1", allocate(json!({}))).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["invoice_id"]);
    assert_eq!(problem.errors[0].code, "over_allocation");
    let res = resolve(
        &app,
        token,
        &stray,
        "k2",
        allocate(json!({"amount": "1000.01"})),
    )
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "exceeds_payment");
    let res = resolve(
        &app,
        token,
        &stray,
        "k3",
        allocate(json!({"invoice_id": Uuid::now_v7()})),
    )
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "unknown_invoice");
    let draft = app.draft(&b, "a-draft").await;
    let res = resolve(
        &app,
        token,
        &stray,
        "k4",
        allocate(json!({"invoice_id": draft["id"]})),
    )
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "invoice_not_payable");
    let mut francs = stray.clone();
    francs["id"] = report(&app, &key, {
        let mut e = event("e-2", "pay-2", &invoice, "10.00", "confirmed", 3);
        e["currency"] = json!("CHF");
        e
    })
    .await["id"]
        .clone();
    let before_chf = footprint(&app).await;
    let res = resolve(&app, token, &francs, "k5", allocate(json!({}))).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "wrong_currency");
    assert_eq!(footprint(&app).await, before_chf);
    assert_eq!(before[..2], before_chf[..2]);
    // The stated balance fits: the invoice is paid.
    let res = resolve(
        &app,
        token,
        &stray,
        "k6",
        allocate(json!({"amount_minor": 80000})),
    )
    .await;
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["invoice"]["state"], "paid");
    assert_eq!(answer["payment"]["allocated"], "800.00");
    assert_eq!(answer["payment"]["amount"], "1000.00");
}

async fn a_voided_payment_moves_the_invoice_back(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "voided").await;
    report(
        &app,
        &key,
        event("e-1", "pay-1", &invoice, "600.00", "confirmed", 1),
    )
    .await;
    let second = report(
        &app,
        &key,
        event("e-2", "pay-2", &invoice, "600.00", "confirmed", 2),
    )
    .await;
    assert_eq!(app.invoice(token, id_of(&invoice)).await["state"], "paid");
    let res = resolve(
        &app,
        token,
        &second,
        "void-1",
        json!({"action": "void", "reason": "the bank recalled it as a duplicate"}),
    )
    .await;
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["payment"]["status"], "failed");
    assert_eq!(answer["payment"]["resolution"], "void");
    assert_eq!(answer["payment"]["allocated"], "0.00");
    assert_eq!(answer["invoice"]["state"], "partially_paid");
    assert_eq!(answer["invoice"]["amount_paid"], "600.00");
    assert_eq!(
        actions(&app, token, &invoice).await[4..],
        [
            "payment_applied",
            "payment_applied",
            "paid",
            "payment_reversed"
        ]
    );
    // A voided payment stays out, whatever its events say later; voiding it again is refused.
    report(
        &app,
        &key,
        event("e-3", "pay-2", &invoice, "600.00", "confirmed", 3),
    )
    .await;
    assert_eq!(
        app.invoice(token, id_of(&invoice)).await["state"],
        "partially_paid"
    );
    let res = resolve(
        &app,
        token,
        &second,
        "void-2",
        json!({"action": "void", "reason": "again"}),
    )
    .await;
    expect_problem(res, StatusCode::CONFLICT, "payment_not_resolvable").await;
    // An unmatched payment voided leaves the inbox.
    let stray = report(
        &app,
        &key,
        event(
            "e-4",
            "pay-3",
            &json!({"id": Uuid::now_v7()}),
            "5.00",
            "confirmed",
            4,
        ),
    )
    .await;
    let res = resolve(
        &app,
        token,
        &stray,
        "void-3",
        json!({"action": "void", "reason": "test transfer"}),
    )
    .await;
    let answer = expect_status(res, StatusCode::OK).await;
    assert_eq!(answer["payment"]["status"], "failed");
    assert!(answer["invoice"].is_null());
}

async fn four_eyes_makes_a_resolution_a_proposal_another_approver_confirms(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let a1 = &b.org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    // Issued first: with four eyes on, A1 could not approve their own agent's invoice.
    let invoice = issued(&app, &b, "four-eyes").await;
    let p = contradicted(&app, &key, &invoice, "pay-1").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let body =
        json!({"action": "accept", "amount": "400.00", "reason": "the first event was right"});

    let res = resolve(&app, a1, &p, "fe-1", body.clone()).await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    assert_eq!(proposed["resolution"]["state"], "proposed");
    assert_eq!(proposed["change"]["kind"], "payment_resolution");
    assert_eq!(proposed["change"]["state"], "pending");
    assert_eq!(
        proposed["change"]["payment_resolution_id"],
        proposed["resolution"]["id"]
    );
    assert_eq!(proposed["change"]["payment_id"], p["id"]);
    assert_eq!(
        proposed["payment"]["status"], "conflict",
        "nothing applied yet"
    );
    assert_eq!(app.invoice(a1, id_of(&invoice)).await["state"], "issued");
    let change = proposed["change"]["id"].as_str().unwrap().to_owned();
    // The proposer cannot confirm their own.
    let res = app
        .post(
            &format!("/v1/organisation/changes/{change}/confirm"),
            a1,
            json!({}),
        )
        .await;
    expect_problem(res, StatusCode::FORBIDDEN, "four_eyes_required").await;
    assert_eq!(detail(&app, a1, &p).await["payment"]["status"], "conflict");
    // Another approver confirms: now it applies, as them.
    let res = app
        .post(
            &format!("/v1/organisation/changes/{change}/confirm"),
            &a2,
            json!({}),
        )
        .await;
    let done = expect_status(res, StatusCode::OK).await;
    assert_eq!(done["change"]["state"], "confirmed");
    let d = detail(&app, a1, &p).await;
    assert_eq!(d["payment"]["status"], "applied");
    assert_eq!(d["resolutions"][0]["state"], "applied");
    assert_eq!(d["resolutions"][0]["decided_by"], a2_id.to_string());
    assert_eq!(
        app.invoice(a1, id_of(&invoice)).await["amount_paid"],
        "400.00"
    );
    assert_eq!(
        app.audit_actions(b.org.org_id, uuid_of(&p["id"])).await,
        ["payment.resolution_proposed", "payment.resolved"]
    );
    // The proposer's request again is a replay: the resolution as it is now, nothing written.
    let before = footprint(&app).await;
    let res = resolve(&app, a1, &p, "fe-1", body).await;
    let replay = expect_status(res, StatusCode::OK).await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["resolution"]["state"], "applied");
    assert_eq!(footprint(&app).await, before);

    // A rejected proposal changes nothing.
    let stray = report(
        &app,
        &key,
        event(
            "e-9",
            "pay-9",
            &json!({"id": Uuid::now_v7()}),
            "5.00",
            "confirmed",
            9,
        ),
    )
    .await;
    let res = resolve(
        &app,
        a1,
        &stray,
        "fe-2",
        json!({"action": "void", "reason": "noise"}),
    )
    .await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = proposed["change"]["id"].as_str().unwrap().to_owned();
    let res = app
        .post(
            &format!("/v1/organisation/changes/{change}/reject"),
            &a2,
            json!({}),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
    let d = detail(&app, a1, &stray).await;
    assert_eq!(d["payment"]["status"], "unmatched");
    assert_eq!(d["resolutions"][0]["state"], "rejected");

    // The confirm checks again: two proposals for one payment, the first confirmed, the second
    // no longer fits and is refused, writing nothing; it stays pending for an approver to reject.
    let res = resolve(
        &app,
        a1,
        &stray,
        "fe-3",
        json!({"action": "void", "reason": "noise"}),
    )
    .await;
    let void = expect_status(res, StatusCode::ACCEPTED).await["change"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let allocate = json!({"action": "allocate", "invoice_id": invoice["id"], "amount": "5.00", "reason": "ours"});
    let res = resolve(&app, a1, &stray, "fe-4", allocate).await;
    let alloc = expect_status(res, StatusCode::ACCEPTED).await["change"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = app
        .post(
            &format!("/v1/organisation/changes/{void}/confirm"),
            &a2,
            json!({}),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
    let before = footprint(&app).await;
    let res = app
        .post(
            &format!("/v1/organisation/changes/{alloc}/confirm"),
            &a2,
            json!({}),
        )
        .await;
    expect_problem(res, StatusCode::CONFLICT, "payment_not_resolvable").await;
    assert_eq!(footprint(&app).await, before);
    let change = app
        .get(&format!("/v1/organisation/changes/{alloc}"), a1)
        .await;
    assert_eq!(
        expect_status(change, StatusCode::OK).await["state"],
        "pending"
    );
    assert_eq!(
        detail(&app, a1, &stray).await["payment"]["status"],
        "failed"
    );
}

async fn a_replayed_resolution_writes_nothing(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "replayed").await;
    let p = contradicted(&app, &key, &invoice, "pay-1").await;
    let body = json!({"action": "accept", "amount_minor": 40000, "reason": "as first reported"});
    let first = expect_status(
        resolve(&app, token, &p, "same", body.clone()).await,
        StatusCode::OK,
    )
    .await;
    let before = footprint(&app).await;
    // The same key and body, the amount written another way: the same answer, replayed.
    let res = resolve(
        &app,
        token,
        &p,
        "same",
        json!({"action": "accept", "amount": "400.00", "reason": "as first reported"}),
    )
    .await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replay = expect_status(res, StatusCode::OK).await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["resolution"]["id"], first["resolution"]["id"]);
    assert_eq!(replay["payment"]["status"], "applied");
    assert_eq!(footprint(&app).await, before);
    // The same key, another body: refused, naming the resolution that holds the key.
    let res = resolve(
        &app,
        token,
        &p,
        "same",
        json!({"action": "accept", "amount": "401.00", "reason": "as first reported"}),
    )
    .await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "idempotency_conflict").await;
    assert_eq!(
        problem.body["payment_resolution_id"],
        first["resolution"]["id"]
    );
    assert_eq!(footprint(&app).await, before);
    // Keys are per approver: another approver's same key is theirs (and refused on state).
    let (_, a2) = app.human(token, "approver").await;
    app.set_org(token, json!({"shared_review": true})).await;
    let before = footprint(&app).await;
    let res = resolve(&app, &a2, &p, "same", body).await;
    expect_problem(res, StatusCode::CONFLICT, "payment_not_resolvable").await;
    assert_eq!(footprint(&app).await, before);
}

async fn parallel_duplicate_resolutions_apply_once(app: TestApp) {
    const N: usize = 8;
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "parallel").await;
    let p = contradicted(&app, &key, &invoice, "pay-1").await;
    let body = json!({"action": "accept", "amount": "1200.00", "reason": "confirmed in full"});
    let requests = (0..N)
        .map(|_| resolve_request(&app, token, &p, "one-key", &body))
        .collect();
    let mut fresh = 0;
    let mut ids = Vec::new();
    for res in parallel(requests).await {
        let answer = expect_status(res, StatusCode::OK).await;
        if answer["replayed"] == false {
            fresh += 1;
        }
        ids.push(answer["resolution"]["id"].clone());
    }
    assert_eq!(fresh, 1, "one request applies, the others replay it");
    assert!(ids.iter().all(|id| *id == ids[0]));
    // Under different keys, racing: one applies, the others find it resolved.
    let q = contradicted(&app, &key, &invoice, "pay-2").await;
    let requests = (0..N)
        .map(|i| {
            resolve_request(
                &app,
                token,
                &q,
                &format!("key-{i}"),
                &json!({"action": "void", "reason": "duplicate"}),
            )
        })
        .collect();
    let answers = parallel(requests).await;
    let statuses = tally(answers.iter().map(Response::status));
    assert_eq!(statuses, BTreeMap::from([(200, 1), (409, N - 1)]));
    let resolutions = app
        .sql_count("select count(*) from payment_resolutions")
        .await;
    assert_eq!(resolutions, 2);
    let events = actions(&app, token, &invoice).await;
    assert_eq!(
        events.iter().filter(|a| *a == "paid").count(),
        1,
        "{events:?}"
    );
    assert_eq!(app.invoice(token, id_of(&invoice)).await["state"], "paid");
    figures(
        "payments: parallel duplicate resolutions",
        app.backend,
        &[
            ("same-key requests", N.to_string()),
            ("applied", fresh.to_string()),
            ("racing keys applied", statuses[&200].to_string()),
            ("resolutions written", resolutions.to_string()),
        ],
    );
}

async fn invoice_paid_is_written_once_per_reaching_paid(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    // An endpoint may subscribe to it.
    let res = app
        .post(
            "/v1/webhook-endpoints",
            token,
            json!({"url": "https://hooks.example.com/tauros", "events": ["invoice.paid"]}),
        )
        .await;
    let endpoint = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(endpoint["endpoint"]["events"], json!(["invoice.paid"]));
    let invoice = issued(&app, &b, "paid-once").await;
    let full = event("e-1", "pay-1", &invoice, "1200.00", "confirmed", 1);
    report(&app, &key, full.clone()).await;
    // A redelivery moves nothing and writes nothing.
    let res = app.post("/v1/settlement-events", &key, full).await;
    expect_status(res, StatusCode::OK).await;
    let mut reversed = event("e-2", "pay-1", &invoice, "1200.00", "confirmed", 2);
    reversed["status"] = json!("failed");
    report(&app, &key, reversed).await;
    report(
        &app,
        &key,
        event("e-3", "pay-2", &invoice, "1200.00", "confirmed", 3),
    )
    .await;
    assert_eq!(
        actions(&app, token, &invoice).await[4..],
        [
            "payment_applied",
            "paid",
            "payment_reversed",
            "payment_applied",
            "paid"
        ]
    );
    // Each `paid` is one delivery to the endpoint that subscribed; nothing else is sent there.
    let deliveries = app
        .sql_count("select count(*) from jobs where kind = 'webhook.deliver.v1'")
        .await;
    assert_eq!(deliveries, 2);
    let verified = app.verify(token, id_of(&invoice)).await;
    assert_eq!(verified["ok"], true, "{verified}");
}

async fn refused_resolutions_name_the_field_and_write_nothing(app: TestApp) {
    let (b, key) = billing_with_settlement_key(&app).await;
    let token = &b.org.approver_token;
    let invoice = issued(&app, &b, "refusals").await;
    let p = contradicted(&app, &key, &invoice, "pay-1").await;
    let (_, operator) = app.human(token, "operator").await;
    let other = app.org().await;
    let before = footprint(&app).await;
    // No key.
    let path = format!("/v1/payments/{}/resolve", id_of(&p));
    let res = app
        .post(&path, token, json!({"action": "void", "reason": "r"}))
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["Idempotency-Key"]);
    // Every broken member at once.
    let res = resolve(
        &app,
        token,
        &p,
        "k",
        json!({"action": "accept", "amount": "10.005"}),
    )
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["reason", "amount"]);
    let res = resolve(
        &app,
        token,
        &p,
        "k",
        json!({"action": "refund", "reason": "r"}),
    )
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["action"]);
    let res = resolve(
        &app,
        token,
        &p,
        "k",
        json!({"action": "accept", "amount": 4.5, "reason": "r"}),
    )
    .await;
    expect_problem(res, StatusCode::BAD_REQUEST, "float_not_allowed").await;
    // The wrong action for its status.
    let res = resolve(
        &app,
        token,
        &p,
        "k",
        json!({"action": "allocate", "invoice_id": invoice["id"], "reason": "r"}),
    )
    .await;
    expect_problem(res, StatusCode::CONFLICT, "payment_not_resolvable").await;
    // Only approvers; agents and operators are refused, unknown payments are 404.
    let body = json!({"action": "void", "reason": "r"});
    let res = resolve(&app, &operator, &p, "k", body.clone()).await;
    expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    let res = resolve(&app, &b.org.agent_key, &p, "k", body.clone()).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let unknown = json!({"id": Uuid::now_v7()});
    let res = resolve(&app, token, &unknown, "k", body.clone()).await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    // Another organisation's approver cannot tell it exists.
    let res = resolve(&app, &other.approver_token, &p, "k", body).await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert_eq!(footprint(&app).await, before);
}
