//! One answer names every mistake (docs/contract/api.md Errors): once a body parses as a JSON
//! object, its shape errors (a float where a decimal string belongs, a wrong type, an unknown
//! member) and its value errors (a missing member, an unknown currency, a bad date, a length)
//! come in one answer: 400 with the first shape code when there is a shape error, and
//! `errors[]` listing every problem. REST and MCP answer alike. A body that is not JSON, or not
//! an object, still stops before its shape. Nothing is written by any of these requests.

use crate::helpers::{
    Billing, Problem, TestApp, both_backends, expect_problem, id_of, invoice_body,
};
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

both_backends!(
    the_issues_three_mistakes_come_in_one_answer,
    every_shape_and_value_mistake_of_a_create_comes_in_one_answer,
    a_body_that_is_not_a_json_object_still_stops_before_its_shape,
    a_sign_ins_field_rules_come_with_its_shape_errors,
    a_revise_hears_every_mistake_of_its_body_at_once,
    a_password_changes_field_rules_come_with_its_shape_errors,
    customers_agents_and_invitations_hear_their_field_rules_with_their_shape_errors,
    a_destinations_field_rules_come_with_its_payees_rules,
);

type Client = RunningService<RoleClient, ()>;

async fn connect(app: &TestApp, key: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(key);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP client connects")
}

/// The problem `create_invoice_draft` answers `args` with, without its request id.
async fn mcp_problem(client: &Client, args: &Value) -> Value {
    let Value::Object(args) = args.clone() else {
        panic!("arguments are an object");
    };
    let result = client
        .call_tool(
            CallToolRequestParams::new("create_invoice_draft".to_owned()).with_arguments(args),
        )
        .await
        .expect("tools/call answered");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let mut problem = result.structured_content.expect("structured content");
    problem.as_object_mut().unwrap().remove("request_id");
    problem
}

/// The problem `POST /v1/invoices` answers `body` with, asserting its status and code.
/// Its `body` is without the request id.
async fn rest_problem(app: &TestApp, b: &Billing, body: &Value, code: &str) -> Problem {
    let key = body["idempotency_key"].as_str().unwrap_or("one-answer");
    let res = app.create_invoice(&b.org.agent_key, key, body).await;
    let mut problem = expect_problem(res, StatusCode::BAD_REQUEST, code).await;
    problem.body.as_object_mut().unwrap().remove("request_id");
    problem
}

/// `(field, code)` of every entry of `errors[]`, sorted.
fn entries(problem: &Problem) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = problem
        .errors
        .iter()
        .map(|e| (e.field.clone(), e.code.clone()))
        .collect();
    out.sort();
    out
}

/// The 422 `validation_failed` problem+json of a refused request.
async fn refused(res: reqwest::Response) -> Problem {
    expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await
}

/// A 422 `validation_failed` listing exactly `expected` (field, code) pairs, in any order; the
/// problem, for what a test checks next.
async fn refused_listing(res: reqwest::Response, expected: &[(&str, &str)]) -> Problem {
    let problem = refused(res).await;
    assert_eq!(entries(&problem), pairs(expected), "{problem}");
    problem
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .iter()
        .map(|(f, c)| ((*f).to_owned(), (*c).to_owned()))
        .collect();
    out.sort();
    out
}

/// The issue's example (Tauros #27 item 1): a JSON number for an amount, no due date and an
/// unknown currency took two answers; they come in one.
async fn the_issues_three_mistakes_come_in_one_answer(app: TestApp) {
    let b = app.billing().await;
    let before = app.invoice_rows().await;
    let mut body = invoice_body(&b);
    body["lines"][0]["unit_amount"] = json!(400.5);
    body.as_object_mut().unwrap().remove("due_date");
    body["currency"] = json!("XQZ");
    body["idempotency_key"] = json!("three-mistakes");

    let problem = rest_problem(&app, &b, &body, "float_not_allowed").await;
    assert_eq!(problem.status, 400);
    assert_eq!(problem.body["field"], "lines[0].unit_amount");
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("currency", "unknown_currency"),
            ("due_date", "required"),
            ("lines[0].unit_amount", "float_not_allowed"),
        ]),
        "{problem}"
    );
    let detail = problem.detail.as_str();
    assert!(detail.contains("3 problems"), "{detail}");

    // MCP answers the same arguments with the same problem.
    let client = connect(&app, &b.org.agent_key).await;
    assert_eq!(mcp_problem(&client, &body).await, problem.body);
    // Without its key (an argument over MCP), the same answer lists the key too.
    body.as_object_mut().unwrap().remove("idempotency_key");
    let keyless = Problem::from_body(mcp_problem(&client, &body).await);
    assert_eq!(keyless.code, "float_not_allowed");
    assert_eq!(
        entries(&keyless),
        pairs(&[
            ("currency", "unknown_currency"),
            ("due_date", "required"),
            ("idempotency_key", "required"),
            ("lines[0].unit_amount", "float_not_allowed"),
        ]),
        "{keyless}"
    );
    client.cancel().await.expect("closes");
    assert_eq!(app.invoice_rows().await, before);
}

/// Every pair (shape mistake, value mistake) in one create is answered at once: a 400 with the
/// shape's code, listing both, on REST and MCP alike.
async fn every_shape_and_value_mistake_of_a_create_comes_in_one_answer(app: TestApp) {
    type Edit = fn(&mut Value);
    let b = app.billing().await;
    let before = app.invoice_rows().await;
    let shapes: [(&str, &str, Edit); 5] = [
        ("lines[0].unit_amount", "float_not_allowed", |v| {
            v["lines"][0]["unit_amount"] = json!(400.5);
        }),
        ("lines[1].quantity", "float_not_allowed", |v| {
            v["lines"][1]["quantity"] = json!(2.0);
        }),
        ("customer_id", "invalid_type", |v| {
            v["customer_id"] = json!(5);
        }),
        ("reasoning", "invalid_type", |v| {
            v["reasoning"] = json!(["why"]);
        }),
        ("colour", "unknown_field", |v| {
            v["colour"] = json!("blue");
        }),
    ];
    let values: [(&str, &str, Edit); 6] = [
        ("due_date", "required", |v| {
            v.as_object_mut().unwrap().remove("due_date");
        }),
        ("due_date", "invalid_date", |v| {
            v["due_date"] = json!("31/01/2030");
        }),
        ("currency", "unknown_currency", |v| {
            v["currency"] = json!("XQZ");
        }),
        ("payment_destination_id", "required", |v| {
            v.as_object_mut().unwrap().remove("payment_destination_id");
        }),
        ("lines[1].description", "invalid_length", |v| {
            v["lines"][1]["description"] = json!("d".repeat(501));
        }),
        ("lines[0].unit_amount", "too_many_decimals", |v| {
            v["lines"][0]["unit_amount"] = json!("1.001");
        }),
    ];
    let client = connect(&app, &b.org.agent_key).await;
    for (shape_field, shape_code, shape) in shapes {
        for (value_field, value_code, value) in values {
            if shape_field == value_field {
                continue; // one member cannot be both wrong in shape and in value
            }
            let mut body = invoice_body(&b);
            body["idempotency_key"] = json!("pairs");
            value(&mut body);
            shape(&mut body);
            let case = format!("{shape_code} at {shape_field} × {value_code} at {value_field}");
            let problem = rest_problem(&app, &b, &body, shape_code).await;
            assert_eq!(problem.body["field"], shape_field, "{case}: {problem}");
            assert_eq!(
                entries(&problem),
                pairs(&[(shape_field, shape_code), (value_field, value_code)]),
                "{case}: {problem}"
            );
            assert_eq!(mcp_problem(&client, &body).await, problem.body, "{case}");
        }
    }
    client.cancel().await.expect("closes");
    assert_eq!(app.invoice_rows().await, before);
}

async fn a_body_that_is_not_a_json_object_still_stops_before_its_shape(app: TestApp) {
    let b = app.billing().await;
    let before = app.invoice_rows().await;
    for (text, code) in [
        // Not JSON: nothing after the syntax error is looked at.
        (
            r#"{"customer_id": 5, "due_date": 1.5, "lines": ["#,
            "invalid_json",
        ),
        // JSON, but not an object: one error about the body.
        (r#"[{"customer_id": 5}, 1.5]"#, "invalid_type"),
    ] {
        let res = app
            .create_invoice_text(&b.org.agent_key, "not-an-object", text)
            .await;
        let problem = expect_problem(res, StatusCode::BAD_REQUEST, code).await;
        assert!(problem.body.get("errors").is_none(), "{problem}");
    }
    assert_eq!(app.invoice_rows().await, before);
}

/// A route whose rules are all the body's own (`validator` rules on `SignInRequest`): its value
/// errors come with its shape errors, and alone they are one 422 before any work.
async fn a_sign_ins_field_rules_come_with_its_shape_errors(app: TestApp) {
    let long_email = format!("{}@example.com", "a".repeat(250));
    let res = app
        .client
        .post(app.url("/v1/sessions"))
        .json(&json!({"email": long_email, "organisation": 5, "remember": true}))
        .send()
        .await
        .unwrap();
    let problem = expect_problem(res, StatusCode::BAD_REQUEST, "invalid_type").await;
    assert_eq!(problem.body["field"], "organisation");
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("email", "email_too_long"),
            ("organisation", "invalid_type"),
            ("password", "required"),
            ("remember", "unknown_field"),
        ]),
        "{problem}"
    );

    let res = app
        .client
        .post(app.url("/v1/sessions"))
        .json(&json!({
            "email": long_email,
            "password": "p".repeat(1025),
            "organisation": "o".repeat(161),
        }))
        .send()
        .await
        .unwrap();
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("email", "email_too_long"),
            ("organisation", "organisation_too_long"),
            ("password", "password_too_long"),
        ]),
        "{problem}"
    );
    let detail = problem.errors[0].detail.as_str();
    assert!(detail.contains("at most"), "{detail}");

    // Accepting an invitation: the same, before any token is looked up.
    let res = app
        .client
        .post(app.url("/v1/invitations/accept"))
        .json(&json!({"invitation_token": 5, "password": "short"}))
        .send()
        .await
        .unwrap();
    let problem = expect_problem(res, StatusCode::BAD_REQUEST, "invalid_type").await;
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("invitation_token", "invalid_type"),
            ("password", "password_too_short"),
        ]),
        "{problem}"
    );
}

/// Changing one's password: the field rules (`validator` on `ChangePasswordRequest`) come with
/// the shape errors, and alone in one 422 before the current password is checked.
async fn a_password_changes_field_rules_come_with_its_shape_errors(app: TestApp) {
    let b = app.billing().await;
    let token = b.org.approver_token.as_str();
    let problem = expect_problem(
        app.post(
            "/v1/me/password",
            token,
            json!({"current_password": "p".repeat(1025), "new_password": 5, "extra": 1}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("current_password", "password_too_long"),
            ("extra", "unknown_field"),
            ("new_password", "invalid_type"),
        ]),
        "{problem}"
    );
    refused_listing(
        app.post(
            "/v1/me/password",
            token,
            json!({"current_password": "wrong but short", "new_password": "short"}),
        )
        .await,
        &[("new_password", "password_too_short")],
    )
    .await;
}

/// A revise's body is read like a create's: a float, a bad date and a missing reasoning come in
/// one answer; a member a revise may omit is not reported missing. Nothing is written.
async fn a_revise_hears_every_mistake_of_its_body_at_once(app: TestApp) {
    let b = app.billing().await;
    let draft = app.draft(&b, "revise-once").await;
    let before = app.invoice_rows().await;
    let body = json!({
        "due_date": "2030-13-01",
        "lines": [{"description": "a", "quantity": 1.5, "unit_amount": "1"}],
    });
    let res = app
        .command(&b.org.agent_key, id_of(&draft), "revise", body)
        .await;
    let problem = expect_problem(res, StatusCode::BAD_REQUEST, "float_not_allowed").await;
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("due_date", "invalid_date"),
            ("lines[0].quantity", "float_not_allowed"),
            ("reasoning", "required"),
        ]),
        "{problem}"
    );
    assert_eq!(app.invoice_rows().await, before);
}

/// Rows a refused customer, agent or invitation body could have written.
async fn people_rows(app: &TestApp) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in ["customers", "agents", "users", "audit_events"] {
        counts.push(
            app.sql_count(&format!("select count(*) from {table}"))
                .await,
        );
    }
    counts
}

/// Customers, agents and invitations: their field rules (`validator` on the request types: a
/// required member, a name of 1–160 characters of clean text, a valid email) come with their
/// shape errors, and alone in one 422 before any work; what the domain parses (capability
/// names) comes with them. Nothing is written.
async fn customers_agents_and_invitations_hear_their_field_rules_with_their_shape_errors(
    app: TestApp,
) {
    let b = app.billing().await;
    let token = b.org.approver_token.as_str();
    let before = people_rows(&app).await;

    // A customer: a blank name and a bad email beside an unknown member.
    let problem = expect_problem(
        app.post(
            "/v1/customers",
            token,
            json!({"agent_id": b.org.agent_id, "name": "  ", "email": "not an email", "vip": true}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(
        entries(&problem),
        pairs(&[
            ("email", "invalid_email"),
            ("name", "required"),
            ("vip", "unknown_field"),
        ]),
        "{problem}"
    );
    // Alone: a missing agent and a name over 160 characters, one 422.
    let problem = refused_listing(
        app.post(
            "/v1/customers",
            token,
            json!({"name": "n".repeat(161), "email": "billing@example.com"}),
        )
        .await,
        &[("agent_id", "required"), ("name", "too_long")],
    )
    .await;
    let detail = problem.errors[1].detail.as_str();
    assert!(detail.contains("`name` must be at most 160"), "{detail}");
    // A change: a hidden character in the name, an email without `@`.
    let problem = refused_listing(
        app.patch(
            &format!("/v1/customers/{}", b.customer_id),
            token,
            json!({"name": "Acme\u{202E}Inc", "email": "billing.example.com"}),
        )
        .await,
        &[("email", "invalid_email"), ("name", "invalid_characters")],
    )
    .await;
    let detail = problem.errors[1].detail.as_str();
    assert!(detail.starts_with("`name` holds"), "{detail}");

    // An agent: an empty name and an unknown capability, in one answer.
    refused_listing(
        app.post(
            "/v1/agents",
            token,
            json!({"name": "", "capabilities": ["invoicing", "payroll"]}),
        )
        .await,
        &[("capabilities[1]", "invalid_value"), ("name", "required")],
    )
    .await;
    refused_listing(
        app.patch(
            &format!("/v1/agents/{}", b.org.agent_id),
            token,
            json!({"name": "a".repeat(161)}),
        )
        .await,
        &[("name", "too_long")],
    )
    .await;

    // An invitation: a bad email beside a role of the wrong type; alone, with no role.
    let problem = expect_problem(
        app.post("/v1/users", token, json!({"email": "ops", "role": 5}))
            .await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(
        entries(&problem),
        pairs(&[("email", "invalid_email"), ("role", "invalid_type")]),
        "{problem}"
    );
    refused_listing(
        app.post("/v1/users", token, json!({"email": " ops@ex ample.com "}))
            .await,
        &[("email", "invalid_email"), ("role", "required")],
    )
    .await;
    assert_eq!(people_rows(&app).await, before);

    // The checked values are trimmed as before.
    let res = app
        .post(
            "/v1/customers",
            token,
            json!({"agent_id": b.org.agent_id, "name": "  Trimmed Ltd ", "email": " t@example.com "}),
        )
        .await;
    let customer = crate::helpers::expect_status(res, StatusCode::CREATED).await;
    assert_eq!(customer["name"], "Trimmed Ltd");
    assert_eq!(customer["email"], "t@example.com");
}

/// A payment destination: its label and the presence of every member are the request type's
/// rules (`validator`), its payee (currency, network, address) the domain's; a body refused for
/// either hears both, in one answer. Nothing is written.
async fn a_destinations_field_rules_come_with_its_payees_rules(app: TestApp) {
    let b = app.billing().await;
    let key = b.org.agent_key.as_str();
    let before = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    refused_listing(
        app.post(
            "/v1/payment-destinations",
            key,
            json!({"label": "Ops\u{200B}", "currency": "EURO", "network": "iban"}),
        )
        .await,
        &[
            ("address", "required"),
            ("currency", "unknown_currency"),
            ("label", "invalid_characters"),
        ],
    )
    .await;
    let problem = expect_problem(
        app.post(
            "/v1/payment-destinations",
            key,
            json!({"label": 5, "currency": "EURO", "network": "iban", "address": "DE89"}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(
        entries(&problem),
        pairs(&[("currency", "unknown_currency"), ("label", "invalid_type")]),
        "{problem}"
    );
    // Right in itself, the body still hears the payee's rules (the use case's answer).
    let problem = refused(
        app.post(
            "/v1/payment-destinations",
            key,
            json!({"label": "  Ops  ", "currency": "EUR", "network": "iban", "address": "DE00"}),
        )
        .await,
    )
    .await;
    assert_eq!(problem.fields(), ["address"], "{problem}");
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations")
            .await,
        before
    );
}
