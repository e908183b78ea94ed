//! What a client hears about a bad body (docs/contract/api.md Conventions): a body that is not JSON
//! is `invalid_json` whatever its members; every shape error of a body arrives in one 400; every
//! missing member and every broken rule arrives in one 422, on every route; each hint fits its
//! field. Nothing is written by any of these requests.

use crate::helpers::{Billing, Problem, TestApp, both_backends, expect_problem};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

both_backends!(
    an_empty_body_names_every_required_member_on_every_route,
    missing_members_and_broken_rules_come_in_one_answer,
    a_body_that_is_not_json_is_invalid_json_whatever_its_members,
    every_shape_error_of_a_body_comes_in_one_answer,
    each_float_hint_fits_its_field,
    a_body_with_hundreds_of_errors_gets_one_bounded_answer,
    a_huge_unknown_member_or_wrong_value_keeps_its_code_and_field,
    a_capability_list_over_its_maximum_is_refused_before_its_entries,
);

/// Sends `body` with `token` and returns the problem, asserting its status and code.
async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: &Value,
    status: StatusCode,
    code: &str,
) -> Problem {
    let mut req = app.client.request(method, app.url(path)).json(body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    expect_problem(req.send().await.unwrap(), status, code).await
}

/// Row counts of every table a refused body could have written to.
async fn written(app: &TestApp) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in [
        "agents",
        "users",
        "sessions",
        "customers",
        "payment_destinations",
        "invoices",
        "invoice_revisions",
        "decisions",
        "invoice_events",
        "audit_events",
    ] {
        counts.push(
            app.sql_count(&format!("select count(*) from {table}"))
                .await,
        );
    }
    counts
}

async fn an_empty_body_names_every_required_member_on_every_route(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "bodies").await;
    let id = invoice["id"].as_str().unwrap();
    let approver = Some(b.org.approver_token.as_str());
    let agent = Some(b.org.agent_key.as_str());
    let before = written(&app).await;
    let cases: Vec<(Method, String, Option<&str>, Vec<&str>)> = vec![
        (
            Method::POST,
            "/v1/payment-destinations".into(),
            agent,
            vec!["address", "currency", "label", "network"],
        ),
        (
            Method::POST,
            "/v1/customers".into(),
            approver,
            vec!["agent_id", "email", "name"],
        ),
        (Method::POST, "/v1/agents".into(), approver, vec!["name"]),
        (
            Method::PATCH,
            format!("/v1/agents/{}", b.org.agent_id),
            approver,
            vec!["name"],
        ),
        (
            Method::POST,
            "/v1/users".into(),
            approver,
            vec!["email", "role"],
        ),
        (
            Method::POST,
            "/v1/invitations/accept".into(),
            None,
            vec!["invitation_token", "password"],
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            None,
            vec!["email", "password"],
        ),
        (
            Method::POST,
            format!("/v1/invoices/{id}/reject"),
            approver,
            vec!["revision_id", "payload_hash", "reason"],
        ),
        (
            Method::POST,
            format!("/v1/invoices/{id}/approve"),
            approver,
            vec!["revision_id", "payload_hash"],
        ),
        (
            Method::POST,
            "/v1/invoices".into(),
            agent,
            vec![
                "idempotency_key",
                "customer_id",
                "payment_destination_id",
                "currency",
                "due_date",
                "reasoning",
                "lines",
            ],
        ),
    ];
    for (method, path, token, fields) in cases {
        let problem = send(
            &app,
            method.clone(),
            &path,
            token,
            &json!({}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.fields(), fields, "{method} {path}");
        for error in &problem.errors {
            assert_eq!(error.code, "required", "{method} {path}: {error:?}");
        }
    }
    assert_eq!(written(&app).await, before);
}

async fn missing_members_and_broken_rules_come_in_one_answer(app: TestApp) {
    let b = app.billing().await;
    let before = written(&app).await;
    let problem = send(
        &app,
        Method::POST,
        "/v1/payment-destinations",
        Some(&b.org.agent_key),
        &json!({"currency": "EURO"}),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    // The request type's field rules (in the order of the members' names), then the payee's
    // rules, the domain's.
    assert_eq!(
        problem.fields(),
        ["address", "label", "network", "currency"]
    );
    assert_eq!(problem.errors[3].code, "unknown_currency");

    // A draft with an unknown currency and a past due date hears both, with the parties.
    let mut body = crate::helpers::invoice_body(&b);
    body["currency"] = json!("EURO");
    body["due_date"] = json!("2001-01-01");
    body["customer_id"] = json!(uuid::Uuid::now_v7());
    let problem = send(
        &app,
        Method::POST,
        "/v1/invoices",
        Some(&b.org.agent_key),
        &with_key(body, "all-rules"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    let codes: Vec<(&str, &str)> = problem
        .errors
        .iter()
        .map(|e| (e.field.as_str(), e.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            ("currency", "unknown_currency"),
            ("due_date", "due_date_in_past"),
            ("customer_id", "unknown_customer"),
        ]
    );
    assert_eq!(written(&app).await, before);
}

fn with_key(mut body: Value, key: &str) -> Value {
    body["idempotency_key"] = json!(key);
    body
}

async fn a_body_that_is_not_json_is_invalid_json_whatever_its_members(app: TestApp) {
    let b = app.billing().await;
    let before = written(&app).await;
    for text in [
        r#"{"customer_id": "x", "lines": ["#,
        r#"{"customer_id": 5} trailing"#,
        r#"{"currency": "EUR", "currency": "USD"}"#,
    ] {
        let res = app
            .create_invoice_text(&b.org.agent_key, "not-json", text)
            .await;
        expect_problem(res, StatusCode::BAD_REQUEST, "invalid_json").await;
    }
    assert_eq!(written(&app).await, before);
}

async fn every_shape_error_of_a_body_comes_in_one_answer(app: TestApp) {
    let b: Billing = app.billing().await;
    let before = written(&app).await;
    // Six numbers where strings belong: one round trip, not six.
    let body = json!({
        "idempotency_key": "shapes",
        "customer_id": 1,
        "payment_destination_id": 2,
        "currency": 3,
        "due_date": 4,
        "reasoning": 5,
        "lines": [
            {"description": 6, "quantity": "1", "unit_amount": "1"},
            {"description": "ok", "quantity": "1", "unit_amount": "1", "colour": "red"}
        ],
    });
    let problem = send(
        &app,
        Method::POST,
        "/v1/invoices",
        Some(&b.org.agent_key),
        &body,
        StatusCode::BAD_REQUEST,
        "invalid_type",
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
            "lines[0].description",
            "lines[1].colour",
            "payment_destination_id",
            "reasoning",
        ]
    );
    assert!(problem.body["field"].is_string());

    let problem = send(
        &app,
        Method::PATCH,
        "/v1/organisation",
        Some(&b.org.approver_token),
        &json!({"four_eyes": "yes", "shared_review": 1}),
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(problem.fields(), ["four_eyes", "shared_review"]);
    assert_eq!(written(&app).await, before);
}

async fn each_float_hint_fits_its_field(app: TestApp) {
    let b = app.billing().await;
    for (line, field, hint) in [
        (
            json!({"description": "d", "quantity": 1.5, "unit_amount": "1"}),
            "lines[0].quantity",
            "send quantity as a decimal string",
        ),
        (
            json!({"description": "d", "quantity": "1", "unit_amount": 1.5}),
            "lines[0].unit_amount",
            "send unit_amount as a decimal string",
        ),
        (
            json!({"description": "d", "quantity": "1", "unit_amount_minor": 1.5}),
            "lines[0].unit_amount_minor",
            "send unit_amount_minor as an integer",
        ),
    ] {
        let mut body = crate::helpers::invoice_body(&b);
        body["lines"] = json!([line]);
        let problem = send(
            &app,
            Method::POST,
            "/v1/invoices",
            Some(&b.org.agent_key),
            &with_key(body, "floats"),
            StatusCode::BAD_REQUEST,
            "float_not_allowed",
        )
        .await;
        assert_eq!(problem.body["field"], field);
        let detail = problem.detail.as_str();
        assert!(detail.contains(hint), "{detail}");
    }
}

async fn a_body_with_hundreds_of_errors_gets_one_bounded_answer(app: TestApp) {
    let b = app.billing().await;
    // 100 lines with three rule errors each: 300 problems, one answer of at most 100.
    let mut body = crate::helpers::invoice_body(&b);
    body["lines"] = json!(vec![
        json!({"description": " ", "unit_amount_minor": -1});
        100
    ]);
    let problem = send(
        &app,
        Method::POST,
        "/v1/invoices",
        Some(&b.org.agent_key),
        &with_key(body, "many-errors"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors.len(), 100);

    // Far over the maximum, the lines are not checked one by one at all.
    let mut body = crate::helpers::invoice_body(&b);
    body["lines"] = json!(vec![json!({}); 20_000]);
    let problem = send(
        &app,
        Method::POST,
        "/v1/invoices",
        Some(&b.org.agent_key),
        &with_key(body, "far-too-many"),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.fields(), ["lines"]);
    assert_eq!(problem.errors[0].code, "invalid_line_count");
}

/// Client text is echoed shortened: a problem that repeated a 600 KiB member name or value in
/// full (in `field`, `detail` and `errors[]`) grew past what the problem middleware reads back,
/// and the client got a bare `bad_request` without its `field`.
async fn a_huge_unknown_member_or_wrong_value_keeps_its_code_and_field(app: TestApp) {
    let org = app.org().await;
    let token = org.approver_token.as_str();
    let huge = "k".repeat(600 * 1024);
    let before = written(&app).await;

    let res = app
        .patch("/v1/organisation", token, json!({ huge.clone(): true }))
        .await;
    let problem = expect_problem(res, StatusCode::BAD_REQUEST, "unknown_field").await;
    let field = problem.body["field"].as_str().expect("field");
    assert!(field.starts_with("kkkk") && field.ends_with('…'), "{field}");
    assert!(field.chars().count() < 1_000);
    assert_eq!(problem.errors[0].code, "unknown_field");
    assert!(problem.to_string().len() < 16 * 1024);

    let res = app
        .patch("/v1/organisation", token, json!({"four_eyes": huge}))
        .await;
    let problem = expect_problem(res, StatusCode::BAD_REQUEST, "invalid_type").await;
    assert_eq!(problem.body["field"], "four_eyes");
    assert_eq!(problem.fields(), ["four_eyes"]);
    let detail = problem.detail.as_str();
    assert!(detail.contains("expected a boolean"), "{detail}");
    assert!(problem.to_string().len() < 16 * 1024);

    assert_eq!(written(&app).await, before);
    let settings = app.get("/v1/organisation", token).await;
    let settings: Value = settings.json().await.unwrap();
    assert_eq!(settings["four_eyes"], false);
}

/// `capabilities` on `POST /v1/agents` is bounded like every list the API takes: over 8 entries
/// it is refused whole, with one error, before any entry is read.
async fn a_capability_list_over_its_maximum_is_refused_before_its_entries(app: TestApp) {
    let org = app.org().await;
    let token = org.approver_token.as_str();
    let before = written(&app).await;
    for count in [9, 20_000] {
        let problem = send(
            &app,
            Method::POST,
            "/v1/agents",
            Some(token),
            &json!({"name": "Many", "capabilities": vec!["root"; count]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem.fields(), ["capabilities"], "{count}");
        assert_eq!(problem.errors[0].code, "too_many_capabilities");
    }
    assert_eq!(written(&app).await, before);

    // Up to the maximum, entries are read; repeats are kept once, unknown ones named.
    let problem = send(
        &app,
        Method::POST,
        "/v1/agents",
        Some(token),
        &json!({"name": "Some", "capabilities": ["invoicing", "root", "invoicing", "admin"]}),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.fields(), ["capabilities[1]", "capabilities[3]"]);
    let res = app
        .post(
            "/v1/agents",
            token,
            json!({"name": "Eight", "capabilities": ["settlement", "settlement", "settlement", "settlement",
                "settlement", "settlement", "settlement", "settlement"]}),
        )
        .await;
    let created = crate::helpers::expect_status(res, StatusCode::CREATED).await;
    assert_eq!(created["agent"]["capabilities"], json!(["settlement"]));
}
