//! The adversarial scenarios of the upstream system (tauros-upstream.md §9), ported to HTTP:
//! authority escalation, smuggled fields, state manipulation, cross-tenant probing,
//! destination and revision safety, replay rules, payload integrity and money rules. Each test
//! checks what a careful user would: the status, the code and its members, and that nothing was
//! written when the answer is a refusal.

use crate::helpers::{
    IBAN, TestApp, both_backends, error_fields, expect_problem, expect_status, id_of, invoice_body,
    invoice_body_for, uuid_of, without_request_id,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

both_backends!(
    agents_never_decide_or_cancel,
    smuggled_fields_are_refused_and_nothing_is_written,
    illegal_moves_are_invalid_transitions,
    a_decision_names_one_exact_revision_and_hash,
    other_tenants_ids_answer_exactly_like_random_ids,
    other_agents_parties_answer_exactly_like_random_ids,
    inactive_destinations_receive_nothing,
    supersede_and_deactivate_rules,
    revisions_must_change_something_and_be_revised_after_changes,
    replays_count_only_for_the_same_command,
    append_only_tables_refuse_update_and_delete,
    tampering_outside_tauros_is_detected,
    money_is_exact_over_http,
    currency_must_be_the_destinations,
    a_create_reports_every_missing_field_at_once,
    idempotency_key_in_header_and_body_must_agree,
    humans_never_propose_and_agents_never_verify,
);

// ---------------------------------------------------------------------------------------------
// Small helpers

/// Asserts two responses are identical apart from the request id; returns the shared status
/// and body.
async fn identical(foreign: Response, random: Response) -> (StatusCode, Value) {
    let foreign = without_request_id(foreign).await;
    let random = without_request_id(random).await;
    assert_eq!(
        foreign, random,
        "a foreign id must answer exactly like a random one"
    );
    foreign
}

// ---------------------------------------------------------------------------------------------
// Authority escalation

async fn agents_never_decide_or_cancel(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let before = app.invoice_rows().await;
    for (action, reason) in [
        ("approve", None),
        ("reject", Some("no")),
        ("request-changes", Some("redo")),
    ] {
        let body = expect_problem(
            app.command(
                &b.org.agent_key,
                id,
                action,
                TestApp::decision_body(&pending, reason),
            )
            .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        assert!(
            body["detail"].as_str().unwrap().contains("human approver"),
            "the refusal says who may: {body}"
        );
    }
    // Who may act is answered before what was sent: without a reason, still 403 (and 404 for
    // a stranger, exactly as for a random id), not "reason is required".
    for action in ["reject", "request-changes"] {
        let body = TestApp::decision_body(&pending, None);
        expect_problem(
            app.command(&b.org.agent_key, id, action, body.clone())
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
        let stranger = app.org().await;
        let (status, _) = identical(
            app.command(&stranger.approver_token, id, action, body.clone())
                .await,
            app.command(
                &stranger.approver_token,
                &Uuid::new_v4().to_string(),
                action,
                body.clone(),
            )
            .await,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        // The approver who may decide learns what is missing.
        let problem = expect_problem(
            app.command(&b.org.approver_token, id, action, body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], "reason");
        assert_eq!(problem["errors"][0]["code"], "required");
    }
    // Decisions, events and revisions cannot be written directly, by anyone: there is no
    // route, and the invoice itself has no generic update.
    let forged = json!({"revision_id": pending["current_revision"]["id"], "decision": "approved",
                        "payload_hash": pending["current_revision"]["payload_hash"],
                        "approver_id": b.org.approver_id, "state": "approved"});
    for token in [&b.org.agent_key, &b.org.approver_token] {
        for suffix in ["/decisions", "/events", "/revisions"] {
            expect_problem(
                app.post(&format!("/v1/invoices/{id}{suffix}"), token, forged.clone())
                    .await,
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            )
            .await;
        }
        expect_problem(
            app.patch(&format!("/v1/invoices/{id}"), token, forged.clone())
                .await,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        )
        .await;
        expect_problem(
            app.delete(&format!("/v1/invoices/{id}"), token).await,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        )
        .await;
    }
    assert_eq!(app.invoice_rows().await, before, "refusals write nothing");
    let now = app.invoice(&b.org.approver_token, id).await;
    assert_eq!(now["state"], "pending_approval");
    assert!(app.decisions(&b.org.approver_token, id).await.is_empty());

    // Approved by the human; the agent still cannot cancel.
    expect_status(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(
            &b.org.agent_key,
            id,
            "cancel",
            json!({"reason": "the agent wants out"}),
        )
        .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.command(&b.org.agent_key, id, "cancel", json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let problem = expect_problem(
        app.command(&b.org.approver_token, id, "cancel", json!({}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "reason");
    // Nor withdraw or revise an approved invoice (state rules, after authority).
    expect_problem(
        app.command(&b.org.agent_key, id, "withdraw", json!({}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(
        app.invoice(&b.org.approver_token, id).await["state"],
        "approved"
    );
    // An operator who owns an agent cannot decide either.
    let (_, operator) = app.human(&b.org.approver_token, "operator").await;
    let (op_agent, op_key) = app.agent(&operator, "Operator's").await;
    let op_key = op_key.as_str();
    let customer = app.customer(&operator, op_agent, "Op customer").await;
    let destination = app.destination(op_key, "EUR", "iban", IBAN).await;
    let body = invoice_body_for(customer, destination);
    let draft = expect_status(
        app.create_invoice(op_key, "op-1", &body).await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    let pending = expect_status(
        app.command(op_key, id_of(&draft), "submit", json!({}))
            .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    expect_problem(
        app.approve(&operator, &pending).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert!(app.decisions(&operator, id_of(&pending)).await.is_empty());
}

async fn smuggled_fields_are_refused_and_nothing_is_written(app: TestApp) {
    let b = app.billing().await;
    let draft = app.draft(&b, "inv-1").await;
    let id = id_of(&draft);
    let before = app.invoice_rows().await;
    let smuggled = [
        ("state", json!("approved")),
        ("total_minor", json!(1)),
        (
            "payload_hash",
            json!("0000000000000000000000000000000000000000000000000000000000000000"),
        ),
        ("agent_id", json!(Uuid::new_v4())),
        ("approver_id", json!(b.org.approver_id)),
    ];
    for (field, value) in &smuggled {
        let mut body = invoice_body(&b);
        body[*field] = value.clone();
        let problem = expect_problem(
            app.create_invoice(&b.org.agent_key, &format!("smuggle-{field}"), &body)
                .await,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        )
        .await;
        assert_eq!(problem["field"], *field, "{problem}");
        assert!(problem["detail"].as_str().unwrap().contains(field));

        let problem = expect_problem(
            app.command(&b.org.agent_key, id, "revise", {
                let mut body = json!({"reasoning": "sneaky"});
                body[*field] = value.clone();
                body
            })
            .await,
            StatusCode::BAD_REQUEST,
            "unknown_field",
        )
        .await;
        assert_eq!(problem["field"], *field, "{problem}");
    }
    // Inside a line, the path names the line.
    let mut body = invoice_body(&b);
    body["lines"][1]["amount_minor"] = json!(1);
    let problem = expect_problem(
        app.create_invoice(&b.org.agent_key, "smuggle-line", &body)
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem["field"], "lines[1].amount_minor");
    // Commands take no state either.
    for (action, smuggled) in [("submit", "approved"), ("withdraw", "draft")] {
        let body = json!({ "state": smuggled });
        let res = app.command(&b.org.agent_key, id, action, body).await;
        let problem = expect_problem(res, StatusCode::BAD_REQUEST, "unknown_field").await;
        assert_eq!(problem["field"], "state", "{action}");
    }
    assert_eq!(app.invoice_rows().await, before, "nothing was written");
    let now = app.invoice(&b.org.agent_key, id).await;
    assert_eq!(now["state"], "draft");
    assert_eq!(now["revision_count"], 1);
    assert_eq!(now["agent_id"], b.org.agent_id.to_string());
    assert_eq!(now["current_revision"]["total_minor"], 120000);
}

// ---------------------------------------------------------------------------------------------
// State manipulation

async fn illegal_moves_are_invalid_transitions(app: TestApp) {
    let b = app.billing().await;
    let approver = &b.org.approver_token;
    let key = &b.org.agent_key;

    // Approving a draft.
    let draft = app.draft(&b, "draft").await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(approver, &draft).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(problem["from"], "draft");
    assert_eq!(problem["action"], "approve");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("`approve` is not allowed while the invoice is `draft`"),
        "{problem}"
    );
    assert_eq!(app.invoice_rows().await, before);

    // Revising, submitting or withdrawing an approved invoice.
    let pending = app.pending(&b, "approved").await;
    let id = id_of(&pending);
    expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "one more change", "due_date": (chrono::Utc::now() + chrono::Duration::days(60)).date_naive().to_string()}),
        )
        .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem["from"], &problem["action"]),
        (&json!("approved"), &json!("revise"))
    );
    for action in ["submit", "withdraw"] {
        let problem = expect_problem(
            app.command(key, id, action, json!({})).await,
            StatusCode::CONFLICT,
            "invalid_transition",
        )
        .await;
        assert_eq!(problem["from"], "approved");
        assert_eq!(problem["action"], action);
    }
    assert_eq!(app.invoice_rows().await, before);

    // Approving a rejected invoice: the revision is decided, and it stays rejected.
    let pending = app.pending(&b, "rejected").await;
    let id = id_of(&pending);
    expect_status(
        app.command(
            approver,
            id,
            "reject",
            TestApp::decision_body(&pending, Some("Not agreed.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.approve(approver, &pending).await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(app.invoice(approver, id).await["state"], "rejected");
    let problem = expect_problem(
        app.command(key, id, "revise", json!({"reasoning": "try again"}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(problem["from"], "rejected");

    // Approving, submitting or revising a withdrawn invoice (a stale copy after withdraw).
    let pending = app.pending(&b, "withdrawn").await;
    let id = id_of(&pending);
    expect_status(
        app.command(key, id, "withdraw", json!({})).await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(approver, &pending).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem["from"], &problem["action"]),
        (&json!("cancelled"), &json!("approve"))
    );
    let problem = expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem["from"], &problem["action"]),
        (&json!("cancelled"), &json!("submit"))
    );
    expect_problem(
        app.command(key, id, "revise", json!({"reasoning": "again"}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
}

async fn a_decision_names_one_exact_revision_and_hash(app: TestApp) {
    let b = app.billing().await;
    let approver = &b.org.approver_token;
    let key = &b.org.agent_key;
    let r1 = app.pending(&b, "inv-1").await;
    let id = id_of(&r1);
    // Revise (back to draft, revision 2) and submit again.
    let revised = expect_status(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "Workshop ran long.", "lines": [{"description": "Discovery workshop", "quantity": "1", "unit_amount": "1250.00"}]}),
        )
        .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    assert_eq!(revised["state"], "draft");
    assert_eq!(revised["current_revision"]["number"], 2);
    let r2 = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    let other = app.pending(&b, "inv-2").await;
    let before = app.invoice_rows().await;

    // The reviewer's copy of revision 1 is stale.
    let problem = expect_problem(
        app.approve(approver, &r1).await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains(r2["current_revision"]["id"].as_str().unwrap()),
        "the detail names the current revision: {problem}"
    );
    // The current revision with revision 1's hash, or any other well-formed hash.
    for hash in [
        r1["current_revision"]["payload_hash"].clone(),
        json!("0".repeat(64)),
    ] {
        expect_problem(
            app.command(
                approver,
                id,
                "approve",
                json!({"revision_id": r2["current_revision"]["id"], "payload_hash": hash}),
            )
            .await,
            StatusCode::CONFLICT,
            "payload_mismatch",
        )
        .await;
    }
    // Something that is not a hash as Tauros writes it (even the right one in upper case) is a
    // field error, never mistaken for a mismatch.
    let upper = r2["current_revision"]["payload_hash"]
        .as_str()
        .unwrap()
        .to_uppercase();
    for hash in ["not a hash", "", &upper] {
        let problem = expect_problem(
            app.command(
                approver,
                id,
                "reject",
                json!({"revision_id": r2["current_revision"]["id"], "payload_hash": hash}),
            )
            .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        let fields = error_fields(&problem);
        assert_eq!(fields, ["payload_hash", "reason"], "all at once: {problem}");
    }
    // A revision (and its hash) of another invoice.
    expect_problem(
        app.command(
            approver,
            id,
            "approve",
            TestApp::decision_body(&other, None),
        )
        .await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    // A revision id that exists nowhere.
    expect_problem(
        app.command(
            approver,
            id,
            "approve",
            json!({"revision_id": Uuid::new_v4(), "payload_hash": r2["current_revision"]["payload_hash"]}),
        )
        .await,
        StatusCode::CONFLICT,
        "stale_revision",
    )
    .await;
    assert_eq!(
        app.invoice_rows().await,
        before,
        "no refused decision wrote anything"
    );
    assert!(app.decisions(approver, id).await.is_empty());

    // The exact current revision and hash: approved; the decision records them.
    let approved = expect_status(app.approve(approver, &r2).await, StatusCode::OK).await;
    assert_eq!(approved["invoice"]["state"], "approved");
    let decided = app.decisions(approver, id).await;
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["revision_id"], r2["current_revision"]["id"]);
    assert_eq!(
        decided[0]["payload_hash"],
        r2["current_revision"]["payload_hash"]
    );
    assert_eq!(decided[0]["approver_id"], b.org.approver_id.to_string());
}

// ---------------------------------------------------------------------------------------------
// Cross-tenant

async fn other_tenants_ids_answer_exactly_like_random_ids(app: TestApp) {
    let a = app.billing().await;
    let b = app.billing().await;
    let theirs = app.pending(&b, "theirs").await;
    let their_id = id_of(&theirs);
    let random = Uuid::new_v4().to_string();
    let before = app.invoice_rows().await;

    for (token, who) in [
        (&a.org.approver_token, "approver"),
        (&a.org.agent_key, "agent"),
    ] {
        for suffix in ["", "/revisions", "/decisions", "/events", "/verify"] {
            let (status, body) = identical(
                app.get(&format!("/v1/invoices/{their_id}{suffix}"), token)
                    .await,
                app.get(&format!("/v1/invoices/{random}{suffix}"), token)
                    .await,
            )
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{who} {suffix}: {body}");
            assert_eq!(body["code"], "not_found");
        }
        for (action, body) in [
            ("approve", TestApp::decision_body(&theirs, None)),
            ("reject", TestApp::decision_body(&theirs, Some("no"))),
            (
                "request-changes",
                TestApp::decision_body(&theirs, Some("no")),
            ),
            ("cancel", json!({"reason": "no"})),
            ("withdraw", json!({})),
            ("submit", json!({})),
            ("revise", json!({"reasoning": "mine now"})),
        ] {
            let (status, problem) = identical(
                app.command(token, their_id, action, body.clone()).await,
                app.command(token, &random, action, body).await,
            )
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{who} {action}: {problem}");
        }
        // Their invoices are absent from our lists, whatever the filter.
        for query in [
            "",
            "?state=pending_approval",
            &format!("?agent_id={}", b.org.agent_id),
            &format!("?customer_id={}", b.customer_id),
        ] {
            let list = expect_status(
                app.get(&format!("/v1/invoices{query}"), token).await,
                StatusCode::OK,
            )
            .await;
            assert_eq!(list["items"], json!([]), "{who} {query}");
        }
    }

    // Their customer and destination, by id.
    let random = Uuid::new_v4();
    for (path_theirs, path_random) in [
        (
            format!("/v1/customers/{}", b.customer_id),
            format!("/v1/customers/{random}"),
        ),
        (
            format!("/v1/payment-destinations/{}", b.destination_id),
            format!("/v1/payment-destinations/{random}"),
        ),
    ] {
        for token in [&a.org.approver_token, &a.org.agent_key] {
            let (status, _) = identical(
                app.get(&path_theirs, token).await,
                app.get(&path_random, token).await,
            )
            .await;
            assert_eq!(status, StatusCode::NOT_FOUND);
        }
    }
    let (status, _) = identical(
        app.patch(
            &format!("/v1/customers/{}", b.customer_id),
            &a.org.approver_token,
            json!({"name": "Mine"}),
        )
        .await,
        app.patch(
            &format!("/v1/customers/{random}"),
            &a.org.approver_token,
            json!({"name": "Mine"}),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = identical(
        app.delete(
            &format!("/v1/customers/{}", b.customer_id),
            &a.org.approver_token,
        )
        .await,
        app.delete(&format!("/v1/customers/{random}"), &a.org.approver_token)
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for token in [&a.org.approver_token, &a.org.agent_key] {
        let (status, _) = identical(
            app.post(
                &format!("/v1/payment-destinations/{}/deactivate", b.destination_id),
                token,
                json!({}),
            )
            .await,
            app.post(
                &format!("/v1/payment-destinations/{random}/deactivate"),
                token,
                json!({}),
            )
            .await,
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    // Naming their customer or destination in our draft: the same 422 as a random id.
    for field in ["customer_id", "payment_destination_id"] {
        let their_value = if field == "customer_id" {
            b.customer_id
        } else {
            b.destination_id
        };
        let mut foreign = invoice_body(&a);
        foreign[field] = json!(their_value);
        let mut unknown = invoice_body(&a);
        unknown[field] = json!(random);
        let (status, problem) = identical(
            app.create_invoice(&a.org.agent_key, "x-foreign", &foreign)
                .await,
            app.create_invoice(&a.org.agent_key, "x-random", &unknown)
                .await,
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    // Revising ours to their destination: the same 422 as a random one.
    let ours = app.draft(&a, "ours").await;
    let (status, problem) = identical(
        app.command(
            &a.org.agent_key,
            id_of(&ours),
            "revise",
            json!({"reasoning": "move the money", "payment_destination_id": b.destination_id}),
        )
        .await,
        app.command(
            &a.org.agent_key,
            id_of(&ours),
            "revise",
            json!({"reasoning": "move the money", "payment_destination_id": random}),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["errors"][0]["field"], "payment_destination_id");

    // Nothing of theirs moved, and we wrote only our one draft.
    let mut expected = before;
    expected[0] += 1;
    expected[1] += 1;
    expected[3] += 1;
    assert_eq!(app.invoice_rows().await, expected);
    let now = app.invoice(&b.org.approver_token, their_id).await;
    assert_eq!(now["state"], "pending_approval");
    let destination = expect_status(
        app.get(
            &format!("/v1/payment-destinations/{}", b.destination_id),
            &b.org.agent_key,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(destination["state"], "active");
}

async fn other_agents_parties_answer_exactly_like_random_ids(app: TestApp) {
    let b = app.billing().await;
    // A sibling agent of the same owner, with its own customer and destination.
    let sibling = app.second_agent(&b).await;
    let sibling_key = sibling.org.agent_key.as_str();
    let sibling_customer = sibling.customer_id;
    let sibling_destination = sibling.destination_id;
    let random = Uuid::new_v4();
    let before = app.invoice_rows().await;
    for (field, theirs) in [
        ("customer_id", sibling_customer),
        ("payment_destination_id", sibling_destination),
    ] {
        let mut foreign = invoice_body(&b);
        foreign[field] = json!(theirs);
        let mut unknown = invoice_body(&b);
        unknown[field] = json!(random);
        let (status, problem) = identical(
            app.create_invoice(&b.org.agent_key, "k-foreign", &foreign)
                .await,
            app.create_invoice(&b.org.agent_key, "k-random", &unknown)
                .await,
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(problem["code"], "validation_failed");
        assert_eq!(problem["errors"].as_array().unwrap().len(), 1, "{problem}");
        assert_eq!(problem["errors"][0]["field"], field);
    }
    assert_eq!(app.invoice_rows().await, before);
    // The sibling's invoice is invisible to our agent, like a random id.
    let created = expect_status(
        app.create_invoice(sibling_key, "sib-1", &invoice_body(&sibling))
            .await,
        StatusCode::CREATED,
    )
    .await;
    let their_id = id_of(&created["invoice"]);
    identical(
        app.get(&format!("/v1/invoices/{their_id}"), &b.org.agent_key)
            .await,
        app.get(&format!("/v1/invoices/{random}"), &b.org.agent_key)
            .await,
    )
    .await;
    identical(
        app.command(&b.org.agent_key, their_id, "submit", json!({}))
            .await,
        app.command(&b.org.agent_key, &random.to_string(), "submit", json!({}))
            .await,
    )
    .await;
    identical(
        app.get(
            &format!("/v1/invoices/{their_id}/decisions"),
            &b.org.agent_key,
        )
        .await,
        app.get(
            &format!("/v1/invoices/{random}/decisions"),
            &b.org.agent_key,
        )
        .await,
    )
    .await;
    assert_eq!(app.invoice(sibling_key, their_id).await["state"], "draft");
}

// ---------------------------------------------------------------------------------------------
// Destination safety

async fn inactive_destinations_receive_nothing(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;

    // Naming a deactivated destination on create or revise: 422 on payment_destination_id.
    let retired = app.destination(key, "EUR", "iban", IBAN).await;
    app.deactivate(key, retired).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.create_invoice(key, "to-retired", &invoice_body_for(b.customer_id, retired))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "payment_destination_id");
    assert_eq!(problem["errors"][0]["code"], "destination_inactive");
    let draft = app.draft(&b, "draft").await;
    let before_revise = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(
            key,
            id_of(&draft),
            "revise",
            json!({"reasoning": "pay elsewhere", "payment_destination_id": retired}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "payment_destination_id");
    assert_eq!(app.invoice_rows().await, before_revise);
    assert_eq!(
        before[0] + 1,
        before_revise[0],
        "only the good draft was written"
    );

    // A draft whose destination is deactivated before submit.
    let d2 = app.destination(key, "EUR", "iban", IBAN).await;
    let draft = expect_status(
        app.create_invoice(key, "d2", &invoice_body_for(b.customer_id, d2))
            .await,
        StatusCode::CREATED,
    )
    .await["invoice"]
        .clone();
    app.deactivate(approver, d2).await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(key, id_of(&draft), "submit", json!({})).await,
        StatusCode::CONFLICT,
        "destination_inactive",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(app.invoice(key, id_of(&draft)).await["state"], "draft");

    // Pending invoices whose destination is deactivated after submit: approve is refused,
    // reject and request-changes still work.
    let d3 = app.destination(key, "EUR", "iban", IBAN).await;
    let mut pending = Vec::new();
    for n in 0..3 {
        let created = expect_status(
            app.create_invoice(
                key,
                &format!("d3-{n}"),
                &invoice_body_for(b.customer_id, d3),
            )
            .await,
            StatusCode::CREATED,
        )
        .await;
        let id = id_of(&created["invoice"]);
        pending.push(
            expect_status(
                app.command(key, id, "submit", json!({})).await,
                StatusCode::OK,
            )
            .await["invoice"]
                .clone(),
        );
    }
    app.deactivate(key, d3).await;
    let before = app.invoice_rows().await;
    for invoice in &pending {
        expect_problem(
            app.approve(approver, invoice).await,
            StatusCode::CONFLICT,
            "destination_inactive",
        )
        .await;
    }
    assert_eq!(app.invoice_rows().await, before);
    let rejected = expect_status(
        app.command(
            approver,
            id_of(&pending[0]),
            "reject",
            TestApp::decision_body(&pending[0], Some("The account is closed.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(rejected["invoice"]["state"], "rejected");
    let sent_back = expect_status(
        app.command(
            approver,
            id_of(&pending[1]),
            "request-changes",
            TestApp::decision_body(&pending[1], Some("Use the new account.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(sent_back["invoice"]["state"], "draft");
    // The agent revises onto an active destination; now it can be approved.
    let revised = expect_status(
        app.command(
            key,
            id_of(&pending[1]),
            "revise",
            json!({"reasoning": "New account.", "payment_destination_id": b.destination_id}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(revised["replayed"], false);
    let resubmitted = expect_status(
        app.command(key, id_of(&pending[1]), "submit", json!({}))
            .await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    let approved = expect_status(app.approve(approver, &resubmitted).await, StatusCode::OK).await;
    assert_eq!(approved["invoice"]["state"], "approved");
    assert_eq!(
        app.invoice(approver, id_of(&pending[2])).await["state"],
        "pending_approval"
    );
}

async fn supersede_and_deactivate_rules(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let old = b.destination_id;
    let body = |supersedes: Uuid| {
        json!({"label": "New account", "currency": "EUR", "network": "iban",
               "address": "CH9300762011623852957", "supersedes_id": supersedes})
    };
    let replacement = expect_status(
        app.post("/v1/payment-destinations", key, body(old)).await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(replacement["supersedes_id"], old.to_string());
    assert_eq!(replacement["state"], "active");
    let read = expect_status(
        app.get(&format!("/v1/payment-destinations/{old}"), key)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read["state"], "superseded");

    // A second replacement of the same destination is refused, nothing written.
    let destinations = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    let problem = expect_problem(
        app.post("/v1/payment-destinations", key, body(old)).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "supersedes_id");
    // So is superseding a deactivated one, a random id, or another agent's.
    let other = app.org().await;
    let theirs = app.destination(&other.agent_key, "EUR", "iban", IBAN).await;
    let retired = app.destination(key, "EUR", "iban", IBAN).await;
    app.deactivate(key, retired).await;
    let destinations_then = app
        .sql_count("select count(*) from payment_destinations")
        .await;
    for target in [retired, Uuid::new_v4(), theirs] {
        let problem = expect_problem(
            app.post("/v1/payment-destinations", key, body(target))
                .await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        )
        .await;
        assert_eq!(problem["errors"][0]["field"], "supersedes_id");
    }
    assert_eq!(
        app.sql_count("select count(*) from payment_destinations")
            .await,
        destinations_then
    );
    assert_eq!(
        destinations + 2,
        destinations_then,
        "theirs and retired only"
    );
    // A superseded destination receives nothing new.
    let problem = expect_problem(
        app.create_invoice(key, "to-superseded", &invoice_body_for(b.customer_id, old))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem["errors"][0]["field"], "payment_destination_id");

    // Deactivate is idempotent: 200 twice, one audit event.
    let id = uuid_of(&replacement["id"]);
    let first = app.deactivate(key, id).await;
    assert_eq!(first["state"], "deactivated");
    let second = app.deactivate(&b.org.approver_token, id).await;
    assert_eq!(
        second, first,
        "the second answer is the destination as it is"
    );
    // Deactivating a superseded destination keeps it superseded and writes nothing.
    let still = app.deactivate(key, old).await;
    assert_eq!(still["state"], "superseded");
    assert_eq!(
        app.audit_actions(b.org.org_id, id).await,
        ["destination.created", "destination.deactivated"]
    );
    assert_eq!(
        app.audit_actions(b.org.org_id, old).await,
        ["destination.created", "destination.superseded"]
    );
}

// ---------------------------------------------------------------------------------------------
// Revision safety

async fn revisions_must_change_something_and_be_revised_after_changes(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let before = app.invoice_rows().await;

    // The same payload (amounts written another way, reworded reasoning): nothing happens, and
    // a pending invoice stays pending.
    let mut same = invoice_body(&b);
    same.as_object_mut().unwrap().remove("customer_id");
    same["lines"][0]["unit_amount"] = json!("400.00");
    same["lines"][1] = json!({"description": "Implementation days", "quantity": "2.000", "unit_amount_minor": 40000});
    for body in [
        json!({"reasoning": "Monthly retainer agreed in the signed statement of work."}),
        json!({"reasoning": "Reworded: the retainer from the signed SOW."}),
        {
            let mut b = same.clone();
            b["reasoning"] = json!("Same money, written differently.");
            b
        },
    ] {
        let res = app.command(key, id, "revise", body).await;
        assert_eq!(res.headers()["idempotent-replayed"], "true");
        let replay = expect_status(res, StatusCode::OK).await;
        assert_eq!(replay["replayed"], true);
        assert_eq!(replay["invoice"]["state"], "pending_approval");
        assert_eq!(replay["invoice"]["revision_count"], 1);
        assert_eq!(
            replay["invoice"]["current_revision"]["reasoning"],
            "Monthly retainer agreed in the signed statement of work.",
            "the stored reasoning is kept"
        );
    }
    assert_eq!(app.invoice_rows().await, before, "no revision, no event");
    assert_eq!(app.event_actions(key, id).await, ["create_draft", "submit"]);

    // After request-changes, submit needs a new revision first.
    expect_status(
        app.command(
            approver,
            id,
            "request-changes",
            TestApp::decision_body(&pending, Some("Split the days per week.")),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let before = app.invoice_rows().await;
    expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "revision_already_decided",
    )
    .await;
    // Revising to the same payload is not a new revision either.
    let replay = expect_status(
        app.command(key, id, "revise", json!({"reasoning": "As you asked."}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    expect_problem(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::CONFLICT,
        "revision_already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    // A real revision, then submit and approve revision 2.
    expect_status(
        app.command(
            key,
            id,
            "revise",
            json!({"reasoning": "Split per week.", "lines": [
                {"description": "Discovery workshop", "quantity": "1", "unit_amount": "400"},
                {"description": "Implementation, week 1", "quantity": "1", "unit_amount": "400"},
                {"description": "Implementation, week 2", "quantity": "1", "unit_amount": "400"}
            ]}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let r2 = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await["invoice"]
        .clone();
    assert_eq!(r2["current_revision"]["number"], 2);
    assert_eq!(r2["current_revision"]["total_minor"], 120000);
    expect_status(app.approve(approver, &r2).await, StatusCode::OK).await;
    let decided: Vec<Value> = app
        .decisions(key, id)
        .await
        .iter()
        .map(|d| d["decision"].clone())
        .collect();
    assert_eq!(decided, [json!("changes_requested"), json!("approved")]);
    assert_eq!(
        app.event_actions(key, id).await,
        [
            "create_draft",
            "submit",
            "request_changes",
            "revise",
            "submit",
            "approve"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Replay rules

async fn replays_count_only_for_the_same_command(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let approver = &b.org.approver_token;

    // Submit twice, withdraw twice: the second is a replay, with no event.
    let pending = app.pending(&b, "withdrawn").await;
    let id = id_of(&pending);
    let replay = expect_status(
        app.command(key, id, "submit", json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["replayed"], true);
    assert_eq!(
        replay["invoice"]["updated_at"], pending["updated_at"],
        "a replay changes nothing, not even updated_at"
    );
    let first = expect_status(
        app.command(key, id, "withdraw", json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(first["replayed"], false);
    let res = app.command(approver, id, "withdraw", json!({})).await;
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let second = expect_status(res, StatusCode::OK).await;
    assert_eq!(second["replayed"], true);
    assert_eq!(second["invoice"]["state"], "cancelled");
    assert_eq!(
        app.event_actions(key, id).await,
        ["create_draft", "submit", "withdraw"]
    );
    // Cancel on a withdrawn invoice is not a replay.
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.command(approver, id, "cancel", json!({"reason": "Cancel it too."}))
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(
        (&problem["from"], &problem["action"]),
        (&json!("cancelled"), &json!("cancel"))
    );
    assert_eq!(app.invoice_rows().await, before);

    // Approve, then cancel twice; withdraw on the cancelled invoice is not a replay.
    let pending = app.pending(&b, "cancelled").await;
    let id = id_of(&pending);
    let approved = expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    assert_eq!(approved["replayed"], false);
    // The same approver approving again: a replay.
    let again = expect_status(app.approve(approver, &pending).await, StatusCode::OK).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["invoice"]["state"], "approved");
    // Another approver (who sees it through shared_review): already decided.
    let (_, other) = app.human(approver, "approver").await;
    app.set_org(approver, json!({"shared_review": true})).await;
    let before = app.invoice_rows().await;
    let problem = expect_problem(
        app.approve(&other, &pending).await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert!(problem["detail"].as_str().unwrap().contains("approved"));
    // The same approver with another decision on the same revision: already decided too.
    expect_problem(
        app.command(
            approver,
            id,
            "reject",
            TestApp::decision_body(&pending, Some("Changed my mind.")),
        )
        .await,
        StatusCode::CONFLICT,
        "already_decided",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);
    let cancelled = expect_status(
        app.command(
            approver,
            id,
            "cancel",
            json!({"reason": "Customer went bust."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["state"], "cancelled");
    let again = expect_status(
        app.command(
            approver,
            id,
            "cancel",
            json!({"reason": "Customer went bust."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["replayed"], true);
    let before = app.invoice_rows().await;
    for token in [key, approver] {
        let problem = expect_problem(
            app.command(token, id, "withdraw", json!({})).await,
            StatusCode::CONFLICT,
            "invalid_transition",
        )
        .await;
        assert_eq!(
            (&problem["from"], &problem["action"]),
            (&json!("cancelled"), &json!("withdraw"))
        );
    }
    assert_eq!(app.invoice_rows().await, before);
    let events = expect_status(
        app.get(&format!("/v1/invoices/{id}/events"), approver)
            .await,
        StatusCode::OK,
    )
    .await;
    let last = events["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "cancel");
    assert_eq!(last["note"], "Customer went bust.");
    assert_eq!(
        app.event_actions(key, id).await,
        ["create_draft", "submit", "approve", "cancel"]
    );
}

// ---------------------------------------------------------------------------------------------
// Payload integrity

async fn append_only_tables_refuse_update_and_delete(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    expect_status(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::OK,
    )
    .await;
    let ok = json!({"ok": true, "revisions": [{"number": 1, "ok": true}], "events": {"ok": true, "broken_at": null}});
    assert_eq!(app.verify(&b.org.approver_token, id).await, ok);
    let before = app.invoice_rows().await;
    for statement in [
        "update invoice_revisions set total_minor = '1'",
        "update invoice_revisions set due_date = '2099-12-31'",
        "update invoice_revisions set reasoning = 'rewritten'",
        "delete from invoice_revisions",
        "update decisions set decision = 'rejected'",
        "update decisions set payload_hash = 'forged'",
        "delete from decisions",
        "update invoice_events set note = 'forged'",
        "update invoice_events set actor_kind = 'agent'",
        "delete from invoice_events",
        "update audit_events set action = 'forged'",
        "delete from audit_events",
    ] {
        assert!(
            !app.sql_exec(statement).await,
            "the database must refuse: {statement}"
        );
    }
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(
        app.verify(&b.org.approver_token, id).await,
        ok,
        "the refused tampering left the invoice intact"
    );
    let decided = app.decisions(&b.org.approver_token, id).await;
    assert_eq!(decided[0]["decision"], "approved");
}

/// Someone with the power to disable the triggers (outside Tauros) edits history: verify
/// reports it, and no decision can be recorded on an altered revision.
async fn tampering_outside_tauros_is_detected(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let postgres = !app.database_url.starts_with("sqlite");
    let unguard = |table: &str| {
        if postgres {
            format!("alter table {table} disable trigger {table}_append_only")
        } else {
            format!("drop trigger {table}_no_update")
        }
    };
    assert!(app.sql_exec(&unguard("invoice_revisions")).await);
    assert!(
        app.sql_exec("update invoice_revisions set due_date = '2099-12-31'")
            .await
    );
    let report = app.verify(&b.org.approver_token, id).await;
    assert_eq!(report["ok"], false);
    assert_eq!(report["revisions"], json!([{"number": 1, "ok": false}]));
    assert_eq!(report["events"]["ok"], true);
    let before = app.invoice_rows().await;
    expect_problem(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::CONFLICT,
        "payload_integrity",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);

    // Editing a past event breaks the chain at that event.
    assert!(app.sql_exec(&unguard("invoice_events")).await);
    assert!(
        app.sql_exec("update invoice_events set note = 'approved by the CEO' where seq = 2")
            .await
    );
    let report = app.verify(&b.org.approver_token, id).await;
    assert_eq!(report["events"], json!({"ok": false, "broken_at": 2}));
}

// ---------------------------------------------------------------------------------------------
// Money rules

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
        assert_eq!(problem["field"], field, "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
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
    assert_eq!(
        problem["errors"],
        json!([{"field": "lines[0].unit_amount", "code": "too_many_decimals", "detail": problem["errors"][0]["detail"]}])
    );
    // 1.5 × 0.05 EUR is not a whole number of cents.
    let mut body = invoice_body(&b);
    body["lines"][0] = json!({"description": "a", "quantity": "1.5", "unit_amount": "0.05"});
    let problem = expect_problem(
        app.create_invoice(key, "fraction", &body).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert!(
        problem["errors"][0]["field"]
            .as_str()
            .unwrap()
            .starts_with("lines[0]"),
        "{problem}"
    );
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
    let fields = error_fields(&problem);
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
    assert_eq!(problem["errors"][0]["code"], "too_many_decimals");

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
        assert_eq!(problem["errors"][0]["field"], "network", "{problem}");
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
        assert_eq!(problem["errors"][0]["field"], "currency", "{problem}");
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
    assert_eq!(problem["errors"][0]["field"], "currency");
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
    assert_eq!(problem["errors"][0]["field"], "lines");
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
    assert_eq!(problem["errors"][0]["field"], "currency");
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
    let mut fields = error_fields(&problem);
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
        assert!(problem["detail"].as_str().unwrap().contains(field));
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
    let mut fields = error_fields(&problem);
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
    assert_eq!(problem["errors"].as_array().unwrap().len(), 1, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "idempotency_key");
    assert_eq!(problem["errors"][0]["code"], "required");
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
    assert_eq!(problem["field"], "idempotency_key");
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
    assert!(problem["detail"].as_str().unwrap().contains("humans"));
}
