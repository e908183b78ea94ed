//! The invoice lifecycle through HTTP: the happy path, replays and the idempotency contract.

use crate::helpers::{
    IBAN, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body,
    invoice_body_for, sql_uuid,
};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(
    create_submit_approve_with_events_and_verify,
    replays_follow_the_idempotency_contract,
    a_create_stays_bound_to_revision_one_once_revised
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
    let id = id_of(&invoice);
    let pending = app.command(&b.org.agent_key, id, "submit", json!({})).await;
    let pending = expect_status(pending, StatusCode::OK).await;
    assert_eq!(pending["replayed"], false);
    assert_eq!(pending["invoice"]["state"], "pending_approval");
    let approve = app
        .command(
            &b.org.approver_token,
            id,
            "approve",
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
    let verify = app.verify(&b.org.approver_token, id).await;
    assert_eq!(
        verify,
        json!({"ok": true, "revisions": [{"number": 1, "ok": true}], "events": {"ok": true, "broken_at": null}})
    );
    let decisions = app.decisions(&b.org.agent_key, id).await;
    assert_eq!(decisions[0]["decision"], "approved");
    assert_eq!(decisions[0]["reason"], "ok");
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
    // Replays and conflicts are counted for operators.
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("tauros_replays_total{resource=\"invoice\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tauros_idempotency_conflicts_total"),
        "{metrics}"
    );
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);
    // Another agent's k1 is independent.
    let other = app.org().await;
    let customer = app
        .customer(&other.approver_token, other.agent_id, "Other")
        .await;
    let destination = app.destination(&other.agent_key, "EUR", "iban", IBAN).await;
    let theirs = invoice_body_for(customer, destination);
    let res = app.create_invoice(&other.agent_key, "k1", &theirs).await;
    let created = expect_status(res, StatusCode::CREATED).await;
    assert_ne!(created["invoice"]["id"], first["invoice"]["id"]);
}

/// A create's key stays bound to revision 1's payload once the invoice is revised: sent again
/// with revision 1's payload it replays the invoice as it is now (revision 2); with revision 2's
/// it is a conflict, and nothing is written. (While revision 1 is current a replay is compared
/// by its canonical bytes, once revised by its hash: `replays_follow_the_idempotency_contract`
/// covers the first.)
async fn a_create_stays_bound_to_revision_one_once_revised(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let invoice = app.draft(&b, "bound-to-one").await;
    let id = id_of(&invoice).to_owned();
    let lines =
        json!([{"description": "Discovery workshop", "quantity": "1", "unit_amount": "450.00"}]);
    let revise = json!({"lines": lines, "reasoning": "The workshop's rate, agreed again."});
    let res = app
        .post(
            &format!("/v1/invoices/{id}/revise"),
            &b.org.agent_key,
            revise,
        )
        .await;
    expect_status(res, StatusCode::OK).await;

    let res = app
        .create_invoice(&b.org.agent_key, "bound-to-one", &body)
        .await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replay = expect_status(res, StatusCode::OK).await;
    assert_eq!(replay["invoice"]["id"], id.as_str());
    assert_eq!(replay["invoice"]["current_revision"]["number"], 2);
    assert_eq!(replay["invoice"]["current_revision"]["total"], "450.00");

    let mut as_revised = body.clone();
    as_revised["lines"] = lines;
    let rows = app.invoice_rows().await;
    let res = app
        .create_invoice(&b.org.agent_key, "bound-to-one", &as_revised)
        .await;
    expect_problem(res, StatusCode::CONFLICT, "idempotency_conflict").await;
    assert_eq!(app.invoice_rows().await, rows, "nothing written");
}

both_backends!(due_dates_are_checked_but_never_block_a_replay);

/// A due date in the past is refused for new content; a replay of a create whose due date has
/// passed since, or whose destination was retired since, still answers the original
/// (docs/contract/domain.md §7). "Since" is simulated by giving the stored invoice's revision 1
/// the due date, canonical bytes and hash of the same payload dated yesterday, which is what it
/// would hold had it been created before that day ended (revisions are append-only: the
/// forgery lifts that for its one update). A replay compares canonical bytes while revision 1
/// is current, its hash once revised: both are forged.
async fn due_dates_are_checked_but_never_block_a_replay(app: TestApp) {
    use tauros_domain::payload::{decode, seal};

    let b = app.billing().await;
    let yesterday = (chrono::Utc::now() - chrono::Duration::days(1)).date_naive();
    let mut past = invoice_body(&b);
    past["due_date"] = json!(yesterday.to_string());
    let problem = expect_problem(
        app.create_invoice(&b.org.agent_key, "late", &past).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "due_date");
    assert_eq!(problem.errors[0].code, "due_date_in_past");
    assert_eq!(app.sql_count("select count(*) from invoices").await, 0);

    let invoice = app.draft(&b, "made-in-time").await;
    let stored = invoice["current_revision"]["canonical_payload"]
        .as_str()
        .unwrap();
    let mut payload = decode(stored).unwrap().payload;
    payload.due_date = yesterday;
    let sealed_yesterday = seal(&payload).unwrap();
    let invoice_id = sql_uuid(&app.database_url, id_of(&invoice));
    let sqlite = app.database_url.starts_with("sqlite");
    let (lift, restore) = if sqlite {
        let trigger: String = app
            .sql_scalar(
                "select sql from sqlite_master where type = 'trigger' \
                 and name = 'invoice_revisions_no_update'",
            )
            .await;
        (
            "drop trigger invoice_revisions_no_update".to_owned(),
            trigger,
        )
    } else {
        let alter = "alter table invoice_revisions";
        let trigger = "trigger invoice_revisions_append_only";
        (
            format!("{alter} disable {trigger}"),
            format!("{alter} enable {trigger}"),
        )
    };
    assert!(app.sql_exec(&lift).await);
    let forged_revision = format!(
        "update invoice_revisions set due_date = '{yesterday}', canonical_payload = '{}', \
         payload_hash = '{}' where invoice_id = {invoice_id} and number = 1",
        sealed_yesterday.canonical.replace('\'', "''"),
        sealed_yesterday.hash,
    );
    assert!(app.sql_exec(&forged_revision).await);
    assert!(app.sql_exec(&restore).await);
    // The invoice's update refreshes its read row from the forged revision.
    let forged = format!(
        "update invoices set first_payload_hash = '{}' where id = {invoice_id}",
        sealed_yesterday.hash,
    );
    assert!(app.sql_exec(&forged).await);
    let path = format!("/v1/invoices/{}", id_of(&invoice));
    let stored = expect_status(app.get(&path, &b.org.agent_key).await, StatusCode::OK).await;
    assert_eq!(
        stored["current_revision"]["due_date"],
        yesterday.to_string()
    );
    assert_eq!(
        stored["current_revision"]["payload_hash"],
        sealed_yesterday.hash
    );
    // The destination is retired too.
    app.deactivate(&b.org.agent_key, b.destination_id).await;
    let replay = expect_status(
        app.create_invoice(&b.org.agent_key, "made-in-time", &past)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["invoice"]["id"], invoice["id"]);
    assert_eq!(
        app.sql_count("select count(*) from invoice_events").await,
        1
    );
}
