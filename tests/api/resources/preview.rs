//! `POST /v1/invoices/preview` and the MCP tool `preview_invoice`: a create's dry run. A valid
//! body answers what a create then seals (same lines, total, canonical bytes and hash) and
//! writes nothing; an invalid one answers the problem a create answers; warnings never block.

use crate::helpers::{
    Backend, Billing, IBAN, TestApp, both_backends, expect_problem, expect_status, id_of,
    invoice_body, spawn_app, spawn_app_with, without_request_id,
};
use crate::resources::mcp::{compacted, comparable, connect, ok, refused};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tauros_api::HttpConfig;
use tauros_app::AppConfig;

const PREVIEW: &str = "/v1/invoices/preview";
const ETH_ADDRESS: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";

both_backends!(
    a_preview_is_what_create_then_seals_and_writes_nothing,
    an_invalid_body_is_refused_as_a_create_refuses_it,
    a_sent_key_is_checked_as_a_create_checks_it_then_ignored,
    warnings_name_a_close_or_far_due_date_and_an_open_duplicate,
    a_preview_over_mcp_equals_the_rest_answer,
);
both_backends!(backend: previews_count_against_the_rate_limit);

/// Row counts of every table a create, its audit or its follow-up work would write: invoices
/// (which carry the create's idempotency key), revisions, decisions, invoice events, the org
/// audit trail and jobs.
async fn written(app: &TestApp) -> Vec<i64> {
    let mut counts = app.invoice_rows().await.to_vec();
    for table in ["audit_events", "jobs"] {
        counts.push(
            app.sql_count(&format!("select count(*) from {table}"))
                .await,
        );
    }
    counts
}

fn due_in(days: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::days(days))
        .date_naive()
        .to_string()
}

async fn preview(app: &TestApp, token: &str, body: &Value) -> reqwest::Response {
    app.post(PREVIEW, token, body.clone()).await
}

/// The members of a preview that a create's revision 1 seals, as the revision shows them.
fn sealed_members(revision: &Value) -> Value {
    json!({
        "customer_id": revision["customer_id"],
        "payment_destination_id": revision["payment_destination_id"],
        "currency": revision["currency"],
        "due_date": revision["due_date"],
        "lines": revision["lines"],
        "total": revision["total"],
        "total_minor": revision["total_minor"],
        "canonical_payload": revision["canonical_payload"],
        "payload_hash": revision["payload_hash"],
    })
}

async fn a_preview_is_what_create_then_seals_and_writes_nothing(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let body = invoice_body(&b);
    let before = written(&app).await;
    let previewed = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(written(&app).await, before, "a preview writes nothing");
    assert_eq!(previewed["total"], "1200.00");
    assert_eq!(previewed["total_minor"], 120000);
    assert_eq!(previewed["warnings"], json!([]));
    // Twice is the same answer: nothing was reserved or counted.
    let again = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(again, previewed);

    let res = app.create_invoice(key, "preview-then-create", &body).await;
    let created = expect_status(res, StatusCode::CREATED).await;
    let revision = &created["invoice"]["current_revision"];
    let mut expected = sealed_members(revision);
    expected["warnings"] = json!([]);
    assert_eq!(previewed, expected);
}

async fn an_invalid_body_is_refused_as_a_create_refuses_it(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let other = app.destination(key, "USDC", "ethereum", ETH_ADDRESS).await;
    let inactive = app.destination(key, "EUR", "iban", IBAN).await;
    app.deactivate(key, inactive).await;
    let good = invoice_body(&b);
    let with = |member: &str, value: Value| {
        let mut body = good.clone();
        body[member] = value;
        body
    };
    let without = |member: &str| {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(member);
        body
    };
    let mut three_mistakes = without("due_date");
    three_mistakes["currency"] = json!("XXX");
    three_mistakes["lines"][0]["unit_amount"] = json!(400.5);
    let cases = [
        ("three mistakes", three_mistakes),
        (
            "a float",
            with(
                "lines",
                json!([{"description": "x", "quantity": "1", "unit_amount": 1.5}]),
            ),
        ),
        ("no lines", without("lines")),
        ("a past due date", with("due_date", json!(due_in(-1)))),
        ("a bad date", with("due_date", json!("31/01/2030"))),
        (
            "an unknown customer",
            with("customer_id", json!(uuid::Uuid::now_v7())),
        ),
        (
            "an inactive destination",
            with("payment_destination_id", json!(inactive)),
        ),
        (
            "another currency's destination",
            with("payment_destination_id", json!(other)),
        ),
        (
            "too many decimals",
            with(
                "lines",
                json!([{"description": "x", "quantity": "1", "unit_amount": "1.001"}]),
            ),
        ),
        ("an unknown member", with("approved", json!(true))),
        ("not JSON", json!("an invoice")),
    ];
    let before = written(&app).await;
    for (i, (what, body)) in cases.iter().enumerate() {
        let previewed = without_request_id(preview(&app, key, body).await).await;
        assert!(previewed.0.is_client_error(), "{what}: {previewed:?}");
        let res = app.create_invoice(key, &format!("refused-{i}"), body).await;
        let created = without_request_id(res).await;
        assert_eq!(previewed, created, "{what}");
    }
    assert_eq!(written(&app).await, before);
    // A human is refused as on a create: only agents propose.
    let human = &b.org.approver_token;
    let previewed = without_request_id(preview(&app, human, &good).await).await;
    assert_eq!(previewed.0, StatusCode::FORBIDDEN);
    let created = without_request_id(app.create_invoice(human, "human", &good).await).await;
    assert_eq!(previewed, created);
    // Without a credential: 401, as everywhere.
    let res = app.post_public(PREVIEW, good).await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
}

async fn a_sent_key_is_checked_as_a_create_checks_it_then_ignored(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let body = invoice_body(&b);
    // A well-formed key changes nothing: the same answer as without one, nothing written.
    let plain = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    let before = written(&app).await;
    let res = app
        .post_request(PREVIEW, key, &body)
        .header("idempotency-key", "k-1")
        .send()
        .await
        .unwrap();
    assert_eq!(expect_status(res, StatusCode::OK).await, plain);
    assert_eq!(written(&app).await, before);
    // The key is not reserved: a create under it then creates.
    let res = app.create_invoice(key, "k-1", &body).await;
    expect_status(res, StatusCode::CREATED).await;
    // A header and a body key that differ are refused as a create refuses them.
    let mut keyed = body.clone();
    keyed["idempotency_key"] = json!("k-2");
    let send = |path: &'static str| {
        app.post_request(path, key, &keyed)
            .header("idempotency-key", "k-3")
            .send()
    };
    let previewed = without_request_id(send(PREVIEW).await.unwrap()).await;
    assert_eq!(previewed.0, StatusCode::BAD_REQUEST);
    let created = without_request_id(send("/v1/invoices").await.unwrap()).await;
    assert_eq!(previewed, created);
    // A malformed body key is listed with the body's other mistakes, as on a create.
    let mut bad = body.clone();
    bad["idempotency_key"] = json!(" padded ");
    bad["currency"] = json!("XXX");
    let previewed = without_request_id(preview(&app, key, &bad).await).await;
    assert_eq!(previewed.0, StatusCode::UNPROCESSABLE_ENTITY);
    let created = without_request_id(app.post("/v1/invoices", key, bad).await).await;
    assert_eq!(previewed, created);
}

fn codes(previewed: &Value) -> Vec<&str> {
    previewed["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w["code"].as_str().expect("code"))
        .collect()
}

async fn warnings_name_a_close_or_far_due_date_and_an_open_duplicate(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let body = invoice_body(&b);
    let dated = |days: i64| {
        let mut body = body.clone();
        body["due_date"] = json!(due_in(days));
        body
    };
    // Due today: valid, and an approver would notice.
    let today = expect_status(preview(&app, key, &dated(0)).await, StatusCode::OK).await;
    assert_eq!(codes(&today), ["due_date_soon"]);
    assert_eq!(today["warnings"][0]["field"], "due_date");
    // Far ahead: valid, and probably the wrong year.
    let far = expect_status(preview(&app, key, &dated(400)).await, StatusCode::OK).await;
    assert_eq!(codes(&far), ["due_date_far"]);
    // In the past: not a warning, the create's refusal.
    let res = preview(&app, key, &dated(-1)).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "due_date_in_past");

    // An open invoice of the same customer and total: named, and a create is not blocked.
    let first = app.draft(&b, "first").await;
    let previewed = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(codes(&previewed), ["possible_duplicate"]);
    assert_eq!(previewed["warnings"][0]["invoice_id"], first["id"]);
    assert!(previewed["warnings"].get(0).unwrap().get("field").is_none());
    let second = app.create_invoice(key, "second", &body).await;
    expect_status(second, StatusCode::CREATED).await;
    let both = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(codes(&both), ["possible_duplicate", "possible_duplicate"]);
    // Another total is no duplicate.
    let mut cheaper = body.clone();
    cheaper["lines"][0]["unit_amount"] = json!("399");
    let other = expect_status(preview(&app, key, &cheaper).await, StatusCode::OK).await;
    assert_eq!(codes(&other), Vec::<&str>::new());
    // A withdrawn invoice is no longer open.
    for invoice in app
        .get("/v1/invoices", key)
        .await
        .json::<Value>()
        .await
        .unwrap()["items"]
        .as_array()
        .unwrap()
    {
        let res = app
            .command(key, id_of(invoice), "withdraw", json!({}))
            .await;
        expect_status(res, StatusCode::OK).await;
    }
    let after = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(codes(&after), Vec::<&str>::new());
    // Another agent's open invoices are never named (its customers are not this agent's).
    let b2 = app.second_agent(&b).await;
    app.draft(&b2, "theirs").await;
    let mine = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    assert_eq!(codes(&mine), Vec::<&str>::new());
}

async fn a_preview_over_mcp_equals_the_rest_answer(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    app.draft(&b, "open").await;
    let client = connect(&app, key).await;
    let body = invoice_body(&b);
    let before = written(&app).await;
    let rest = expect_status(preview(&app, key, &body).await, StatusCode::OK).await;
    let tool = ok(&client, "preview_invoice", body.clone()).await;
    assert_eq!(tool, compacted(rest.clone()));
    assert_eq!(tool["canonical_payload"], rest["canonical_payload"]);
    assert_eq!(codes(&tool), ["possible_duplicate"]);
    assert_eq!(
        written(&app).await,
        before,
        "nothing written over MCP either"
    );
    // The same refusal, every mistake listed.
    let mut bad = body.clone();
    bad["currency"] = json!("XXX");
    bad.as_object_mut().unwrap().remove("reasoning");
    let problem = refused(&client, "preview_invoice", bad.clone(), "validation_failed").await;
    let rest = without_request_id(preview(&app, key, &bad).await).await.1;
    assert_eq!(comparable(problem), rest);
    // The tool says it only reads.
    let tools = client.list_all_tools().await.unwrap();
    let listed = tools.iter().find(|t| t.name == "preview_invoice").unwrap();
    let annotations = listed.annotations.as_ref().unwrap();
    assert_eq!(annotations.read_only_hint, Some(true));
    assert!(
        !listed.input_schema["properties"]
            .as_object()
            .unwrap()
            .contains_key("idempotency_key")
    );
    client.cancel().await.unwrap();
}

/// A preview takes a request from the caller's bucket, like any request.
async fn previews_count_against_the_rate_limit(backend: Backend) {
    let config = AppConfig {
        rate_limit_per_second: 1,
        rate_limit_burst: 2,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let body = json!({});
    let mut limited = 0;
    for _ in 0..10 {
        let res = preview(&app, &org.agent_key, &body).await;
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            limited += 1;
            expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
        }
    }
    assert!(limited >= 3, "only {limited} of 10 were limited");
}

/// One random valid body: 1–5 lines in one of four currencies (exponents 0, 2, 6, 18), each
/// priced in minor units or as the same amount in major units, integer quantities.
#[derive(Clone, Debug)]
struct Case {
    currency: usize,
    lines: Vec<(u32, u64, bool)>,
    due_days: i64,
}

const CURRENCIES: [(&str, &str, &str, u32); 4] = [
    ("EUR", "iban", IBAN, 2),
    ("JPY", "iban", IBAN, 0),
    ("USDC", "ethereum", ETH_ADDRESS, 6),
    ("ETH", "ethereum", ETH_ADDRESS, 18),
];

fn case() -> impl Strategy<Value = Case> {
    (
        0..CURRENCIES.len(),
        prop::collection::vec((1u32..=1000, 1u64..=10_000_000_000, any::<bool>()), 1..=5),
        0i64..=500,
    )
        .prop_map(|(currency, lines, due_days)| Case {
            currency,
            lines,
            due_days,
        })
}

/// `minor` written in major units with `exponent` decimals.
fn major(minor: u64, exponent: u32) -> String {
    let digits = format!("{minor:0>width$}", width = exponent as usize + 1);
    let (units, fraction) = digits.split_at(digits.len() - exponent as usize);
    if fraction.is_empty() {
        units.to_owned()
    } else {
        format!("{units}.{fraction}")
    }
}

fn body_of(case: &Case, b: &Billing, destinations: &[uuid::Uuid]) -> Value {
    let (code, _, _, exponent) = CURRENCIES[case.currency];
    let lines: Vec<Value> = case
        .lines
        .iter()
        .enumerate()
        .map(|(i, &(quantity, minor, as_major))| {
            let mut line =
                json!({"description": format!("Line {i}"), "quantity": quantity.to_string()});
            if as_major {
                line["unit_amount"] = json!(major(minor, exponent));
            } else {
                line["unit_amount_minor"] = json!(minor);
            }
            line
        })
        .collect();
    json!({
        "customer_id": b.customer_id,
        "payment_destination_id": destinations[case.currency],
        "currency": code,
        "due_date": due_in(case.due_days),
        "lines": lines,
        "reasoning": "Property test.",
    })
}

fn preview_equals_create(backend: Backend) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (app, b, destinations) = rt.block_on(async {
        let app = spawn_app(backend).await;
        let b = app.billing().await;
        let mut destinations = Vec::new();
        for (code, network, address, _) in CURRENCIES {
            let id = app
                .destination(&b.org.agent_key, code, network, address)
                .await;
            destinations.push(id);
        }
        (app, b, destinations)
    });
    let mut config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 16;
    }
    let mut runner = TestRunner::new(config);
    let n = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&case(), |case| {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = body_of(&case, &b, &destinations);
        rt.block_on(async {
            let key = &b.org.agent_key;
            let before = written(&app).await;
            let res = preview(&app, key, &body).await;
            let status = res.status();
            let previewed: Value = res.json().await.unwrap();
            prop_assert_eq!(status, StatusCode::OK, "{}", previewed);
            prop_assert_eq!(written(&app).await, before);
            let res = app.create_invoice(key, &format!("prop-{n}"), &body).await;
            let status = res.status();
            let created: Value = res.json().await.unwrap();
            prop_assert_eq!(status, StatusCode::CREATED, "{}", created);
            let revision = &created["invoice"]["current_revision"];
            prop_assert_eq!(&previewed["payload_hash"], &revision["payload_hash"]);
            prop_assert_eq!(&previewed["total_minor"], &revision["total_minor"]);
            prop_assert_eq!(&previewed["total"], &revision["total"]);
            prop_assert_eq!(&previewed["lines"], &revision["lines"]);
            prop_assert_eq!(
                &previewed["canonical_payload"],
                &revision["canonical_payload"]
            );
            // The create is now an open duplicate of the same body.
            let again: Value = preview(&app, key, &body).await.json().await.unwrap();
            prop_assert!(
                again["warnings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w["invoice_id"] == created["invoice"]["id"]),
                "{}",
                again
            );
            Ok::<(), TestCaseError>(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn preview_equals_create_sqlite() {
    preview_equals_create(Backend::Sqlite);
}

#[test]
fn preview_equals_create_postgres() {
    preview_equals_create(Backend::Postgres);
}
