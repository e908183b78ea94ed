//! The reads that check their credential in the same statement (`GET /v1/invoices/{id}`,
//! `GET /v1/invoices`, a create's replay): they refuse exactly what every other route refuses,
//! at once (a rotated key, a signed-out session), keep organisations apart, and answer a
//! request refused for another reason with the credential's refusal first.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body};
use reqwest::StatusCode;
use serde_json::{Value, json};

both_backends!(
    a_rotated_or_tampered_key_is_refused_by_every_joined_read,
    another_organisations_invoice_is_not_found_and_its_key_is_its_own,
    an_agent_without_invoices_lists_an_empty_page,
    a_human_reads_through_the_joined_read_until_signed_out,
    the_credentials_refusal_comes_before_a_malformed_request,
);

/// The three joined reads, as `token`: the invoice, the list, and the create's replay.
async fn reads(
    app: &TestApp,
    token: &str,
    invoice: &Value,
    key: &str,
    body: &Value,
) -> [StatusCode; 3] {
    let get = app
        .get(&format!("/v1/invoices/{}", id_of(invoice)), token)
        .await
        .status();
    let list = app.get("/v1/invoices", token).await.status();
    let replay = app.create_invoice(token, key, body).await.status();
    [get, list, replay]
}

/// `key` with another secret under the same key id, well-formed (its checksum matches): the
/// store finds the key's row, and the hash comparison must refuse it.
fn tampered(key: &str) -> String {
    const BASE62: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let rest = key.strip_prefix("tauros_").expect("an API key");
    let (body, _) = rest.split_once('_').expect("body and checksum");
    let mut raw = base_x::decode(BASE62, body).expect("base62");
    raw[40] ^= 0x5a; // past the 16-byte key id: the secret
    let check = crc32fast::hash(&raw).to_be_bytes();
    format!(
        "tauros_{}_{}",
        base_x::encode(BASE62, &raw),
        base_x::encode(BASE62, &check)
    )
}

async fn a_rotated_or_tampered_key_is_refused_by_every_joined_read(app: TestApp) {
    let b = app.billing().await;
    let body = invoice_body(&b);
    let invoice = expect_status(
        app.create_invoice(&b.org.agent_key, "joined-1", &body)
            .await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    let ok = [StatusCode::OK; 3];
    assert_eq!(
        reads(&app, &b.org.agent_key, &invoice, "joined-1", &body).await,
        ok
    );

    // The right key id with a wrong secret: the stored row is found, and refused.
    let unauthorized = [StatusCode::UNAUTHORIZED; 3];
    let forged = tampered(&b.org.agent_key);
    assert_eq!(
        reads(&app, &forged, &invoice, "joined-1", &body).await,
        unauthorized
    );

    // A rotated key stops working on the very next request; the new one reads the same.
    let path = format!("/v1/agents/{}/rotate-key", b.org.agent_id);
    let rotated = expect_status(
        app.post(&path, &b.org.approver_token, json!({})).await,
        StatusCode::OK,
    )
    .await;
    let new_key = rotated["api_key"].as_str().unwrap();
    assert_eq!(
        reads(&app, &b.org.agent_key, &invoice, "joined-1", &body).await,
        unauthorized
    );
    assert_eq!(reads(&app, new_key, &invoice, "joined-1", &body).await, ok);
    let listed = expect_status(app.get("/v1/invoices", new_key).await, StatusCode::OK).await;
    assert_eq!(listed["items"][0]["id"], invoice["id"]);
    let replay = expect_status(
        app.create_invoice(new_key, "joined-1", &body).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["invoice"]["id"], invoice["id"]);
    // Refused requests wrote nothing.
    assert_eq!(
        app.sql_count("select count(*) from invoices").await,
        1,
        "one invoice, however often it was asked for"
    );
}

async fn another_organisations_invoice_is_not_found_and_its_key_is_its_own(app: TestApp) {
    let ours = app.billing().await;
    let theirs = app.billing().await;
    let body = invoice_body(&ours);
    let invoice = expect_status(
        app.create_invoice(&ours.org.agent_key, "shared-key", &body)
            .await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    // Their valid key: our invoice is unknown (not forbidden), and not in their list.
    let path = format!("/v1/invoices/{}", id_of(&invoice));
    expect_problem(
        app.get(&path, &theirs.org.agent_key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.get(&path, &theirs.org.approver_token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let listed = expect_status(
        app.get("/v1/invoices", &theirs.org.agent_key).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed["items"], json!([]));
    // The same idempotency key under their key is a new invoice of theirs.
    let their_body = invoice_body(&theirs);
    let created = expect_status(
        app.create_invoice(&theirs.org.agent_key, "shared-key", &their_body)
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_ne!(created["invoice"]["id"], invoice["id"]);
    assert_eq!(created["replayed"], false);
}

async fn an_agent_without_invoices_lists_an_empty_page(app: TestApp) {
    let org = app.org().await;
    let listed = expect_status(
        app.get("/v1/invoices", &org.agent_key).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(listed["items"], json!([]));
    assert!(listed["next_cursor"].is_null());
    let pending = expect_status(
        app.get("/v1/invoices?state=pending_approval", &org.agent_key)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(pending["items"], json!([]));
}

async fn a_human_reads_through_the_joined_read_until_signed_out(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "human-read").await;
    let path = format!("/v1/invoices/{}", id_of(&invoice));
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    let read = expect_status(app.get(&path, &b.org.approver_token).await, StatusCode::OK).await;
    assert_eq!(read["id"], invoice["id"]);
    // An operator who does not own the agent does not see its invoice: unknown, alike.
    expect_problem(
        app.get(&path, &operator).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let res = app
        .delete("/v1/sessions/current", &b.org.approver_token)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_problem(
        app.get(&path, &b.org.approver_token).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
}

async fn the_credentials_refusal_comes_before_a_malformed_request(app: TestApp) {
    let b = app.billing().await;
    let forged = tampered(&b.org.agent_key);
    // A malformed id, list parameter, header or body: 401 for a bad credential …
    for (token, status) in [
        (forged.as_str(), StatusCode::UNAUTHORIZED),
        (b.org.agent_key.as_str(), StatusCode::BAD_REQUEST),
    ] {
        let res = app.get("/v1/invoices/not-a-uuid", token).await;
        assert_eq!(res.status(), status, "malformed id");
        let res = app.get("/v1/invoices?limit=0", token).await;
        let expected = if status == StatusCode::UNAUTHORIZED {
            status
        } else {
            StatusCode::UNPROCESSABLE_ENTITY
        };
        assert_eq!(res.status(), expected, "malformed limit");
        let res = app.create_invoice_text(token, "k-1", "{not json").await;
        assert_eq!(res.status(), status, "malformed body");
    }
    // … and a create without a key is refused after the credential too.
    let body = invoice_body(&b);
    let res = app
        .client
        .post(app.url("/v1/invoices"))
        .bearer_auth(&forged)
        .json(&body)
        .send()
        .await
        .unwrap();
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_eq!(app.sql_count("select count(*) from invoices").await, 0);
}
