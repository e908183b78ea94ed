//! Bounds per record (Tenancy, docs/contract/api.md): at most 100 revisions per invoice, the
//! history lists paginated, at most 1,000 payments matched to one invoice and 100 events per
//! payment (beyond: 409, kept nowhere), and reconciliation figures kept incrementally that
//! agree with a full recomputation.

use crate::helpers::settlement::{billing_with_settlement_key, event, issued, settlement_rows};
use crate::helpers::{
    Backend, Billing, TestApp, both_backends, error_fields, expect_problem, expect_status, figures,
    id_of, parallel, spawn_app_with,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tauros_api::HttpConfig;
use tauros_app::AppConfig;

both_backends!(
    a_revise_beyond_100_revisions_is_409_revision_limit_and_writes_nothing,
    revisions_and_events_page_by_limit_and_cursor,
    a_payments_events_page_by_limit_and_cursor,
    mcp_get_invoice_answers_a_bounded_page_of_events,
    the_101st_event_of_a_payment_is_409_limit_reached_and_kept_nowhere,
    incremental_payment_figures_agree_with_a_full_recomputation,
);

both_backends!(backend:
    the_1001st_payment_of_an_invoice_is_409_limit_reached_and_kept_nowhere,
    a_peer_answer_over_the_bound_leaves_the_issue_unknown_and_the_claim_processing,
);

fn revise_body(step: usize) -> Value {
    json!({
        "lines": [{"description": "Discovery workshop", "quantity": "1", "unit_amount": format!("{}.00", 100 + step)}],
        "reasoning": format!("Revision step {step}."),
    })
}

/// A draft revised until it has `count` revisions; returns its id.
async fn revised_draft(app: &TestApp, b: &Billing, key: &str, count: usize) -> String {
    let invoice = app.draft(b, key).await;
    let id = id_of(&invoice).to_owned();
    for step in 2..=count {
        let res = app
            .post(
                &format!("/v1/invoices/{id}/revise"),
                &b.org.agent_key,
                revise_body(step),
            )
            .await;
        expect_status(res, StatusCode::OK).await;
    }
    id
}

async fn a_revise_beyond_100_revisions_is_409_revision_limit_and_writes_nothing(app: TestApp) {
    let b = app.billing().await;
    let id = revised_draft(&app, &b, "many-revisions", 100).await;
    let path = format!("/v1/invoices/{id}/revise");
    let invoice = app.invoice(&b.org.agent_key, &id).await;
    assert_eq!(invoice["revision_count"], 100);
    let rows = app.invoice_rows().await;

    let res = app.post(&path, &b.org.agent_key, revise_body(101)).await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "revision_limit").await;
    let detail = problem.detail.as_str();
    assert!(detail.contains("100"), "{detail}");
    assert!(detail.contains("new invoice"), "{detail}");
    assert_eq!(app.invoice_rows().await, rows, "nothing written");
    assert_eq!(
        app.invoice(&b.org.agent_key, &id).await["revision_count"],
        100
    );

    // The revise that made revision 100, sent again, is still a replay.
    let res = app.post(&path, &b.org.agent_key, revise_body(100)).await;
    let again = expect_status(res, StatusCode::OK).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["invoice"]["revision_count"], 100);
    assert_eq!(app.invoice_rows().await, rows, "a replay writes nothing");

    // What the agent can still do: submit it as it is.
    let res = app
        .command(&b.org.agent_key, &id, "submit", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await;
}

/// Every item of a paginated list, following `next_cursor` with `limit`; returns the items
/// and how many pages it took.
async fn every_page(app: &TestApp, token: &str, path: &str, limit: usize) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}?limit={limit}&cursor={c}"),
            None => format!("{path}?limit={limit}"),
        };
        let page = expect_status(app.get(&url, token).await, StatusCode::OK).await;
        pages += 1;
        let got = page["items"].as_array().unwrap();
        assert!(got.len() <= limit, "{path}: {} > {limit}", got.len());
        items.extend(got.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
        assert!(pages < 100, "{path} never ends");
    }
    (items, pages)
}

async fn revisions_and_events_page_by_limit_and_cursor(app: TestApp) {
    let b = app.billing().await;
    let id = revised_draft(&app, &b, "paged", 5).await;
    let token = &b.org.agent_key;

    let revisions = format!("/v1/invoices/{id}/revisions");
    let (items, pages) = every_page(&app, token, &revisions, 2).await;
    let numbers: Vec<i64> = items
        .iter()
        .map(|r| r["number"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    assert_eq!(pages, 3);

    let events = format!("/v1/invoices/{id}/events");
    let (items, pages) = every_page(&app, token, &events, 2).await;
    let seqs: Vec<i64> = items.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(pages, 3);

    // Without `limit`: one page of at most 50, no cursor when it is all.
    let page = expect_status(app.get(&events, token).await, StatusCode::OK).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 5);
    assert_eq!(page["next_cursor"], Value::Null);

    for path in [&revisions, &events] {
        let res = app.get(&format!("{path}?limit=101"), token).await;
        let problem = expect_status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(error_fields(&problem), ["limit"], "{path}");
        let res = app.get(&format!("{path}?cursor=not-a-cursor"), token).await;
        let problem = expect_status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(error_fields(&problem), ["cursor"], "{path}");
    }
}

/// An organisation, an issued invoice of it (1200.00 EUR) and a settlement key of its approver.
async fn issued_with_key(app: &TestApp, key: &str) -> (Billing, Value, String) {
    let (b, settlement) = billing_with_settlement_key(app).await;
    let invoice = issued(app, &b, key).await;
    (b, invoice, settlement)
}

async fn a_payments_events_page_by_limit_and_cursor(app: TestApp) {
    let (b, invoice, key) = issued_with_key(&app, "payment-pages").await;
    for n in 0..5 {
        let status = if n == 4 { "confirmed" } else { "observed" };
        let body = event(&format!("evt-{n}"), "pay-1", &invoice, "10.00", status, n);
        let res = app.post("/v1/settlement-events", &key, body).await;
        expect_status(res, StatusCode::CREATED).await;
    }
    let token = &b.org.approver_token;
    let list = app.get("/v1/payments", token).await;
    let payment = expect_status(list, StatusCode::OK).await["items"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/payments/{payment}");

    let mut seen = Vec::new();
    let mut url = format!("{path}?limit=2");
    let mut pages = 0;
    loop {
        let detail = expect_status(app.get(&url, token).await, StatusCode::OK).await;
        pages += 1;
        assert_eq!(detail["payment"]["event_count"], 5);
        let events = detail["events"].as_array().unwrap();
        assert!(events.len() <= 2);
        seen.extend(
            events
                .iter()
                .map(|e| e["event_id"].as_str().unwrap().to_owned()),
        );
        match detail["events_next_cursor"].as_str() {
            Some(c) => url = format!("{path}?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["evt-0", "evt-1", "evt-2", "evt-3", "evt-4"]);
    assert_eq!(pages, 3);

    let res = app.get(&format!("{path}?limit=101"), token).await;
    let problem = expect_status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(error_fields(&problem), ["limit"]);
    let res = app.get(&format!("{path}?cursor=zz"), token).await;
    let problem = expect_status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
    assert_eq!(error_fields(&problem), ["cursor"]);
}

async fn mcp_get_invoice_answers_a_bounded_page_of_events(app: TestApp) {
    let b = app.billing().await;
    // 100 revisions and a submit: 101 events.
    let id = revised_draft(&app, &b, "mcp-bounded", 100).await;
    let res = app
        .command(&b.org.agent_key, &id, "submit", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await;

    let answer = tool_answer(
        &app,
        &b.org.agent_key,
        "get_invoice",
        json!({"id": id, "history": true}),
    )
    .await;
    let events = answer["events"].as_array().unwrap();
    assert_eq!(events.len(), 100, "one page of events");
    let cursor = answer["events_next_cursor"]
        .as_str()
        .expect("a next cursor");
    assert_eq!(answer["revisions"].as_array().unwrap().len(), 100);

    let next = tool_answer(
        &app,
        &b.org.agent_key,
        "get_invoice",
        json!({"id": id, "events_cursor": cursor}),
    )
    .await;
    let events = next["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["seq"], 101);
    assert_eq!(next["events_next_cursor"], Value::Null);

    // Verify walks 100 revisions and 101 events page by page, across the page boundary.
    let report = app.verify(&b.org.approver_token, &id).await;
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["revisions"].as_array().unwrap().len(), 100);
    assert_eq!(report["events"]["ok"], true);
}

/// What an MCP tool answers `key` (it must succeed).
async fn tool_answer(app: &TestApp, key: &str, tool: &str, args: Value) -> Value {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(key);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{tool}: {result:?}");
    result.structured_content.expect("structured content")
}

async fn the_101st_event_of_a_payment_is_409_limit_reached_and_kept_nowhere(app: TestApp) {
    let (_b, invoice, key) = issued_with_key(&app, "event-limit").await;
    for n in 0..100 {
        let body = event(
            &format!("evt-{n}"),
            "pay-1",
            &invoice,
            "10.00",
            "observed",
            n,
        );
        let res = app.post("/v1/settlement-events", &key, body).await;
        expect_status(res, StatusCode::CREATED).await;
    }
    let rows = settlement_rows(&app).await;
    let invoice_rows = app.invoice_rows().await;

    let body = event("evt-100", "pay-1", &invoice, "10.00", "confirmed", 100);
    let res = app.post("/v1/settlement-events", &key, body).await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "limit_reached").await;
    let detail = problem.detail.as_str();
    assert!(detail.contains("100 events"), "{detail}");
    assert_eq!(settlement_rows(&app).await, rows, "kept nowhere");
    assert_eq!(app.invoice_rows().await, invoice_rows);

    // A redelivery of an event already kept still replays.
    let body = event("evt-99", "pay-1", &invoice, "10.00", "observed", 99);
    let res = app.post("/v1/settlement-events", &key, body).await;
    let again = expect_status(res, StatusCode::OK).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["payment"]["event_count"], 100);
}

async fn the_1001st_payment_of_an_invoice_is_409_limit_reached_and_kept_nowhere(backend: Backend) {
    // No per-credential rate limit: a thousand reports in parallel batches.
    let config = AppConfig {
        rate_limit_per_second: 0,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let (_b, invoice, key) = issued_with_key(&app, "payment-limit").await;
    let started = std::time::Instant::now();
    for batch in 0..(1000 / 25) {
        let requests = (0..25)
            .map(|i| {
                let n = batch * 25 + i;
                let body = event(
                    &format!("evt-{n}"),
                    &format!("pay-{n}"),
                    &invoice,
                    "0.01",
                    "confirmed",
                    n,
                );
                app.post_request("/v1/settlement-events", &key, &body)
            })
            .collect();
        for res in parallel(requests).await {
            expect_status(res, StatusCode::CREATED).await;
        }
    }
    let elapsed = started.elapsed();
    let rows = settlement_rows(&app).await;
    assert_eq!(rows, [1000, 1000]);
    let invoice_rows = app.invoice_rows().await;

    let body = event("evt-1000", "pay-1000", &invoice, "0.01", "confirmed", 1000);
    let res = app.post("/v1/settlement-events", &key, body).await;
    let problem = expect_problem(res, StatusCode::CONFLICT, "limit_reached").await;
    let detail = problem.detail.as_str();
    assert!(detail.contains("1000 payments"), "{detail}");
    assert_eq!(settlement_rows(&app).await, rows, "kept nowhere");
    assert_eq!(app.invoice_rows().await, invoice_rows);

    // Another event of a payment already matched is still kept.
    let body = event("evt-again-7", "pay-7", &invoice, "0.01", "confirmed", 7);
    let res = app.post("/v1/settlement-events", &key, body).await;
    expect_status(res, StatusCode::CREATED).await;

    let paid = app.invoice(&_b.org.agent_key, id_of(&invoice)).await;
    assert_eq!(paid["amount_paid"], "10.00");
    figures(
        "payments_per_invoice",
        backend,
        &[
            ("payments", "1000".to_owned()),
            ("seconds_for_1000", format!("{:.1}", elapsed.as_secs_f64())),
        ],
    );
}

/// A fixed, generated sequence of events over a few payments of one invoice, in an order that
/// reshuffles which payment counts first; after each event the figures kept on the rows must
/// equal what a full recomputation from every event gives.
async fn incremental_payment_figures_agree_with_a_full_recomputation(app: TestApp) {
    let (b, invoice, key) = issued_with_key(&app, "incremental").await;
    let token = &b.org.approver_token;
    // A small linear congruential generator: the same sequence on every run and backend.
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |m: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % m
    };
    let states = ["observed", "confirmed", "failed"];
    let amounts = ["300.00", "500.00", "700.00"];
    for n in 0..40 {
        let p = next(5) as usize;
        let state = states[next(3) as usize];
        let body = event(
            &format!("evt-{n}"),
            &format!("pay-{p}"),
            &invoice,
            amounts[p % 3],
            state,
            next(3000) as usize,
        );
        let res = app.post("/v1/settlement-events", &key, body).await;
        assert!(res.status().is_success(), "{}", res.status());

        // The full recomputation: every payment's every event, folded from scratch.
        let list = app.get("/v1/payments?limit=100", token).await;
        let payments = expect_status(list, StatusCode::OK).await["items"]
            .as_array()
            .unwrap()
            .clone();
        let mut allocated_total = 0u64;
        for payment in &payments {
            let id = payment["id"].as_str().unwrap();
            let detail = app
                .get(&format!("/v1/payments/{id}?limit=100"), token)
                .await;
            let detail = expect_status(detail, StatusCode::OK).await;
            let events = detail["events"].as_array().unwrap();
            assert_eq!(payment["event_count"], events.len());
            let rank = |s: &str| states.iter().position(|x| *x == s).unwrap();
            let furthest = events
                .iter()
                .map(|e| rank(e["status"].as_str().unwrap()))
                .max()
                .unwrap();
            assert_eq!(payment["state"], states[furthest], "{payment}");
            allocated_total += payment["allocated_minor"].as_u64().unwrap();
        }
        let now = app.invoice(&b.org.agent_key, id_of(&invoice)).await;
        assert_eq!(now["amount_paid_minor"], allocated_total, "after event {n}");

        // The running figures kept on the invoice equal the recomputation: how many payments
        // are matched, and what each would count on its own (applied or overpaid: its amount).
        let kept_count = app
            .sql_count("select cast(payment_count as bigint) from invoices")
            .await;
        assert_eq!(kept_count, payments.len() as i64, "after event {n}");
        let counted: u64 = payments
            .iter()
            .filter(|p| ["applied", "overpaid"].contains(&p["status"].as_str().unwrap()))
            .map(|p| p["amount_minor"].as_u64().unwrap())
            .sum();
        let kept: Option<String> = app.sql_scalar("select counted_minor from invoices").await;
        // Unknown only until the first reconciliation has read the payments once.
        if let Some(kept) = kept {
            assert_eq!(kept, counted.to_string(), "after event {n}");
        }
    }
}

/// A peer that answers every request with a well-formed JSON object longer than the bound the
/// `http` issuer reads (2 MiB); returns its invoices URL.
async fn oversized_peer() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let filler = "x".repeat(2 * 1024 * 1024);
    let body = std::sync::Arc::new(format!(r#"{{"peer_id":"p","filler":"{filler}"}}"#));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = std::sync::Arc::clone(&body);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 256 * 1024];
                let _ = socket.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{addr}/invoices")
}

async fn a_peer_answer_over_the_bound_leaves_the_issue_unknown_and_the_claim_processing(
    backend: Backend,
) {
    use std::sync::Arc;
    use std::time::Duration;
    use tauros_app::issuing::{HttpIssuer, Issuer};
    let config = AppConfig {
        issuer_configured: true,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let b = app.billing().await;
    let pending = app.pending(&b, "to-issue").await;
    let res = app.approve(&b.org.approver_token, &pending).await;
    let invoice = expect_status(res, StatusCode::OK).await["invoice"].clone();

    let timeout = Duration::from_secs(10);
    let adapter = HttpIssuer::new(&oversized_peer().await, timeout).unwrap();
    let issuer = Issuer::new(Arc::new(adapter), timeout, None);
    let failed = issuer
        .issue(
            &app.app,
            b.org.org_id,
            crate::helpers::uuid_of(&invoice["id"]),
        )
        .await;
    assert_eq!(
        failed.unwrap_err().to_string(),
        tauros_domain::effect::EffectFailure::OutcomeUnknown.to_string(),
        "an over-long answer is no answer"
    );
    let now = app.invoice(&b.org.approver_token, id_of(&invoice)).await;
    assert_eq!(now["state"], "approved", "never a success");
    let processing = app
        .sql_count("select count(*) from effect_claims where state = 'processing'")
        .await;
    assert_eq!(processing, 1, "the claim stays the recovery point");
}
