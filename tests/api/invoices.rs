//! The invoice lifecycle through HTTP: the happy path, replays and the idempotency contract.

use crate::helpers::{
    TestApp, both_backends, expect_problem, expect_status, invoice_body, sql_count,
};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(
    create_submit_approve_with_events_and_verify,
    replays_follow_the_idempotency_contract
);

async fn create_submit_approve_with_events_and_verify(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.draft(&b, "inv-1").await;
    assert_eq!(invoice["state"], "draft");
    let other = app.pending(&b, "inv-2").await;
    assert_eq!(other["state"], "pending_approval");
    let rev = &invoice["current_revision"];
    assert_eq!(rev["total"], "1200.00");
    assert_eq!(rev["total_minor"], 120000);
    assert_eq!(rev["lines"][1]["amount"], "800.00");
    assert_eq!(rev["lines"][1]["unit_amount_minor"], 40000);
    let canonical = rev["canonical_payload"].as_str().unwrap();
    assert!(
        canonical.starts_with("{\"currency\":\"EUR\",\"customer_id\":"),
        "{canonical}"
    );
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        rev["payload_hash"], digest,
        "the hash is the SHA-256 of the canonical bytes"
    );
    let id = invoice["id"].as_str().unwrap();
    let pending = app
        .post(
            &format!("/v1/invoices/{id}/submit"),
            &b.org.agent_key,
            json!({}),
        )
        .await;
    let pending = expect_status(pending, StatusCode::OK).await;
    assert_eq!(pending["replayed"], false);
    assert_eq!(pending["invoice"]["state"], "pending_approval");
    let approve = app
        .post(
            &format!("/v1/invoices/{id}/approve"),
            &b.org.approver_token,
            TestApp::decision_body(&invoice, Some("ok")),
        )
        .await;
    assert_eq!(approve.headers()["idempotent-replayed"], "false");
    let approved = expect_status(approve, StatusCode::OK).await;
    assert_eq!(approved["invoice"]["state"], "approved");
    let events = expect_status(
        app.get(&format!("/v1/invoices/{id}/events"), &b.org.approver_token)
            .await,
        StatusCode::OK,
    )
    .await;
    let actions: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create_draft", "submit", "approve"]);
    assert_eq!(events["items"][0]["idempotency_key"], "inv-1");
    assert_eq!(events["items"][2]["actor_kind"], "human");
    let verify = expect_status(
        app.get(&format!("/v1/invoices/{id}/verify"), &b.org.approver_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        verify,
        json!({"ok": true, "revisions": [{"number": 1, "ok": true}], "events": {"ok": true, "broken_at": null}})
    );
    let decisions = expect_status(
        app.get(&format!("/v1/invoices/{id}/decisions"), &b.org.agent_key)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(decisions["items"][0]["decision"], "approved");
    assert_eq!(decisions["items"][0]["reason"], "ok");
}

async fn replays_follow_the_idempotency_contract(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let first = app.create_invoice(&b.org.agent_key, "k1", &body).await;
    assert_eq!(first.headers()["idempotent-replayed"], "false");
    let first = expect_status(first, StatusCode::CREATED).await;
    // Reworded reasoning and "400" written "400.00" / 40000 minor: the same payload.
    let mut same = body.clone();
    same["reasoning"] = json!("Reworded, but the money is the same.");
    same["lines"][0] = json!({"description": "Discovery workshop", "quantity": "1.000", "unit_amount_minor": 40000});
    let replay = app.create_invoice(&b.org.agent_key, "k1", &same).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let replay = expect_status(replay, StatusCode::OK).await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["invoice"]["id"], first["invoice"]["id"]);
    // One changed amount: 409, nothing written.
    let mut changed = body.clone();
    changed["lines"][0]["unit_amount"] = json!("401");
    expect_problem(
        app.create_invoice(&b.org.agent_key, "k1", &changed).await,
        StatusCode::CONFLICT,
        "idempotency_conflict",
    )
    .await;
    let url = &app.database_url;
    assert_eq!(sql_count(url, "select count(*) from invoices").await, 1);
    assert_eq!(
        sql_count(url, "select count(*) from invoice_revisions").await,
        1
    );
    assert_eq!(
        sql_count(url, "select count(*) from invoice_events").await,
        1
    );
    // Another agent's k1 is independent.
    let other = app.org().await;
    let customer = app
        .customer(&other.approver_token, other.agent_id, "Other")
        .await;
    let destination = app
        .destination(&other.agent_key, "EUR", "iban", crate::helpers::IBAN)
        .await;
    let mut theirs = body.clone();
    theirs["customer_id"] = json!(customer);
    theirs["payment_destination_id"] = json!(destination);
    let res = app.create_invoice(&other.agent_key, "k1", &theirs).await;
    let created = expect_status(res, StatusCode::CREATED).await;
    assert_ne!(created["invoice"]["id"], first["invoice"]["id"]);
}
