//! Money rules: exact amounts over HTTP, currencies the destination receives; and the rules of
//! a create's fields, its idempotency key and who may propose or verify.

use crate::helpers::{
    Billing, IBAN, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body,
    invoice_body_for,
};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(
    money_is_exact_over_http,
    an_integer_is_never_a_float,
    currency_must_be_the_destinations,
    a_create_reports_every_missing_field_at_once,
    idempotency_key_in_header_and_body_must_agree,
    humans_never_propose_and_agents_never_verify,
);

/// A create whose one line costs `literal` minor units, sent as this exact JSON text (a JSON
/// integer beyond 64 bits has no `Value`).
fn priced_at(b: &Billing, literal: &str) -> String {
    let mut body = invoice_body(b);
    body["lines"] = json!([{"description": "a", "quantity": "1", "unit_amount_minor": "PRICE"}]);
    body.to_string().replace("\"PRICE\"", literal)
}

/// JSON integers are integers: exact up to 2^53, beyond it 422 `amount_out_of_range` on the field
/// whatever its size (2^64 and more included, which a JSON parser would read as a float), a sign
/// `negative_amount`; a float, even a whole one, 400 `float_not_allowed`. REST and MCP alike.
async fn an_integer_is_never_a_float(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let before = app.invoice_rows().await;
    let ten_to_the_40 = format!("1{}", "0".repeat(40));
    for (literal, code) in [
        ("9007199254740993", "amount_out_of_range"),
        ("18446744073709551615", "amount_out_of_range"),
        ("100000000000000000000", "amount_out_of_range"),
        (ten_to_the_40.as_str(), "amount_out_of_range"),
        ("-100000000000000000000", "negative_amount"),
    ] {
        let res = app
            .create_invoice_text(key, "wide", &priced_at(&b, literal))
            .await;
        let problem =
            expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
        assert_eq!(
            problem.fields(),
            ["lines[0].unit_amount_minor"],
            "{literal}: {problem}"
        );
        assert_eq!(problem.errors[0].code, code, "{literal}: {problem}");
        if code == "amount_out_of_range" {
            assert!(
                problem.errors[0].detail.contains("string of digits"),
                "{problem}"
            );
        }
    }
    for literal in ["1e20", "100000000000000000000.0", "9007199254740993.0"] {
        let res = app
            .create_invoice_text(key, "float", &priced_at(&b, literal))
            .await;
        let problem = expect_problem(res, StatusCode::BAD_REQUEST, "float_not_allowed").await;
        assert_eq!(
            problem.body["field"], "lines[0].unit_amount_minor",
            "{literal}"
        );
    }
    assert_eq!(
        app.invoice_rows().await,
        before,
        "nothing refused is written"
    );

    // Over MCP, the transport reads the message first: the same answer.
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"create_invoice_draft","arguments":{}}}}}"#,
        priced_at(&b, "100000000000000000000").replacen(
            '{',
            r#"{"idempotency_key":"wide-mcp","#,
            1
        )
    );
    let res = app
        .post_text("/mcp", key, &call)
        .header("accept", "application/json, text/event-stream")
        .send()
        .await
        .expect("request");
    let answer = expect_status(res, StatusCode::OK).await;
    let problem = &answer["result"]["structuredContent"];
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(problem["code"], "validation_failed", "{answer}");
    assert_eq!(problem["errors"][0]["field"], "lines[0].unit_amount_minor");
    assert_eq!(problem["errors"][0]["code"], "amount_out_of_range");
    assert_eq!(app.invoice_rows().await, before);

    // Up to 2^53 a JSON integer is the amount, exactly.
    let res = app
        .create_invoice_text(key, "exact", &priced_at(&b, "9007199254740992"))
        .await;
    let invoice = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(
        invoice["invoice"]["current_revision"]["lines"][0]["unit_amount_minor"],
        json!(9_007_199_254_740_992_u64)
    );
}

async fn money_is_exact_over_http(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let before = app.invoice_rows().await;

    // A float in a money or quantity field.
    for (line, field) in [
        (
            json!({"description": "a", "quantity": "1", "unit_amount_minor": 400.0}),
            "lines[0].unit_amount_minor",
        ),
        (
            json!({"description": "a", "quantity": "1", "unit_amount_minor": 400.5}),
            "lines[0].unit_amount_minor",
        ),
        (
            json!({"description": "a", "quantity": 1.5, "unit_amount": "400"}),
            "lines[0].quantity",
        ),
        (
            json!({"description": "a", "quantity": "1", "unit_amount": 10.5}),
            "lines[0].unit_amount",
        ),
    ] {
        let mut body = invoice_body(&b);
        body["lines"] = json!([line]);
        let problem = expect_problem(
            app.create_invoice(key, "float", &body).await,
            StatusCode::BAD_REQUEST,
            "float_not_allowed",
        )
        .await;
        assert_eq!(problem.body["field"], field, "{problem}");
        assert!(
            problem
                .detail
                .contains("floating-point numbers are never accepted"),
            "{problem}"
        );
    }
    // More decimals than EUR has: refused, never rounded.
    let mut body = invoice_body(&b);
    body["lines"][0]["unit_amount"] = json!("10.005");
    let problem = expect_problem(
        app.create_invoice(key, "decimals", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "lines[0].unit_amount");
    assert_eq!(problem.errors[0].code, "too_many_decimals");
    // 1.5 × 0.05 EUR is not a whole number of cents.
    let mut body = invoice_body(&b);
    body["lines"][0] = json!({"description": "a", "quantity": "1.5", "unit_amount": "0.05"});
    let problem = expect_problem(
        app.create_invoice(key, "fraction", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert!(problem.errors[0].field.starts_with("lines[0]"), "{problem}");
    // Both forms, or neither.
    let mut body = invoice_body(&b);
    body["lines"][0]["unit_amount_minor"] = json!(40000);
    body["lines"][1] = json!({"description": "b", "quantity": "1"});
    let problem = expect_problem(
        app.create_invoice(key, "both", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    let fields = problem.fields();
    assert_eq!(fields, ["lines[0]", "lines[1].unit_amount"], "{problem}");
    assert_eq!(
        app.invoice_rows().await,
        before,
        "no refused create wrote anything"
    );

    // JPY has no minor unit: "1200" is 1200 minor.
    let jpy = app.destination(key, "JPY", "iban", IBAN).await;
    let mut body = invoice_body_for(b.customer_id, jpy);
    body["currency"] = json!("JPY");
    body["lines"] = json!([{"description": "Consulting", "quantity": "1", "unit_amount": "1200"}]);
    let created = expect_status(
        app.create_invoice(key, "jpy", &body).await,
        StatusCode::CREATED,
    )
    .await;
    let rev = &created["invoice"]["current_revision"];
    assert_eq!(rev["lines"][0]["unit_amount"], "1200");
    assert_eq!(rev["lines"][0]["unit_amount_minor"], 1200);
    assert_eq!(rev["total"], "1200");
    assert_eq!(rev["total_minor"], 1200);
    body["lines"][0]["unit_amount"] = json!("1200.5");
    let problem = expect_problem(
        app.create_invoice(key, "jpy-2", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].code, "too_many_decimals");

    // 18-decimal ETH far beyond 2^53, sent as a digit string: exact, and a JSON integer back.
    let eth = app
        .destination(
            key,
            "ETH",
            "ethereum",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        )
        .await;
    let wei = "12345678901234567891234";
    let mut body = invoice_body_for(b.customer_id, eth);
    body["currency"] = json!("ETH");
    body["lines"] =
        json!([{"description": "Node operation", "quantity": "1", "unit_amount_minor": wei}]);
    let res = app.create_invoice(key, "eth", &body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let text = res.text().await.unwrap();
    for exact in [
        format!("\"unit_amount_minor\":{wei},"),
        format!("\"amount_minor\":{wei}"),
        format!("\"total_minor\":{wei},"),
        "\"unit_amount\":\"12345.678901234567891234\"".to_owned(),
        "\"total\":\"12345.678901234567891234\"".to_owned(),
        format!("\\\"unit_amount_minor\\\":\\\"{wei}\\\""),
    ] {
        assert!(text.contains(&exact), "{exact} not in {text}");
    }
    // The same amount in major units is the same payload: a replay.
    body["lines"][0] = json!({"description": "Node operation", "quantity": "1", "unit_amount": "12345.678901234567891234"});
    let res = app.create_invoice(key, "eth", &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    let replay = res.text().await.unwrap();
    assert!(replay.contains("\"replayed\":true"));
    assert!(replay.contains(&format!("\"total_minor\":{wei},")));
    // One wei more is another payload.
    body["lines"][0]["unit_amount"] = json!("12345.678901234567891235");
    expect_problem(
        app.create_invoice(key, "eth", &body).await,
        StatusCode::CONFLICT,
        "idempotency_conflict",
    )
    .await;
}

async fn currency_must_be_the_destinations(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    // A destination on a network that does not carry the currency.
    let count = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    for (currency, network, address) in [
        ("BTC", "iban", IBAN),
        (
            "EUR",
            "ethereum",
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
        ),
        ("USDT", "base", "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"),
    ] {
        let problem = expect_problem(
            app.post(
                "/v1/payment-destinations",
                key,
                json!({"label": "x", "currency": currency, "network": network, "address": address}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.errors[0].field, "network", "{problem}");
    }
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations")
            .await,
        count
    );
    // An invoice in a currency the destination does not receive (the IBAN receives EUR).
    let before = app.invoice_rows().await;
    for currency in ["USD", "CHF", "BTC"] {
        let mut body = invoice_body(&b);
        body["currency"] = json!(currency);
        let problem = expect_problem(
            app.create_invoice(key, &format!("cur-{currency}"), &body)
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.errors[0].field, "currency", "{problem}");
    }
    // An unknown currency is an error on `currency` too.
    let mut body = invoice_body(&b);
    body["currency"] = json!("DOGE");
    let problem = expect_problem(
        app.create_invoice(key, "doge", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "currency");
    // Revising only the currency, without new lines, is refused (the amounts would change
    // meaning), and so is a currency the destination does not receive.
    let draft = app.draft(&b, "eur").await;
    let before_revise = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(
            key,
            id_of(&draft),
            "revise",
            json!({"reasoning": "bill in dollars", "currency": "USD"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "lines");
    let problem = expect_problem(
        app.command(
            key,
            id_of(&draft),
            "revise",
            json!({"reasoning": "bill in dollars", "currency": "USD",
                   "lines": [{"description": "a", "quantity": "1", "unit_amount": "100"}]}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "currency");
    assert_eq!(app.invoice_rows().await, before_revise);
    assert_eq!(before[0] + 1, before_revise[0]);
}

async fn a_create_reports_every_missing_field_at_once(app: TestApp) {
    let b = app.org().await;
    let problem = expect_problem(
        app.post("/v1/invoices", &b.agent_key, json!({})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    let mut fields = problem.fields();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "currency",
            "customer_id",
            "due_date",
            "idempotency_key",
            "lines",
            "payment_destination_id",
            "reasoning"
        ],
        "{problem}"
    );
    for field in &fields {
        assert!(problem.detail.contains(field));
    }
    // Every missing field of a line too, with the key present.
    let problem = expect_problem(
        app.create_invoice(
            &b.agent_key,
            "k",
            &json!({"currency": "EUR", "lines": [{"description": "ok", "quantity": "1", "unit_amount": "1"}, {}]}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    let mut fields = problem.fields();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "customer_id",
            "due_date",
            "lines[1].description",
            "lines[1].quantity",
            "lines[1].unit_amount",
            "payment_destination_id",
            "reasoning"
        ],
        "{problem}"
    );
    // A complete body without a key: 422 naming only the key, and nothing is written.
    let billing = app.billing().await;
    let problem = expect_problem(
        app.post(
            "/v1/invoices",
            &billing.org.agent_key,
            invoice_body(&billing),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "idempotency_key");
    assert_eq!(problem.errors[0].code, "required");
    assert_eq!(
        app.invoice_rows().await,
        [0, 0, 0, 0],
        "nothing was written"
    );
}

async fn idempotency_key_in_header_and_body_must_agree(app: TestApp) {
    let b = app.billing().await;
    let mut body = invoice_body(&b);
    body["idempotency_key"] = json!("body-key");
    let problem = expect_problem(
        app.create_invoice(&b.org.agent_key, "header-key", &body)
            .await,
        StatusCode::BAD_REQUEST,
        "idempotency_key_mismatch",
    )
    .await;
    assert_eq!(problem.body["field"], "idempotency_key");
    assert_eq!(app.sql_count("select count(*) from invoices").await, 0);
    // The body alone, or the same key in both, is the same key.
    let created = expect_status(
        app.post("/v1/invoices", &b.org.agent_key, body.clone())
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(created["invoice"]["idempotency_key"], "body-key");
    let replay = expect_status(
        app.create_invoice(&b.org.agent_key, "body-key", &body)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["invoice"]["id"], created["invoice"]["id"]);
    let without = invoice_body(&b);
    let replay = expect_status(
        app.create_invoice(&b.org.agent_key, "body-key", &without)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["invoice"]["id"], created["invoice"]["id"]);
}

async fn humans_never_propose_and_agents_never_verify(app: TestApp) {
    let b = app.billing().await;
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    let body = invoice_body(&b);
    for token in [&b.org.approver_token, &operator] {
        expect_problem(
            app.create_invoice(token, "human", &body).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        // Without a key, or with nothing at all, the answer is still who may, not what is missing.
        expect_problem(
            app.post("/v1/invoices", token, body.clone()).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        expect_problem(
            app.post("/v1/invoices", token, json!({})).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    assert_eq!(app.sql_count("select count(*) from invoices").await, 0);
    let draft = app.draft(&b, "inv-1").await;
    let problem = expect_problem(
        app.get(
            &format!("/v1/invoices/{}/verify", id_of(&draft)),
            &b.org.agent_key,
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(problem.detail.contains("humans"));
}
