//! The MCP tool surface (`/mcp`), driven by a real MCP client (rmcp over streamable HTTP):
//! the reviewed tool list, an agent's whole journey, arguments as strict as REST with the same
//! problems, no existence oracle, capabilities, agents only, the Origin check, turning it off,
//! and the audit trail saying `mcp`.

use crate::helpers::settlement::{event_from, issued, settlement_key};
use crate::helpers::{
    Backend, Billing, IBAN, TestApp, both_backends, error_fields, expect_problem, expect_status,
    invoice_body, spawn_app_with, uuid_of, without_request_id,
};
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tauros_api::HttpConfig;
use tauros_api::mcp::McpConfig;
use tauros_app::AppConfig;
use uuid::Uuid;

/// The reviewed list, spelled out: adding a tool must change this test too. No tool approves,
/// rejects, requests changes, cancels, manages agents or keys, or changes settings.
const TOOLS: [&str; 13] = [
    "whoami",
    "list_customers",
    "list_payment_destinations",
    "create_payment_destination",
    "deactivate_payment_destination",
    "list_invoices",
    "get_invoice",
    "preview_invoice",
    "create_invoice_draft",
    "revise_invoice",
    "submit_invoice",
    "withdraw_invoice",
    "record_settlement_event",
];

pub(crate) type Client = RunningService<RoleClient, ()>;

/// An MCP client connected to `/mcp` with `key` as its bearer credential.
pub(crate) async fn connect(app: &TestApp, key: &str) -> Client {
    try_connect(app, key).await.expect("MCP client connects")
}

async fn try_connect(app: &TestApp, key: &str) -> Result<Client, String> {
    let config = StreamableHttpClientTransportConfig::with_uri(app.url("/mcp")).auth_header(key);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|e| e.to_string())
}

pub(crate) async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("tools/call answered")
}

/// The tool's answer; it must have succeeded.
pub(crate) async fn ok(client: &Client, tool: &str, args: Value) -> Value {
    let result = call(client, tool, args).await;
    assert_eq!(result.is_error, Some(false), "{tool}: {result:?}");
    let value = result.structured_content.expect("structured content");
    // The JSON comes once; the text is a summary that names every id a next call takes.
    assert_eq!(result.content.len(), 1, "{tool}");
    let text = &result.content[0].as_text().expect("text").text;
    assert!(
        serde_json::from_str::<Value>(text).is_err(),
        "{tool}: {text}"
    );
    for id in ids_a_next_call_takes(&value) {
        assert!(text.contains(&id), "{tool}: {id} in {text}");
    }
    value
}

/// The ids in a tool's answer that a next call may take: the invoice's, the destination's,
/// every listed item's, and a next page's cursor. A settlement answer's matched invoice is named
/// by its number when it has one: a feed's next call never takes the invoice's id.
fn ids_a_next_call_takes(value: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    let mut take = |v: &Value| {
        if let Some(s) = v.as_str() {
            ids.push(s.to_owned());
        }
    };
    // An invoice view (a settlement answer names its matched invoice by number instead).
    if value["invoice"]["current_revision"].is_object() {
        take(&value["invoice"]["id"]);
    }
    take(&value["payment_destination"]["id"]);
    take(&value["next_cursor"]);
    take(&value["events_next_cursor"]);
    if value["kind"].is_string() {
        take(&value["id"]);
    }
    for item in value["items"].as_array().into_iter().flatten() {
        take(&item["id"]);
    }
    ids
}

/// The tool's problem; it must have been refused with `code`.
pub(crate) async fn refused(client: &Client, tool: &str, args: Value, code: &str) -> Value {
    let result = call(client, tool, args).await;
    assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
    let problem = result.structured_content.expect("structured content");
    assert_eq!(problem["code"], code, "{tool}: {problem}");
    // The text names the code and every field error, without repeating the JSON.
    let text = &result.content[0].as_text().expect("text").text;
    assert!(text.contains(code), "{text}");
    for e in problem["errors"].as_array().into_iter().flatten() {
        let field = e["field"].as_str().unwrap();
        assert!(text.contains(&format!("- {field} (")), "{field} in {text}");
    }
    assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
    assert!(problem["request_id"].as_str().is_some(), "{problem}");
    problem
}

/// A REST answer as a tool answers it (docs/MCP.md, "Answers and errors"), the rule written
/// out again: no null members, no `agent_id` (always the caller's), no `_minor` twin beside its decimal string, no
/// `canonical_payload` in an invoice's current revision.
pub(crate) fn compacted(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(members) => {
                let keys: Vec<String> = members.keys().cloned().collect();
                for key in keys {
                    let twin = key
                        .strip_suffix("_minor")
                        .is_some_and(|major| members.get(major).is_some_and(Value::is_string));
                    if members[&key].is_null() || twin || key == "agent_id" {
                        members.remove(&key);
                    }
                }
                if let Some(revision) = members.get_mut("current_revision") {
                    revision
                        .as_object_mut()
                        .unwrap()
                        .remove("canonical_payload");
                }
                members.values_mut().for_each(walk);
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

/// A problem without its request id, for comparing two answers.
pub(crate) fn comparable(mut problem: Value) -> Value {
    problem.as_object_mut().unwrap().remove("request_id");
    problem
}

/// A REST answer's problem, comparable with a tool's.
async fn rest_problem(res: reqwest::Response) -> Value {
    without_request_id(res).await.1
}

/// The create arguments of the test fixture, with an idempotency key.
fn draft_args(b: &Billing, key: &str) -> Value {
    let mut args = invoice_body(b);
    args["idempotency_key"] = json!(key);
    args
}

/// A raw JSON-RPC POST to `/mcp` with `token` and extra headers; the answer as sent.
async fn raw(app: &TestApp, token: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.expect("request")
}

both_backends!(
    initialises_and_lists_exactly_the_reviewed_tools,
    an_agent_proposes_and_submits_an_invoice_end_to_end,
    get_invoice_shows_the_changes_an_approver_requested_over_rest,
    a_retried_create_replays_and_a_changed_one_conflicts,
    a_float_in_money_is_refused_as_rest_refuses_it,
    unknown_arguments_are_refused_naming_the_accepted_ones,
    a_foreign_id_is_answered_like_an_unknown_one,
    a_revision_id_passed_as_the_invoice_id_is_named_as_rest_names_it,
    the_waiting_for_you_filter_and_the_current_flag_over_mcp,
    a_settlement_only_key_is_refused_on_invoicing_tools,
    a_settlement_key_reports_payments_and_only_it,
    a_human_session_is_refused,
    commands_through_mcp_are_audited_as_mcp,
    answers_carry_the_json_once_and_a_summary_naming_the_next_step,
);
both_backends!(backend: a_browser_origin_must_be_configured, mcp_turned_off_is_not_found);

async fn initialises_and_lists_exactly_the_reviewed_tools(app: TestApp) {
    let org = app.org().await;
    let client = connect(&app, &org.agent_key).await;
    let info = client.peer_info().expect("initialised");
    assert_eq!(
        info.server_info.as_ref().expect("server info").name,
        "tauros"
    );
    assert!(info.capabilities.tools.is_some());
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains("No tool approves"), "{instructions}");

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOLS);
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}", tool.name);
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
        assert!(!schema.to_string().contains("\"$ref\""), "{}", tool.name);
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 80));
    }
    let draft = tools
        .iter()
        .find(|t| t.name == "create_invoice_draft")
        .unwrap();
    assert!(
        draft.input_schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("idempotency_key"))
    );
    let whoami = ok(&client, "whoami", json!({})).await;
    assert_eq!(whoami["kind"], "agent");
    assert_eq!(uuid_of(&whoami["id"]), org.agent_id);
    client.cancel().await.expect("closes");
}

async fn an_agent_proposes_and_submits_an_invoice_end_to_end(app: TestApp) {
    let org = app.org().await;
    let customer_id = app
        .customer(&org.approver_token, org.agent_id, "Acme Inc")
        .await;
    let client = connect(&app, &org.agent_key).await;

    let customers = ok(&client, "list_customers", json!({})).await;
    assert_eq!(uuid_of(&customers["items"][0]["id"]), customer_id);
    assert_eq!(customers["next_cursor"], Value::Null);
    let created = ok(
        &client,
        "create_payment_destination",
        json!({"label": "Operating account", "currency": "EUR", "network": "iban",
               "address": IBAN, "idempotency_key": "dest-1"}),
    )
    .await;
    assert_eq!(created["replayed"], false);
    let destination_id = uuid_of(&created["payment_destination"]["id"]);
    let again = ok(
        &client,
        "create_payment_destination",
        json!({"label": "Operating account", "currency": "EUR", "network": "iban",
               "address": IBAN, "idempotency_key": "dest-1"}),
    )
    .await;
    assert_eq!(again["replayed"], true);
    assert_eq!(uuid_of(&again["payment_destination"]["id"]), destination_id);
    let active = ok(
        &client,
        "list_payment_destinations",
        json!({"state": "active"}),
    )
    .await;
    assert_eq!(active["items"].as_array().unwrap().len(), 1);

    let b = Billing {
        org,
        customer_id,
        destination_id,
    };
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "inv-1")).await;
    assert_eq!(draft["replayed"], false);
    assert_eq!(draft["invoice"]["state"], "draft");
    assert_eq!(draft["invoice"]["current_revision"]["total"], "1200.00");
    let id = draft["invoice"]["id"].as_str().unwrap().to_owned();

    let revised = ok(
        &client,
        "revise_invoice",
        json!({"id": id, "reasoning": "One more workshop day, as agreed by phone.",
               "lines": [{"description": "Workshop", "quantity": "3", "unit_amount": "400.50"}]}),
    )
    .await;
    assert_eq!(revised["invoice"]["revision_count"], 2);
    assert_eq!(revised["invoice"]["current_revision"]["total"], "1201.50");
    let submitted = ok(&client, "submit_invoice", json!({"id": id})).await;
    assert_eq!(submitted["invoice"]["state"], "pending_approval");
    assert_eq!(submitted["replayed"], false);
    let resubmitted = ok(&client, "submit_invoice", json!({"id": id})).await;
    assert_eq!(resubmitted["replayed"], true);

    let history = ok(&client, "get_invoice", json!({"id": id, "history": true})).await;
    assert_eq!(history["invoice"]["state"], "pending_approval");
    assert_eq!(history["revisions"].as_array().unwrap().len(), 2);
    assert_eq!(history["decisions"], json!([]));
    let actions: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create_draft", "revise", "submit"]);
    let mine = ok(
        &client,
        "list_invoices",
        json!({"state": "pending_approval", "limit": 10}),
    )
    .await;
    assert_eq!(mine["items"][0]["id"], id.as_str());

    // The human sees it in the inbox, exactly as REST shows it.
    let inbox = app
        .get("/v1/invoices?state=pending_approval", &b.org.approver_token)
        .await;
    let inbox = expect_status(inbox, StatusCode::OK).await;
    assert_eq!(compacted(inbox["items"][0].clone()), history["invoice"]);

    // No tool reaches authority: those names are not tools, and the invoice stays pending.
    for tool in [
        "approve_invoice",
        "reject_invoice",
        "cancel_invoice",
        "create_agent",
    ] {
        let Value::Object(args) = json!({"id": id}) else {
            unreachable!()
        };
        let answer = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
            .await;
        let error = answer.expect_err("not a tool").to_string();
        assert!(error.contains("no tool is named"), "{error}");
    }
    assert_eq!(
        app.invoice(&b.org.approver_token, &id).await["state"],
        "pending_approval"
    );
    assert_eq!(app.decisions(&b.org.approver_token, &id).await.len(), 0);

    let withdrawn = ok(&client, "withdraw_invoice", json!({"id": id})).await;
    assert_eq!(withdrawn["invoice"]["state"], "cancelled");
    let gone = ok(
        &client,
        "deactivate_payment_destination",
        json!({"id": destination_id}),
    )
    .await;
    assert_eq!(gone["state"], "deactivated");
    client.cancel().await.expect("closes");
}

/// The agent's way back from a human's "not like this": get_invoice shows the decision made
/// over REST, with its reason and the revision it named, exactly as REST lists it.
async fn get_invoice_shows_the_changes_an_approver_requested_over_rest(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "sent-back")).await;
    let id = draft["invoice"]["id"].as_str().unwrap().to_owned();
    let pending = ok(&client, "submit_invoice", json!({"id": id})).await["invoice"].clone();
    let first_revision = pending["current_revision"]["id"].clone();

    let reason = "Split the workshop line into the two days it took.";
    let res = app
        .command(
            &b.org.approver_token,
            &id,
            "request-changes",
            TestApp::decision_body(&pending, Some(reason)),
        )
        .await;
    expect_status(res, StatusCode::OK).await;

    let history = ok(&client, "get_invoice", json!({"id": id, "history": true})).await;
    assert_eq!(history["invoice"]["state"], "draft");
    let decisions = history["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 1, "{history}");
    assert_eq!(decisions[0]["decision"], "changes_requested");
    assert_eq!(decisions[0]["reason"], reason);
    assert_eq!(decisions[0]["revision_id"], first_revision);
    assert_eq!(
        decisions[0]["payload_hash"],
        pending["current_revision"]["payload_hash"]
    );
    assert_eq!(
        Value::from(decisions.clone()),
        compacted(Value::from(app.decisions(&b.org.approver_token, &id).await)),
        "MCP and REST list the same decision"
    );
    let actions: Vec<&str> = history["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create_draft", "submit", "request_changes"]);

    // What the description says to do next: revise, submit again; the decision stays with
    // the revision it was made on.
    ok(
        &client,
        "revise_invoice",
        json!({"id": id, "reasoning": "Split the workshop into its two days.",
               "lines": [{"description": "Workshop, day 1", "quantity": "1", "unit_amount": "600"},
                         {"description": "Workshop, day 2", "quantity": "1", "unit_amount": "600"}]}),
    )
    .await;
    let resubmitted = ok(&client, "submit_invoice", json!({"id": id})).await;
    assert_eq!(resubmitted["invoice"]["state"], "pending_approval");
    let history = ok(&client, "get_invoice", json!({"id": id, "history": true})).await;
    assert_eq!(history["revisions"].as_array().unwrap().len(), 2);
    assert_eq!(history["decisions"].as_array().unwrap().len(), 1);
    assert_eq!(history["decisions"][0]["revision_id"], first_revision);
    client.cancel().await.expect("closes");
}

async fn a_retried_create_replays_and_a_changed_one_conflicts(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let first = ok(&client, "create_invoice_draft", draft_args(&b, "retry-1")).await;
    let mut reworded = draft_args(&b, "retry-1");
    reworded["reasoning"] = json!("The same invoice, explained again after a timeout.");
    reworded["lines"][0]["unit_amount"] = json!("400.00");
    let replay = ok(&client, "create_invoice_draft", reworded).await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["invoice"]["id"], first["invoice"]["id"]);
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);

    let mut changed = draft_args(&b, "retry-1");
    changed["lines"][0]["unit_amount"] = json!("401");
    let conflict = refused(
        &client,
        "create_invoice_draft",
        changed,
        "idempotency_conflict",
    )
    .await;
    assert_eq!(conflict["status"], 409);
    assert_eq!(conflict["invoice_id"], first["invoice"]["id"]);
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);

    // The key is required, and reported with every other missing argument; nothing written.
    let missing = refused(
        &client,
        "create_invoice_draft",
        json!({"currency": "EUR"}),
        "validation_failed",
    )
    .await;
    let fields: Vec<&str> = missing["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields[0], "idempotency_key");
    for field in [
        "customer_id",
        "payment_destination_id",
        "due_date",
        "lines",
        "reasoning",
    ] {
        assert!(fields.contains(&field), "{field}: {missing}");
    }
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);
    client.cancel().await.expect("closes");
}

async fn a_float_in_money_is_refused_as_rest_refuses_it(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let mut args = draft_args(&b, "float-1");
    args["lines"][0]["unit_amount"] = json!(400.5);
    let problem = refused(
        &client,
        "create_invoice_draft",
        args.clone(),
        "float_not_allowed",
    )
    .await;
    assert_eq!(problem["status"], 400);
    assert_eq!(problem["field"], "lines[0].unit_amount");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("decimal string"), "{detail}");

    // REST answers the same body with the same problem.
    let res = app.create_invoice(&b.org.agent_key, "float-1", &args).await;
    assert_eq!(rest_problem(res).await, comparable(problem));

    // Minor units too, inside a revise.
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "float-2")).await;
    let problem = refused(
        &client,
        "revise_invoice",
        json!({"id": draft["invoice"]["id"], "reasoning": "r",
               "lines": [{"description": "a", "quantity": "1", "unit_amount_minor": 1050.0}]}),
        "float_not_allowed",
    )
    .await;
    assert_eq!(problem["field"], "lines[0].unit_amount_minor");
    assert_eq!(app.invoice_rows().await, [1, 1, 0, 1]);
    client.cancel().await.expect("closes");
}

async fn unknown_arguments_are_refused_naming_the_accepted_ones(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "unknown-1")).await;
    let id = draft["invoice"]["id"].as_str().unwrap();

    let problem = refused(
        &client,
        "submit_invoice",
        json!({"id": id, "state": "approved"}),
        "unknown_field",
    )
    .await;
    assert_eq!(problem["status"], 400);
    assert_eq!(problem["field"], "state");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("expected `id`"),
        "{problem}"
    );
    let problem = refused(
        &client,
        "revise_invoice",
        json!({"id": id, "reasoning": "r", "payload_hash": "0".repeat(64)}),
        "unknown_field",
    )
    .await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("`id`, `reasoning`, `customer_id`"),
        "{detail}"
    );
    assert_eq!(
        app.invoice(&b.org.approver_token, id).await["state"],
        "draft"
    );

    // A create's arguments are REST's body: the same answer, word for word.
    let mut args = draft_args(&b, "unknown-2");
    args["total_minor"] = json!(1);
    args["lines"][1]["amount"] = json!("800.00");
    let problem = refused(
        &client,
        "create_invoice_draft",
        args.clone(),
        "unknown_field",
    )
    .await;
    assert_eq!(problem["errors"].as_array().unwrap().len(), 2);
    let res = app
        .create_invoice(&b.org.agent_key, "unknown-2", &args)
        .await;
    assert_eq!(rest_problem(res).await, comparable(problem));

    // A bad id is a type error on `id`, never a panic or a 500.
    let problem = refused(
        &client,
        "get_invoice",
        json!({"id": "invoice-1"}),
        "invalid_type",
    )
    .await;
    assert_eq!(problem["field"], "id");
    let problem = refused(&client, "get_invoice", json!({}), "validation_failed").await;
    assert_eq!(problem["errors"][0]["field"], "id");
    assert_eq!(problem["errors"][0]["code"], "required");
    refused(
        &client,
        "list_invoices",
        json!({"limit": 0}),
        "validation_failed",
    )
    .await;
    refused(&client, "whoami", json!({"verbose": true}), "unknown_field").await;
    // REST's `Idempotency-Key` header is the argument `idempotency_key` here, and named so.
    let problem = refused(
        &client,
        "create_payment_destination",
        json!({"label": "A", "currency": "EUR", "network": "iban", "address": IBAN,
               "idempotency_key": " padded"}),
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "idempotency_key");
    assert!(
        !problem["detail"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key")
    );
    client.cancel().await.expect("closes");
}

async fn a_foreign_id_is_answered_like_an_unknown_one(app: TestApp) {
    let b = app.billing().await;
    let other = app.second_agent(&b).await;
    let theirs = app.draft(&other, "theirs").await;
    let foreign = theirs["id"].as_str().unwrap();
    let unknown = Uuid::now_v7().to_string();
    let client = connect(&app, &b.org.agent_key).await;
    for tool in ["get_invoice", "submit_invoice", "withdraw_invoice"] {
        let a = refused(&client, tool, json!({"id": foreign}), "not_found").await;
        let z = refused(&client, tool, json!({"id": unknown}), "not_found").await;
        assert_eq!(a["status"], 404);
        assert_eq!(comparable(a), comparable(z), "{tool}");
    }
    let a = refused(
        &client,
        "revise_invoice",
        json!({"id": foreign, "reasoning": "mine now"}),
        "not_found",
    )
    .await;
    let z = refused(
        &client,
        "revise_invoice",
        json!({"id": unknown, "reasoning": "mine now"}),
        "not_found",
    )
    .await;
    assert_eq!(comparable(a), comparable(z));
    let a = refused(
        &client,
        "deactivate_payment_destination",
        json!({"id": other.destination_id}),
        "not_found",
    )
    .await;
    let z = refused(
        &client,
        "deactivate_payment_destination",
        json!({"id": unknown}),
        "not_found",
    )
    .await;
    assert_eq!(comparable(a), comparable(z));
    // Another agent's customer in a draft: the same 422 as a customer that does not exist.
    let mut foreign_customer = draft_args(&b, "foreign-customer");
    foreign_customer["customer_id"] = json!(other.customer_id);
    let mut unknown_customer = draft_args(&b, "unknown-customer");
    unknown_customer["customer_id"] = json!(unknown);
    let a = refused(
        &client,
        "create_invoice_draft",
        foreign_customer,
        "validation_failed",
    )
    .await;
    let z = refused(
        &client,
        "create_invoice_draft",
        unknown_customer,
        "validation_failed",
    )
    .await;
    assert_eq!(comparable(a), comparable(z));
    assert_eq!(
        app.invoice(&other.org.agent_key, foreign).await["state"],
        "draft"
    );
    client.cancel().await.expect("closes");
}

/// The revision id an agent may confuse with its invoice's: every invoice tool says what it
/// is, with the very problem REST answers; another agent's revision stays a plain not_found.
async fn a_revision_id_passed_as_the_invoice_id_is_named_as_rest_names_it(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "near")).await;
    let id = draft["invoice"]["id"].as_str().unwrap().to_owned();
    let revision = draft["invoice"]["current_revision"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let problem = refused(&client, "get_invoice", json!({"id": revision}), "not_found").await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("revision 1 of invoice {id}")),
        "{problem}"
    );
    assert_eq!(problem["invoice_id"], json!(id));
    assert_eq!(problem["id_kind"], "revision");
    let res = app
        .get(&format!("/v1/invoices/{revision}"), &b.org.agent_key)
        .await;
    assert_eq!(comparable(problem), rest_problem(res).await);
    for (tool, args) in [
        ("submit_invoice", json!({"id": revision})),
        ("withdraw_invoice", json!({"id": revision})),
        (
            "revise_invoice",
            json!({"id": revision, "reasoning": "again"}),
        ),
    ] {
        let problem = refused(&client, tool, args, "not_found").await;
        assert_eq!(problem["invoice_id"], json!(id), "{tool}: {problem}");
    }

    let other = app.second_agent(&b).await;
    let theirs = app.draft(&other, "theirs").await;
    let hidden = theirs["current_revision"]["id"].as_str().unwrap();
    let unknown = Uuid::now_v7().to_string();
    let a = refused(&client, "get_invoice", json!({"id": hidden}), "not_found").await;
    let z = refused(&client, "get_invoice", json!({"id": unknown}), "not_found").await;
    assert_eq!(comparable(a), comparable(z));
    client.cancel().await.expect("closes");
}

/// list_invoices' `decision: changes_requested` is the agent's to-do list: the invoice is on
/// it while the request is open and off it once revised; its decision says `current`.
async fn the_waiting_for_you_filter_and_the_current_flag_over_mcp(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "todo")).await;
    let id = draft["invoice"]["id"].as_str().unwrap().to_owned();
    let pending = ok(&client, "submit_invoice", json!({"id": id})).await["invoice"].clone();
    let res = app
        .command(
            &b.org.approver_token,
            &id,
            "request-changes",
            TestApp::decision_body(&pending, Some("Split the workshop line.")),
        )
        .await;
    expect_status(res, StatusCode::OK).await;
    let todo = ok(
        &client,
        "list_invoices",
        json!({"decision": "changes_requested"}),
    )
    .await;
    let items = todo["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{todo}");
    assert_eq!(items[0]["id"], json!(id));
    assert_eq!(items[0]["decision"]["current"], true);

    let revised = ok(
        &client,
        "revise_invoice",
        json!({"id": id, "due_date": "2099-12-31", "reasoning": "Split as asked."}),
    )
    .await;
    assert_eq!(revised["invoice"]["decision"]["current"], false);
    let todo = ok(
        &client,
        "list_invoices",
        json!({"decision": "changes_requested"}),
    )
    .await;
    assert_eq!(todo["items"], json!([]), "{todo}");
    let history = ok(&client, "get_invoice", json!({"id": id})).await;
    assert_eq!(history["invoice"]["decision"]["current"], false);
    client.cancel().await.expect("closes");
}

async fn a_settlement_only_key_is_refused_on_invoicing_tools(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.draft(&b, "capability").await;
    let key = settlement_key(&app, &b.org.approver_token).await;
    let client = connect(&app, &key).await;
    let me = ok(&client, "whoami", json!({})).await;
    assert_eq!(me["capabilities"], json!(["settlement"]));
    let rows = app.invoice_rows().await;
    let unknown = Uuid::now_v7().to_string();
    let calls = [
        ("list_customers", json!({})),
        ("list_payment_destinations", json!({})),
        (
            "create_payment_destination",
            json!({"label": "A", "currency": "EUR", "network": "iban", "address": IBAN}),
        ),
        ("list_invoices", json!({})),
        ("get_invoice", json!({"id": invoice["id"]})),
        ("get_invoice", json!({"id": unknown})),
        ("create_invoice_draft", draft_args(&b, "settlement")),
        (
            "revise_invoice",
            json!({"id": invoice["id"], "reasoning": "r"}),
        ),
        ("submit_invoice", json!({"id": invoice["id"]})),
        ("withdraw_invoice", json!({"id": invoice["id"]})),
    ];
    for (tool, args) in calls {
        let problem = refused(&client, tool, args, "missing_capability").await;
        assert_eq!(problem["status"], 403, "{tool}");
        assert!(problem["detail"].as_str().unwrap().contains("invoicing"));
    }
    assert_eq!(app.invoice_rows().await, rows);
    client.cancel().await.expect("closes");
}

/// A settlement event reported over MCP: recorded once (a redelivery replays), refused to an
/// invoicing key, floats refused like REST, and the invoice's payment event says `mcp`.
async fn a_settlement_key_reports_payments_and_only_it(app: TestApp) {
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let issued = issued(&app, &b, "to-pay").await;
    let id = issued["id"].as_str().unwrap().to_owned();
    let total = issued["current_revision"]["total"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = settlement_key(&app, token).await;
    let event = event_from(
        "bank-feed",
        "evt-1",
        "pay-1",
        &issued,
        &total,
        "confirmed",
        0,
    );
    // An invoicing key may not report.
    let invoicing = connect(&app, &b.org.agent_key).await;
    let problem = refused(
        &invoicing,
        "record_settlement_event",
        event.clone(),
        "missing_capability",
    )
    .await;
    assert!(problem["detail"].as_str().unwrap().contains("settlement"));
    invoicing.cancel().await.expect("closes");
    let client = connect(&app, &key).await;
    let mut float = event.clone();
    float["amount"] = json!(1200.5);
    let problem = refused(
        &client,
        "record_settlement_event",
        float,
        "float_not_allowed",
    )
    .await;
    assert_eq!(problem["field"], "amount");
    let first = ok(&client, "record_settlement_event", event.clone()).await;
    assert_eq!(first["replayed"], false);
    assert_eq!(first["invoice"]["state"], "paid");
    // A settlement answer shows the matched invoice's id, number and state only.
    let mut shown: Vec<&String> = first["invoice"].as_object().unwrap().keys().collect();
    shown.sort();
    assert_eq!(shown, ["id", "number", "state"], "{first}");
    assert!(first["payment"].get("allocated").is_none(), "{first}");
    let again = ok(&client, "record_settlement_event", event.clone()).await;
    assert_eq!(again["replayed"], true);
    // The summary names the payment, the invoice by its number, and the replay.
    let third = call(&client, "record_settlement_event", event).await;
    let text = &third.content[0].as_text().unwrap().text;
    let number = issued["number"].as_str().unwrap();
    for part in ["pay-1", number, "is paid", "replayed"] {
        assert!(text.contains(part), "{part} in {text}");
    }
    assert_eq!(
        app.sql_count("select count(*) from settlement_events")
            .await,
        1
    );
    let events = expect_status(
        app.get(&format!("/v1/invoices/{id}/events"), token).await,
        StatusCode::OK,
    )
    .await;
    // Paid in full: the move, then `paid` (invoice.paid), both over MCP.
    let items = events["items"].as_array().unwrap();
    let (applied, paid) = (&items[items.len() - 2], &items[items.len() - 1]);
    assert_eq!(applied["action"], "payment_applied");
    assert_eq!(applied["interface"], "mcp");
    assert_eq!(paid["action"], "paid");
    assert_eq!(paid["interface"], "mcp");
    client.cancel().await.expect("closes");
}

async fn a_human_session_is_refused(app: TestApp) {
    let org = app.org().await;
    let res = raw(&app, &org.approver_token, &[]).await;
    let problem = expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    assert!(problem.detail.contains("agents"));
    assert!(try_connect(&app, &org.approver_token).await.is_err());
    // No credential, or a bad one: 401 as on REST.
    let res = raw(&app, "tauros_not_a_key", &[]).await;
    let res_headers = res.headers().clone();
    expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_eq!(res_headers["www-authenticate"], "Bearer");
    // The agent's key gets through, on the same request.
    let res = raw(&app, &org.agent_key, &[]).await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(
        body["result"]["tools"].as_array().unwrap().len(),
        TOOLS.len()
    );
}

async fn commands_through_mcp_are_audited_as_mcp(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let draft = ok(&client, "create_invoice_draft", draft_args(&b, "audited")).await;
    let id = draft["invoice"]["id"].as_str().unwrap().to_owned();
    ok(&client, "submit_invoice", json!({"id": id})).await;
    let created = ok(
        &client,
        "create_payment_destination",
        json!({"label": "Second", "currency": "EUR", "network": "iban", "address": IBAN}),
    )
    .await;
    let destination = created["payment_destination"]["id"].clone();
    ok(
        &client,
        "deactivate_payment_destination",
        json!({"id": destination}),
    )
    .await;
    // A REST command on the same invoice says `api`.
    let res = app
        .command(&b.org.agent_key, &id, "withdraw", json!({}))
        .await;
    expect_status(res, StatusCode::OK).await;

    let res = app
        .get(&format!("/v1/invoices/{id}/events"), &b.org.agent_key)
        .await;
    let events = expect_status(res, StatusCode::OK).await;
    let trail: Vec<(&str, &str, &str)> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["interface"].as_str().unwrap(),
                e["actor_kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        trail,
        [
            ("create_draft", "mcp", "agent"),
            ("submit", "mcp", "agent"),
            ("withdraw", "api", "agent"),
        ]
    );
    // The org trail says where each destination change came from.
    let res = app.get("/v1/audit-events", &b.org.approver_token).await;
    let audit = expect_status(res, StatusCode::OK).await;
    let of_destination: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["subject_id"] == destination)
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["interface"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        of_destination,
        [
            ("destination.deactivated", "mcp"),
            ("destination.created", "mcp")
        ]
    );
    let first_destination = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subject_id"] == json!(b.destination_id))
        .expect("the REST destination's row");
    assert_eq!(first_destination["interface"], "api");
    client.cancel().await.expect("closes");
}

async fn a_browser_origin_must_be_configured(backend: Backend) {
    let http = HttpConfig {
        mcp: McpConfig {
            enabled: true,
            origins: vec!["https://console.example".into()],
        },
        ..HttpConfig::default()
    };
    let app = spawn_app_with(backend, AppConfig::default(), http).await;
    let org = app.org().await;
    let res = raw(&app, &org.agent_key, &[("origin", "https://evil.example")]).await;
    let problem = expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    assert!(problem.detail.contains("origin"));
    // Refused before the credential is looked at: no key, same answer.
    let res = raw(&app, "", &[("origin", "http://127.0.0.1")]).await;
    expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    let res = raw(
        &app,
        &org.agent_key,
        &[("origin", "https://console.example")],
    )
    .await;
    expect_status(res, StatusCode::OK).await;
    let res = raw(&app, &org.agent_key, &[]).await;
    expect_status(res, StatusCode::OK).await;

    // Without configured origins, every browser origin is refused.
    let app = spawn_app_with(backend, AppConfig::default(), HttpConfig::default()).await;
    let org = app.org().await;
    let res = raw(&app, &org.agent_key, &[("origin", &app.base)]).await;
    expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
}

async fn mcp_turned_off_is_not_found(backend: Backend) {
    let http = HttpConfig {
        mcp: McpConfig {
            enabled: false,
            origins: Vec::new(),
        },
        ..HttpConfig::default()
    };
    let app = spawn_app_with(backend, AppConfig::default(), http).await;
    let org = app.org().await;
    let res = raw(&app, &org.agent_key, &[]).await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    assert!(try_connect(&app, &org.agent_key).await.is_err());
    // REST is unaffected.
    let res = app.get("/v1/me", &org.agent_key).await;
    expect_status(res, StatusCode::OK).await;
}

/// An answer's JSON comes once (structured content) with a few lines of text naming the ids,
/// the state, the total and the next step; get_invoice answers the invoice alone unless asked
/// for its history; a refusal's text lists every mistake.
async fn answers_carry_the_json_once_and_a_summary_naming_the_next_step(app: TestApp) {
    let b = app.billing().await;
    let client = connect(&app, &b.org.agent_key).await;
    let text = |r: &CallToolResult| r.content[0].as_text().expect("text").text.clone();

    let created = call(&client, "create_invoice_draft", draft_args(&b, "summary-1")).await;
    let value = created
        .structured_content
        .clone()
        .expect("structured content");
    let id = value["invoice"]["id"].as_str().unwrap().to_owned();
    let hash = value["invoice"]["current_revision"]["payload_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let wire = serde_json::to_string(&created).unwrap();
    assert_eq!(
        wire.matches(&hash).count(),
        1,
        "the JSON comes once: {wire}"
    );
    // Every fact once: no nulls, amounts as decimal strings only, no canonical bytes beside
    // their hash (they are in the history).
    let revision = &value["invoice"]["current_revision"];
    assert_eq!(revision["total"], "1200.00");
    for gone in ["total_minor", "canonical_payload"] {
        assert!(revision.get(gone).is_none(), "{gone}: {revision}");
    }
    assert!(
        revision["lines"][0].get("amount_minor").is_none(),
        "{revision}"
    );
    assert!(
        value["invoice"].get("number").is_none(),
        "null members are left out"
    );
    assert!(value["invoice"].get("balance_minor").is_none());
    let summary = text(&created);
    for part in [id.as_str(), "draft", "1200.00 EUR", "Next: submit_invoice"] {
        assert!(summary.contains(part), "{part} in {summary}");
    }
    assert!(summary.len() < 400, "{} bytes: {summary}", summary.len());

    let submitted = call(&client, "submit_invoice", json!({"id": id})).await;
    assert!(
        text(&submitted).contains("wait for a human"),
        "{}",
        text(&submitted)
    );
    let again = call(&client, "submit_invoice", json!({"id": id})).await;
    assert!(text(&again).contains("replayed"), "{}", text(&again));

    // get_invoice: the invoice alone by default, the history on request.
    let compact = call(&client, "get_invoice", json!({"id": id})).await;
    let value = compact.structured_content.clone().unwrap();
    let members: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(members, ["invoice"], "{value}");
    assert_eq!(value["invoice"]["state"], "pending_approval");
    assert!(
        text(&compact).contains("history: true"),
        "{}",
        text(&compact)
    );
    assert!(
        text(&compact).contains("Discovery workshop"),
        "{}",
        text(&compact)
    );
    let full = call(&client, "get_invoice", json!({"id": id, "history": true})).await;
    let history = full.structured_content.clone().unwrap();
    assert_eq!(history["invoice"], value["invoice"]);
    assert_eq!(history["revisions"].as_array().unwrap().len(), 1);
    assert!(history["revisions"][0]["canonical_payload"].is_string());
    assert_eq!(history["events"].as_array().unwrap().len(), 2);
    assert!(
        text(&full).contains("1 revision, 0 decisions, 2 events"),
        "{}",
        text(&full)
    );
    let bytes = |r: &CallToolResult| serde_json::to_string(r).unwrap().len();
    assert!(
        bytes(&compact) * 2 < bytes(&full),
        "{} vs {}",
        bytes(&compact),
        bytes(&full)
    );

    // A refusal's text names every mistake, so a model reading only text can fix them all.
    let mut args = draft_args(&b, "summary-2");
    args["lines"][0]["unit_amount"] = json!(400.5);
    args["currency"] = json!("EUX");
    args.as_object_mut().unwrap().remove("due_date");
    let problem = refused(&client, "create_invoice_draft", args, "float_not_allowed").await;
    assert_eq!(
        error_fields(&problem),
        ["lines[0].unit_amount", "currency", "due_date"],
        "{problem}"
    );
    client.cancel().await.expect("closes");
}
