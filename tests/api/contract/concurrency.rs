//! Concurrency: real requests fired at once behind a barrier (`helpers::parallel`), then the
//! rows that exist afterwards are counted. Every assertion holds for every interleaving: the
//! tests never depend on which request the scheduler lets in first, only on the invariants of
//! docs/contract/domain.md §5 (the outcomes under concurrency), §7 (idempotency) and §8 (audit).
//!
//! Each test runs on its own fresh database, so whole-table counts are the test's own rows.

use crate::helpers::{
    Billing, IBAN, TestApp, both_backends, expect_status, id_of, invoice_body, invoice_body_for,
    parallel, tally,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;

both_backends!(
    identical_parallel_creates_make_one_invoice,
    conflicting_parallel_creates_keep_the_winners_payload,
    parallel_creates_with_distinct_keys_all_succeed,
    one_key_of_two_agents_in_parallel_makes_two_invoices,
    identical_parallel_approvals_make_one_decision,
    approve_racing_reject_has_one_winner,
    revise_racing_approve_never_both,
    submit_racing_withdraw_is_consistent,
    withdraw_racing_approve_never_both,
    approve_racing_deactivation_is_consistent,
    identical_parallel_commands_write_one_event_each,
    parallel_destination_creates_with_one_key_make_one_row,
    parallel_deactivations_write_one_audit_event,
);

/// One answer: status, the `Idempotent-Replayed` header (if any) and the JSON body.
struct Answer {
    status: StatusCode,
    replayed_header: Option<String>,
    body: Value,
}

impl Answer {
    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    fn invoice_id(&self) -> &str {
        self.body["invoice"]["id"].as_str().expect("invoice id")
    }
}

async fn answers(responses: Vec<Response>) -> Vec<Answer> {
    let mut out = Vec::with_capacity(responses.len());
    for res in responses {
        let status = res.status();
        let replayed_header = res
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = res.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).expect("JSON body")
        };
        assert!(
            !status.is_server_error(),
            "no request may see a 5xx under concurrency: {status} {body}"
        );
        if !status.is_success() {
            assert_eq!(body["status"], status.as_u16(), "problem body: {body}");
            let rendered = body.to_string().to_lowercase();
            for leak in ["unique", "constraint", "deadlock", "sqlite", "violat"] {
                assert!(
                    !rendered.contains(leak),
                    "a database error leaked into the answer: {body}"
                );
            }
        }
        out.push(Answer {
            status,
            replayed_header,
            body,
        });
    }
    out
}

/// Asserts a successful invoice command answer and returns `replayed`.
fn ok_replayed(a: &Answer) -> bool {
    let replayed = a.body["replayed"].as_bool().expect("replayed flag");
    assert_eq!(
        a.replayed_header.as_deref(),
        Some(if replayed { "true" } else { "false" }),
        "header and body agree on replayed"
    );
    replayed
}

/// Asserts that `verify` finds the invoice intact after the race.
async fn verify_ok(app: &TestApp, b: &Billing, id: &str) {
    let body = app.verify(&b.org.approver_token, id).await;
    assert_eq!(body["ok"], true, "verify after the race: {body}");
}

/// Sixteen identical creates on one key: one invoice, one revision, one event; every caller
/// gets its id; exactly one 201 and fifteen replays.
async fn identical_parallel_creates_make_one_invoice(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let requests = (0..16)
        .map(|_| app.create_invoice_request(&b.org.agent_key, "storm-1", &body))
        .collect();
    let got = answers(parallel(requests).await).await;
    let created: Vec<&Answer> = got
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .collect();
    assert_eq!(created.len(), 1, "exactly one request creates");
    assert!(!ok_replayed(created[0]));
    let id = created[0].invoice_id().to_owned();
    let hash = created[0].body["invoice"]["current_revision"]["payload_hash"].clone();
    for a in &got {
        assert!(
            a.status == StatusCode::CREATED || a.status == StatusCode::OK,
            "{} {}",
            a.status,
            a.body
        );
        assert_eq!(a.invoice_id(), id, "every caller gets the same invoice");
        assert_eq!(a.body["invoice"]["current_revision"]["payload_hash"], hash);
        assert_eq!(a.body["invoice"]["state"], "draft");
        if a.status == StatusCode::OK {
            assert!(ok_replayed(a), "a 200 on create is a replay");
        }
    }
    assert_eq!(
        tally(got.iter().map(|a| a.status)),
        BTreeMap::from([(201, 1), (200, 15)])
    );
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);
    verify_ok(&app, &b, &id).await;
}

/// Eight creates with payload A race eight with payload B on one key: one invoice whose
/// revision is exactly the winner's payload; the other payload's requests all get 409
/// `idempotency_conflict`; the winner's payload's requests all get the invoice.
async fn conflicting_parallel_creates_keep_the_winners_payload(app: TestApp) {
    let b = app.billing().await;
    let a_body = invoice_body(&b);
    let mut b_body = a_body.clone();
    b_body["lines"][0]["unit_amount"] = json!("401");
    let requests = (0..16)
        .map(|i| {
            app.create_invoice_request(
                &b.org.agent_key,
                "race-1",
                if i % 2 == 0 { &a_body } else { &b_body },
            )
        })
        .collect();
    let got = answers(parallel(requests).await).await;
    let winners: Vec<usize> = (0..16)
        .filter(|i| got[*i].status == StatusCode::CREATED)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one request creates");
    let winner = &got[winners[0]];
    let winner_is_a = winners[0].is_multiple_of(2);
    let id = winner.invoice_id().to_owned();
    let hash = winner.body["invoice"]["current_revision"]["payload_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let expected_total = if winner_is_a { 120_000 } else { 120_100 };
    assert_eq!(
        winner.body["invoice"]["current_revision"]["total_minor"],
        expected_total
    );
    for (i, a) in got.iter().enumerate() {
        let same_payload = (i % 2 == 0) == winner_is_a;
        if same_payload {
            assert!(
                a.status == StatusCode::CREATED || a.status == StatusCode::OK,
                "same payload as the winner: {} {}",
                a.status,
                a.body
            );
            assert_eq!(a.invoice_id(), id);
            assert_eq!(
                a.body["invoice"]["current_revision"]["payload_hash"], hash,
                "a replay shows the winner's payload"
            );
            if a.status == StatusCode::OK {
                assert!(ok_replayed(a));
            }
        } else {
            assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.body);
            assert_eq!(a.code(), "idempotency_conflict", "{}", a.body);
        }
    }
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);
    // The one stored revision is the winner's, byte for byte (no mix of A and B).
    assert_eq!(
        app.sql_count(&format!(
            "select count(*) from invoice_revisions where payload_hash = '{hash}'"
        ))
        .await,
        1
    );
    let now = app.invoice(&b.org.approver_token, &id).await;
    assert_eq!(now["current_revision"]["payload_hash"], hash);
    assert_eq!(now["current_revision"]["total_minor"], expected_total);
    assert_eq!(
        now["current_revision"]["canonical_payload"],
        winner.body["invoice"]["current_revision"]["canonical_payload"]
    );
    assert_eq!(
        app.sql_count("select count(*) from invoice_events where action = 'create_draft'")
            .await,
        1
    );
    verify_ok(&app, &b, &id).await;
}

/// Sixteen creates with sixteen different keys of one agent, at once: sixteen invoices, none
/// refused (same agent, same customer, same destination: they may queue, never fail).
async fn parallel_creates_with_distinct_keys_all_succeed(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let requests = (0..16)
        .map(|i| app.create_invoice_request(&b.org.agent_key, &format!("distinct-{i}"), &body))
        .collect();
    let got = answers(parallel(requests).await).await;
    let mut ids: Vec<&str> = Vec::new();
    for a in &got {
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        assert!(!ok_replayed(a));
        ids.push(a.invoice_id());
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 16, "sixteen distinct invoices");
    assert_eq!(app.invoice_rows().await, [16, 16, 0, 16]);
}

/// Five identical approvals at once: one decision, all 200, one fresh and four replays, one
/// approve event.
async fn identical_parallel_approvals_make_one_decision(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "approve-storm").await;
    let id = invoice["id"].as_str().unwrap();
    let body = TestApp::decision_body(&invoice, Some("looks right"));
    let requests = (0..5)
        .map(|_| app.command_request(&b.org.approver_token, id, "approve", &body))
        .collect();
    let got = answers(parallel(requests).await).await;
    for a in &got {
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.body["invoice"]["state"], "approved");
    }
    let fresh = got.iter().filter(|a| !ok_replayed(a)).count();
    assert_eq!(fresh, 1, "one approval is recorded, four replay it");
    assert_eq!(app.invoice_rows().await, [1, 1, 1, 3]);
    assert_eq!(
        app.sql_count("select count(*) from invoice_events where action = 'approve'")
            .await,
        1
    );
    verify_ok(&app, &b, id).await;
}

/// Approve races reject on the same revision, several times over: exactly one wins, the loser
/// gets 409 `already_decided`, one decision row per invoice, and the state is the winner's.
async fn approve_racing_reject_has_one_winner(app: TestApp) {
    let b = app.billing().await;
    const ROUNDS: i64 = 4;
    for round in 0..ROUNDS {
        let invoice = app.pending(&b, &format!("duel-{round}")).await;
        let id = invoice["id"].as_str().unwrap();
        // Alternate who is sent first, so both orders of spawning are exercised.
        let approve = TestApp::decision_body(&invoice, Some("fine"));
        let reject = TestApp::decision_body(&invoice, Some("wrong customer"));
        let mut requests = vec![
            app.command_request(&b.org.approver_token, id, "approve", &approve),
            app.command_request(&b.org.approver_token, id, "reject", &reject),
        ];
        if round % 2 == 1 {
            requests.reverse();
        }
        let mut got = answers(parallel(requests).await).await;
        if round % 2 == 1 {
            got.reverse();
        }
        let (approve, reject) = (&got[0], &got[1]);
        let winner_state = match (approve.status, reject.status) {
            (StatusCode::OK, StatusCode::CONFLICT) => {
                assert_eq!(reject.code(), "already_decided", "{}", reject.body);
                assert!(!ok_replayed(approve));
                "approved"
            }
            (StatusCode::CONFLICT, StatusCode::OK) => {
                assert_eq!(approve.code(), "already_decided", "{}", approve.body);
                assert!(!ok_replayed(reject));
                "rejected"
            }
            other => panic!(
                "exactly one decision must win: {other:?} {} {}",
                approve.body, reject.body
            ),
        };
        let now = app.invoice(&b.org.approver_token, id).await;
        assert_eq!(now["state"], winner_state);
        let items = app.decisions(&b.org.approver_token, id).await;
        assert_eq!(items.len(), 1, "{items:?}");
        let expected_kind = if winner_state == "approved" {
            "approved"
        } else {
            "rejected"
        };
        assert_eq!(items[0]["decision"], expected_kind);
        verify_ok(&app, &b, id).await;
    }
    // Per invoice: one revision, one decision, events create + submit + the winner.
    assert_eq!(
        app.invoice_rows().await,
        [ROUNDS, ROUNDS, ROUNDS, 3 * ROUNDS]
    );
}

/// Revise (a changed amount) races approve on a pending invoice, several times over: either
/// approve wins (approved; revise is `invalid_transition`) or revise wins (draft with revision
/// 2; approve is `stale_revision` or `invalid_transition`); never both.
async fn revise_racing_approve_never_both(app: TestApp) {
    let b = app.billing().await;
    const ROUNDS: usize = 4;
    let (mut approved, mut revised) = (0i64, 0i64);
    for round in 0..ROUNDS {
        let invoice = app.pending(&b, &format!("revise-approve-{round}")).await;
        let id = invoice["id"].as_str().unwrap();
        let mut lines = invoice_body(&b)["lines"].clone();
        lines[0]["unit_amount"] = json!("450");
        let revise = json!({"lines": lines, "reasoning": "Workshop ran longer."});
        let mut requests = vec![
            app.command_request(&b.org.agent_key, id, "revise", &revise),
            app.command_request(
                &b.org.approver_token,
                id,
                "approve",
                &TestApp::decision_body(&invoice, None),
            ),
        ];
        if round % 2 == 1 {
            requests.reverse();
        }
        let mut got = answers(parallel(requests).await).await;
        if round % 2 == 1 {
            got.reverse();
        }
        let (revise, approve) = (&got[0], &got[1]);
        let now = app.invoice(&b.org.approver_token, id).await;
        match (revise.status, approve.status) {
            (StatusCode::CONFLICT, StatusCode::OK) => {
                assert_eq!(revise.code(), "invalid_transition", "{}", revise.body);
                assert_eq!(revise.body["from"], "approved");
                assert!(!ok_replayed(approve));
                assert_eq!(now["state"], "approved");
                assert_eq!(now["revision_count"], 1);
                approved += 1;
            }
            (StatusCode::OK, StatusCode::CONFLICT) => {
                assert!(
                    ["stale_revision", "invalid_transition"].contains(&approve.code()),
                    "{}",
                    approve.body
                );
                assert!(!ok_replayed(revise));
                assert_eq!(now["state"], "draft");
                assert_eq!(now["revision_count"], 2);
                assert_eq!(now["current_revision"]["number"], 2);
                assert_eq!(now["current_revision"]["total_minor"], 125_000);
                revised += 1;
            }
            other => panic!(
                "exactly one of revise and approve must win: {other:?} {} {}",
                revise.body, approve.body
            ),
        }
        verify_ok(&app, &b, id).await;
    }
    let rounds = ROUNDS as i64;
    // Events per invoice: create, submit, and the winner's.
    assert_eq!(
        app.invoice_rows().await,
        [rounds, rounds + revised, approved, 3 * rounds]
    );
}

/// Submit races withdraw on a draft, several times over. Withdraw first: cancelled, submit
/// 409. Submit first: pending, then withdrawn: cancelled, both 200. Either way the invoice
/// ends cancelled-by-withdraw and there is one event per successful command.
async fn submit_racing_withdraw_is_consistent(app: TestApp) {
    let b = app.billing().await;
    const ROUNDS: usize = 4;
    let mut expected_events = 0i64;
    for round in 0..ROUNDS {
        let invoice = app.draft(&b, &format!("submit-withdraw-{round}")).await;
        let id = invoice["id"].as_str().unwrap();
        // The human withdraws in odd rounds, the agent in even ones.
        let withdrawer = if round % 2 == 0 {
            &b.org.agent_key
        } else {
            &b.org.approver_token
        };
        let requests = vec![
            app.command_request(&b.org.agent_key, id, "submit", &json!({})),
            app.command_request(withdrawer, id, "withdraw", &json!({})),
        ];
        let got = answers(parallel(requests).await).await;
        let (submit, withdraw) = (&got[0], &got[1]);
        assert_eq!(withdraw.status, StatusCode::OK, "{}", withdraw.body);
        assert!(!ok_replayed(withdraw));
        assert_eq!(withdraw.body["invoice"]["state"], "cancelled");
        expected_events += 2; // create + withdraw
        match submit.status {
            StatusCode::OK => {
                assert!(!ok_replayed(submit));
                assert_eq!(submit.body["invoice"]["state"], "pending_approval");
                expected_events += 1;
            }
            StatusCode::CONFLICT => {
                assert_eq!(submit.code(), "invalid_transition", "{}", submit.body);
                assert_eq!(submit.body["from"], "cancelled");
            }
            other => panic!("submit: {other} {}", submit.body),
        }
        let now = app.invoice(&b.org.approver_token, id).await;
        assert_eq!(now["state"], "cancelled");
        // A retry of the withdraw replays (cancelled by withdraw), writing nothing.
        let again = answers(vec![
            app.command_request(&b.org.agent_key, id, "withdraw", &json!({}))
                .send()
                .await
                .unwrap(),
        ])
        .await;
        assert_eq!(again[0].status, StatusCode::OK);
        assert!(ok_replayed(&again[0]));
        verify_ok(&app, &b, id).await;
    }
    let rounds = ROUNDS as i64;
    assert_eq!(
        app.invoice_rows().await,
        [rounds, rounds, 0, expected_events]
    );
    assert_eq!(
        app.sql_count("select count(*) from invoice_events where action = 'withdraw'")
            .await,
        rounds
    );
}

/// Identical parallel submits, revises, cancels and withdraws (agent and human mixed): each
/// command writes exactly one event and one effect; every other copy replays with 200.
async fn identical_parallel_commands_write_one_event_each(app: TestApp) {
    let b = app.billing().await;
    let agent = b.org.agent_key.as_str();
    let approver = b.org.approver_token.as_str();

    async fn storm(
        app: &TestApp,
        calls: Vec<(&str, &str, &str, Value)>,
        state: &str,
    ) -> Vec<Answer> {
        let requests = calls
            .into_iter()
            .map(|(token, id, cmd, body)| app.command_request(token, id, cmd, &body))
            .collect();
        let got = answers(parallel(requests).await).await;
        for a in &got {
            assert_eq!(a.status, StatusCode::OK, "{}", a.body);
            assert_eq!(a.body["invoice"]["state"], state);
        }
        assert_eq!(
            got.iter().filter(|a| !ok_replayed(a)).count(),
            1,
            "exactly one copy changes something"
        );
        got
    }

    // Revise to the same new payload six times at once: one new revision.
    let first = app.pending(&b, "storm-commands").await;
    let id = first["id"].as_str().unwrap().to_owned();
    let mut lines = invoice_body(&b)["lines"].clone();
    lines[1]["quantity"] = json!("3");
    let revise = json!({"lines": lines, "reasoning": "Three implementation days."});
    let got = storm(
        &app,
        (0..6)
            .map(|_| (agent, id.as_str(), "revise", revise.clone()))
            .collect(),
        "draft",
    )
    .await;
    for a in &got {
        assert_eq!(a.body["invoice"]["revision_count"], 2);
    }
    // Submit six times at once: one submit.
    storm(
        &app,
        (0..6)
            .map(|_| (agent, id.as_str(), "submit", json!({})))
            .collect(),
        "pending_approval",
    )
    .await;
    // Approve the new revision, then cancel six times at once: one cancel.
    let now = app.invoice(&b.org.approver_token, &id).await;
    let res = app.approve(approver, &now).await;
    assert_eq!(res.status(), StatusCode::OK);
    storm(
        &app,
        (0..6)
            .map(|_| {
                (
                    approver,
                    id.as_str(),
                    "cancel",
                    json!({"reason": "Client paused the project."}),
                )
            })
            .collect(),
        "cancelled",
    )
    .await;

    // Withdraw a second invoice six times at once, agent and human interleaved: one withdraw.
    let second = app.draft(&b, "storm-withdraw").await;
    let second_id = second["id"].as_str().unwrap().to_owned();
    storm(
        &app,
        (0..6)
            .map(|i| {
                let token = if i % 2 == 0 { agent } else { approver };
                (token, second_id.as_str(), "withdraw", json!({}))
            })
            .collect(),
        "cancelled",
    )
    .await;

    // First invoice: create, submit, revise, submit, approve, cancel. Second: create, withdraw.
    assert_eq!(app.invoice_rows().await, [2, 3, 1, 8]);
    for (action, n) in [
        ("revise", 1),
        ("submit", 2),
        ("approve", 1),
        ("cancel", 1),
        ("withdraw", 1),
    ] {
        assert_eq!(
            app.sql_count(&format!(
                "select count(*) from invoice_events where action = '{action}'"
            ))
            .await,
            n,
            "{action} events"
        );
    }
    verify_ok(&app, &b, &id).await;
    verify_ok(&app, &b, &second_id).await;
}

/// Eight destination creates with one Idempotency-Key at once: one row, one audit event, one
/// 201 and seven replays of it.
async fn parallel_destination_creates_with_one_key_make_one_row(app: TestApp) {
    let b = app.billing().await;
    let body = json!({"label": "Treasury", "currency": "EUR", "network": "iban", "address": "CH9300762011623852957"});
    let requests = (0..8)
        .map(|_| app.create_destination_request(&b.org.agent_key, "dest-1", &body))
        .collect();
    let got = answers(parallel(requests).await).await;
    // Exactly one request creates; the other seven replay it.
    assert_eq!(
        tally(got.iter().map(|a| a.status)),
        BTreeMap::from([(201, 1), (200, 7)])
    );
    let id = got[0].body["id"].clone();
    for a in &got {
        assert!(
            a.status == StatusCode::CREATED || a.status == StatusCode::OK,
            "{} {}",
            a.status,
            a.body
        );
        assert_eq!(a.body["id"], id, "every caller gets the same destination");
        let expected = if a.status == StatusCode::OK {
            "true"
        } else {
            "false"
        };
        assert_eq!(a.replayed_header.as_deref(), Some(expected));
    }
    // The fixture's own destination plus this one.
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations")
            .await,
        2
    );
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations where idempotency_key = 'dest-1'")
            .await,
        1
    );
    assert_eq!(
        app.sql_count("select count(*) from audit_events where action = 'destination.created'")
            .await,
        2
    );
}

/// Eight deactivations of one destination at once, by its agent and its human: all 200, the
/// destination deactivated, one audit event.
async fn parallel_deactivations_write_one_audit_event(app: TestApp) {
    let b = app.billing().await;
    let path = format!("/v1/payment-destinations/{}/deactivate", b.destination_id);
    let requests = (0..8)
        .map(|i| {
            let token = if i % 2 == 0 {
                &b.org.agent_key
            } else {
                &b.org.approver_token
            };
            app.post_request(&path, token, &json!({}))
        })
        .collect();
    let got = answers(parallel(requests).await).await;
    for a in &got {
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert_eq!(a.body["state"], "deactivated");
    }
    assert_eq!(
        app.sql_count("select count(*) from audit_events where action = 'destination.deactivated'")
            .await,
        1
    );
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations where state = 'deactivated'")
            .await,
        1
    );
}

/// Keys are scoped to the agent: eight identical creates by agent A and eight by agent B, all
/// on the key `shared`, at once: two invoices, one per agent, each caller answered with its
/// own agent's.
async fn one_key_of_two_agents_in_parallel_makes_two_invoices(app: TestApp) {
    let a = app.billing().await;
    let b = app.second_agent(&a).await;
    let (a_body, b_body) = (invoice_body(&a), invoice_body(&b));
    let requests = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                app.create_invoice_request(&a.org.agent_key, "shared", &a_body)
            } else {
                app.create_invoice_request(&b.org.agent_key, "shared", &b_body)
            }
        })
        .collect();
    let got = answers(parallel(requests).await).await;
    // One create per agent; every other copy replays its agent's.
    assert_eq!(
        tally(got.iter().map(|x| x.status)),
        BTreeMap::from([(201, 2), (200, 14)])
    );
    for (i, x) in got.iter().enumerate() {
        assert!(
            x.status == StatusCode::CREATED || x.status == StatusCode::OK,
            "{} {}",
            x.status,
            x.body
        );
        let agent = if i % 2 == 0 {
            a.org.agent_id
        } else {
            b.org.agent_id
        };
        assert_eq!(x.body["invoice"]["agent_id"], agent.to_string());
        assert_eq!(x.invoice_id(), got[i % 2].invoice_id());
    }
    assert_ne!(got[0].invoice_id(), got[1].invoice_id());
    assert_eq!(app.invoice_rows().await, [2, 2, 0, 2]);
}

/// A human withdraws while the approver approves the same pending invoice, several times
/// over: exactly one wins, the other gets `invalid_transition` from the winner's state.
async fn withdraw_racing_approve_never_both(app: TestApp) {
    let b = app.billing().await;
    const ROUNDS: i64 = 4;
    let mut approved = 0i64;
    for round in 0..ROUNDS {
        let invoice = app.pending(&b, &format!("withdraw-approve-{round}")).await;
        let id = invoice["id"].as_str().unwrap();
        let withdrawer = if round % 2 == 0 {
            &b.org.agent_key
        } else {
            &b.org.approver_token
        };
        let requests = vec![
            app.command_request(withdrawer, id, "withdraw", &json!({})),
            app.command_request(
                &b.org.approver_token,
                id,
                "approve",
                &TestApp::decision_body(&invoice, None),
            ),
        ];
        let got = answers(parallel(requests).await).await;
        let (withdraw, approve) = (&got[0], &got[1]);
        let now = app.invoice(&b.org.approver_token, id).await;
        match (withdraw.status, approve.status) {
            (StatusCode::OK, StatusCode::CONFLICT) => {
                assert!(!ok_replayed(withdraw));
                assert_eq!(approve.code(), "invalid_transition", "{}", approve.body);
                assert_eq!(approve.body["from"], "cancelled");
                assert_eq!(now["state"], "cancelled");
            }
            (StatusCode::CONFLICT, StatusCode::OK) => {
                assert!(!ok_replayed(approve));
                assert_eq!(withdraw.code(), "invalid_transition", "{}", withdraw.body);
                assert_eq!(withdraw.body["from"], "approved");
                assert_eq!(now["state"], "approved");
                approved += 1;
            }
            other => panic!(
                "exactly one of withdraw and approve must win: {other:?} {} {}",
                withdraw.body, approve.body
            ),
        }
        verify_ok(&app, &b, id).await;
    }
    // Events per invoice: create, submit, and the winner's.
    assert_eq!(
        app.invoice_rows().await,
        [ROUNDS, ROUNDS, approved, 3 * ROUNDS]
    );
}

/// The agent deactivates the destination while the approver approves an invoice paying to
/// it, several times over (approve locks invoice → destination, deactivate the destination):
/// either the approval comes first (approved, then deactivated) or it sees the destination
/// retired and answers `destination_inactive` with nothing written. Never a 5xx or a
/// deadlock.
async fn approve_racing_deactivation_is_consistent(app: TestApp) {
    let b = app.billing().await;
    const ROUNDS: i64 = 4;
    let mut approved = 0i64;
    for round in 0..ROUNDS {
        let destination = app.destination(&b.org.agent_key, "EUR", "iban", IBAN).await;
        let body = invoice_body_for(b.customer_id, destination);
        let res = app
            .create_invoice(&b.org.agent_key, &format!("retire-{round}"), &body)
            .await;
        let invoice = expect_status(res, StatusCode::CREATED).await["invoice"].clone();
        let id = id_of(&invoice);
        let res = app.command(&b.org.agent_key, id, "submit", json!({})).await;
        expect_status(res, StatusCode::OK).await;
        let requests = vec![
            app.command_request(
                &b.org.approver_token,
                id,
                "approve",
                &TestApp::decision_body(&invoice, None),
            ),
            app.post_request(
                &format!("/v1/payment-destinations/{destination}/deactivate"),
                &b.org.agent_key,
                &json!({}),
            ),
        ];
        let got = answers(parallel(requests).await).await;
        let (approve, deactivate) = (&got[0], &got[1]);
        assert_eq!(deactivate.status, StatusCode::OK, "{}", deactivate.body);
        assert_eq!(deactivate.body["state"], "deactivated");
        let now = app.invoice(&b.org.approver_token, id).await;
        match approve.status {
            StatusCode::OK => {
                assert!(!ok_replayed(approve));
                assert_eq!(now["state"], "approved");
                approved += 1;
            }
            StatusCode::CONFLICT => {
                assert_eq!(approve.code(), "destination_inactive", "{}", approve.body);
                assert_eq!(now["state"], "pending_approval");
            }
            other => panic!("approve: {other} {}", approve.body),
        }
    }
    assert_eq!(
        app.invoice_rows().await,
        [ROUNDS, ROUNDS, approved, 2 * ROUNDS + approved]
    );
    assert_eq!(
        app.sql_count("select count(*) from audit_events where action = 'destination.deactivated'")
            .await,
        ROUNDS
    );
}
