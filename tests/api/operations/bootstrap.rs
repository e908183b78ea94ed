//! `tauros bootstrap-approver`: concurrent runs for one organisation give exactly one
//! approver, decided by a database constraint; the loser exits non-zero having changed nothing.

use crate::helpers::{PASSWORD, TestApp, both_backends, expect_problem, expect_status};
use reqwest::StatusCode;
use serde_json::json;
use std::io::Write;
use std::process::{Command, Stdio};
use tauros_app::AppError;

both_backends!(
    two_concurrent_cli_runs_give_one_approver,
    many_concurrent_bootstraps_give_one_approver,
    bootstrap_refuses_bad_input_and_changes_nothing,
);

fn start_cli(database_url: &str, org: &str, email: &str, password: &str) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args([
            "bootstrap-approver",
            "--org",
            org,
            "--email",
            email,
            "--password-stdin",
        ])
        .env("DATABASE_URL", database_url)
        .env("TAUROS_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{password}\n").as_bytes())
        .expect("write password");
    child
}

async fn two_concurrent_cli_runs_give_one_approver(app: TestApp) {
    let url = app.database_url.clone();
    let outputs = tokio::task::spawn_blocking(move || {
        let a = start_cli(&url, "Race Inc", "first@race.example", PASSWORD);
        let b = start_cli(&url, "Race Inc", "second@race.example", PASSWORD);
        [
            a.wait_with_output().expect("wait"),
            b.wait_with_output().expect("wait"),
        ]
    })
    .await
    .unwrap();
    let winners: Vec<_> = outputs.iter().filter(|o| o.status.success()).collect();
    let losers: Vec<_> = outputs.iter().filter(|o| !o.status.success()).collect();
    assert_eq!(winners.len(), 1, "exactly one run succeeds: {outputs:?}");
    assert_eq!(losers.len(), 1);
    let stderr = String::from_utf8_lossy(&losers[0].stderr);
    assert!(
        stderr.contains("already has an approver"),
        "loser says why: {stderr}"
    );
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "one-line reason: {stderr}"
    );
    // Exactly one of the two humans exists, and it can sign in.
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let first = conn
        .users_by_email("first@race.example", 1)
        .await
        .unwrap()
        .pop();
    let second = conn
        .users_by_email("second@race.example", 1)
        .await
        .unwrap()
        .pop();
    assert!(
        first.is_some() != second.is_some(),
        "one approver, not two and not none"
    );
    let winner = first.or(second).unwrap();
    assert_eq!(winner.role, "approver");
    app.sign_in(&winner.email, PASSWORD).await;
    // A third run, after the fact, is refused the same way.
    let url = app.database_url.clone();
    let third = tokio::task::spawn_blocking(move || {
        start_cli(&url, "Race Inc", "third@race.example", PASSWORD)
            .wait_with_output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!third.status.success());
    assert!(
        conn.users_by_email("third@race.example", 1)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn many_concurrent_bootstraps_give_one_approver(app: TestApp) {
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let inner = app.app.clone();
            tokio::spawn(async move {
                inner
                    .bootstrap_approver("Crowd", &format!("a{i}@crowd.example"), PASSWORD.into())
                    .await
            })
        })
        .collect();
    let mut ok = 0;
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => ok += 1,
            Err(AppError::ApproverExists) => refused += 1,
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!((ok, refused), (1, 7));
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let mut existing = 0;
    for i in 0..8 {
        if !conn
            .users_by_email(&format!("a{i}@crowd.example"), 1)
            .await
            .unwrap()
            .is_empty()
        {
            existing += 1;
        }
    }
    assert_eq!(existing, 1);
}

async fn bootstrap_refuses_bad_input_and_changes_nothing(app: TestApp) {
    let url = app.database_url.clone();
    let out = tokio::task::spawn_blocking(move || {
        start_cli(&url, "Shorty", "s@example.com", "short")
            .wait_with_output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("password"));
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    assert!(
        conn.org_by_name("Shorty").await.unwrap().is_none(),
        "nothing was created"
    );
    // The password's trailing newline is trimmed: the exact password signs in.
    let url = app.database_url.clone();
    let out = tokio::task::spawn_blocking(move || {
        start_cli(&url, "Newline", "n@example.com", PASSWORD)
            .wait_with_output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    app.sign_in("n@example.com", PASSWORD).await;
    let res = app
        .post_public(
            "/v1/sessions",
            json!({"email": "n@example.com", "password": format!("{PASSWORD}\n")}),
        )
        .await;
    expect_problem(res, StatusCode::UNAUTHORIZED, "invalid_credentials").await;
    let token = app.sign_in("n@example.com", PASSWORD).await;
    let me = expect_status(app.get("/v1/me", &token).await, StatusCode::OK).await;
    assert_eq!(me["role"], "approver");
}
