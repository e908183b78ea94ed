//! The real binary: `serve --demo` prints credentials that work, seeds once, and a SIGTERM lets
//! an in-flight request finish before the process exits 0. Audit rows cannot be changed.

use crate::helpers::{
    TestApp, both_backends, child_lines, expect_problem, expect_status, listening_address,
};
use reqwest::StatusCode;
use serde_json::json;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

both_backends!(
    demo_credentials_work_and_sigterm_finishes_in_flight_requests,
    sigterm_the_moment_it_is_listening_still_exits_cleanly,
    audit_rows_are_append_only
);

struct Server {
    child: Child,
    base: String,
    agent_key: String,
    stdout: String,
    /// What the server logs; read after it exits, so a failed exit shows why.
    stderr: std::sync::mpsc::Receiver<String>,
}

/// Starts `tauros serve --demo` on a free port and reads what it prints (with a deadline, so
/// a server that never comes up fails the test instead of hanging it).
fn start_demo(database_url: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["serve", "--demo", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", database_url)
        .env("TAUROS_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros serve");
    let stderr = child_lines(child.stderr.take().unwrap(), None);
    let stdout = child_lines(child.stdout.take().unwrap(), None);
    let deadline = Duration::from_secs(60);
    let address = listening_address(&stderr);
    let mut printed = String::new();
    while !printed.contains("OpenAPI:") {
        printed.push_str(&stdout.recv_timeout(deadline).expect("credentials printed"));
        printed.push('\n');
    }
    let agent_key = printed
        .lines()
        .find_map(|l| l.strip_prefix("Agent key: "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("agent key printed")
        .to_owned();
    Server {
        child,
        base: format!("http://{address}"),
        agent_key,
        stdout: printed,
        stderr,
    }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (bounded) for the server to exit and asserts it exited 0, showing its log if not.
async fn assert_clean_exit(server: Server) {
    let Server {
        mut child, stderr, ..
    } = server;
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait()),
    );
    let status = waited.await.expect("exits after SIGTERM").unwrap().unwrap();
    // The reader thread ends at the pipe's end, which the exit has closed.
    let log: Vec<String> =
        std::iter::from_fn(|| stderr.recv_timeout(Duration::from_secs(5)).ok()).collect();
    assert!(
        status.success(),
        "graceful exit, got {status:?}; the server logged:\n{}",
        log.join("\n")
    );
}

async fn demo_credentials_work_and_sigterm_finishes_in_flight_requests(app: TestApp) {
    let server = start_demo(&app.database_url);
    assert!(
        server.stdout.contains("demo@tauros.local"),
        "{}",
        server.stdout
    );
    assert!(server.stdout.contains("tauros-demo-password"));
    let client = reqwest::Client::new();
    let me = client
        .get(format!("{}/v1/me", server.base))
        .bearer_auth(&server.agent_key)
        .send()
        .await
        .unwrap();
    let me = expect_status(me, StatusCode::OK).await;
    assert_eq!(me["name"], "Billing agent");
    let agent_id = me["id"].clone();
    let session = client
        .post(format!("{}/v1/sessions", server.base))
        .json(&json!({"email": "demo@tauros.local", "password": "tauros-demo-password"}))
        .send()
        .await
        .unwrap();
    let session = expect_status(session, StatusCode::CREATED).await;
    assert_eq!(session["user"]["role"], "approver");
    let token = session["token"].as_str().unwrap().to_owned();

    // An in-flight request: headers sent, body not yet. SIGTERM arrives; the request still
    // gets its answer, then the process exits 0. `Expect: 100-continue` tells us when the
    // handler has started reading the body, so the signal provably lands mid-request.
    let first_key = server.agent_key.clone();
    let host = server.base.trim_start_matches("http://").to_owned();
    let body = r#"{"email":"demo@tauros.local","password":"wrong password!"}"#;
    let mut stream = std::net::TcpStream::connect(&host).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "POST /v1/sessions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.flush().unwrap();
    let mut interim = [0u8; 25];
    stream.read_exact(&mut interim).unwrap();
    assert!(
        String::from_utf8_lossy(&interim).starts_with("HTTP/1.1 100 Continue"),
        "the handler is reading the body: {}",
        String::from_utf8_lossy(&interim)
    );
    sigterm(&server.child);
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 401"),
        "in-flight request answered: {answer}"
    );
    assert!(answer.contains("invalid_credentials"));
    assert_clean_exit(server).await;

    // A second start seeds nothing new, prints a fresh key that works, and the old key is revoked.
    let again = start_demo(&app.database_url);
    assert!(again.stdout.contains("seeded earlier"), "{}", again.stdout);
    assert_ne!(again.agent_key, first_key);
    let me = client
        .get(format!("{}/v1/me", again.base))
        .bearer_auth(&again.agent_key)
        .send()
        .await
        .unwrap();
    assert_eq!(
        expect_status(me, StatusCode::OK).await["id"],
        agent_id,
        "the same demo agent"
    );
    let old = client
        .get(format!("{}/v1/me", again.base))
        .bearer_auth(&first_key)
        .send()
        .await
        .unwrap();
    expect_problem(old, StatusCode::UNAUTHORIZED, "unauthorized").await;
    // Sessions survive restarts (they live in the database).
    let me = client
        .get(format!("{}/v1/me", again.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    expect_status(me, StatusCode::OK).await;
    sigterm(&again.child);
    assert_clean_exit(again).await;
}

/// An orchestrator may stop a process the instant it reports ready. The signal handlers are
/// installed before "tauros listening" is logged, so even then it drains and exits 0 rather
/// than dying of the signal (a CI run once caught the lazily installed handler's window).
async fn sigterm_the_moment_it_is_listening_still_exits_cleanly(app: TestApp) {
    for _ in 0..3 {
        let server = start_demo(&app.database_url);
        sigterm(&server.child);
        assert_clean_exit(server).await;
    }
}

async fn audit_rows_are_append_only(app: TestApp) {
    let org = app.org().await;
    let before = app.audit_actions(org.org_id, org.agent_id).await;
    assert_eq!(before.len(), 1);
    let update = "update audit_events set action = 'forged'";
    let delete = "delete from audit_events";
    assert!(!app.sql_exec(update).await, "UPDATE refused");
    assert!(!app.sql_exec(delete).await, "DELETE refused");
    let after = app.audit_actions(org.org_id, org.agent_id).await;
    assert_eq!(after, before);
}
