//! Cross-tenant probing: another organisation's or another agent's ids answer exactly like
//! random ones.

use super::identical;
use crate::helpers::{TestApp, both_backends, expect_status, id_of, invoice_body};
use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

both_backends!(
    other_tenants_ids_answer_exactly_like_random_ids,
    other_agents_parties_answer_exactly_like_random_ids,
);

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
