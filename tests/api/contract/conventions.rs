//! HTTP conventions: every error is problem+json with a documented code and the request id;
//! strict bodies; the 1 MiB limit; request ids; operations routes; CORS; no input yields a 5xx.

use crate::helpers::{
    Backend, TestApp, both_backends, expect_problem, expect_status, spawn_app_with,
};
use reqwest::StatusCode;
use serde_json::json;
use tauros_api::HttpConfig;
use tauros_app::AppConfig;

both_backends!(
    strict_json_names_the_offending_field,
    bodies_over_one_mebibyte_are_413,
    routing_errors_are_problems,
    request_ids_are_echoed_or_generated,
    health_readiness_and_metrics,
    garbage_never_yields_a_5xx,
);

async fn sign_in_raw(
    app: &TestApp,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut req = app.client.post(app.url("/v1/sessions")).body(body);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    req.send().await.unwrap()
}

async fn strict_json_names_the_offending_field(app: TestApp) {
    let json_ct = Some("application/json");
    let problem = expect_problem(
        sign_in_raw(
            &app,
            json_ct,
            r#"{"email":"a@b.c","password":"p","state":"approved"}"#,
        )
        .await,
        StatusCode::BAD_REQUEST,
        "unknown_field",
    )
    .await;
    assert_eq!(problem.body["field"], "state");
    assert!(problem.detail.contains("state"));
    let problem = expect_problem(
        sign_in_raw(&app, json_ct, r#"{"email":42,"password":"p"}"#).await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(problem.body["field"], "email");
    expect_problem(
        sign_in_raw(&app, json_ct, "email=a").await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    )
    .await;
    expect_problem(
        sign_in_raw(&app, json_ct, r#"{"email":"a","password":"b"} x"#).await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    )
    .await;
    expect_problem(
        sign_in_raw(&app, json_ct, "").await,
        StatusCode::BAD_REQUEST,
        "invalid_json",
    )
    .await;
    expect_problem(
        sign_in_raw(&app, json_ct, "[]").await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    let problem = expect_problem(
        sign_in_raw(&app, json_ct, r#"{"email":"a@b.c"}"#).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors.len(), 1, "{problem}");
    assert_eq!(problem.errors[0].field, "password");
    assert_eq!(problem.errors[0].code, "required");
    assert_eq!(problem.errors[0].detail, "`password` is required");
    expect_problem(
        sign_in_raw(&app, None, r#"{"email":"a","password":"b"}"#).await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    expect_problem(
        sign_in_raw(&app, Some("text/plain"), r#"{"email":"a","password":"b"}"#).await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    // Nested unknown fields are named by their path too.
    let org = app.org().await;
    let problem = expect_problem(
        app.post(
            "/v1/agents",
            &org.approver_token,
            json!({"name": "x", "capabilities": ["invoicing", "root"]}),
        )
        .await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.errors[0].field, "capabilities[1]");
}

async fn bodies_over_one_mebibyte_are_413(app: TestApp) {
    let org = app.org().await;
    let big = format!(r#"{{"name":"{}"}}"#, "x".repeat(1024 * 1024 + 10));
    let res = app
        .client
        .post(app.url("/v1/agents"))
        .bearer_auth(&org.approver_token)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    expect_problem(res, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    let list = expect_status(
        app.get("/v1/agents", &org.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        1,
        "nothing was written"
    );
    // Just under the limit reaches validation (the name is too long), not the limit.
    let under = format!(r#"{{"name":"{}"}}"#, "x".repeat(1024 * 1024 - 100));
    let res = app
        .client
        .post(app.url("/v1/agents"))
        .bearer_auth(&org.approver_token)
        .header("content-type", "application/json")
        .body(under)
        .send()
        .await
        .unwrap();
    expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
}

async fn routing_errors_are_problems(app: TestApp) {
    expect_problem(
        app.client
            .get(app.url("/v1/nothing-here"))
            .send()
            .await
            .unwrap(),
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.client.put(app.url("/v1/me")).send().await.unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    )
    .await;
    let org = app.org().await;
    let problem = expect_problem(
        app.get("/v1/agents/not-a-uuid", &org.approver_token).await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert_eq!(problem.body["field"], "id");
}

async fn request_ids_are_echoed_or_generated(app: TestApp) {
    let res = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "trace-me-123")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "trace-me-123");
    let res = app
        .client
        .get(app.url("/v1/me"))
        .header("x-request-id", "trace-me-456")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["x-request-id"], "trace-me-456");
    let problem = expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
    assert_eq!(problem.body["request_id"], "trace-me-456");
    let a = app.client.get(app.url("/healthz")).send().await.unwrap();
    let b = app.client.get(app.url("/healthz")).send().await.unwrap();
    let a = a.headers()["x-request-id"].to_str().unwrap().to_owned();
    let b = b.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(
        uuid::Uuid::parse_str(&a).is_ok() && a != b,
        "generated ids are fresh UUIDs"
    );
}

async fn health_readiness_and_metrics(app: TestApp) {
    expect_status(
        app.client.get(app.url("/healthz")).send().await.unwrap(),
        StatusCode::OK,
    )
    .await;
    let ready = expect_status(
        app.client.get(app.url("/readyz")).send().await.unwrap(),
        StatusCode::OK,
    )
    .await;
    let backend = if app.backend == Backend::Sqlite {
        "sqlite"
    } else {
        "postgres"
    };
    assert_eq!(
        ready,
        json!({"status": "ready", "database": backend, "migrations": "current"})
    );
    app.client.get(app.url("/v1/me")).send().await.unwrap();
    let text = app.metrics().await;
    assert!(
        text.lines().any(|l| l.starts_with("http_requests_total{")
            && l.contains(r#"route="/v1/me""#)
            && l.contains(r#"status="401""#)),
        "request counts by route template and status: {text}"
    );
    assert!(
        text.contains("http_request_duration_seconds_bucket{"),
        "latency histogram"
    );
    let doc = expect_status(
        app.client
            .get(app.url("/openapi.json"))
            .send()
            .await
            .unwrap(),
        StatusCode::OK,
    )
    .await;
    assert_eq!(doc["openapi"], "3.1.0");
    let docs = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(docs.status(), StatusCode::OK);
    let html = docs.text().await.unwrap();
    assert!(
        html.contains("swagger"),
        "Swagger UI is served from the binary"
    );
    let bundle = app
        .client
        .get(app.url("/docs/swagger-ui-bundle.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(bundle.status(), StatusCode::OK);
}

async fn garbage_never_yields_a_5xx(app: TestApp) {
    let org = app.org().await;
    let routes = [
        ("POST", "/v1/sessions".to_owned()),
        ("POST", "/v1/users".to_owned()),
        ("POST", "/v1/invitations/accept".to_owned()),
        ("PATCH", "/v1/organisation".to_owned()),
        ("POST", "/v1/agents".to_owned()),
        ("PATCH", format!("/v1/agents/{}", org.agent_id)),
        ("POST", format!("/v1/agents/{}/rotate-key", org.agent_id)),
    ];
    let bodies = [
        "",
        "null",
        "0",
        "1.5",
        "\"s\"",
        "[]",
        "{}",
        "{\"a\":1}",
        "{",
        "\u{0}",
        "{\"name\":null}",
        "{\"email\":[],\"password\":{}}",
        "{\"name\":\"\\ud800\"}",
        "{\"four_eyes\":1e400}",
        "{\"invitation_token\":\"tinv_x\",\"password\":\"aaaaaaaaaaaaaaaa\"}",
    ];
    for (method, path) in &routes {
        for token in [
            None,
            Some(org.approver_token.as_str()),
            Some(org.agent_key.as_str()),
        ] {
            for body in bodies {
                let mut req = app
                    .client
                    .request(method.parse().unwrap(), app.url(path))
                    .header("content-type", "application/json")
                    .body(body);
                if let Some(t) = token {
                    req = req.bearer_auth(t);
                }
                let res = req.send().await.unwrap();
                assert!(
                    res.status().as_u16() < 500,
                    "{method} {path} {body:?} gave {}",
                    res.status()
                );
            }
        }
    }
}

async fn cors_allows_only_configured_origins(backend: Backend) {
    let http = HttpConfig {
        cors_origins: vec!["https://app.example".into()],
        ..HttpConfig::default()
    };
    let app = spawn_app_with(backend, AppConfig::default(), http).await;
    let preflight = |origin: &'static str| {
        app.client
            .request(reqwest::Method::OPTIONS, app.url("/v1/me"))
            .header("origin", origin)
            .header("access-control-request-method", "GET")
            .send()
    };
    let allowed = preflight("https://app.example").await.unwrap();
    assert_eq!(
        allowed
            .headers()
            .get("access-control-allow-origin")
            .unwrap(),
        "https://app.example"
    );
    let denied = preflight("https://evil.example").await.unwrap();
    assert!(
        denied
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

/// With no origins configured (the default) CORS allows nothing: a preflight gets no
/// `Access-Control-Allow-Origin`, and an ordinary answer carries no CORS headers at all.
async fn without_origins_cors_allows_nothing(backend: Backend) {
    let app = spawn_app_with(backend, AppConfig::default(), HttpConfig::default()).await;
    let preflight = app
        .client
        .request(reqwest::Method::OPTIONS, app.url("/v1/me"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert!(!preflight.status().is_success(), "{}", preflight.status());
    let plain = app
        .client
        .get(app.url("/v1/me"))
        .header("origin", "https://app.example")
        .send()
        .await
        .unwrap();
    for response in [&preflight, &plain] {
        assert!(
            !response
                .headers()
                .keys()
                .any(|name| name.as_str().starts_with("access-control-")),
            "{:?}",
            response.headers()
        );
        assert!(response.headers().contains_key("x-request-id"));
    }
}

#[tokio::test]
async fn without_origins_cors_allows_nothing_sqlite() {
    without_origins_cors_allows_nothing(Backend::Sqlite).await;
}

#[tokio::test]
async fn without_origins_cors_allows_nothing_postgres() {
    without_origins_cors_allows_nothing(Backend::Postgres).await;
}

#[tokio::test]
async fn cors_allows_only_configured_origins_sqlite() {
    cors_allows_only_configured_origins(Backend::Sqlite).await;
}

#[tokio::test]
async fn cors_allows_only_configured_origins_postgres() {
    cors_allows_only_configured_origins(Backend::Postgres).await;
}
