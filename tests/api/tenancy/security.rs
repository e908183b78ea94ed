//! Attacks on the running service, each shown refused (docs/SECURITY.md): clean text
//! (docs/contract/api.md Conventions, text hygiene): control, bidirectional and invisible
//! characters never reach the database or a seal, on either backend; metric labels that a client
//! cannot multiply; security headers; rate limits per credential and per sign-in; password hashing
//! that a flood of guesses cannot queue behind. The other findings have files of their own: four
//! eyes that one approver cannot undo (`resources/governance.rs`), the account lifecycle
//! (`resources/accounts.rs`), oversized bodies (`contract/bodies.rs`) and slow clients
//! (`slow_clients.rs`).

use crate::helpers::{
    Backend, PASSWORD, TestApp, both_backends, expect_problem, expect_status, invoice_body,
    parallel, serve_router, spawn_app_with,
};
use reqwest::StatusCode;
use serde_json::json;
use tauros_api::HttpConfig;
use tauros_app::AppConfig;

both_backends!(
    hidden_characters_are_refused_on_every_text_field,
    a_nul_never_reaches_the_database,
    made_up_methods_and_paths_cannot_grow_the_metrics,
    responses_are_not_sniffed_or_cached_and_request_ids_stay_small,
    metrics_on_their_own_address_are_not_sniffed_either,
    the_docs_page_cannot_be_framed_or_run_foreign_scripts,
);

both_backends!(
    backend: each_credential_has_its_own_rate_limit,
    failed_sign_ins_are_limited_per_email,
    a_flood_of_sign_ins_is_turned_away_not_queued,
);

async fn hidden_characters_are_refused_on_every_text_field(app: TestApp) {
    let b = app.billing().await;
    let before = app.invoice_rows().await;
    let customers = app.sql_count("select count(*) from customers").await;

    // A right-to-left override in a line description would show an approver other text than
    // the one sealed; a zero-width space in the reasoning hides content.
    for (path, value, field) in [
        (
            "/lines/0/description",
            "Consulting \u{202E}0001 EUR",
            "lines[0].description",
        ),
        ("/reasoning", "Agreed\u{200B} in writing.", "reasoning"),
    ] {
        let mut body = invoice_body(&b);
        *body.pointer_mut(path).unwrap() = json!(value);
        let res = app.create_invoice(&b.org.agent_key, "hidden", &body).await;
        let problem =
            expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
        assert_eq!(problem.errors[0].field, field, "{problem}");
        assert_eq!(problem.errors[0].code, "invalid_characters");
    }
    // Line breaks and tabs are fine where a text spans lines.
    let mut body = invoice_body(&b);
    body["reasoning"] = json!("Agreed in writing.\n\tSee the statement of work.");
    let res = app
        .create_invoice(&b.org.agent_key, "multiline", &body)
        .await;
    expect_status(res, StatusCode::CREATED).await;

    // Single-line fields refuse them, and names refuse bidirectional isolates.
    let res = app
        .post(
            "/v1/customers",
            &b.org.approver_token,
            json!({"agent_id": b.org.agent_id, "name": "Acme\nInc", "email": "a@example.com"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "name");
    let res = app
        .post(
            "/v1/agents",
            &b.org.approver_token,
            json!({"name": "Billing \u{2066}agent\u{2069}"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "invalid_characters");

    let pending = app.pending(&b, "reasoned").await;
    let id = pending["id"].as_str().unwrap();
    let res = app
        .post(
            &format!("/v1/invoices/{id}/reject"),
            &b.org.approver_token,
            TestApp::decision_body(&pending, Some("No\u{202D}pe")),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "reason");

    assert_eq!(
        app.sql_count("select count(*) from customers").await,
        customers
    );
    let after = app.invoice_rows().await;
    // Only the multi-line draft and the pending invoice were written.
    assert_eq!(after[0], before[0] + 2);
    assert_eq!(after[2], before[2]);
}

async fn a_nul_never_reaches_the_database(app: TestApp) {
    let b = app.billing().await;
    let res = app
        .post(
            "/v1/payment-destinations",
            &b.org.agent_key,
            json!({"label": "Acc\u{0}ount", "currency": "EUR", "network": "iban", "address": crate::helpers::IBAN}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "label");
    assert_eq!(problem.errors[0].code, "invalid_characters");

    // Sign-in with a NUL in the email is an unknown email, not a database error.
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "demo\u{0}@example.com", "password": "whatever-it-is"}),
        )
        .await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;

    // A list filter that can never match is refused by name, not sent to the database.
    let res = app
        .get("/v1/invoices?idempotency_key=a%00b", &b.org.agent_key)
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "idempotency_key");
}

async fn made_up_methods_and_paths_cannot_grow_the_metrics(app: TestApp) {
    // Warm every label the flood below could use, then measure.
    let warm = |method: &str, path: &str| {
        app.client
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                app.url(path),
            )
            .send()
    };
    warm("BREW", "/nowhere-0").await.unwrap();
    let other = |text: &str| {
        text.lines()
            .filter(|l| l.contains("method=\"OTHER\""))
            .count()
    };
    let before = other(&app.metrics().await);
    assert!(before > 0, "the made-up method is counted as OTHER");
    for n in 0..200 {
        let method = format!("M{n}X");
        warm(&method, &format!("/nowhere-{n}")).await.unwrap();
    }
    let after = app.metrics().await;
    assert!(!after.contains("M7X"), "a client's method became a label");
    assert!(
        !after.contains("nowhere-7"),
        "a client's path became a label"
    );
    // Only the counters' values grew, not the number of series.
    assert_eq!(other(&after), before);
}

async fn responses_are_not_sniffed_or_cached_and_request_ids_stay_small(app: TestApp) {
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "nobody@example.com", "password": "wrong password here"}),
        )
        .await;
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let b = app.billing().await;
    // The answer that carries an API key is never cached.
    let res = app
        .post(
            "/v1/agents",
            &b.org.approver_token,
            json!({"name": "Cached?"}),
        )
        .await;
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
    expect_status(res, StatusCode::CREATED).await;

    let header =
        |res: &reqwest::Response| res.headers()["x-request-id"].to_str().unwrap().to_owned();
    let fine = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "trace-42.a:b_c")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&fine), "trace-42.a:b_c");
    for bad in [
        "x".repeat(10_000),
        "has space".to_owned(),
        "semi;colon".to_owned(),
    ] {
        let res = app
            .client
            .get(app.url("/v1/me"))
            .header("x-request-id", bad.as_str())
            .send()
            .await
            .unwrap();
        let id = header(&res);
        assert_ne!(id, bad);
        assert!((1..=128).contains(&id.len()), "{id}");
        let problem = expect_problem(res, StatusCode::UNAUTHORIZED, "unauthorized").await;
        assert_eq!(problem.body["request_id"], id.as_str());
    }
}

/// `/metrics` served on its own address (`TAUROS_METRICS_BIND`) is a router of its own: it
/// carries `nosniff` like every other answer.
async fn metrics_on_their_own_address_are_not_sniffed_either(app: TestApp) {
    // One request on the main listener, so there is a series to read.
    app.client.get(app.url("/healthz")).send().await.unwrap();
    let addr = serve_router(
        tauros_api::ops_metrics_router(app.app.clone()),
        HttpConfig::default().limits,
    )
    .await;
    let res = app
        .client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["x-content-type-options"], "nosniff");
    assert!(res.text().await.unwrap().contains("http_requests_total"));
    let other = app
        .client
        .get(format!("http://{addr}/v1/me"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    assert_eq!(other.headers()["x-content-type-options"], "nosniff");
}

/// The API docs page (Swagger UI) runs only its own scripts and cannot be framed: a strict
/// Content-Security-Policy with `frame-ancestors 'none'`, and `X-Frame-Options: DENY` for
/// browsers that predate it.
async fn the_docs_page_cannot_be_framed_or_run_foreign_scripts(app: TestApp) {
    let res = app.client.get(app.url("/docs/")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let headers = res.headers().clone();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let policy = headers["content-security-policy"].to_str().unwrap();
    let directive = |name: &str| -> Vec<String> {
        let found: Vec<Vec<String>> = policy
            .split(';')
            .map(|d| d.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
            .filter(|d| d.first().map(String::as_str) == Some(name))
            .collect();
        assert_eq!(found.len(), 1, "{name} once in {policy}");
        found[0][1..].to_vec()
    };
    assert_eq!(directive("frame-ancestors"), ["'none'"], "{policy}");
    assert_eq!(directive("script-src"), ["'self'"], "{policy}");
    assert_eq!(directive("object-src"), ["'none'"], "{policy}");
    assert_eq!(directive("base-uri"), ["'none'"], "{policy}");
    assert_eq!(directive("default-src"), ["'self'"], "{policy}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    // The page's scripts are files of its own origin, none inline.
    let page = res.text().await.unwrap();
    for script in page.split("<script").skip(1) {
        let tag = script.split('>').next().unwrap_or_default();
        assert!(tag.contains("src=\"./") || tag.contains("src=\"/"), "{tag}");
        let inline = script.split_once('>').map_or("", |(_, rest)| rest);
        assert!(
            inline.trim_start().starts_with("</script"),
            "inline script: {script}"
        );
    }
}

/// Sixty wrong-password sign-ins at once, from sixty client addresses (one address may hold
/// only half the pool: `anonymous::one_address_cannot_fill_the_password_pool`), against a pool
/// of one thread and two waiting places: the ones that do not fit are answered 503 with
/// `Retry-After` at once, none is a 500, and a real sign-in works as soon as the flood is over.
async fn a_flood_of_sign_ins_is_turned_away_not_queued(backend: Backend) {
    let config = AppConfig {
        password_threads: 1,
        password_queue: 2,
        // This test is about the hashing pool; the failed sign-in limit has its own.
        sign_in_failures: 0,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let email = app
        .get("/v1/me", &org.approver_token)
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap()["email"]
        .as_str()
        .unwrap()
        .to_owned();
    let guesses = (0..60u8)
        .map(|n| {
            crate::helpers::client_from(n + 2)
                .post(app.url("/v1/sessions"))
                .json(&json!({"email": email, "password": format!("guess number {n}")}))
        })
        .collect();
    let mut turned_away = 0;
    for res in parallel(guesses).await {
        match res.status() {
            StatusCode::UNAUTHORIZED => {}
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(res.headers()["retry-after"], "1");
                expect_problem(res, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
                turned_away += 1;
            }
            other => panic!("a guess got {other}"),
        }
    }
    assert!(turned_away > 0, "no guess was turned away");
    app.sign_in(&email, PASSWORD).await;
}

/// A credential over its bucket hears 429 with `Retry-After`; another credential is not slowed.
async fn each_credential_has_its_own_rate_limit(backend: Backend) {
    let config = AppConfig {
        rate_limit_per_second: 1,
        rate_limit_burst: 2,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let mut limited = Vec::new();
    for _ in 0..10 {
        let res = app.get("/v1/me", &org.agent_key).await;
        if res.status() == StatusCode::TOO_MANY_REQUESTS {
            limited.push(res);
        }
    }
    // Two at once and one a second: ten requests in well under seven seconds meet the limit.
    assert!(
        limited.len() >= 3,
        "only {} of 10 were limited",
        limited.len()
    );
    let res = limited.remove(0);
    assert_eq!(res.headers()["retry-after"], "1");
    expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    // The approver's session has its own bucket.
    expect_status(app.get("/v1/me", &org.approver_token).await, StatusCode::OK).await;
}

/// After ten failed sign-ins for one email (and address), the eleventh attempt is refused
/// before any password work, even with the right password; another email is not affected.
async fn failed_sign_ins_are_limited_per_email(backend: Backend) {
    let app = spawn_app_with(backend, AppConfig::default(), HttpConfig::default()).await;
    let org = app.org().await;
    let email = app
        .get("/v1/me", &org.approver_token)
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap()["email"]
        .as_str()
        .unwrap()
        .to_owned();
    for n in 0..10 {
        let res = app
            .post_public(
                "/v1/sessions",
                json!({"email": email, "password": format!("wrong guess {n}")}),
            )
            .await;
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    }
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": email, "password": PASSWORD}),
        )
        .await;
    let retry: u32 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 800 && retry <= 900, "{retry}");
    expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "someone.else@example.com", "password": "wrong guess"}),
        )
        .await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
}
