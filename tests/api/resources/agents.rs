//! Agents are managed by the humans who own them; agents may not manage agents; another
//! human's agent is indistinguishable from an unknown one.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, parallel};
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

both_backends!(
    create_returns_a_working_key_once,
    list_pages_newest_first,
    foreign_and_unknown_agents_are_identical_404s,
    rename_validates_and_audits,
    delete_revokes_the_key,
    agents_may_not_manage_agents,
    concurrent_rotations_leave_exactly_one_key,
);

async fn create_returns_a_working_key_once(app: TestApp) {
    let org = app.org().await;
    let res = app
        .post(
            "/v1/agents",
            &org.approver_token,
            json!({"name": "  Collector  ", "capabilities": ["settlement", "settlement"]}),
        )
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    assert_eq!(body["agent"]["name"], "Collector", "names are trimmed");
    assert_eq!(body["agent"]["owner_id"], org.approver_id.to_string());
    assert_eq!(body["agent"]["capabilities"], json!(["settlement"]));
    let key = body["api_key"].as_str().unwrap();
    assert!(key.starts_with("tauros_"));
    let me = expect_status(app.get("/v1/me", key).await, StatusCode::OK).await;
    assert_eq!(me["id"], body["agent"]["id"]);
    assert_eq!(me["capabilities"], json!(["settlement"]));
    // The key is never shown again.
    let id = body["agent"]["id"].as_str().unwrap();
    let read = expect_status(
        app.get(&format!("/v1/agents/{id}"), &org.approver_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert!(!read.to_string().contains(key));
    assert!(read.get("api_key").is_none());
    // The creation is audited.
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let trail = conn
        .audit_for_subject(org.org_id, id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        trail.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["agent.created"]
    );
    assert_eq!(trail[0].actor_id, Some(org.approver_id));
    assert_eq!(trail[0].interface.as_str(), "api");
}

async fn list_pages_newest_first(app: TestApp) {
    let org = app.org().await;
    for name in ["B", "C"] {
        expect_status(
            app.post("/v1/agents", &org.approver_token, json!({"name": name}))
                .await,
            StatusCode::CREATED,
        )
        .await;
    }
    let names = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = expect_status(
        app.get("/v1/agents?limit=2", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(names(&first), ["C", "B"]);
    let cursor = first["next_cursor"].as_str().expect("a next page exists");
    let second = expect_status(
        app.get(
            &format!("/v1/agents?limit=2&cursor={cursor}"),
            &org.approver_token,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(names(&second), ["Agent A"]);
    assert!(second["next_cursor"].is_null());
    // Bad list parameters are 422 naming the parameter.
    let problem = expect_problem(
        app.get("/v1/agents?limit=0", &org.approver_token).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "limit");
    let problem = expect_problem(
        app.get("/v1/agents?limit=101", &org.approver_token).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "limit");
    let problem = expect_problem(
        app.get("/v1/agents?cursor=zzz", &org.approver_token).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "cursor");
}

async fn foreign_and_unknown_agents_are_identical_404s(app: TestApp) {
    let org = app.org().await;
    let other = app.org().await;
    let (_, sibling_human) = app.human(&org.approver_token, "approver").await;
    let unknown = Uuid::now_v7();
    for token in [&other.approver_token, &sibling_human] {
        let mut answers = Vec::new();
        for id in [org.agent_id, unknown] {
            for (method, path) in [
                ("GET", format!("/v1/agents/{id}")),
                ("PATCH", format!("/v1/agents/{id}")),
                ("POST", format!("/v1/agents/{id}/rotate-key")),
                ("DELETE", format!("/v1/agents/{id}")),
            ] {
                let res = match method {
                    "GET" => app.get(&path, token).await,
                    "PATCH" => app.patch(&path, token, json!({"name": "mine now"})).await,
                    "POST" => app.post(&path, token, json!({})).await,
                    _ => app.delete(&path, token).await,
                };
                let mut body = expect_problem(res, StatusCode::NOT_FOUND, "not_found")
                    .await
                    .body;
                body.as_object_mut().unwrap().remove("request_id");
                answers.push(body);
            }
        }
        assert!(
            answers.windows(2).all(|w| w[0] == w[1]),
            "foreign and unknown answers differ: {answers:?}"
        );
        // Nor does it show up in their list.
        let list = expect_status(app.get("/v1/agents", token).await, StatusCode::OK).await;
        assert!(!list.to_string().contains(&org.agent_id.to_string()));
    }
    // The owner's agent is untouched.
    let agent = expect_status(
        app.get(&format!("/v1/agents/{}", org.agent_id), &org.approver_token)
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(agent["name"], "Agent A");
    expect_status(app.get("/v1/me", &org.agent_key).await, StatusCode::OK).await;
}

async fn rename_validates_and_audits(app: TestApp) {
    let org = app.org().await;
    let path = format!("/v1/agents/{}", org.agent_id);
    let problem = expect_problem(
        app.patch(&path, &org.approver_token, json!({"name": "   "}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "name");
    let long = "x".repeat(161);
    let problem = expect_problem(
        app.patch(&path, &org.approver_token, json!({"name": long}))
            .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].code, "too_long");
    let problem = expect_problem(
        app.patch(
            &path,
            &org.approver_token,
            json!({"name": "B", "owner_id": Uuid::nil()}),
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "owner_id");
    let renamed = expect_status(
        app.patch(&path, &org.approver_token, json!({"name": "Renamed"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(renamed["name"], "Renamed");
    // The same name again changes nothing and writes no audit event.
    expect_status(
        app.patch(&path, &org.approver_token, json!({"name": "Renamed"}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        app.audit_actions(org.org_id, org.agent_id).await,
        ["agent.created", "agent.renamed"]
    );
}

async fn delete_revokes_the_key(app: TestApp) {
    let org = app.org().await;
    let path = format!("/v1/agents/{}", org.agent_id);
    let res = app.delete(&path, &org.approver_token).await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    expect_problem(
        app.get(&path, &org.approver_token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.get("/v1/me", &org.agent_key).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    expect_problem(
        app.delete(&path, &org.approver_token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

async fn agents_may_not_manage_agents(app: TestApp) {
    let org = app.org().await;
    let key = &org.agent_key;
    let id = org.agent_id;
    expect_problem(
        app.post("/v1/agents", key, json!({"name": "child"})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.get("/v1/agents", key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.get(&format!("/v1/agents/{id}"), key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.patch(&format!("/v1/agents/{id}"), key, json!({"name": "x"}))
            .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.post(&format!("/v1/agents/{id}/rotate-key"), key, json!({}))
            .await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    expect_problem(
        app.delete(&format!("/v1/agents/{id}"), key).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    // Still there, key still valid.
    expect_status(app.get("/v1/me", key).await, StatusCode::OK).await;
}

async fn concurrent_rotations_leave_exactly_one_key(app: TestApp) {
    let org = app.org().await;
    let path = format!("/v1/agents/{}/rotate-key", org.agent_id);
    let requests = (0..6)
        .map(|_| app.post_request(&path, &org.approver_token, &json!({})))
        .collect();
    let responses = parallel(requests).await;
    let mut keys = Vec::new();
    for res in responses {
        let body = expect_status(res, StatusCode::OK).await;
        keys.push(body["api_key"].as_str().unwrap().to_owned());
    }
    let mut working = 0;
    for key in keys.iter().chain(std::iter::once(&org.agent_key)) {
        if app.get("/v1/me", key).await.status() == StatusCode::OK {
            working += 1;
        }
    }
    assert_eq!(working, 1, "exactly one key survives concurrent rotations");
}
