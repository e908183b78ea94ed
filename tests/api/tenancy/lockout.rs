//! Nobody can lock a human out (docs/contract/api.md, Tenancy; docs/SECURITY.md): failed
//! sign-ins counted for an email across addresses stop only sign-ins without a valid device
//! token of that human; a device is stopped only by its own failures; an address only for the
//! emails it guessed; every 429 names its limit; a password change or signing out everywhere
//! revokes every device token; `tauros user unlock` clears an email's count.
//!
//! Addresses are real: each client binds its side of the connection to its own loopback
//! address (127.0.0.x), as in [`super::anonymous`].

use crate::helpers::{
    Backend, PASSWORD, TestApp, both_backends, client_from, email_of, expect_problem,
    expect_status, spawn_app, sql_uuid,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::Command;

both_backends!(backend:
    a_device_token_passes_the_guessed_emails_limit_until_it_is_revoked,
    a_device_is_stopped_by_its_own_failures_only,
    a_password_change_revokes_device_tokens_and_the_operator_unlocks_the_email,
);

/// `POST /v1/sessions` from 127.0.0.`from`, with `device_token` if given.
async fn sign_in(
    app: &TestApp,
    from: u8,
    email: &str,
    password: &str,
    device: Option<&str>,
) -> reqwest::Response {
    let mut body = json!({"email": email, "password": password});
    if let Some(device) = device {
        body["device_token"] = json!(device);
    }
    client_from(from)
        .post(app.url("/v1/sessions"))
        .json(&body)
        .send()
        .await
        .expect("request")
}

/// A successful sign-in's answer.
async fn signed_in(app: &TestApp, from: u8, email: &str, device: Option<&str>) -> Value {
    expect_status(
        sign_in(app, from, email, PASSWORD, device).await,
        StatusCode::CREATED,
    )
    .await
}

/// `count` wrong passwords for `email` from 127.0.0.`from` (with `device` if given), each 401.
async fn guess(app: &TestApp, from: u8, email: &str, device: Option<&str>, count: usize) {
    for n in 0..count {
        let res = sign_in(app, from, email, &format!("wrong guess {n}"), device).await;
        expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    }
}

/// A 429 naming `limit`, with a `Retry-After` within the 15-minute window; its detail.
async fn limited(res: reqwest::Response, limit: &str) -> String {
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 0 && retry <= 900, "{retry}");
    let problem = expect_problem(res, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
    assert_eq!(problem.body["limit"], limit, "{problem}");
    problem.detail
}

fn device_of(answer: &Value) -> String {
    let device = answer["device_token"].as_str().expect("a device_token");
    assert!(device.starts_with("tdev_"), "{device}");
    device.to_owned()
}

/// The case: eleven wrong guesses from one address; then the right password with a
/// device token from another address is 201, without one 429 naming the email's limit, and
/// from the guessing address 429 naming that address. An expired device token does not pass;
/// signing out everywhere revokes them all.
async fn a_device_token_passes_the_guessed_emails_limit_until_it_is_revoked(backend: Backend) {
    let app = spawn_app(backend).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let first = signed_in(&app, 3, &email, None).await;
    let device = device_of(&first);
    let lapsing = device_of(&signed_in(&app, 5, &email, None).await);
    let user = sql_uuid(&app.database_url, first["user"]["id"].as_str().unwrap());

    guess(&app, 2, &email, None, 10).await;
    let eleventh = sign_in(&app, 2, &email, "wrong guess 10", None).await;
    assert_eq!(eleventh.status(), StatusCode::TOO_MANY_REQUESTS);

    let answer = signed_in(&app, 4, &email, Some(&device)).await;
    assert_eq!(device_of(&answer), device, "the valid token comes back");
    let session = answer["token"].as_str().unwrap().to_owned();

    let res = sign_in(&app, 4, &email, PASSWORD, None).await;
    let detail = limited(res, "email").await;
    assert!(
        !detail.contains("this address"),
        "blames no address: {detail}"
    );
    assert!(detail.contains("device_token"), "says the way in: {detail}");
    // Unknown or malformed tokens are no token: the same answer.
    for other in ["tdev_unknown", "not a token"] {
        limited(
            sign_in(&app, 4, &email, PASSWORD, Some(other)).await,
            "email",
        )
        .await;
    }
    let res = sign_in(&app, 2, &email, PASSWORD, Some(&device)).await;
    let detail = limited(res, "address_and_email").await;
    assert!(detail.contains("this address"), "{detail}");
    // Another email from the guessing address is not stopped.
    let other = app.org().await;
    signed_in(&app, 2, &email_of(&app, &other.approver_token).await, None).await;

    // The second device's token lapses: it is no device token any more.
    assert!(
        app.sql_exec(&format!(
            "update device_tokens set expires_at = '2000-01-01T00:00:00+00:00'
             where user_id = {user} and created_at =
                 (select max(created_at) from device_tokens where user_id = {user})"
        ))
        .await
    );
    limited(
        sign_in(&app, 5, &email, PASSWORD, Some(&lapsing)).await,
        "email",
    )
    .await;
    signed_in(&app, 5, &email, Some(&device)).await;

    // Signing out everywhere revokes every device token of the human.
    let devices = format!("select count(*) from device_tokens where user_id = {user}");
    assert!(app.sql_count(&devices).await >= 2);
    expect_status(
        app.delete("/v1/sessions", &session).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    assert_eq!(app.sql_count(&devices).await, 0);
    limited(
        sign_in(&app, 4, &email, PASSWORD, Some(&device)).await,
        "email",
    )
    .await;
}

/// Two devices of one human: ten wrong passwords with the first stop the first (429 naming
/// the device), even with the right password; the second still signs in.
async fn a_device_is_stopped_by_its_own_failures_only(backend: Backend) {
    let app = spawn_app(backend).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let laptop = device_of(&signed_in(&app, 2, &email, None).await);
    let phone = device_of(&signed_in(&app, 3, &email, None).await);
    assert_ne!(laptop, phone);
    // One failure from each of ten addresses: no address reaches its own limit.
    for from in 10..20 {
        guess(&app, from, &email, Some(&laptop), 1).await;
    }
    let res = sign_in(&app, 20, &email, PASSWORD, Some(&laptop)).await;
    limited(res, "device").await;
    let answer = signed_in(&app, 20, &email, Some(&phone)).await;
    assert_eq!(device_of(&answer), phone);
}

/// A password change revokes every device token; while the email is guessed at, the human
/// on a device without a token waits, until the operator runs `tauros user unlock --email`
/// (audited, interface `cli`).
async fn a_password_change_revokes_device_tokens_and_the_operator_unlocks_the_email(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let org = app.org().await;
    let email = email_of(&app, &org.approver_token).await;
    let first = signed_in(&app, 2, &email, None).await;
    let device = device_of(&first);
    let session = first["token"].as_str().unwrap().to_owned();
    let new_password = "a brand new password";
    let res = app
        .post(
            "/v1/me/password",
            &session,
            json!({"current_password": PASSWORD, "new_password": new_password}),
        )
        .await;
    expect_status(res, StatusCode::NO_CONTENT).await;

    guess(&app, 3, &email, None, 10).await;
    let res = sign_in(&app, 4, &email, new_password, Some(&device)).await;
    limited(res, "email").await;

    let out = unlock(&app.database_url, &email).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("cleared"), "{said}");
    let res = sign_in(&app, 4, &email, new_password, None).await;
    let answer = expect_status(res, StatusCode::CREATED).await;
    assert_ne!(device_of(&answer), device, "a new device token");

    let trail = expect_status(
        app.get("/v1/audit-events", answer["token"].as_str().unwrap())
            .await,
        StatusCode::OK,
    )
    .await;
    let unlocked: Vec<&Value> = trail["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "user.sign_ins_unlocked")
        .collect();
    assert_eq!(unlocked.len(), 1, "{trail}");
    assert_eq!(unlocked[0]["interface"], "cli");

    // An email nobody has: refused, nothing written.
    let out = unlock(&app.database_url, "nobody@example.com").await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was changed"));
}

/// Runs `tauros user unlock --email EMAIL` against the test's database.
async fn unlock(database_url: &str, email: &str) -> std::process::Output {
    let (url, email) = (database_url.to_owned(), email.to_owned());
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_tauros"))
            .args(["user", "unlock", "--email", &email])
            .env("DATABASE_URL", url)
            .env("TAUROS_LOG", "warn")
            .output()
            .expect("run tauros user unlock")
    })
    .await
    .unwrap()
}
