//! What an anonymous client may cost (docs/contract/api.md Tenancy, "Anonymous cost"): an
//! oversized email or password is refused before any hashing or bookkeeping; failed sign-ins
//! are counted per email across every address before the hash, so concurrent guesses cannot
//! pass the limit (what a device token changes: [`super::lockout`]); the record of failures is
//! bounded; an invitation token is looked up before the new password is hashed.
//!
//! Client addresses come from the socket only (no forwarding header is trusted), so a test
//! rotates its address by binding its side of the connection to another loopback address
//! (127.0.0.2, 127.0.0.3, …; Linux routes all of 127/8 to the loopback interface).

use crate::helpers::{
    Backend, PASSWORD, Problem, TestApp, both_backends, client_from, email_of, expect_problem,
    expect_status, figures, parallel, spawn_app_with,
};
use reqwest::StatusCode;
use serde_json::json;
use tauros_api::{ConnectionLimits, HttpConfig};
use tauros_app::AppConfig;

both_backends!(oversized_emails_and_passwords_are_refused_before_any_work);

both_backends!(backend:
    failed_sign_ins_are_counted_per_email_across_addresses,
    concurrent_guesses_cannot_pass_the_failure_limit,
    the_failed_sign_in_record_stays_within_its_cap,
    a_bogus_invitation_token_never_reaches_the_password_pool,
    one_address_cannot_fill_the_password_pool,
);

/// `POST /v1/sessions` from `client`.
async fn sign_in_from(
    app: &TestApp,
    client: &reqwest::Client,
    email: &str,
    password: &str,
) -> reqwest::Response {
    client
        .post(app.url("/v1/sessions"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .expect("request")
}

fn only_field(problem: &Problem) -> &str {
    assert_eq!(problem.errors.len(), 1, "{problem}");
    let detail = &problem.errors[0].detail;
    assert!(
        detail.contains("254") || detail.contains("1024") || detail.contains("1,024"),
        "says what to send: {problem}"
    );
    &problem.errors[0].field
}

/// An email over 254 characters or a password over 1,024 is a 422 naming the field, on every
/// door that takes one (sign-in, changing a password, accepting an invitation, inviting), and
/// nothing enters the failed-sign-in record.
async fn oversized_emails_and_passwords_are_refused_before_any_work(app: TestApp) {
    let org = app.org().await;
    let long_email = format!("{}@example.com", "a".repeat(250));
    let long_password = "p".repeat(1025);
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": long_email, "password": "a wrong password"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(only_field(&problem), "email");
    let email = email_of(&app, &org.approver_token).await;
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": email, "password": long_password}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(only_field(&problem), "password");
    let res = app
        .post(
            "/v1/me/password",
            &org.approver_token,
            json!({"current_password": long_password, "new_password": "a new long password"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(only_field(&problem), "current_password");
    let res = app
        .post_public(
            "/v1/invitations/accept",
            json!({"invitation_token": format!("tinv_{}", "A".repeat(43)), "password": long_password}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(only_field(&problem), "password");
    let res = app
        .post(
            "/v1/users",
            &org.approver_token,
            json!({"email": long_email, "role": "operator"}),
        )
        .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(only_field(&problem), "email");
    // `tauros bootstrap-approver` takes both too, and refuses them the same way.
    for (email, password, field) in [
        (long_email.as_str(), PASSWORD.to_owned(), "email"),
        ("boot@example.com", long_password.clone(), "password"),
    ] {
        match app
            .app
            .bootstrap_approver("Oversized", email, password)
            .await
        {
            Err(tauros_app::AppError::Validation(errors)) => {
                assert_eq!(errors.len(), 1, "{errors:?}");
                assert_eq!(errors[0].field, field);
            }
            other => panic!("bootstrap with an oversized {field}: {other:?}"),
        }
    }
    assert_eq!(
        app.app.sign_in_record_entries(),
        0,
        "an oversized attempt was recorded"
    );
    // The account was not touched: the right password still signs in.
    app.sign_in(&email, PASSWORD).await;
}

/// Three wrong passwords for one email, each from another address, use up that email's limit
/// of three: the fourth attempt, from a fourth address and with the right password, is 429.
async fn failed_sign_ins_are_counted_per_email_across_addresses(backend: Backend) {
    let config = AppConfig {
        sign_in_failures: 3,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    for n in 2..5 {
        let res = sign_in_from(&app, &client_from(n), &email, "a wrong password").await;
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    }
    let res = sign_in_from(&app, &client_from(5), &email, PASSWORD).await;
    assert!(res.headers().contains_key("retry-after"));
    let problem = expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert_eq!(problem.body["limit"], "email", "{problem}");
}

/// Twenty wrong guesses at once against a limit of ten: a place is reserved before the hash,
/// so exactly ten reach the password check (401) and the other ten are refused (429); the
/// right password then waits too.
async fn concurrent_guesses_cannot_pass_the_failure_limit(backend: Backend) {
    let config = AppConfig {
        sign_in_failures: 10,
        // Room for every guess in the hashing queue: this test is about the failure limit.
        password_queue: 64,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let guesses = (0..20)
        .map(|n| {
            app.client
                .post(app.url("/v1/sessions"))
                .json(&json!({"email": email, "password": format!("wrong guess {n}")}))
        })
        .collect();
    let (mut wrong, mut limited) = (0, 0);
    for res in parallel(guesses).await {
        match res.status() {
            StatusCode::UNAUTHORIZED => {
                expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
                wrong += 1;
            }
            StatusCode::TOO_MANY_REQUESTS => {
                expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
                limited += 1;
            }
            other => panic!("a guess got {other}"),
        }
    }
    figures(
        "anonymous cost: 20 concurrent guesses, limit 10",
        backend,
        &[
            ("invalid_credentials", wrong.to_string()),
            ("rate_limited", limited.to_string()),
        ],
    );
    assert_eq!(wrong, 10, "guesses that reached the password hash");
    assert_eq!(limited, 10);
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": email, "password": PASSWORD}),
        )
        .await;
    expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
}

/// Forty failed sign-ins for forty emails against a record of sixteen entries: the record
/// never holds more than sixteen, and an email guessed afterwards is still limited.
async fn the_failed_sign_in_record_stays_within_its_cap(backend: Backend) {
    let config = AppConfig {
        sign_in_failures: 3,
        sign_in_record_entries: 16,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let mut most = 0;
    for n in 0..40 {
        let email = format!("flood-{n}@example.com");
        let res = sign_in_from(&app, &app.client, &email, "a wrong password").await;
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
        most = most.max(app.app.sign_in_record_entries());
        assert!(most <= 16, "the record holds {most} entries, over its cap");
    }
    figures(
        "anonymous cost: failed-sign-in record, cap 16",
        backend,
        &[
            ("distinct emails", "40".into()),
            ("most entries", most.to_string()),
        ],
    );
    for _ in 0..3 {
        let res = sign_in_from(&app, &app.client, "late@example.com", "a wrong password").await;
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    }
    let res = sign_in_from(&app, &app.client, "late@example.com", "a wrong password").await;
    expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
}

/// Sixty-four accepts with well-formed but unknown tokens at once, against a hashing pool of
/// one thread and one waiting place, together with a real sign-in: every bogus accept is
/// answered `invalid_credentials` (none 503: no password was hashed for them) and the sign-in
/// succeeds.
async fn a_bogus_invitation_token_never_reaches_the_password_pool(backend: Backend) {
    let config = AppConfig {
        password_threads: 1,
        password_queue: 1,
        ..AppConfig::default()
    };
    // Sixty-five connections from one address: over the default share of 64 per address.
    let http = HttpConfig {
        limits: ConnectionLimits {
            max_connections_per_address: 128,
            ..ConnectionLimits::default()
        },
        ..HttpConfig::default()
    };
    let app = spawn_app_with(backend, config, http).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let mut requests: Vec<reqwest::RequestBuilder> = (0..64)
        .map(|n| {
            app.client
                .post(app.url("/v1/invitations/accept"))
                .json(&json!({
                    "invitation_token": format!("tinv_{:0>43}", n),
                    "password": "a long enough password",
                }))
        })
        .collect();
    requests.push(
        app.client
            .post(app.url("/v1/sessions"))
            .json(&json!({"email": email, "password": PASSWORD})),
    );
    let mut answers = parallel(requests).await;
    let sign_in = answers.pop().expect("the sign-in");
    let mut busy = 0;
    for res in answers {
        if res.status() == StatusCode::SERVICE_UNAVAILABLE {
            busy += 1;
            continue;
        }
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    }
    assert_eq!(busy, 0, "bogus accepts that waited for the password pool");
    expect_status(sign_in, StatusCode::CREATED).await;
}

/// Sixteen wrong sign-ins at once from one address, against a hashing pool of one thread and
/// three waiting places, together with a real sign-in from another address: the guessing
/// address holds at most half of the pool (two places; the rest of its guesses are 429 at
/// once, uncounted and unhashed), so the real sign-in finds room and succeeds at its first try
/// instead of 503 `unavailable`.
async fn one_address_cannot_fill_the_password_pool(backend: Backend) {
    let config = AppConfig {
        password_threads: 1,
        password_queue: 3,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let guesser = client_from(2);
    let legitimate = client_from(1);
    let mut requests: Vec<reqwest::RequestBuilder> = (0..16)
        .map(|n| {
            guesser.post(app.url("/v1/sessions")).json(
                &json!({"email": format!("guess-{n}@example.com"), "password": "a wrong password"}),
            )
        })
        .collect();
    requests.push(
        legitimate
            .post(app.url("/v1/sessions"))
            .json(&json!({"email": email, "password": PASSWORD})),
    );
    let mut answers = parallel(requests).await;
    let sign_in = answers.pop().expect("the sign-in");
    let (mut wrong, mut limited, mut busy) = (0, 0, 0);
    for res in answers {
        match res.status() {
            StatusCode::UNAUTHORIZED => wrong += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
                limited += 1;
            }
            StatusCode::SERVICE_UNAVAILABLE => busy += 1,
            other => panic!("a guess got {other}"),
        }
    }
    figures(
        "anonymous cost: 16 parallel guesses from one address, pool of 1 + 3",
        backend,
        &[
            ("invalid_credentials", wrong.to_string()),
            ("rate_limited", limited.to_string()),
            ("unavailable", busy.to_string()),
            ("real sign-in", sign_in.status().as_u16().to_string()),
        ],
    );
    assert_eq!(busy, 0, "guesses from one address filled the password pool");
    expect_status(sign_in, StatusCode::CREATED).await;
}
