//! Authority over money (docs/contract/api.md, "Tenancy"): only approvers grant `settlement`,
//! never together with `invoicing`, and under four eyes granting it is a proposal; a settlement
//! `source` belongs to the agent that first reported under it; settlement answers reveal only
//! the matched invoice's id, number and state. And four eyes covers removals: deactivating an
//! approver while it is on is a proposal another approver confirms.

use crate::helpers::settlement::{
    event_from, issued, send_event, settlement_agent, settlement_key, settlement_key_named,
    settlement_rows,
};
use crate::helpers::{
    Billing, TestApp, both_backends, expect_problem, expect_status, figures, id_of, parallel,
    tally, uuid_of,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

both_backends!(
    an_operator_cannot_grant_settlement,
    a_key_never_holds_settlement_with_invoicing,
    a_key_holding_both_from_before_is_refused_on_settlement_until_split,
    under_four_eyes_granting_settlement_is_a_proposal,
    parallel_confirmations_of_a_settlement_grant_create_one_agent,
    under_four_eyes_deactivating_an_approver_is_a_proposal,
    a_source_belongs_to_the_agent_that_first_reported_under_it,
    agents_racing_on_a_new_source_leave_exactly_one_owner,
    settlement_answers_reveal_only_the_invoice_id_number_and_state,
);

fn confirm_path(change: &Value) -> String {
    format!("/v1/organisation/changes/{}/confirm", id_of(change))
}

fn reject_path(change: &Value) -> String {
    format!("/v1/organisation/changes/{}/reject", id_of(change))
}

async fn agent_count(app: &TestApp) -> i64 {
    app.sql_count("select count(*) from agents").await
}

async fn an_operator_cannot_grant_settlement(app: TestApp) {
    let b = app.billing().await;
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    let before = agent_count(&app).await;
    for caps in [json!(["settlement"]), json!(["settlement", "settlement"])] {
        let res = app
            .post(
                "/v1/agents",
                &operator,
                json!({"name": "Bank feed", "capabilities": caps}),
            )
            .await;
        let problem = expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
        assert!(problem.detail.contains("approver"), "{problem}");
    }
    assert_eq!(agent_count(&app).await, before, "nothing written");
    // An operator still creates invoicing agents, and an approver grants settlement.
    expect_status(
        app.post("/v1/agents", &operator, json!({"name": "Invoicer"}))
            .await,
        StatusCode::CREATED,
    )
    .await;
    let granted = expect_status(
        settlement_agent(&app, &b.org.approver_token, "Bank feed").await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(granted["agent"]["capabilities"], json!(["settlement"]));
}

async fn a_key_never_holds_settlement_with_invoicing(app: TestApp) {
    let org = app.org().await;
    let before = agent_count(&app).await;
    let res = app
        .post(
            "/v1/agents",
            &org.approver_token,
            json!({"name": "Both", "capabilities": ["invoicing", "settlement"]}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["capabilities"], "{problem}");
    let hint = problem.errors[0].detail.as_str();
    assert!(
        hint.contains("separate") || hint.contains("two agents"),
        "says what to send instead: {problem}"
    );
    assert_eq!(agent_count(&app).await, before, "nothing written");
}

async fn a_key_holding_both_from_before_is_refused_on_settlement_until_split(app: TestApp) {
    let b = app.billing().await;
    let invoice = issued(&app, &b, "both").await;
    // An agent created before the rule: the API no longer creates one, so the test writes it.
    assert!(
        app.sql_exec(&format!(
            "update agents set capabilities = 'invoicing,settlement' where id = {}",
            crate::helpers::sql_uuid(&app.database_url, &b.org.agent_id.to_string())
        ))
        .await
    );
    let me = expect_status(app.get("/v1/me", &b.org.agent_key).await, StatusCode::OK).await;
    assert_eq!(me["capabilities"], json!(["invoicing", "settlement"]));
    let body = event_from("bank", "e1", "pay-1", &invoice, "1200.00", "confirmed", 0);
    let problem = expect_problem(
        send_event(&app, &b.org.agent_key, &body).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(problem.detail.contains("invoicing"), "{problem}");
    assert_eq!(settlement_rows(&app).await, [0, 0], "nothing written");
    assert_eq!(
        app.invoice(&b.org.agent_key, id_of(&invoice)).await["state"],
        "issued"
    );
    // Its invoicing keeps working; a separate settlement agent reports.
    expect_status(
        app.get("/v1/invoices", &b.org.agent_key).await,
        StatusCode::OK,
    )
    .await;
    let key = settlement_key(&app, &b.org.approver_token).await;
    expect_status(send_event(&app, &key, &body).await, StatusCode::CREATED).await;
}

async fn under_four_eyes_granting_settlement_is_a_proposal(app: TestApp) {
    let b = app.billing().await;
    let a1 = &b.org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let invoice = issued_under_four_eyes(&app, &b, &a2).await;
    let before = agent_count(&app).await;

    let res = settlement_agent(&app, a1, "Bank feed").await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = proposed["change"].clone();
    assert_eq!(change["kind"], "settlement_agent");
    assert_eq!(change["state"], "pending");
    assert_eq!(change["proposed_by"], b.org.approver_id.to_string());
    assert_eq!(change["agent_name"], "Bank feed");
    assert!(proposed.get("api_key").is_none());
    assert_eq!(agent_count(&app).await, before, "nothing exists yet");
    // Asking again answers the same proposal.
    let again = expect_status(
        settlement_agent(&app, a1, "Bank feed").await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["change"]["id"], change["id"]);

    // The proposer cannot confirm it.
    expect_problem(
        app.post(&confirm_path(&change), a1, json!({})).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;
    assert_eq!(agent_count(&app).await, before);

    // Another approver confirms: the agent exists, owned by the proposer, with no key yet; the
    // confirming approver never sees one.
    let decided = expect_status(
        app.post(&confirm_path(&change), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(decided["change"]["state"], "confirmed");
    assert_eq!(decided["change"]["decided_by"], a2_id.to_string());
    assert!(!decided.to_string().contains("tauros_"), "{decided}");
    let agent_id = decided["change"]["agent_id"].as_str().unwrap().to_owned();
    let agent = expect_status(
        app.get(&format!("/v1/agents/{agent_id}"), a1).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(agent["owner_id"], b.org.approver_id.to_string());
    assert_eq!(agent["capabilities"], json!(["settlement"]));
    assert_eq!(agent["key_expires_at"], Value::Null);
    expect_problem(
        app.get(&format!("/v1/agents/{agent_id}"), &a2).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    // The proposer takes its key, once, by rotating; it reports.
    let rotated = expect_status(
        app.post(&format!("/v1/agents/{agent_id}/rotate-key"), a1, json!({}))
            .await,
        StatusCode::OK,
    )
    .await;
    let key = rotated["api_key"].as_str().unwrap();
    let body = event_from("bank", "e1", "pay-1", &invoice, "1200.00", "confirmed", 0);
    expect_status(send_event(&app, key, &body).await, StatusCode::CREATED).await;

    // A rejected proposal creates nothing.
    let before = agent_count(&app).await;
    let other = expect_status(
        settlement_agent(&app, a1, "Chain watcher").await,
        StatusCode::ACCEPTED,
    )
    .await["change"]
        .clone();
    let rejected = expect_status(
        app.post(&reject_path(&other), &a2, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(rejected["change"]["state"], "rejected");
    assert_eq!(agent_count(&app).await, before);
    // An invoicing agent is still created at once.
    expect_status(
        app.post("/v1/agents", a1, json!({"name": "Invoicer"}))
            .await,
        StatusCode::CREATED,
    )
    .await;
}

async fn parallel_confirmations_of_a_settlement_grant_create_one_agent(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let mut others = Vec::new();
    for _ in 0..4 {
        others.push(app.human(a1, "approver").await.1);
    }
    app.set_org(a1, json!({"four_eyes": true})).await;
    let before = agent_count(&app).await;
    let change = expect_status(
        settlement_agent(&app, a1, "Bank feed").await,
        StatusCode::ACCEPTED,
    )
    .await["change"]
        .clone();
    let requests = others
        .iter()
        .flat_map(|token| {
            let path = confirm_path(&change);
            [
                app.post_request(&path, token, &json!({})),
                app.post_request(&path, token, &json!({})),
            ]
        })
        .collect();
    let answers = parallel(requests).await;
    // One approver's confirmation applies it (and that approver's twin replays it); the
    // others hear that it was decided.
    let statuses = tally(answers.iter().map(Response::status));
    let applied = statuses.get(&200).copied().unwrap_or(0);
    assert!((1..=2).contains(&applied), "{statuses:?}");
    assert!(
        statuses.keys().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );
    assert_eq!(agent_count(&app).await, before + 1, "exactly one agent");
    figures(
        "settlement grant confirmations",
        app.backend,
        &[
            ("confirmations", answers.len().to_string()),
            ("answered 200", applied.to_string()),
            ("agents created", "1".into()),
        ],
    );
}

/// Under four eyes an approver cannot approve their own agent's invoice: the second approver
/// (with shared review) approves it, then issues it.
async fn issued_under_four_eyes(app: &TestApp, b: &Billing, other: &str) -> Value {
    app.set_org(&b.org.approver_token, json!({"shared_review": true}))
        .await;
    let pending = app.pending(b, "four-eyes").await;
    expect_status(app.approve(other, &pending).await, StatusCode::OK).await;
    let res = app
        .command(other, id_of(&pending), "issue", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await["invoice"].clone()
}

async fn under_four_eyes_deactivating_an_approver_is_a_proposal(app: TestApp) {
    let org = app.org().await;
    let a1 = &org.approver_token;
    let (a2_id, a2) = app.human(a1, "approver").await;
    let (_, a3) = app.human(a1, "approver").await;
    let (operator_id, operator) = app.human(a1, "operator").await;
    app.set_org(a1, json!({"four_eyes": true})).await;
    let deactivate = |id: uuid::Uuid| format!("/v1/users/{id}/deactivate");

    // The attack: one approver removes the others. It is a proposal; nothing changes.
    let res = app.post(&deactivate(a2_id), a1, json!({})).await;
    let proposed = expect_status(res, StatusCode::ACCEPTED).await;
    let change = proposed["change"].clone();
    assert_eq!(change["kind"], "approver_deactivation");
    assert_eq!(change["state"], "pending");
    assert_eq!(change["user_id"], a2_id.to_string());
    expect_status(app.get("/v1/organisation", &a2).await, StatusCode::OK).await;
    let again = expect_status(
        app.post(&deactivate(a2_id), a1, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["change"]["id"], change["id"]);

    // Neither the proposer nor the approver it removes confirms it, and the one it removes
    // cannot reject it either (that would keep them in place).
    for token in [a1, &a2] {
        expect_problem(
            app.post(&confirm_path(&change), token, json!({})).await,
            StatusCode::FORBIDDEN,
            "four_eyes_required",
        )
        .await;
    }
    expect_problem(
        app.post(&reject_path(&change), &a2, json!({})).await,
        StatusCode::FORBIDDEN,
        "four_eyes_required",
    )
    .await;
    expect_status(app.get("/v1/organisation", &a2).await, StatusCode::OK).await;

    // A third approver confirms: the approver is deactivated, their sessions end.
    let decided = expect_status(
        app.post(&confirm_path(&change), &a3, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(decided["change"]["state"], "confirmed");
    expect_problem(
        app.get("/v1/organisation", &a2).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    let users = expect_status(app.get("/v1/users", a1).await, StatusCode::OK).await;
    let a2_row = users["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == a2_id.to_string())
        .unwrap()
        .clone();
    assert_eq!(a2_row["state"], "deactivated");

    // Deactivating an operator stays immediate.
    let done = expect_status(
        app.post(&deactivate(operator_id), a1, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(done["state"], "deactivated");
    expect_problem(
        app.get("/v1/invoices", &operator).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
}

async fn a_source_belongs_to_the_agent_that_first_reported_under_it(app: TestApp) {
    let b = app.billing().await;
    let invoice = issued(&app, &b, "owned").await;
    let owner = settlement_key(&app, &b.org.approver_token).await;
    let intruder = settlement_key_named(&app, &b.org.approver_token, "Other feed").await;
    let first = event_from("bank", "e1", "pay-1", &invoice, "400.00", "confirmed", 0);
    expect_status(send_event(&app, &owner, &first).await, StatusCode::CREATED).await;
    let rows = settlement_rows(&app).await;

    let attempts = [
        // a new payment under the source
        event_from("bank", "e2", "pay-2", &invoice, "800.00", "confirmed", 0),
        // a contradiction of the owner's payment, which would put it in conflict
        event_from("bank", "e3", "pay-1", &invoice, "1.00", "confirmed", 0),
        // the owner's next event id, taken first
        event_from("bank", "e4", "pay-1", &invoice, "400.00", "confirmed", 0),
        // a redelivery of the owner's own event
        first.clone(),
    ];
    for body in &attempts {
        let problem = expect_problem(
            send_event(&app, &intruder, body).await,
            StatusCode::FORBIDDEN,
            "source_owned",
        )
        .await;
        assert!(problem.detail.contains("source"), "{problem}");
    }
    assert_eq!(settlement_rows(&app).await, rows, "nothing written");
    assert!(
        app.sql_count("select count(*) from payments where status = 'conflict'")
            .await
            == 0
    );
    // The owner's feed goes on: its next event id is still its own.
    let next = expect_status(
        send_event(
            &app,
            &owner,
            &event_from("bank", "e4", "pay-1", &invoice, "400.00", "confirmed", 0),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(next["payment"]["status"], "applied");
    // Another source is the other agent's own.
    let elsewhere = event_from(
        "other-bank",
        "e1",
        "pay-9",
        &invoice,
        "100.00",
        "confirmed",
        0,
    );
    expect_status(
        send_event(&app, &intruder, &elsewhere).await,
        StatusCode::CREATED,
    )
    .await;
    expect_problem(
        send_event(
            &app,
            &owner,
            &event_from(
                "other-bank",
                "e2",
                "pay-8",
                &invoice,
                "1.00",
                "confirmed",
                0,
            ),
        )
        .await,
        StatusCode::FORBIDDEN,
        "source_owned",
    )
    .await;
    // Sources are per organisation: another org's agent uses the same name freely.
    let other = app.billing().await;
    let other_invoice = issued(&app, &other, "owned").await;
    let other_key = settlement_key(&app, &other.org.approver_token).await;
    expect_status(
        send_event(
            &app,
            &other_key,
            &event_from(
                "bank",
                "e1",
                "pay-1",
                &other_invoice,
                "1.00",
                "confirmed",
                0,
            ),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
}

async fn agents_racing_on_a_new_source_leave_exactly_one_owner(app: TestApp) {
    let b = app.billing().await;
    let invoice = issued(&app, &b, "race").await;
    let keys = [
        settlement_key_named(&app, &b.org.approver_token, "Feed A").await,
        settlement_key_named(&app, &b.org.approver_token, "Feed B").await,
    ];
    let mut requests = Vec::new();
    for i in 0..8 {
        for (k, key) in keys.iter().enumerate() {
            let body = event_from(
                "race",
                &format!("e-{k}-{i}"),
                &format!("p-{k}-{i}"),
                &invoice,
                "1.00",
                "confirmed",
                0,
            );
            requests.push((k, app.post_request("/v1/settlement-events", key, &body)));
        }
    }
    let (who, requests): (Vec<usize>, Vec<_>) = requests.into_iter().unzip();
    let mut created = [0usize; 2];
    let mut owned = [0usize; 2];
    for (k, res) in who.into_iter().zip(parallel(requests).await) {
        match res.status() {
            StatusCode::CREATED => created[k] += 1,
            StatusCode::FORBIDDEN => {
                expect_problem(res, StatusCode::FORBIDDEN, "source_owned").await;
                owned[k] += 1;
            }
            other => panic!("unexpected {other}: {}", res.text().await.unwrap()),
        }
    }
    // Exactly one agent owns the source: all its events are in, none of the other's.
    assert!(
        created == [8, 0] && owned == [0, 8] || created == [0, 8] && owned == [8, 0],
        "created {created:?}, refused {owned:?}"
    );
    assert_eq!(settlement_rows(&app).await, [8, 8]);
    figures(
        "source race",
        app.backend,
        &[
            ("requests", "16".into()),
            ("created", format!("{created:?}")),
            ("source_owned", format!("{owned:?}")),
        ],
    );
}

async fn settlement_answers_reveal_only_the_invoice_id_number_and_state(app: TestApp) {
    let b = app.billing().await;
    let invoice = issued(&app, &b, "reveal").await;
    let key = settlement_key(&app, &b.org.approver_token).await;
    let body = event_from("bank", "e1", "pay-1", &invoice, "400.00", "confirmed", 0);
    let recorded = expect_status(send_event(&app, &key, &body).await, StatusCode::CREATED).await;
    let shown = |answer: &Value| {
        let mut keys: Vec<String> = answer["invoice"]
            .as_object()
            .expect("the matched invoice")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(shown(&recorded), ["id", "number", "state"], "{recorded}");
    assert_eq!(recorded["invoice"]["id"], invoice["id"]);
    assert_eq!(recorded["invoice"]["number"], invoice["number"]);
    assert_eq!(recorded["invoice"]["state"], "partially_paid");
    // The payment part says nothing of the invoice's balance either.
    for hidden in ["allocated", "allocated_minor"] {
        assert!(recorded["payment"].get(hidden).is_none(), "{recorded}");
    }
    // A redelivery answers the same shape.
    let replay = expect_status(send_event(&app, &key, &body).await, StatusCode::OK).await;
    assert_eq!(shown(&replay), ["id", "number", "state"]);
    // Humans still read the whole payment.
    let detail = expect_status(
        app.get(
            &format!(
                "/v1/payments/{}",
                recorded["payment"]["id"].as_str().unwrap()
            ),
            &b.org.approver_token,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(detail["payment"]["allocated"], "400.00");
    assert_eq!(
        uuid_of(&detail["payment"]["matched_invoice_id"]).to_string(),
        id_of(&invoice)
    );
}
