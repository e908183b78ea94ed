//! Customers and payment destinations: CRUD, ownership, dependents, the destination
//! idempotency key, lists (filter and pages), and the org audit trail.

use crate::helpers::{
    IBAN, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body_for, uuid_of,
    without_request_id,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

both_backends!(
    customers_are_created_read_changed_and_deleted_with_an_audit_trail,
    a_customer_belongs_to_an_agent_its_human_owns,
    a_referenced_customer_cannot_be_deleted,
    an_agent_with_records_cannot_be_deleted,
    destinations_are_registered_by_agents_with_their_rules,
    a_destination_key_replays_the_same_body_and_refuses_another,
    destination_lists_filter_by_state_and_page,
    customer_lists_page_newest_first,
);

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Walks every page of `path` (which has no query yet) `limit` at a time; returns the ids.
async fn all_pages(app: &TestApp, token: &str, path: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
            None => format!("{path}{sep}limit={limit}"),
        };
        let page = expect_status(app.get(&url, token).await, StatusCode::OK).await;
        let got = ids(&page);
        assert!(got.len() <= limit);
        out.extend(got);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

async fn customers_are_created_read_changed_and_deleted_with_an_audit_trail(app: TestApp) {
    let org = app.org().await;
    let res = app
        .post(
            "/v1/customers",
            &org.approver_token,
            json!({"agent_id": org.agent_id, "name": "  Acme Inc  ", "email": " billing@acme.example "}),
        )
        .await;
    let created = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(created["name"], "Acme Inc", "text is trimmed");
    assert_eq!(created["email"], "billing@acme.example");
    assert_eq!(created["agent_id"], org.agent_id.to_string());
    assert_eq!(created["created_at"], created["updated_at"]);
    let id = uuid_of(&created["id"]);
    let path = format!("/v1/customers/{id}");

    // The owner and the agent read the same customer.
    for token in [&org.approver_token, &org.agent_key] {
        let read = expect_status(app.get(&path, token).await, StatusCode::OK).await;
        assert_eq!(read, created);
        let list = expect_status(app.get("/v1/customers", token).await, StatusCode::OK).await;
        assert_eq!(list["items"], json!([created]));
        assert!(list["next_cursor"].is_null());
    }

    // Validation: every offending field at once; agent_id cannot be changed.
    let problem = expect_problem(
        app.patch(
            &path,
            &org.approver_token,
            json!({"name": "   ", "email": "not an email"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    // The request type's field rules answer in the order of the members' names.
    let fields = problem.fields();
    assert_eq!(fields, ["email", "name"]);
    let problem = expect_problem(
        app.patch(
            &path,
            &org.approver_token,
            json!({"agent_id": Uuid::new_v4()}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "agent_id");
    let problem = expect_problem(
        app.post(
            "/v1/customers",
            &org.approver_token,
            json!({"agent_id": org.agent_id, "name": "", "email": "a@@b"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors.len(), 2, "{problem}");

    // A change: audited. The same values again: 200, nothing written.
    let changed = expect_status(
        app.patch(
            &path,
            &org.approver_token,
            json!({"email": "ap@acme.example"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(changed["email"], "ap@acme.example");
    assert_eq!(
        changed["name"], "Acme Inc",
        "omitted fields keep their value"
    );
    let same = expect_status(
        app.patch(
            &path,
            &org.approver_token,
            json!({"name": "Acme Inc", "email": "ap@acme.example"}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(same, changed);
    assert_eq!(
        app.audit_actions(org.org_id, id).await,
        ["customer.created", "customer.updated"]
    );

    // Delete: 204, then gone everywhere; audited with the human as actor.
    let res = app.delete(&path, &org.approver_token).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_problem(
        app.get(&path, &org.agent_key).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.delete(&path, &org.approver_token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let list = expect_status(
        app.get("/v1/customers", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(list["items"], json!([]));
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let trail = conn.audit_for_subject(org.org_id, id).await.unwrap();
    assert_eq!(
        trail.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["customer.created", "customer.updated", "customer.deleted"]
    );
    assert!(trail.iter().all(|e| e.actor_id == Some(org.approver_id)
        && e.actor_kind.as_str() == "human"
        && e.interface.as_str() == "api"
        && e.subject_type == "customer"));
}

async fn a_customer_belongs_to_an_agent_its_human_owns(app: TestApp) {
    let org = app.org().await;
    let (_, other_approver) = app.human(&org.approver_token, "approver").await;
    let (_, operator) = app.human(&org.approver_token, "operator").await;
    let other_org = app.org().await;
    let count = || app.sql_count("select count(*) from customers");
    let before = count().await;
    let body =
        |agent_id: Uuid| json!({"agent_id": agent_id, "name": "Acme", "email": "a@acme.example"});
    // The same answer for an unknown agent, another human's agent, another org's agent.
    let (status, unknown) = without_request_id(
        app.post("/v1/customers", &other_approver, body(Uuid::new_v4()))
            .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unknown["errors"][0]["field"], "agent_id");
    for (token, agent) in [
        (&other_approver, org.agent_id),
        (&operator, org.agent_id),
        (&other_approver, other_org.agent_id),
        (&org.approver_token, other_org.agent_id),
    ] {
        let (status, foreign) =
            without_request_id(app.post("/v1/customers", token, body(agent)).await).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(foreign, unknown, "no existence oracle");
    }
    // Agents never create customers, not even for themselves.
    expect_problem(
        app.post("/v1/customers", &org.agent_key, body(org.agent_id))
            .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    assert_eq!(count().await, before, "nothing was written");
    // An operator may create customers for an agent they own.
    let (agent_id, agent_key) = app.agent(&operator, "Ops agent").await;
    let created = expect_status(
        app.post("/v1/customers", &operator, body(agent_id)).await,
        StatusCode::CREATED,
    )
    .await;
    // Which only the operator and that agent see.
    let path = format!("/v1/customers/{}", id_of(&created));
    expect_status(app.get(&path, &agent_key).await, StatusCode::OK).await;
    for token in [&org.approver_token, &other_approver, &org.agent_key] {
        expect_problem(
            app.get(&path, token).await,
            StatusCode::NOT_FOUND,
            "not_found",
        )
        .await;
    }
}

async fn a_referenced_customer_cannot_be_deleted(app: TestApp) {
    let b = app.billing().await;
    let invoice = app.pending(&b, "inv-1").await;
    let path = format!("/v1/customers/{}", b.customer_id);
    expect_problem(
        app.delete(&path, &b.org.approver_token).await,
        StatusCode::CONFLICT,
        "has_dependents",
    )
    .await;
    // Still referenced after the invoice is withdrawn: revisions are history.
    expect_status(
        app.command(
            &b.org.approver_token,
            id_of(&invoice),
            "withdraw",
            json!({}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    expect_problem(
        app.delete(&path, &b.org.approver_token).await,
        StatusCode::CONFLICT,
        "has_dependents",
    )
    .await;
    expect_status(app.get(&path, &b.org.agent_key).await, StatusCode::OK).await;
    assert_eq!(
        app.audit_actions(b.org.org_id, b.customer_id).await,
        ["customer.created"],
        "refusals are not audited"
    );
    // Referenced by a later revision only: refused too.
    let second = app
        .customer(&b.org.approver_token, b.org.agent_id, "Second")
        .await;
    let draft = app.draft(&b, "inv-2").await;
    expect_status(
        app.command(
            &b.org.agent_key,
            id_of(&draft),
            "revise",
            json!({"reasoning": "Bill the subsidiary.", "customer_id": second}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    expect_problem(
        app.delete(&format!("/v1/customers/{second}"), &b.org.approver_token)
            .await,
        StatusCode::CONFLICT,
        "has_dependents",
    )
    .await;
    // An unreferenced customer goes.
    let unused = app
        .customer(&b.org.approver_token, b.org.agent_id, "Unused")
        .await;
    let res = app
        .delete(&format!("/v1/customers/{unused}"), &b.org.approver_token)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
}

async fn an_agent_with_records_cannot_be_deleted(app: TestApp) {
    let org = app.org().await;
    // Owns a customer.
    let (with_customer, _) = app.agent(&org.approver_token, "With customer").await;
    let customer = app
        .customer(&org.approver_token, with_customer, "Acme")
        .await;
    let path = format!("/v1/agents/{with_customer}");
    expect_problem(
        app.delete(&path, &org.approver_token).await,
        StatusCode::CONFLICT,
        "has_dependents",
    )
    .await;
    expect_status(app.get(&path, &org.approver_token).await, StatusCode::OK).await;
    // Once the customer is gone, the agent may go.
    let res = app
        .delete(&format!("/v1/customers/{customer}"), &org.approver_token)
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let res = app.delete(&path, &org.approver_token).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    // Owns a destination (even a deactivated one): refused.
    let (with_destination, key) = app.agent(&org.approver_token, "With destination").await;
    let destination = app.destination(&key, "EUR", "iban", IBAN).await;
    app.deactivate(&key, destination).await;
    expect_problem(
        app.delete(
            &format!("/v1/agents/{with_destination}"),
            &org.approver_token,
        )
        .await,
        StatusCode::CONFLICT,
        "has_dependents",
    )
    .await;
    // Its key still works: nothing was deleted.
    expect_status(app.get("/v1/me", &key).await, StatusCode::OK).await;
    assert_eq!(
        app.audit_actions(org.org_id, with_destination).await,
        ["agent.created"]
    );
}

async fn destinations_are_registered_by_agents_with_their_rules(app: TestApp) {
    let org = app.org().await;
    let count = || app.sql_count("select count(*) from payment_destinations");
    let good = json!({"label": "  Operating account ", "currency": "EUR", "network": "iban", "address": IBAN});
    // Humans do not register destinations.
    let (_, operator) = app.human(&org.approver_token, "operator").await;
    for token in [&org.approver_token, &operator] {
        expect_problem(
            app.post("/v1/payment-destinations", token, good.clone())
                .await,
            StatusCode::FORBIDDEN,
            "forbidden",
        )
        .await;
    }
    // Field rules, every offending field at once; unknown fields refused.
    let problem = expect_problem(
        app.post(
            "/v1/payment-destinations",
            &org.agent_key,
            json!({"label": " ", "currency": "EUR", "network": "iban", "address": "CH9300762011623852958"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    let fields = problem.fields();
    assert_eq!(fields, ["label", "address"], "{problem}");
    let problem = expect_problem(
        app.post(
            "/v1/payment-destinations",
            &org.agent_key,
            json!({"label": "x", "currency": "BTC", "network": "bitcoin",
                   "address": "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "address", "SegWit v0 is refused");
    let mut smuggled = good.clone();
    smuggled["state"] = json!("active");
    let problem = expect_problem(
        app.post("/v1/payment-destinations", &org.agent_key, smuggled)
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "state");
    let mut smuggled = good.clone();
    smuggled["agent_id"] = json!(org.agent_id);
    expect_problem(
        app.post("/v1/payment-destinations", &org.agent_key, smuggled)
            .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(count().await, 0, "nothing was written");

    // Registered for the calling agent, active, audited.
    let res = app
        .post("/v1/payment-destinations", &org.agent_key, good.clone())
        .await;
    assert_eq!(res.headers()["idempotent-replayed"], "false");
    let created = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(created["label"], "Operating account");
    assert_eq!(created["agent_id"], org.agent_id.to_string());
    assert_eq!(created["state"], "active");
    assert_eq!(created["supersedes_id"], Value::Null);
    let id = uuid_of(&created["id"]);
    let read = expect_status(
        app.get(
            &format!("/v1/payment-destinations/{id}"),
            &org.approver_token,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(read, created);
    // Details are immutable: there is no route to change them.
    let res = app
        .patch(
            &format!("/v1/payment-destinations/{id}"),
            &org.agent_key,
            json!({"address": "CH9300762011623852957"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let trail = conn.audit_for_subject(org.org_id, id).await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].action, "destination.created");
    assert_eq!(trail[0].actor_kind.as_str(), "agent");
    assert_eq!(trail[0].actor_id, Some(org.agent_id));
    // Without a key, the same body twice is two destinations.
    expect_status(
        app.post("/v1/payment-destinations", &org.agent_key, good)
            .await,
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(count().await, 2);
}

async fn a_destination_key_replays_the_same_body_and_refuses_another(app: TestApp) {
    let org = app.org().await;
    let post = |key: &str, token: &str, body: Value| {
        app.create_destination_request(token, key, &body).send()
    };
    let body = json!({"label": "Operating", "currency": "EUR", "network": "iban", "address": IBAN});
    let res = post("dest-1", &org.agent_key, body.clone()).await.unwrap();
    assert_eq!(res.headers()["idempotent-replayed"], "false");
    let first = expect_status(res, StatusCode::CREATED).await;
    let res = post("dest-1", &org.agent_key, body.clone()).await.unwrap();
    assert_eq!(res.headers()["idempotent-replayed"], "true");
    let replay = expect_status(res, StatusCode::OK).await;
    assert_eq!(replay, first, "the original, same id");

    // Another body with the same key: 409, nothing written (even a new label, not hashed in
    // invoices, is another request).
    let count = || app.sql_count("select count(*) from payment_destinations");
    for change in [
        json!({"label": "Renamed"}),
        json!({"address": "CH9300762011623852957", "currency": "CHF"}),
        json!({"supersedes_id": first["id"]}),
    ] {
        let mut other = body.clone();
        for (k, v) in change.as_object().unwrap() {
            other[k] = v.clone();
        }
        expect_problem(
            post("dest-1", &org.agent_key, other).await.unwrap(),
            StatusCode::CONFLICT,
            "idempotency_conflict",
        )
        .await;
    }
    assert_eq!(count().await, 1);
    let id = uuid_of(&first["id"]);
    let read = expect_status(
        app.get(&format!("/v1/payment-destinations/{id}"), &org.agent_key)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        read["state"], "active",
        "the refused supersede changed nothing"
    );
    assert_eq!(
        app.audit_actions(org.org_id, id).await,
        ["destination.created"]
    );
    // A replay after a deactivation answers the destination as it is now.
    app.deactivate(&org.agent_key, id).await;
    let replay = expect_status(
        post("dest-1", &org.agent_key, body.clone()).await.unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(replay["id"], first["id"]);
    assert_eq!(replay["state"], "deactivated");
    // Keys are per agent: another agent's dest-1 is independent.
    let (_, second_key) = app.agent(&org.approver_token, "Second").await;
    let theirs = expect_status(
        post("dest-1", &second_key, body).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    assert_ne!(theirs["id"], first["id"]);
    assert_eq!(count().await, 2);
}

async fn destination_lists_filter_by_state_and_page(app: TestApp) {
    let b = app.billing().await;
    let key = &b.org.agent_key;
    let old = b.destination_id;
    let retired = app.destination(key, "EUR", "iban", IBAN).await;
    let chf = app
        .destination(key, "CHF", "iban", "CH9300762011623852957")
        .await;
    let replacement = expect_status(
        app.post(
            "/v1/payment-destinations",
            key,
            json!({"label": "New", "currency": "EUR", "network": "iban", "address": IBAN, "supersedes_id": old}),
        )
        .await,
        StatusCode::CREATED,
    )
    .await;
    let replacement = uuid_of(&replacement["id"]);
    app.deactivate(key, retired).await;
    let s = |ids: &[Uuid]| ids.iter().map(Uuid::to_string).collect::<Vec<_>>();
    // Newest first, for the agent and its owner alike.
    for token in [key, &b.org.approver_token] {
        let all = expect_status(
            app.get("/v1/payment-destinations", token).await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(ids(&all), s(&[replacement, chf, retired, old]));
        for (state, expected) in [
            ("active", s(&[replacement, chf])),
            ("deactivated", s(&[retired])),
            ("superseded", s(&[old])),
        ] {
            let page = expect_status(
                app.get(&format!("/v1/payment-destinations?state={state}"), token)
                    .await,
                StatusCode::OK,
            )
            .await;
            assert_eq!(ids(&page), expected, "{state}");
            assert!(
                page["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|d| d["state"] == state)
            );
        }
        // Pages of 1 and 3 walk the same list; a filtered list pages too.
        assert_eq!(
            all_pages(&app, token, "/v1/payment-destinations", 1).await,
            ids(&all)
        );
        assert_eq!(
            all_pages(&app, token, "/v1/payment-destinations", 3).await,
            ids(&all)
        );
        assert_eq!(
            all_pages(&app, token, "/v1/payment-destinations?state=active", 1).await,
            s(&[replacement, chf])
        );
    }
    let problem = expect_problem(
        app.get("/v1/payment-destinations?state=retired", key).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "state");
    let problem = expect_problem(
        app.get("/v1/payment-destinations?limit=0", key).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "limit");
    // Nobody else sees them: a sibling agent, another approver, another org.
    let (_, sibling_key) = app.agent(&b.org.approver_token, "Sibling").await;
    let (_, other_approver) = app.human(&b.org.approver_token, "approver").await;
    let other = app.org().await;
    for token in [
        &sibling_key,
        &other_approver,
        &other.agent_key,
        &other.approver_token,
    ] {
        let page = expect_status(
            app.get("/v1/payment-destinations", token).await,
            StatusCode::OK,
        )
        .await;
        assert_eq!(page["items"], json!([]));
    }
    // An invoice may only name the active ones of its currency.
    let body = invoice_body_for(b.customer_id, replacement);
    expect_status(
        app.create_invoice(key, "on-replacement", &body).await,
        StatusCode::CREATED,
    )
    .await;
}

async fn customer_lists_page_newest_first(app: TestApp) {
    let org = app.org().await;
    let mut created = Vec::new();
    for name in ["A", "B", "C", "D", "E"] {
        created.push(
            app.customer(&org.approver_token, org.agent_id, name)
                .await
                .to_string(),
        );
    }
    created.reverse();
    for token in [&org.approver_token, &org.agent_key] {
        for limit in [1, 2, 5, 100] {
            assert_eq!(
                all_pages(&app, token, "/v1/customers", limit).await,
                created,
                "limit {limit}"
            );
        }
    }
    let first = expect_status(
        app.get("/v1/customers?limit=2", &org.agent_key).await,
        StatusCode::OK,
    )
    .await;
    let names: Vec<&str> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["E", "D"]);
    let problem = expect_problem(
        app.get("/v1/customers?cursor=not-ours", &org.agent_key)
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "cursor");
}
