//! Signed webhooks (docs/contract/effects.md §2, Standard Webhooks), on both backends over real
//! HTTP: endpoint management and its validation, and deliveries to a receiver this file runs on
//! 127.0.0.1:0. The receiver checks every signature with its own HMAC-SHA256 (written here from
//! RFC 2104 on `sha2`, not the service's), deduplicates by `webhook-id` and can be told to fail:
//! answer an error before or after processing, hang past the endpoint's timeout, or go away and
//! come back on the same port. Workers run in the test process with a short backoff cap (200 ms).
//!
//! The servers here allow-list 127.0.0.1 (and `localhost` where the name's resolution is the
//! point): without that, the outbound policy refuses every loopback address.

use crate::helpers::settlement::{event, settlement_key};
use crate::helpers::{
    Backend, TestApp, both_backends, expect_problem, expect_status, figures, id_of, parallel,
    spawn_app, spawn_app_with, uuid_of,
};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tauros_api::HttpConfig;
use tauros_app::runtime::webhooks::DeliveryPolicy;
use tauros_app::runtime::{Defaults, WorkerConfig, Workers};
use tauros_app::{App, AppConfig, NewJob, Retention, WebhookConfig};
use tauros_domain::webhook::{AllowList, SecretKey};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use uuid::Uuid;

both_backends!(
    backend: endpoints_are_managed_by_approvers_and_show_their_secret_once,
    registrations_are_validated,
    every_event_arrives_once_signed_despite_failures_timeouts_and_a_restart,
    a_command_that_rolls_back_enqueues_no_delivery,
    deleting_an_endpoint_cancels_its_waiting_deliveries,
    a_redirect_is_not_followed_and_the_attempt_fails,
    the_address_is_vetted_again_at_delivery,
    secrets_are_sealed_at_rest_with_the_operators_key,
    every_payment_move_is_one_delivery,
    a_delivery_past_its_retry_budget_is_resent_once_with_the_same_webhook_id,
    a_failing_endpoint_is_disabled_holds_its_deliveries_and_re_enabled_sends_them,
    a_keyed_registration_retried_in_parallel_makes_one_endpoint,
);

const ALL_EVENTS: [&str; 8] = [
    "invoice.created",
    "invoice.revised",
    "invoice.submitted",
    "invoice.withdrawn",
    "invoice.approved",
    "invoice.rejected",
    "invoice.changes_requested",
    "invoice.cancelled",
];

fn webhook_config(allow: &str, key: Option<&SecretKey>) -> WebhookConfig {
    WebhookConfig {
        allow_hosts: AllowList::parse(allow).unwrap(),
        secret_key: key.cloned(),
        ..WebhookConfig::default()
    }
}

/// A server whose outbound policy admits `allow`.
async fn spawn_allowing(backend: Backend, allow: &str) -> TestApp {
    let config = AppConfig {
        webhooks: webhook_config(allow, None),
        ..AppConfig::default()
    };
    spawn_app_with(backend, config, HttpConfig::default()).await
}

/// Workers for `app`, with deliveries retried after 200–250 ms (or after `backoff_cap`).
fn workers_with(app: &App, backoff_cap: Duration) -> Workers {
    let defaults = Defaults {
        backoff_cap,
        timeout: Duration::from_secs(60),
    };
    let registry = Arc::new(tauros_app::runtime::registry(
        defaults,
        DeliveryPolicy { backoff_cap },
        false,
    ));
    let config = WorkerConfig {
        workers: 2,
        webhook_workers: 2,
        lease: Duration::from_secs(10),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: Retention::default(),
        prune_batch: 100,
        pause_after_claim: false,
        name: "webhook-test".to_owned(),
    };
    Workers::start(app.clone(), registry, config)
}

fn start_workers(app: &App) -> Workers {
    workers_with(app, Duration::from_millis(200))
}

/// Waits until `done` holds for what `read` returns (or fails the test after 60 s).
async fn until<T, F, Fut>(what: &str, read: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
    T: std::fmt::Debug,
{
    crate::helpers::until(what, Duration::from_secs(60), read, done).await
}

// ---------------------------------------------------------------------------------------------
// The receiver.

/// RFC 2104 HMAC-SHA256, written out: the receiver does not share the service's code.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The key of a `whsec_` secret.
fn secret_key(secret: &str) -> Vec<u8> {
    BASE64
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64")
}

/// Which of `keys` signed the request (a `webhook-signature` may list several signatures).
fn signed_with(
    keys: &[Vec<u8>],
    id: &str,
    timestamp: &str,
    body: &[u8],
    header: &str,
) -> Option<usize> {
    let mut content = format!("{id}.{timestamp}.").into_bytes();
    content.extend_from_slice(body);
    keys.iter().position(|key| {
        let expected = BASE64.encode(hmac_sha256(key, &content));
        header
            .split(' ')
            .filter_map(|s| s.split_once(','))
            .any(|(version, sig)| version == "v1" && sig == expected)
    })
}

#[test]
fn the_receivers_hmac_matches_the_published_vector() {
    let key = secret_key("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
    let body = br#"{"email":"test@example.com","username":"test_user"}"#;
    let header = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";
    assert_eq!(
        signed_with(
            &[key],
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            "1649367553",
            body,
            header
        ),
        Some(0)
    );
}

/// docs/WEBHOOKS.md's receiver example is the `verify` of scripts/webhook-receiver, which the
/// HTTP exercises run against live servers. Needs no database: runs once.
#[test]
fn the_documented_receiver_is_the_one_the_exercises_run() {
    let read = |path: &str| {
        std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let doc = read("docs/WEBHOOKS.md");
    let (_, example) = doc
        .split_once("<!-- receiver:begin -->\n```python\n")
        .expect("docs/WEBHOOKS.md has the receiver example");
    let (example, _) = example.split_once("```\n<!-- receiver:end -->").unwrap();
    assert!(example.contains("def verify("));
    assert!(
        read("scripts/webhook-receiver").contains(example),
        "docs/WEBHOOKS.md's example differs from scripts/webhook-receiver's verify"
    );
}

/// docs/WEBHOOKS.md's Events table names every event type the service sends, and no other.
#[test]
fn the_documented_events_are_the_event_types() {
    let doc = std::fs::read_to_string(format!("{}/docs/WEBHOOKS.md", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    let (_, table) = doc
        .split_once("| event type | when |\n|---|---|\n")
        .expect("docs/WEBHOOKS.md has the events table");
    let documented: Vec<&str> = table
        .lines()
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.split('`')
                .nth(1)
                .expect("a `type` in the first column")
        })
        .collect();
    let sent: Vec<&str> = tauros_domain::webhook::EventType::names();
    assert_eq!(documented, sent);
}

/// What the receiver does with the next request (of any path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Answer this status without processing the event.
    Refuse(u16),
    /// Process the event, then answer this status (as a crash after the work would).
    FailAfterProcessing(u16),
    /// Process the event, then never answer (until the test releases it): the sender times
    /// out.
    Hang,
    /// Answer this 3xx status with a `Location` of the receiver's redirect target, without
    /// processing the event.
    Redirect(u16),
}

/// One request as the receiver saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    id: String,
    timestamp: i64,
    received_at: i64,
    /// Index into the path's keys of the secret that verified it.
    signed_with: Option<usize>,
    content_type: String,
    body: Value,
    /// The id had already been processed on this path (a duplicate, dropped by dedup).
    duplicate: bool,
    fault: Option<Fault>,
}

#[derive(Default)]
struct Inbox {
    /// The keys each path accepts, oldest first.
    keys: BTreeMap<String, Vec<Vec<u8>>>,
    faults: VecDeque<Fault>,
    /// Paths that always answer 500.
    failing: HashSet<String>,
    seen: Vec<Seen>,
    /// (path, webhook-id) processed once.
    processed: HashSet<(String, String)>,
    /// Where a [`Fault::Redirect`] points.
    redirect_to: String,
}

struct ReceiverState {
    inbox: Mutex<Inbox>,
    release: Notify,
}

/// A webhook receiver on 127.0.0.1.
struct Receiver {
    addr: SocketAddr,
    state: Arc<ReceiverState>,
    server: Option<JoinHandle<()>>,
}

impl Receiver {
    async fn start() -> Receiver {
        let state = Arc::new(ReceiverState {
            inbox: Mutex::new(Inbox::default()),
            release: Notify::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut receiver = Receiver {
            addr,
            state,
            server: None,
        };
        receiver.serve(listener);
        receiver
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let router = axum::Router::new()
            // Any method: a GET (a 302 or 303 followed) would be recorded too.
            .route("/{path}", axum::routing::any(receive))
            .with_state(Arc::clone(&self.state));
        self.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        }));
    }

    /// Stops listening: new connections are refused until [`Receiver::restart`].
    async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
    }

    /// Listens again on the same port.
    async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    fn accept(&self, path: &str, secret: &str) {
        let mut inbox = self.state.inbox.lock().unwrap();
        inbox
            .keys
            .entry(path.to_owned())
            .or_default()
            .push(secret_key(secret));
    }

    fn inject(&self, faults: &[Fault]) {
        self.state.inbox.lock().unwrap().faults.extend(faults);
    }

    fn redirect_to(&self, url: &str) {
        self.state.inbox.lock().unwrap().redirect_to = url.to_owned();
    }

    fn fail_always(&self, path: &str) {
        self.state
            .inbox
            .lock()
            .unwrap()
            .failing
            .insert(path.to_owned());
    }

    /// Stops [`Receiver::fail_always`] on `path`.
    fn recover(&self, path: &str) {
        self.state.inbox.lock().unwrap().failing.remove(path);
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.inbox.lock().unwrap().seen.clone()
    }

    /// The webhook-ids processed on `path` (each once).
    fn processed(&self, path: &str) -> BTreeSet<String> {
        let inbox = self.state.inbox.lock().unwrap();
        inbox
            .processed
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, id)| id.clone())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.state.release.notify_waiters();
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let (id, timestamp, signature) = (
        header("webhook-id"),
        header("webhook-timestamp"),
        header("webhook-signature"),
    );
    let fault = {
        let mut inbox = state.inbox.lock().unwrap();
        let keys = inbox.keys.get(&path).cloned().unwrap_or_default();
        let signed = signed_with(&keys, &id, &timestamp, &body, &signature);
        let fault = if inbox.failing.contains(&path) {
            Some(Fault::Refuse(500))
        } else {
            inbox.faults.pop_front()
        };
        let key = (path.clone(), id.clone());
        let duplicate = inbox.processed.contains(&key);
        // A verified event is processed (once per id) unless refused before processing.
        if signed.is_some() && !matches!(fault, Some(Fault::Refuse(_) | Fault::Redirect(_))) {
            inbox.processed.insert(key);
        }
        inbox.seen.push(Seen {
            path,
            id,
            timestamp: timestamp.parse().unwrap_or(0),
            received_at: chrono::Utc::now().timestamp(),
            signed_with: signed,
            content_type: header("content-type"),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            duplicate,
            fault,
        });
        if signed.is_none() {
            return AxumStatus::UNAUTHORIZED.into_response();
        }
        if let Some(Fault::Redirect(status)) = fault {
            let location = inbox.redirect_to.clone();
            return (
                AxumStatus::from_u16(status).unwrap(),
                [(axum::http::header::LOCATION, location)],
            )
                .into_response();
        }
        fault
    };
    match fault {
        None => AxumStatus::NO_CONTENT.into_response(),
        Some(Fault::Refuse(status) | Fault::FailAfterProcessing(status)) => {
            AxumStatus::from_u16(status).unwrap().into_response()
        }
        Some(Fault::Hang) => {
            state.release.notified().await;
            AxumStatus::NO_CONTENT.into_response()
        }
        Some(Fault::Redirect(_)) => unreachable!("answered above"),
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers over the API.

/// Registers an endpoint as `token`; returns (endpoint id, secret).
async fn register(
    app: &TestApp,
    token: &str,
    url: &str,
    events: &[&str],
    timeout: i64,
) -> (Uuid, String) {
    let res = app
        .post(
            "/v1/webhook-endpoints",
            token,
            json!({"url": url, "events": events, "timeout_seconds": timeout}),
        )
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    (
        uuid_of(&body["endpoint"]["id"]),
        body["secret"].as_str().unwrap().to_owned(),
    )
}

/// Every attempt of an endpoint's deliveries list, newest first.
async fn deliveries(app: &TestApp, token: &str, endpoint: Uuid) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/v1/webhook-endpoints/{endpoint}/deliveries?limit=100{cursor}");
        let page = expect_status(app.get(&path, token).await, StatusCode::OK).await;
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return items,
        }
    }
}

/// Delivery jobs by state.
async fn delivery_jobs(app: &TestApp) -> BTreeMap<String, i64> {
    let rows: Vec<(String, i64)> = app
        .sql_rows(
            "select state, count(*) from jobs where kind = 'webhook.deliver.v1' group by state",
        )
        .await;
    rows.into_iter().collect()
}

/// The events of an invoice: (id, action), oldest first.
async fn events(app: &TestApp, token: &str, invoice: &str) -> Vec<(String, String)> {
    let res = app
        .get(&format!("/v1/invoices/{invoice}/events"), token)
        .await;
    expect_status(res, StatusCode::OK).await["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn event_type_of(action: &str) -> &'static str {
    match action {
        "create_draft" => "invoice.created",
        "revise" => "invoice.revised",
        "submit" => "invoice.submitted",
        "withdraw" => "invoice.withdrawn",
        "approve" => "invoice.approved",
        "reject" => "invoice.rejected",
        "request_changes" => "invoice.changes_requested",
        "cancel" => "invoice.cancelled",
        other => panic!("unknown action {other}"),
    }
}

async fn command(app: &TestApp, token: &str, invoice: &Value, action: &str, body: Value) -> Value {
    let res = app.command(token, id_of(invoice), action, body).await;
    expect_status(res, StatusCode::OK).await["invoice"].clone()
}

// ---------------------------------------------------------------------------------------------
// The tests.

async fn endpoints_are_managed_by_approvers_and_show_their_secret_once(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let org = app.org().await;
    let token = &org.approver_token;
    let res = app
        .post(
            "/v1/webhook-endpoints",
            token,
            json!({
                "url": "http://127.0.0.1:9/In",
                "events": ["invoice.approved", "invoice.created", "invoice.approved"],
                "description": "Accounting",
            }),
        )
        .await;
    let created = expect_status(res, StatusCode::CREATED).await;
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret_key(&secret).len(), 32, "whsec_ + base64 of 32 bytes");
    let endpoint = &created["endpoint"];
    let id = uuid_of(&endpoint["id"]);
    assert_eq!(endpoint["url"], "http://127.0.0.1:9/In");
    assert_eq!(
        endpoint["events"],
        json!(["invoice.created", "invoice.approved"])
    );
    assert_eq!(endpoint["timeout_seconds"], 10);
    assert_eq!(endpoint["description"], "Accounting");
    assert_eq!(endpoint["created_by"], org.approver_id.to_string());
    assert!(endpoint["secret_rotated_at"].is_null());
    assert!(endpoint.get("secret").is_none());

    // Never shown again: not by a read, not by the list.
    let path = format!("/v1/webhook-endpoints/{id}");
    let text = app.get(&path, token).await.text().await.unwrap();
    assert!(!text.contains("whsec_"), "{text}");
    let (second, _) = register(
        &app,
        token,
        "http://127.0.0.1:9/two",
        &["invoice.created"],
        5,
    )
    .await;
    let page = expect_status(
        app.get("/v1/webhook-endpoints?limit=1", token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(page["items"][0]["id"], second.to_string(), "newest first");
    let cursor = page["next_cursor"].as_str().unwrap();
    let rest = app
        .get(
            &format!("/v1/webhook-endpoints?limit=1&cursor={cursor}"),
            token,
        )
        .await;
    let rest = expect_status(rest, StatusCode::OK).await;
    assert_eq!(rest["items"][0]["id"], id.to_string());
    assert!(rest["next_cursor"].is_null());
    assert!(!rest.to_string().contains("whsec_"));

    // Rotation: a new secret, shown once.
    let res = app
        .post(&format!("{path}/rotate-secret"), token, json!({}))
        .await;
    let rotated = expect_status(res, StatusCode::OK).await;
    let new_secret = rotated["secret"].as_str().unwrap();
    assert_ne!(new_secret, secret);
    assert!(rotated["endpoint"]["secret_rotated_at"].is_string());
    let text = app.get(&path, token).await.text().await.unwrap();
    assert!(!text.contains("whsec_"));

    // Only this organisation's approvers.
    let (_, operator) = app.human(token, "operator").await;
    for res in [
        app.get("/v1/webhook-endpoints", &operator).await,
        app.get(&path, &org.agent_key).await,
        app.post(&format!("{path}/rotate-secret"), &operator, json!({}))
            .await,
        app.delete(&path, &org.agent_key).await,
    ] {
        expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    }
    let stranger = app.org().await;
    for res in [
        app.get(&path, &stranger.approver_token).await,
        app.get(&format!("{path}/deliveries"), &stranger.approver_token)
            .await,
        app.post(
            &format!("{path}/rotate-secret"),
            &stranger.approver_token,
            json!({}),
        )
        .await,
        app.delete(&path, &stranger.approver_token).await,
    ] {
        expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    }
    let listed = app
        .get("/v1/webhook-endpoints", &stranger.approver_token)
        .await;
    assert_eq!(
        expect_status(listed, StatusCode::OK).await["items"],
        json!([])
    );

    expect_status(app.delete(&path, token).await, StatusCode::NO_CONTENT).await;
    expect_problem(
        app.get(&path, token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    expect_problem(
        app.delete(&path, token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;

    // Audited in the organisation's trail, never with the secret.
    assert_eq!(
        app.audit_actions(org.org_id, id).await,
        [
            "webhook_endpoint.created",
            "webhook_endpoint.secret_rotated",
            "webhook_endpoint.deleted"
        ]
    );
    assert_eq!(
        app.sql_count("select count(*) from audit_events where detail like '%whsec_%'")
            .await,
        0
    );
}

async fn registrations_are_validated(backend: Backend) {
    // The default policy: any public host, never an internal address.
    let open = spawn_app(backend).await;
    let org = open.org().await;
    for (url, code) in [
        ("http://127.0.0.1:8080/hook", "internal_address"),
        ("http://localhost/hook", "internal_address"),
        ("http://10.1.2.3/", "internal_address"),
        (
            "http://169.254.169.254/latest/meta-data",
            "internal_address",
        ),
        ("http://[::1]/", "internal_address"),
        ("http://[fd00::1]/", "internal_address"),
        ("http://2130706433/", "internal_address"),
        ("ftp://example.com/hook", "unsupported_scheme"),
        ("https://user:pass@example.com/", "credentials_in_url"),
        ("https://", "invalid_url"),
    ] {
        let res = open
            .post(
                "/v1/webhook-endpoints",
                &org.approver_token,
                json!({"url": url, "events": ["invoice.approved"]}),
            )
            .await;
        let problem =
            expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
        assert_eq!(problem.errors[0].field, "url", "{url}");
        assert_eq!(problem.errors[0].code, code, "{url}");
    }
    // A public name is accepted without resolving it (every address is vetted at delivery).
    register(
        &open,
        &org.approver_token,
        "https://hooks.example.com/tauros",
        &["invoice.approved"],
        10,
    )
    .await;

    // With an allow-list, only its hosts.
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let org = app.org().await;
    let token = &org.approver_token;
    let post = |body: Value| app.post("/v1/webhook-endpoints", token, body);
    let res =
        post(json!({"url": "https://hooks.example.com/", "events": ["invoice.approved"]})).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].code, "host_not_allowed");
    let res = post(json!({
        "url": "http://192.168.1.10/",
        "events": ["invoice.approved", "invoice.settled", "invoice.created", "approve"],
        "description": "",
        "timeout_seconds": 31,
    }))
    .await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    let fields: Vec<(&str, &str)> = problem
        .errors
        .iter()
        .map(|e| (e.field.as_str(), e.code.as_str()))
        .collect();
    // The body's own mistakes in one answer: the request type's field rules (in the order of
    // the members' names), then the domain's event types. The allow-list is the operator's,
    // so the host is judged by the use case, once the body is right in itself.
    assert_eq!(
        fields,
        [
            ("description", "required"),
            ("timeout_seconds", "out_of_range"),
            ("events[1]", "unknown_event"),
            ("events[3]", "unknown_event"),
        ]
    );
    let detail = problem.errors[2].detail.as_str();
    for valid in ALL_EVENTS {
        assert!(detail.contains(valid), "{detail} lists {valid}");
    }
    let res = post(json!({"url": "http://192.168.1.10/", "events": ["invoice.approved"]})).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["url"]);
    assert_eq!(problem.errors[0].code, "host_not_allowed");
    let res = post(json!({"url": "http://127.0.0.1:9/", "events": []})).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "events");
    assert_eq!(problem.errors[0].code, "empty_events");
    let res = post(json!({})).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["events", "url"]);
    let res = post(
        json!({"url": "http://127.0.0.1:9/", "events": ["invoice.approved"], "secret": "mine"}),
    )
    .await;
    expect_problem(res, StatusCode::BAD_REQUEST, "unknown_field").await;
    let res = post(json!({"url": "http://127.0.0.1:9/", "events": [1]})).await;
    expect_problem(res, StatusCode::BAD_REQUEST, "invalid_type").await;
    assert_eq!(
        app.sql_count("select count(*) from webhook_endpoints")
            .await,
        0
    );

    // At most 20 per organisation.
    for n in 0..20 {
        register(
            &app,
            token,
            &format!("http://127.0.0.1:9/{n}"),
            &["invoice.created"],
            10,
        )
        .await;
    }
    let res = post(json!({"url": "http://127.0.0.1:9/21", "events": ["invoice.created"]})).await;
    expect_problem(res, StatusCode::CONFLICT, "too_many_endpoints").await;
}

/// The scenario: twelve invoice events of every type to an endpoint that subscribes to all of
/// them, and one of them also to an endpoint that wants approvals only; the receiver fails
/// before and after processing, hangs past the timeout, goes away and comes back on its port,
/// and the first endpoint's secret is rotated half-way.
async fn every_event_arrives_once_signed_despite_failures_timeouts_and_a_restart(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let mut receiver = Receiver::start().await;
    let (all, secret) = register(&app, &token, &receiver.url("all"), &ALL_EVENTS, 1).await;
    receiver.accept("all", &secret);
    let (approvals, approvals_secret) = register(
        &app,
        &token,
        &receiver.url("approvals"),
        &["invoice.approved"],
        1,
    )
    .await;
    receiver.accept("approvals", &approvals_secret);
    let workers = start_workers(&app.app);

    // Phase 1: failures before and after processing, and a hang past the 1 s timeout.
    receiver.inject(&[
        Fault::Refuse(500),
        Fault::FailAfterProcessing(500),
        Fault::Hang,
        Fault::Refuse(503),
        Fault::FailAfterProcessing(502),
    ]);
    let a = app.draft(&b, "webhooks-a").await;
    let a = command(&app, &b.org.agent_key, &a, "submit", json!({})).await;
    let a = command(
        &app,
        &token,
        &a,
        "approve",
        TestApp::decision_body(&a, None),
    )
    .await;
    command(
        &app,
        &token,
        &a,
        "cancel",
        json!({"reason": "The customer cancelled."}),
    )
    .await;
    let a_events = events(&app, &token, id_of(&a)).await;
    let ids =
        |events: &[(String, String)]| events.iter().map(|e| e.0.clone()).collect::<BTreeSet<_>>();
    until(
        "phase 1 deliveries",
        || async { receiver.processed("all") },
        |p| ids(&a_events).is_subset(p),
    )
    .await;

    // Phase 2: the receiver goes away; a delivery fails to connect; it comes back on its port.
    until(
        "phase 1 jobs",
        || delivery_jobs(&app),
        |j| j.keys().all(|s| s == "completed"),
    )
    .await;
    receiver.stop().await;
    let c = app.draft(&b, "webhooks-c").await;
    until(
        "an attempt refused at connect",
        || deliveries(&app, &token, all),
        |items| items.iter().any(|i| i["error_kind"] == "connect_failed"),
    )
    .await;
    receiver.restart().await;
    command(&app, &b.org.agent_key, &c, "withdraw", json!({})).await;
    let c_events = events(&app, &token, id_of(&c)).await;
    until(
        "phase 2 deliveries",
        || async { receiver.processed("all") },
        |p| ids(&c_events).is_subset(p),
    )
    .await;
    until(
        "phase 2 jobs",
        || delivery_jobs(&app),
        |j| j.keys().all(|s| s == "completed"),
    )
    .await;

    // Phase 3: a new secret signs every delivery from now on.
    let res = app
        .post(
            &format!("/v1/webhook-endpoints/{all}/rotate-secret"),
            &token,
            json!({}),
        )
        .await;
    let rotated = expect_status(res, StatusCode::OK).await["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    receiver.accept("all", &rotated);
    receiver.inject(&[Fault::Refuse(500)]);
    let before_rotation = receiver.seen().len();
    let d = app.draft(&b, "webhooks-d").await;
    let d = command(&app, &b.org.agent_key, &d, "submit", json!({})).await;
    let d = command(
        &app,
        &token,
        &d,
        "request-changes",
        TestApp::decision_body(&d, Some("Split the workshop.")),
    )
    .await;
    let revise = json!({
        "reasoning": "The workshop ran longer than planned.",
        "lines": [{"description": "Workshop", "quantity": "1", "unit_amount": "450"}],
    });
    let d = command(&app, &b.org.agent_key, &d, "revise", revise).await;
    let d = command(&app, &b.org.agent_key, &d, "submit", json!({})).await;
    command(
        &app,
        &token,
        &d,
        "reject",
        TestApp::decision_body(&d, Some("Not agreed.")),
    )
    .await;
    let d_events = events(&app, &token, id_of(&d)).await;
    until(
        "phase 3 deliveries",
        || async { receiver.processed("all") },
        |p| ids(&d_events).is_subset(p),
    )
    .await;
    until(
        "phase 3 jobs",
        || delivery_jobs(&app),
        |j| j.keys().all(|s| s == "completed"),
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);

    // Every event of every invoice, exactly once after deduplication by webhook-id.
    let all_events: Vec<(String, String)> =
        [a_events.clone(), c_events.clone(), d_events.clone()].concat();
    let types: BTreeSet<&str> = all_events
        .iter()
        .map(|(_, action)| event_type_of(action))
        .collect();
    assert_eq!(types.len(), ALL_EVENTS.len(), "every event type occurred");
    assert_eq!(receiver.processed("all"), ids(&all_events));
    let approved: BTreeSet<String> = all_events
        .iter()
        .filter(|(_, action)| action == "approve")
        .map(|(id, _)| id.clone())
        .collect();
    assert_eq!(receiver.processed("approvals"), approved);

    // Every request: signed (with the secret of its time), fresh, JSON, about its own event.
    let seen = receiver.seen();
    let action_of: BTreeMap<&str, &str> = all_events
        .iter()
        .map(|(id, a)| (id.as_str(), a.as_str()))
        .collect();
    for (n, s) in seen.iter().enumerate() {
        let expected_key = if s.path == "all" && n >= before_rotation {
            1
        } else {
            0
        };
        assert_eq!(s.signed_with, Some(expected_key), "{s:?}");
        assert!((s.received_at - s.timestamp).abs() <= 300, "{s:?}");
        assert_eq!(s.content_type, "application/json");
        assert_eq!(s.body["data"]["event"]["id"], s.id.as_str());
        assert_eq!(s.body["type"], event_type_of(action_of[s.id.as_str()]));
        assert!(
            s.body["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
        assert!(s.body["data"]["invoice"]["id"].is_string());
        assert!(s.body["data"]["invoice"]["payload_hash"].is_string());
    }
    // The rotated secret signed the retried attempt too (the fault of phase 3).
    assert!(
        seen[before_rotation..]
            .iter()
            .any(|s| s.fault == Some(Fault::Refuse(500)))
    );

    // The attempts the service recorded match what the receiver saw, plus the refused connects.
    let attempts: Vec<(Option<i32>, Option<String>, bool)> = app
        .sql_rows("select status_code, error_kind, delivered from webhook_attempts")
        .await;
    let deliveries_made = all_events.len() + approved.len();
    let answered = attempts.iter().filter(|a| a.0.is_some()).count();
    let timeouts = attempts
        .iter()
        .filter(|a| a.1.as_deref() == Some("timeout"))
        .count();
    let refused = attempts
        .iter()
        .filter(|a| a.1.as_deref() == Some("connect_failed"))
        .count();
    assert_eq!(
        attempts.iter().filter(|a| a.2).count(),
        deliveries_made,
        "one delivered attempt each"
    );
    assert_eq!(
        answered + timeouts,
        seen.len(),
        "every request reached the receiver once"
    );
    assert_eq!(timeouts, 1, "the hang");
    assert!(refused >= 1, "the restart");
    assert_eq!(answered + timeouts + refused, attempts.len());
    let duplicates = seen.iter().filter(|s| s.duplicate).count();
    let processed = receiver.processed("all").len() + receiver.processed("approvals").len();
    // Expected (path, event) pairs the receiver never processed, and any it processed that
    // were not expected.
    let expected: BTreeSet<(String, String)> = all_events
        .iter()
        .map(|(id, _)| ("all".to_owned(), id.clone()))
        .chain(
            approved
                .iter()
                .map(|id| ("approvals".to_owned(), id.clone())),
        )
        .collect();
    let got: BTreeSet<(String, String)> = ["all", "approvals"]
        .iter()
        .flat_map(|path| {
            receiver
                .processed(path)
                .into_iter()
                .map(move |id| ((*path).to_owned(), id))
        })
        .collect();
    let lost = expected.difference(&got).count();
    let unexpected = got.difference(&expected).count();
    let unverified = seen.iter().filter(|s| s.signed_with.is_none()).count();
    figures(
        "webhooks: receiver with 500s, a timeout, a restart and a rotation",
        backend,
        &[
            ("events", all_events.len().to_string()),
            ("deliveries", deliveries_made.to_string()),
            ("attempts", attempts.len().to_string()),
            ("answered", answered.to_string()),
            ("timed out", timeouts.to_string()),
            ("refused at connect", refused.to_string()),
            ("requests received", seen.len().to_string()),
            ("signatures failing", unverified.to_string()),
            ("duplicates seen before dedup", duplicates.to_string()),
            ("processed after dedup", processed.to_string()),
            ("lost", lost.to_string()),
            ("unexpected", unexpected.to_string()),
        ],
    );
    assert_eq!((lost, unexpected, unverified), (0, 0, 0));
    assert_eq!(processed, deliveries_made, "each delivery processed once");
    assert!(
        duplicates >= 2,
        "failures after processing and the hang are seen again"
    );
    let jobs = delivery_jobs(&app).await;
    assert_eq!(jobs.get("completed").copied(), Some(deliveries_made as i64));

    // The deliveries list shows each attempt: event, type, attempt number, status or error.
    let listed = deliveries(&app, &token, all).await;
    assert_eq!(
        listed.len(),
        attempts.len() - deliveries_for(&app, approvals).await
    );
    for item in &listed {
        assert!(item["attempt"].as_i64().unwrap() >= 1);
        assert!(item["duration_ms"].as_i64().unwrap() >= 0);
        assert!(ALL_EVENTS.contains(&item["event_type"].as_str().unwrap()));
        assert!(item["next_retry_at"].is_null(), "every delivery completed");
        assert_eq!(
            item["delivered"],
            item["status_code"]
                .as_i64()
                .is_some_and(|s| (200..300).contains(&s))
        );
    }
    for kind in ["timeout", "connect_failed"] {
        assert!(
            attempts.iter().any(|a| a.1.as_deref() == Some(kind)),
            "{kind} recorded"
        );
    }
    for status in [500, 502, 503] {
        assert!(
            attempts.iter().any(|a| a.0 == Some(status)),
            "{status} recorded"
        );
    }
    let delivered: Vec<&str> = listed
        .iter()
        .filter(|i| i["delivered"] == true)
        .map(|i| i["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        delivered.len(),
        all_events.len(),
        "each event delivered once to the endpoint"
    );
    let retried = listed
        .iter()
        .filter(|i| i["attempt"].as_i64() > Some(1))
        .count();
    assert!(retried >= 5);
    let metrics = app.metrics().await;
    for outcome in ["delivered", "http_error", "timeout", "connect_failed"] {
        assert!(
            metrics.contains(&format!(
                "tauros_webhook_deliveries_total{{outcome=\"{outcome}\"}}"
            )),
            "{outcome} in /metrics"
        );
    }
}

async fn deliveries_for(app: &TestApp, endpoint: Uuid) -> usize {
    let sql = format!(
        "select count(*) from webhook_attempts where endpoint_id = {}",
        crate::helpers::sql_uuid(&app.database_url, &endpoint.to_string())
    );
    usize::try_from(app.sql_count(&sql).await).unwrap()
}

async fn a_command_that_rolls_back_enqueues_no_delivery(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    let (_, secret) = register(&app, &token, &receiver.url("in"), &["invoice.submitted"], 5).await;
    receiver.accept("in", &secret);
    let draft = app.draft(&b, "rollback").await;
    let workers = start_workers(&app.app);

    // The enqueue of the delivery fails inside the submit's transaction: the whole command
    // rolls back (its state change, its event and its delivery together).
    let sabotage = if app.database_url.starts_with("sqlite") {
        vec![
            "create trigger no_deliveries after insert on jobs when new.kind = 'webhook.deliver.v1' \
             begin select raise(abort, 'injected failure'); end",
        ]
    } else {
        vec![
            "create function no_deliveries() returns trigger language plpgsql as $$ \
             begin raise exception 'injected failure'; end $$",
            "create trigger no_deliveries after insert on jobs for each row \
             when (new.kind = 'webhook.deliver.v1') execute function no_deliveries()",
        ]
    };
    for sql in &sabotage {
        assert!(app.sql_exec(sql).await, "{sql}");
    }
    let before = app.invoice_rows().await;
    let res = app
        .command(&b.org.agent_key, id_of(&draft), "submit", json!({}))
        .await;
    assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(app.invoice_rows().await, before, "no event");
    assert_eq!(
        app.invoice(&b.org.agent_key, id_of(&draft)).await["state"],
        "draft"
    );
    let jobs_after_rollback = app.sql_count("select count(*) from jobs").await;
    assert_eq!(jobs_after_rollback, 0, "no delivery");

    // The same command, committed: one delivery, and the receiver gets it.
    assert!(
        app.sql_exec("drop trigger no_deliveries on jobs").await
            || app.sql_exec("drop trigger no_deliveries").await
    );
    let pending = command(&app, &b.org.agent_key, &draft, "submit", json!({})).await;
    let submitted = events(&app, &token, id_of(&pending)).await.pop().unwrap();
    assert_eq!(submitted.1, "submit");
    until(
        "the delivery",
        || async { receiver.processed("in") },
        |p| p.contains(&submitted.0),
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let jobs_after_commit = app.sql_count("select count(*) from jobs").await;
    let requests = receiver.seen().len();
    figures(
        "webhooks: a command that rolls back",
        backend,
        &[
            (
                "delivery jobs after the rollback",
                jobs_after_rollback.to_string(),
            ),
            (
                "delivery jobs after the commit",
                jobs_after_commit.to_string(),
            ),
            ("requests received", requests.to_string()),
            ("processed", receiver.processed("in").len().to_string()),
        ],
    );
    assert_eq!(requests, 1);
    assert_eq!(jobs_after_commit, 1);
}

async fn deleting_an_endpoint_cancels_its_waiting_deliveries(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    receiver.fail_always("down");
    let (down, secret) =
        register(&app, &token, &receiver.url("down"), &["invoice.created"], 5).await;
    receiver.accept("down", &secret);

    // One failed attempt, and a retry a minute away: the list says when.
    let workers = workers_with(&app.app, Duration::from_secs(60));
    let draft = app.draft(&b, "delete-me").await;
    until(
        "the first attempt",
        || deliveries(&app, &token, down),
        |i| !i.is_empty(),
    )
    .await;
    // Stopping lets the execution settle: the job is then retryable.
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let items = deliveries(&app, &token, down).await;
    assert_eq!(items.len(), 1);
    let attempt = &items[0];
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["status_code"], 500);
    assert_eq!(attempt["error_kind"], "http_status");
    assert_eq!(attempt["delivered"], false);
    assert_eq!(attempt["event_type"], "invoice.created");
    let job = expect_status(
        app.get(
            &format!("/v1/jobs/{}", attempt["job_id"].as_str().unwrap()),
            &token,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(job["state"], "retryable");
    assert_eq!(job["last_error"]["code"], "http_500");
    assert_eq!(job["kind"], "webhook.deliver.v1");
    assert_eq!(attempt["next_retry_at"], job["run_at"]);
    let next: chrono::DateTime<chrono::Utc> =
        attempt["next_retry_at"].as_str().unwrap().parse().unwrap();
    let at: chrono::DateTime<chrono::Utc> =
        attempt["attempted_at"].as_str().unwrap().parse().unwrap();
    assert!(
        next > at + chrono::Duration::milliseconds(900),
        "{next} after {at}"
    );

    // Another endpoint's delivery waits too (no workers now).
    let (up, up_secret) =
        register(&app, &token, &receiver.url("up"), &["invoice.submitted"], 5).await;
    receiver.accept("up", &up_secret);
    command(&app, &b.org.agent_key, &draft, "submit", json!({})).await;
    assert_eq!(
        delivery_jobs(&app).await,
        BTreeMap::from([("available".to_owned(), 1), ("retryable".to_owned(), 1)])
    );

    let path = format!("/v1/webhook-endpoints/{down}");
    expect_status(app.delete(&path, &token).await, StatusCode::NO_CONTENT).await;
    assert_eq!(
        delivery_jobs(&app).await,
        BTreeMap::from([("available".to_owned(), 1), ("cancelled".to_owned(), 1)])
    );
    expect_problem(
        app.get(&format!("{path}/deliveries"), &token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert_eq!(
        deliveries_for(&app, down).await,
        0,
        "its attempts went with it"
    );
    let detail: String = app
        .sql_scalar("select detail from audit_events where action = 'webhook_endpoint.deleted'")
        .await;
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["cancelled_deliveries"], 1);

    // A delivery that starts after its endpoint is gone is discarded, not retried.
    let event = events(&app, &token, id_of(&draft)).await[0].0.clone();
    let orphan = app
        .app
        .submit_job(NewJob {
            org_id: b.org.org_id,
            kind: "webhook.deliver.v1".to_owned(),
            args: json!({"endpoint_id": down, "event_id": event}),
            submission_id: None,
            max_attempts: None,
            run_at: None,
        })
        .await
        .unwrap()
        .id;
    let workers = start_workers(&app.app);
    let orphan = until(
        "the orphan discarded",
        || async {
            expect_status(
                app.get(&format!("/v1/jobs/{orphan}"), &token).await,
                StatusCode::OK,
            )
            .await
        },
        |j| j["state"] == "discarded",
    )
    .await;
    assert_eq!(orphan["last_error"]["code"], "endpoint_deleted");
    assert_eq!(orphan["attempt"], 1);
    until(
        "the other endpoint's delivery",
        || async { receiver.processed("up").len() },
        |n| *n == 1,
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let seen = receiver.seen();
    let to_deleted = seen.iter().filter(|s| s.path == "down").count();
    let up_attempts = deliveries_for(&app, up).await;
    let jobs = delivery_jobs(&app).await;
    figures(
        "webhooks: deleting an endpoint",
        backend,
        &[
            ("requests to the deleted endpoint", to_deleted.to_string()),
            (
                "its deliveries cancelled",
                detail["cancelled_deliveries"].to_string(),
            ),
            (
                "orphan delivery",
                format!(
                    "{} at attempt {}",
                    orphan["state"].as_str().unwrap_or_default(),
                    orphan["attempt"]
                ),
            ),
            ("other endpoint's attempts", up_attempts.to_string()),
            (
                "other endpoint processed",
                receiver.processed("up").len().to_string(),
            ),
            ("delivery jobs by state", format!("{jobs:?}")),
        ],
    );
    assert_eq!(to_deleted, 1, "only the attempt before the delete");
    assert!(
        seen.iter()
            .all(|s| s.path == "up" || s.fault == Some(Fault::Refuse(500)))
    );
    assert_eq!(up_attempts, 1);
}

/// A 3xx answer is an answer like any other non-2xx: the attempt fails and is retried, and the
/// `Location` is never contacted (it points at a second receiver that records every request,
/// of any method).
async fn a_redirect_is_not_followed_and_the_attempt_fails(backend: Backend) {
    const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    let (endpoint, secret) =
        register(&app, &token, &receiver.url("in"), &["invoice.created"], 5).await;
    receiver.accept("in", &secret);
    elsewhere.accept("in", &secret);
    receiver.redirect_to(&elsewhere.url("in"));
    let faults: Vec<Fault> = REDIRECTS.iter().map(|s| Fault::Redirect(*s)).collect();
    receiver.inject(&faults);
    let workers = start_workers(&app.app);
    let draft = app.draft(&b, "redirected").await;
    let event = events(&app, &token, id_of(&draft)).await[0].0.clone();
    until(
        "the delivery after the redirects",
        || async { receiver.processed("in") },
        |p| p.contains(&event),
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);

    let seen = receiver.seen();
    let mut items = deliveries(&app, &token, endpoint).await;
    items.reverse();
    let statuses: Vec<i64> = items
        .iter()
        .map(|i| i["status_code"].as_i64().unwrap())
        .collect();
    let delivered = items.iter().filter(|i| i["delivered"] == true).count();
    let job = expect_status(
        app.get(
            &format!("/v1/jobs/{}", items[0]["job_id"].as_str().unwrap()),
            &token,
        )
        .await,
        StatusCode::OK,
    )
    .await;
    figures(
        "webhooks: redirects not followed",
        backend,
        &[
            ("redirects answered", REDIRECTS.len().to_string()),
            ("attempts", items.len().to_string()),
            ("statuses", format!("{statuses:?}")),
            ("delivered", delivered.to_string()),
            ("requests to the receiver", seen.len().to_string()),
            (
                "requests to the redirect target",
                elsewhere.seen().len().to_string(),
            ),
            (
                "duplicates seen before dedup",
                seen.iter().filter(|s| s.duplicate).count().to_string(),
            ),
            (
                "job",
                format!(
                    "{} at attempt {}",
                    job["state"].as_str().unwrap_or_default(),
                    job["attempt"]
                ),
            ),
        ],
    );
    assert!(
        elsewhere.seen().is_empty(),
        "the Location was never contacted"
    );
    let mut expected: Vec<i64> = REDIRECTS.iter().map(|s| i64::from(*s)).collect();
    expected.push(204);
    assert_eq!(statuses, expected, "each redirect is an attempt of its own");
    for (n, item) in items.iter().enumerate() {
        assert_eq!(item["attempt"], n + 1);
        assert_eq!(item["delivered"], n == REDIRECTS.len(), "{item}");
        let kind = if n == REDIRECTS.len() {
            Value::Null
        } else {
            json!("http_status")
        };
        assert_eq!(item["error_kind"], kind, "{item}");
    }
    assert_eq!(seen.len(), REDIRECTS.len() + 1);
    assert!(
        seen.iter()
            .all(|s| s.signed_with == Some(0) && s.id == event)
    );
    assert_eq!(job["state"], "completed");
    assert_eq!(job["attempt"], REDIRECTS.len() + 1);
}

async fn the_address_is_vetted_again_at_delivery(backend: Backend) {
    // Registered while `localhost` and 127.0.0.1 are allow-listed ...
    let app = spawn_allowing(backend, "127.0.0.1, localhost").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    let port = receiver.addr.port();
    let by_name = format!("http://localhost:{port}/name");
    let (name_endpoint, name_secret) =
        register(&app, &token, &by_name, &["invoice.created"], 5).await;
    receiver.accept("name", &name_secret);
    let (address_endpoint, address_secret) = register(
        &app,
        &token,
        &receiver.url("address"),
        &["invoice.created"],
        5,
    )
    .await;
    receiver.accept("address", &address_secret);

    // ... delivered by workers whose policy no longer allows them: `localhost` resolves to a
    // loopback address, which the vetting refuses before any connection.
    let strict = App::new(std::sync::Arc::clone(app.app.store()), AppConfig::default());
    let refusing = start_workers(&strict);
    app.draft(&b, "vetted").await;
    for endpoint in [name_endpoint, address_endpoint] {
        let items = until(
            "a refused attempt",
            || deliveries(&app, &token, endpoint),
            |i| !i.is_empty(),
        )
        .await;
        assert_eq!(items[0]["error_kind"], "address_not_allowed");
        assert!(items[0]["status_code"].is_null());
        assert_eq!(items[0]["delivered"], false);
    }
    assert!(refusing.shutdown(Duration::from_secs(10)).await);
    assert!(receiver.seen().is_empty(), "nothing was sent");

    // With the allow-list back, the name is resolved and the vetted address used.
    let allowing = start_workers(&app.app);
    until(
        "both delivered",
        || async {
            (
                receiver.processed("name").len(),
                receiver.processed("address").len(),
            )
        },
        |n| *n == (1, 1),
    )
    .await;
    assert!(allowing.shutdown(Duration::from_secs(10)).await);
    for endpoint in [name_endpoint, address_endpoint] {
        let items = deliveries(&app, &token, endpoint).await;
        assert_eq!(items[0]["delivered"], true);
        assert!(
            items[1..]
                .iter()
                .all(|i| i["error_kind"] == "address_not_allowed")
        );
    }
}

async fn secrets_are_sealed_at_rest_with_the_operators_key(backend: Backend) {
    let key = SecretKey::parse(&BASE64.encode([42u8; 32])).unwrap();
    let config = AppConfig {
        webhooks: webhook_config("127.0.0.1", Some(&key)),
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    let (_, secret) = register(&app, &token, &receiver.url("in"), &["invoice.created"], 5).await;
    receiver.accept("in", &secret);
    let stored: String = app.sql_scalar("select secret from webhook_endpoints").await;
    assert!(stored.starts_with("v1:"), "sealed");
    assert!(!stored.contains(secret.trim_start_matches("whsec_")));

    // A process without the key cannot sign: the delivery waits for it (retryable), nothing
    // is sent.
    let keyless = App::new(
        std::sync::Arc::clone(app.app.store()),
        AppConfig {
            webhooks: webhook_config("127.0.0.1", None),
            ..AppConfig::default()
        },
    );
    let without_key = start_workers(&keyless);
    app.draft(&b, "sealed").await;
    let code: String = until(
        "a failed execution",
        || async {
            app.sql_rows::<(Option<String>,)>("select last_error_code from jobs")
                .await
                .pop()
                .and_then(|r| r.0)
                .unwrap_or_default()
        },
        |c| !c.is_empty(),
    )
    .await;
    assert_eq!(code, "secret_unavailable");
    assert!(without_key.shutdown(Duration::from_secs(10)).await);
    assert!(receiver.seen().is_empty());

    // With the key, the secret opens and signs.
    let with_key = start_workers(&app.app);
    until(
        "the delivery",
        || async { receiver.processed("in").len() },
        |n| *n == 1,
    )
    .await;
    assert!(with_key.shutdown(Duration::from_secs(10)).await);
    assert_eq!(receiver.seen()[0].signed_with, Some(0));
}

/// The delivery jobs of the organisation (`GET /v1/jobs?kind=webhook.deliver.v1`): the events
/// they deliver, by invoice event id.
async fn delivery_job_events(app: &TestApp, token: &str) -> Vec<String> {
    let res = app
        .get("/v1/jobs?kind=webhook.deliver.v1&limit=100", token)
        .await;
    let page = expect_status(res, StatusCode::OK).await;
    assert!(page["next_cursor"].is_null());
    let mut events: Vec<String> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["args"]["event_id"].as_str().unwrap().to_owned())
        .collect();
    events.sort();
    events
}

/// Each change of what an invoice's payments cover is one invoice event and one delivery to an
/// endpoint subscribed to the payment events: applied, applied, reversed give three
/// deliveries of the right type and states; a settlement event that moves nothing (a late
/// observation) and the issue (not subscribed) give none.
async fn every_payment_move_is_one_delivery(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    let (_, secret) = register(
        &app,
        &token,
        &receiver.url("payments"),
        &["invoice.payment_applied", "invoice.payment_reversed"],
        5,
    )
    .await;
    receiver.accept("payments", &secret);
    let bank = settlement_key(&app, &token).await;
    let pending = app.pending(&b, "paid-with-webhooks").await;
    let approved = command(
        &app,
        &token,
        &pending,
        "approve",
        TestApp::decision_body(&pending, None),
    )
    .await;
    let invoice = command(&app, &token, &approved, "issue", json!({})).await;
    assert_eq!(invoice["state"], "issued");
    assert!(delivery_job_events(&app, &token).await.is_empty());

    // (event id, payment, amount, status, second, the invoice's state after it, moves)
    let journey = [
        ("e1", "pay-1", "400", "confirmed", 1, "partially_paid", true),
        ("e2", "pay-2", "800", "confirmed", 2, "paid", true),
        ("e3", "pay-1", "400", "observed", 0, "paid", false),
        ("e4", "pay-2", "800", "failed", 3, "partially_paid", true),
    ];
    let mut moves = Vec::new();
    for (event_id, payment, amount, status, second, state, moved) in journey {
        let body = event(event_id, payment, &invoice, amount, status, second);
        let before = events(&app, &token, id_of(&invoice)).await.len();
        let res = app.post("/v1/settlement-events", &bank, body).await;
        let recorded = expect_status(res, StatusCode::CREATED).await;
        assert_eq!(recorded["invoice"]["state"], state, "{event_id}");
        let mut new = events(&app, &token, id_of(&invoice))
            .await
            .split_off(before);
        if moved {
            // One move; reaching paid adds `paid` (invoice.paid, not subscribed here).
            let reached_paid = state == "paid" && new.len() == 2 && new[1].1 == "paid";
            assert_eq!(
                new.len(),
                if reached_paid { 2 } else { 1 },
                "{event_id}: {new:?}"
            );
            let (id, action) = new.remove(0);
            assert!(action.starts_with("payment_"), "{event_id}: {action}");
            moves.push((id, action, state));
        } else {
            assert!(new.is_empty(), "{event_id} moves nothing: {new:?}");
        }
        // Exactly one delivery job per move so far, each for one of the moves.
        let mut expected: Vec<String> = moves.iter().map(|(id, _, _)| id.clone()).collect();
        expected.sort();
        assert_eq!(
            delivery_job_events(&app, &token).await,
            expected,
            "{event_id}"
        );
    }
    let actions: Vec<&str> = moves.iter().map(|(_, a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        ["payment_applied", "payment_applied", "payment_reversed"]
    );

    // Delivered, each once, with its type and the invoice's states before and after.
    let workers = start_workers(&app.app);
    let ids: BTreeSet<String> = moves.iter().map(|(id, _, _)| id.clone()).collect();
    until(
        "the payment deliveries",
        || async { receiver.processed("payments") },
        |p| *p == ids,
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let seen = receiver.seen();
    assert_eq!(seen.len(), 3, "one request per move");
    let previous = ["issued", "partially_paid", "paid"];
    for ((id, action, state), before) in moves.iter().zip(previous) {
        let delivery = seen
            .iter()
            .find(|s| s.body["data"]["event"]["id"] == id.as_str())
            .unwrap_or_else(|| panic!("no delivery of {id}"));
        assert_eq!(delivery.signed_with, Some(0));
        assert_eq!(delivery.body["type"], format!("invoice.{action}"));
        let at = &delivery.body["data"]["invoice"];
        assert_eq!(at["id"], invoice["id"]);
        assert_eq!(at["state"], *state);
        assert_eq!(at["previous_state"], before);
    }
}

// ---------------------------------------------------------------------------------------------
// No dead ends (docs/contract/effects.md §6): resend, disable and re-enable, keyed creation.

/// A server whose deliveries get `max_attempts` per cycle and whose endpoints are disabled after
/// failing for `disable_after`.
async fn spawn_with_budget(
    backend: Backend,
    max_attempts: i32,
    disable_after: Duration,
) -> TestApp {
    let config = AppConfig {
        webhooks: WebhookConfig {
            max_attempts,
            disable_after,
            ..webhook_config("127.0.0.1", None)
        },
        ..AppConfig::default()
    };
    spawn_app_with(backend, config, HttpConfig::default()).await
}

/// The endpoint as `GET /v1/webhook-endpoints` lists it.
async fn listed_endpoint(app: &TestApp, token: &str, id: Uuid) -> Value {
    let page = expect_status(
        app.get("/v1/webhook-endpoints?limit=100", token).await,
        StatusCode::OK,
    )
    .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id.to_string())
        .cloned()
        .expect("the endpoint is listed")
}

async fn audit_count(app: &TestApp, action: &str) -> i64 {
    app.sql_count(&format!(
        "select count(*) from audit_events where action = '{action}'"
    ))
    .await
}

async fn a_delivery_past_its_retry_budget_is_resent_once_with_the_same_webhook_id(
    backend: Backend,
) {
    const BUDGET: i32 = 3;
    let app = spawn_with_budget(backend, BUDGET, Duration::from_secs(3 * 24 * 3600)).await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let mut receiver = Receiver::start().await;
    let (down, secret) =
        register(&app, &token, &receiver.url("down"), &["invoice.created"], 2).await;
    receiver.accept("down", &secret);

    // The receiver is down for the whole budget: every attempt is refused at connect.
    receiver.stop().await;
    let workers = start_workers(&app.app);
    let draft = app.draft(&b, "resend-me").await;
    let event = events(&app, &token, id_of(&draft)).await[0].0.clone();
    let items = until(
        "the budget used up",
        || deliveries(&app, &token, down),
        |i| i.first().is_some_and(|a| a["delivery_status"] == "failed"),
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    assert_eq!(items.len(), BUDGET as usize, "{items:#?}");
    assert!(items.iter().all(|a| a["event_id"] == event.as_str()));
    assert!(items.iter().all(|a| a["error_kind"] == "connect_failed"));
    assert!(items.iter().all(|a| a["next_retry_at"].is_null()));
    let delivery = items[0]["delivery_id"].as_str().unwrap().to_owned();
    assert!(items.iter().all(|a| a["delivery_id"] == delivery.as_str()));
    let first_job = items[0]["job_id"].as_str().unwrap().to_owned();
    let job = expect_status(
        app.get(&format!("/v1/jobs/{first_job}"), &token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(job["state"], "discarded");
    assert_eq!(job["last_error"]["code"], "attempts_exhausted");

    // The discarded job is pruned; the delivery stays listed, failed, and can be resent.
    let retention = Retention {
        completed: Duration::ZERO,
        discarded: Duration::ZERO,
        cancelled: Duration::ZERO,
    };
    let pruned = app.app.prune_jobs(&retention, 100).await.unwrap();
    assert!(pruned >= 1);
    expect_problem(
        app.get(&format!("/v1/jobs/{first_job}"), &token).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let items = deliveries(&app, &token, down).await;
    assert_eq!(items.len(), BUDGET as usize);
    assert!(items.iter().all(|a| a["delivery_status"] == "failed"));

    // Resends fired at once: one starts a new cycle, the others find it pending.
    receiver.restart().await;
    let resend = format!("/v1/webhook-endpoints/{down}/deliveries/{delivery}/resend");
    let requests = (0..6)
        .map(|_| app.post_request(&resend, &token, &json!({})))
        .collect();
    let mut answers = Vec::new();
    for res in parallel(requests).await {
        let status = res.status();
        answers.push((status, res.json::<Value>().await.unwrap()));
    }
    let accepted: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::ACCEPTED)
        .map(|(_, v)| v)
        .collect();
    let replayed = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!(accepted.len(), 1, "{answers:#?}");
    assert_eq!(replayed, answers.len() - 1, "{answers:#?}");
    let resent = accepted[0];
    assert_eq!(resent["id"], delivery.as_str());
    assert_eq!(resent["event_id"], event.as_str());
    assert_eq!(resent["status"], "pending");
    assert_eq!(resent["cycle"], 2);
    assert_ne!(resent["job_id"], first_job.as_str());
    assert!(answers.iter().all(|(_, v)| v["job_id"] == resent["job_id"]));
    assert_eq!(
        delivery_jobs(&app).await,
        BTreeMap::from([("available".to_owned(), 1)])
    );
    assert_eq!(audit_count(&app, "webhook_delivery.resent").await, 1);

    // Delivered once, with the same webhook-id as every earlier attempt.
    let workers = start_workers(&app.app);
    until(
        "the resent delivery",
        || async { receiver.processed("down") },
        |p| p.contains(&event),
    )
    .await;
    let items = until(
        "the delivery recorded",
        || deliveries(&app, &token, down),
        |i| {
            i.first()
                .is_some_and(|a| a["delivery_status"] == "delivered")
        },
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "one request after the receiver came back");
    assert_eq!(seen[0].id, event);
    assert_eq!(seen[0].signed_with, Some(0));
    assert_eq!(items.len(), BUDGET as usize + 1);
    assert_eq!(items[0]["attempt"], 1, "a fresh budget");
    assert_eq!(items[0]["delivered"], true);
    assert_eq!(items[0]["job_id"], resent["job_id"]);

    // A delivered delivery is sent again on an approver's request (a receiver restored from a
    // backup lost it): a third cycle, pending until delivered, the same webhook-id, audited.
    let workers = start_workers(&app.app);
    let again = expect_status(
        app.post(&resend, &token, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["status"], "pending");
    assert_eq!(again["cycle"], 3);
    assert!(again["delivered_at"].is_null());
    assert_ne!(again["job_id"], resent["job_id"]);
    assert_eq!(audit_count(&app, "webhook_delivery.resent").await, 2);
    let redelivered = until(
        "the delivered delivery sent again",
        || async { receiver.seen() },
        |seen| seen.len() == 2,
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    assert_eq!(redelivered[1].id, event, "the same webhook-id");
    let status = until(
        "the delivery delivered again",
        || deliveries(&app, &token, down),
        |i| {
            i.first().is_some_and(|a| {
                a["delivery_status"] == "delivered" && a["job_id"] == again["job_id"]
            })
        },
    )
    .await;
    assert_eq!(status[0]["delivered"], true);
    // Unknown and malformed ids.
    let unknown = format!(
        "/v1/webhook-endpoints/{down}/deliveries/{}/resend",
        Uuid::now_v7()
    );
    expect_problem(
        app.post(&unknown, &token, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    let malformed = format!("/v1/webhook-endpoints/{down}/deliveries/nope/resend");
    let problem = expect_problem(
        app.post(&malformed, &token, json!({})).await,
        StatusCode::BAD_REQUEST,
        "invalid_type",
    )
    .await;
    assert!(problem.detail.contains("delivery_id"));
    // Agents may not resend.
    expect_problem(
        app.post(&resend, &b.org.agent_key, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    figures(
        "webhooks: receiver down past its retry budget, then resent",
        backend,
        &[
            ("attempts in the first cycle", BUDGET.to_string()),
            ("first job pruned", (pruned >= 1).to_string()),
            ("resends sent at once", answers.len().to_string()),
            ("answered 202 (new cycle)", accepted.len().to_string()),
            ("answered 200 (already pending)", replayed.to_string()),
            (
                "requests after the receiver came back",
                seen.len().to_string(),
            ),
            (
                "processed after dedup",
                receiver.processed("down").len().to_string(),
            ),
            ("same webhook-id", (seen[0].id == event).to_string()),
            (
                "resend of the delivered one",
                format!("202, cycle {}, same webhook-id", again["cycle"]),
            ),
        ],
    );
}

async fn a_failing_endpoint_is_disabled_holds_its_deliveries_and_re_enabled_sends_them(
    backend: Backend,
) {
    let app = spawn_with_budget(backend, 25, Duration::from_millis(600)).await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let receiver = Receiver::start().await;
    receiver.fail_always("flaky");
    let (flaky, secret) = register(
        &app,
        &token,
        &receiver.url("flaky"),
        &["invoice.created", "invoice.submitted"],
        2,
    )
    .await;
    receiver.accept("flaky", &secret);
    let fresh = listed_endpoint(&app, &token, flaky).await;
    assert_eq!(fresh["status"], "active");
    assert!(fresh["failing_since"].is_null());

    // It fails for longer than the window (600 ms here; 3 days by default): disabled.
    let workers = start_workers(&app.app);
    let draft = app.draft(&b, "held").await;
    let disabled = until(
        "the endpoint disabled",
        || listed_endpoint(&app, &token, flaky),
        |e| e["status"] == "disabled",
    )
    .await;
    let attempts_before = receiver.seen().len();
    assert!(attempts_before >= 2, "{attempts_before}");
    assert!(disabled["disabled_at"].is_string());
    assert!(disabled["failing_since"].is_string());
    assert!(disabled["last_success_at"].is_null());
    assert_eq!(disabled["held_deliveries"], 1);
    assert_eq!(audit_count(&app, "webhook_endpoint.disabled").await, 1);
    let detail: String = app
        .sql_scalar("select detail from audit_events where action = 'webhook_endpoint.disabled'")
        .await;
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["held_deliveries"], 1);
    assert_eq!(detail["disable_after_ms"], 600);
    let items = until(
        "the delivery held",
        || deliveries(&app, &token, flaky),
        |i| i.first().is_some_and(|a| a["delivery_status"] == "held"),
    )
    .await;
    let created = items[0]["delivery_id"].as_str().unwrap().to_owned();

    // While disabled: a new event is held without a job, nothing is attempted, and a resend
    // says to re-enable first.
    command(&app, &b.org.agent_key, &draft, "submit", json!({})).await;
    let held = listed_endpoint(&app, &token, flaky).await;
    assert_eq!(held["held_deliveries"], 2);
    let waiting = app
        .sql_count(
            "select count(*) from jobs where kind = 'webhook.deliver.v1' \
             and state in ('available', 'scheduled', 'retryable', 'running')",
        )
        .await;
    assert_eq!(
        waiting, 0,
        "a disabled endpoint's deliveries wait for nothing"
    );
    let resend = format!("/v1/webhook-endpoints/{flaky}/deliveries/{created}/resend");
    expect_problem(
        app.post(&resend, &token, json!({})).await,
        StatusCode::CONFLICT,
        "endpoint_disabled",
    )
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    assert_eq!(
        receiver.seen().len(),
        attempts_before,
        "nothing sent while disabled"
    );

    // The receiver is fixed; an approver re-enables the endpoint: both held events go out.
    receiver.recover("flaky");
    let enable = format!("/v1/webhook-endpoints/{flaky}/enable");
    expect_problem(
        app.post(&enable, &b.org.agent_key, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let enabled = expect_status(app.post(&enable, &token, json!({})).await, StatusCode::OK).await;
    assert_eq!(enabled["status"], "active");
    assert!(enabled["disabled_at"].is_null());
    assert!(enabled["failing_since"].is_null());
    assert_eq!(enabled["held_deliveries"], 0);
    assert_eq!(audit_count(&app, "webhook_endpoint.enabled").await, 1);
    // Again: answered as it is, nothing written.
    let again = expect_status(app.post(&enable, &token, json!({})).await, StatusCode::OK).await;
    assert_eq!(again["status"], "active");
    assert_eq!(audit_count(&app, "webhook_endpoint.enabled").await, 1);
    let workers = start_workers(&app.app);
    let ids: BTreeSet<String> = events(&app, &token, id_of(&draft))
        .await
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(ids.len(), 2);
    until(
        "the held deliveries",
        || async { receiver.processed("flaky") },
        |p| *p == ids,
    )
    .await;
    let recovered = until(
        "the success recorded",
        || listed_endpoint(&app, &token, flaky),
        |e| e["last_success_at"].is_string(),
    )
    .await;
    // The first cycle's job (discarded when the endpoint was disabled), retried by hand, sends
    // nothing: the re-enable's cycle carries the delivery now.
    let old_job = items
        .iter()
        .map(|a| a["job_id"].as_str().unwrap().to_owned())
        .next()
        .unwrap();
    let sent_before_retry = receiver.seen().len();
    let path = format!("/v1/jobs/{old_job}/retry");
    expect_status(app.post(&path, &token, json!({})).await, StatusCode::OK).await;
    let superseded = until(
        "the old cycle's job settled",
        || async {
            expect_status(
                app.get(&format!("/v1/jobs/{old_job}"), &token).await,
                StatusCode::OK,
            )
            .await
        },
        |j| j["state"] == "discarded",
    )
    .await;
    assert_eq!(superseded["last_error"]["code"], "superseded");
    assert_eq!(receiver.seen().len(), sent_before_retry);
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    assert_eq!(recovered["status"], "active");
    assert!(recovered["failing_since"].is_null());
    let items = deliveries(&app, &token, flaky).await;
    let delivered: BTreeSet<&str> = items
        .iter()
        .filter(|a| a["delivered"] == true)
        .map(|a| a["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(delivered.len(), 2);
    assert!(items.iter().all(|a| a["delivery_status"] == "delivered"));
    let seen = receiver.seen();
    figures(
        "webhooks: an endpoint failing past its disable window, then re-enabled",
        backend,
        &[
            ("disable window", "600 ms".to_owned()),
            (
                "failed attempts before disabled",
                attempts_before.to_string(),
            ),
            ("deliveries held", "2".to_owned()),
            ("attempts while disabled", "0".to_owned()),
            ("disabled events", "1".to_owned()),
            ("enabled events (after two enables)", "1".to_owned()),
            (
                "requests after re-enable",
                (seen.len() - attempts_before).to_string(),
            ),
            ("processed", receiver.processed("flaky").len().to_string()),
        ],
    );
    assert_eq!(seen.len() - attempts_before, 2, "each held event sent once");
}

async fn a_keyed_registration_retried_in_parallel_makes_one_endpoint(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let body = json!({"url": "http://127.0.0.1:9/keyed", "events": ["invoice.approved"]});
    let keyed = |key: &str, body: &Value| {
        app.client
            .post(format!("{}/v1/webhook-endpoints", app.base))
            .bearer_auth(&token)
            .header("idempotency-key", key)
            .json(body)
    };

    // The same key and body, eight times at once: one endpoint.
    let requests = (0..8).map(|_| keyed("register-once", &body)).collect();
    let mut answers = Vec::new();
    for res in parallel(requests).await {
        let status = res.status();
        let replayed = res.headers()["idempotent-replayed"]
            .to_str()
            .unwrap()
            .to_owned();
        answers.push((status, replayed, res.json::<Value>().await.unwrap()));
    }
    let created = answers
        .iter()
        .filter(|(s, r, _)| *s == StatusCode::CREATED && r == "false")
        .count();
    let replays = answers
        .iter()
        .filter(|(s, r, _)| *s == StatusCode::OK && r == "true")
        .count();
    assert_eq!((created, replays), (1, 7), "{answers:#?}");
    let ids: BTreeSet<&str> = answers
        .iter()
        .map(|(_, _, v)| v["endpoint"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1);
    let id: Uuid = ids.iter().next().unwrap().parse().unwrap();
    // Within a day and before any rotation, a replay shows the secret the creation made.
    let secrets: BTreeSet<&str> = answers
        .iter()
        .map(|(_, _, v)| v["secret"].as_str().unwrap())
        .collect();
    assert_eq!(secrets.len(), 1);
    let endpoints = app
        .sql_count("select count(*) from webhook_endpoints")
        .await;
    let audited = audit_count(&app, "webhook_endpoint.created").await;
    assert_eq!((endpoints, audited), (1, 1));

    // The same key with another body: refused, nothing written.
    let other = json!({"url": "http://127.0.0.1:9/other", "events": ["invoice.approved"]});
    let res = keyed("register-once", &other).send().await.unwrap();
    let problem = expect_problem(res, StatusCode::CONFLICT, "idempotency_conflict").await;
    assert_eq!(problem.body["webhook_endpoint_id"], id.to_string());
    // A malformed key (over 200 characters) names the header.
    let res = keyed(&"k".repeat(201), &body).send().await.unwrap();
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.errors[0].field, "Idempotency-Key");
    assert_eq!(
        app.sql_count("select count(*) from webhook_endpoints")
            .await,
        1
    );

    // After a rotation a replay answers the endpoint without a secret: the rotation's is the
    // one in force, and it was shown once.
    let path = format!("/v1/webhook-endpoints/{id}/rotate-secret");
    expect_status(app.post(&path, &token, json!({})).await, StatusCode::OK).await;
    let res = keyed("register-once", &body).send().await.unwrap();
    let replay = expect_status(res, StatusCode::OK).await;
    assert_eq!(replay["endpoint"]["id"], id.to_string());
    assert!(replay["secret"].is_null());

    // Without a key, each request registers an endpoint (as before keys existed).
    for _ in 0..2 {
        let res = app
            .post("/v1/webhook-endpoints", &token, body.clone())
            .await;
        expect_status(res, StatusCode::CREATED).await;
    }
    let total = app
        .sql_count("select count(*) from webhook_endpoints")
        .await;
    assert_eq!(total, 3);
    figures(
        "webhooks: a keyed registration retried in parallel",
        backend,
        &[
            ("requests at once", answers.len().to_string()),
            ("answered 201", created.to_string()),
            ("answered 200 replayed", replays.to_string()),
            ("endpoints made", "1".to_owned()),
            ("secrets shown (all the same)", secrets.len().to_string()),
            (
                "same key, other body",
                "409 idempotency_conflict".to_owned(),
            ),
        ],
    );
}
