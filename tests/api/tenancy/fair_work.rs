//! Fair work (Tenancy, "Fair work" and the webhook half of "Errors that leak nothing
//! internal"), on both backends: job claims take turns across organisations, webhook
//! deliveries run in a worker pool of their own, at most 4 deliveries of one endpoint are in
//! flight at once, and a failed attempt records a kind, never a resolved address or a
//! resolver's message.
//!
//! Workers run in the test process. The endpoints are on 127.0.0.1 (allow-listed): a black hole
//! that accepts connections and never answers, and a receiver that holds each request a moment
//! (a slow endpoint) while it counts the requests in flight per path, or answers 500.
//! Waiting polls with a deadline; the deadlines are correctness bounds, not performance
//! asserts.

use crate::helpers::{
    Backend, TestApp, both_backends, expect_status, figures, spawn_app_with, sql_uuid, until,
    uuid_of,
};
use crate::resources::jobs::echo;
use axum::extract::{Path, State};
use axum::http::StatusCode as AxumStatus;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tauros_api::HttpConfig;
use tauros_app::runtime::webhooks::DeliveryPolicy;
use tauros_app::runtime::{Defaults, WorkerConfig, Workers};
use tauros_app::{App, AppConfig, Retention, WebhookConfig};
use tauros_domain::job::JobState;
use tauros_domain::webhook::AllowList;
use tokio::task::JoinHandle;
use uuid::Uuid;

both_backends!(
    backend: one_organisations_backlog_delays_anothers_job_by_at_most_one_job_per_worker,
    black_hole_deliveries_never_delay_other_jobs,
    at_most_four_deliveries_of_one_endpoint_are_in_flight,
    a_failed_attempt_records_a_kind_and_no_address,
);

/// A server whose outbound policy admits `allow`.
async fn spawn_allowing(backend: Backend, allow: &str) -> TestApp {
    let config = AppConfig {
        webhooks: WebhookConfig {
            allow_hosts: AllowList::parse(allow).unwrap(),
            ..WebhookConfig::default()
        },
        ..AppConfig::default()
    };
    spawn_app_with(backend, config, HttpConfig::default()).await
}

/// In-process workers with the test kinds: `workers` in the main pool and `webhook_workers`
/// delivering webhooks, retried after 200–250 ms.
fn workers(app: &App, workers: usize, webhook_workers: usize) -> Workers {
    let backoff_cap = Duration::from_millis(200);
    let registry = Arc::new(tauros_app::runtime::registry(
        Defaults {
            backoff_cap,
            timeout: Duration::from_secs(60),
        },
        DeliveryPolicy { backoff_cap },
        true,
    ));
    let config = WorkerConfig {
        workers,
        webhook_workers,
        lease: Duration::from_secs(10),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: Retention::default(),
        prune_batch: 100,
        pause_after_claim: false,
        name: "fair-test".to_owned(),
    };
    Workers::start(app.clone(), registry, config)
}

async fn job_state(app: &TestApp, org_id: Uuid, id: Uuid) -> JobState {
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    conn.job(org_id, id).await.unwrap().expect("the job").state
}

async fn register(app: &TestApp, token: &str, url: &str, timeout: i64) -> Uuid {
    let res = app
        .post(
            "/v1/webhook-endpoints",
            token,
            json!({"url": url, "events": ["invoice.created"], "timeout_seconds": timeout}),
        )
        .await;
    let body = expect_status(res, StatusCode::CREATED).await;
    uuid_of(&body["endpoint"]["id"])
}

/// Every attempt of an endpoint's deliveries list, oldest first.
async fn attempts(app: &TestApp, token: &str, endpoint: Uuid) -> Vec<Value> {
    let path = format!("/v1/webhook-endpoints/{endpoint}/deliveries?limit=100");
    let page = expect_status(app.get(&path, token).await, StatusCode::OK).await;
    let mut items = page["items"].as_array().unwrap().clone();
    items.reverse();
    items
}

/// A listener on 127.0.0.1 that accepts every connection and never answers; counts them.
struct BlackHole {
    port: u16,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl BlackHole {
    async fn start() -> BlackHole {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        BlackHole {
            port,
            accepted,
            task,
        }
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Requests in flight per path, and the most seen at once.
#[derive(Default)]
struct InFlight {
    now: BTreeMap<String, usize>,
    max: BTreeMap<String, usize>,
    done: BTreeMap<String, usize>,
}

/// A receiver on 127.0.0.1: `/slow/{name}` holds each request 300 ms (a slow endpoint) and
/// answers 204, counting requests in flight per name; `/fail` answers 500.
struct SlowReceiver {
    port: u16,
    state: Arc<Mutex<InFlight>>,
    task: JoinHandle<()>,
}

async fn slow(Path(name): Path<String>, State(state): State<Arc<Mutex<InFlight>>>) -> AxumStatus {
    {
        let mut s = state.lock().unwrap();
        let now = {
            let n = s.now.entry(name.clone()).or_default();
            *n += 1;
            *n
        };
        let max = s.max.entry(name.clone()).or_default();
        *max = (*max).max(now);
    }
    // The endpoint is slow: it answers 300 ms later (what is simulated, not a wait of the test).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut s = state.lock().unwrap();
    *s.now.entry(name.clone()).or_default() -= 1;
    *s.done.entry(name).or_default() += 1;
    AxumStatus::NO_CONTENT
}

impl SlowReceiver {
    async fn start() -> SlowReceiver {
        let state = Arc::new(Mutex::new(InFlight::default()));
        let router = axum::Router::new()
            .route("/slow/{name}", axum::routing::post(slow))
            .route(
                "/fail",
                axum::routing::post(|| async { AxumStatus::INTERNAL_SERVER_ERROR }),
            )
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        SlowReceiver { port, state, task }
    }

    fn done(&self, name: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .done
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    fn max(&self, name: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .max
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for SlowReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Fair claims across organisations.

async fn one_organisations_backlog_delays_anothers_job_by_at_most_one_job_per_worker(
    backend: Backend,
) {
    const BACKLOG: usize = 200;
    const WORKERS: usize = 2;
    let app = crate::helpers::spawn_app(backend).await;
    let a = app.org().await.org_id;
    let b = app.org().await.org_id;
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    for n in 0..BACKLOG {
        tauros_app::enqueue(&mut *tx, echo(a, json!({"sleep_ms": 20, "note": n})))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let running = workers(&app.app, WORKERS, 1);
    let a_id = sql_uuid(&app.database_url, &a.to_string());
    let started_of_a =
        format!("select count(*) from jobs where org_id = {a_id} and started_at is not null");
    until(
        "A's backlog under way",
        Duration::from_secs(60),
        || app.sql_count(&started_of_a),
        |n| *n >= 4,
    )
    .await;

    let b_job = app
        .app
        .submit_job(echo(b, json!({"note": "b"})))
        .await
        .unwrap()
        .id;
    // B's job is there for every claim from here on (its enqueue has committed): claims whose
    // snapshot predates the commit cannot see it and do not count against the rule.
    let committed = chrono::Utc::now();
    let b_row = until(
        "B's job completed",
        Duration::from_secs(120),
        || async {
            let mut conn = app
                .app
                .store()
                .reader(tauros_store::Lane::Unattributed)
                .await
                .unwrap();
            conn.job(b, b_job).await.unwrap().expect("B's job")
        },
        |j| j.state == JobState::Completed,
    )
    .await;
    let b_started = b_row.started_at.expect("B's job started");
    let a_starts: Vec<(chrono::DateTime<chrono::Utc>,)> = app
        .sql_rows(&format!(
            "select started_at from jobs where org_id = {a_id} and started_at is not null"
        ))
        .await;
    let overtaking = a_starts
        .iter()
        .filter(|(at,)| *at > committed && *at < b_started)
        .count() as i64;
    let a_started = app.sql_count(&started_of_a).await;
    drop(running);
    figures(
        "fair work: one organisation's backlog",
        backend,
        &[
            ("backlog of A", BACKLOG.to_string()),
            ("workers", WORKERS.to_string()),
            ("A's jobs started while B's waited", overtaking.to_string()),
            ("A's jobs started when B's finished", a_started.to_string()),
        ],
    );
    assert!(
        overtaking <= WORKERS as i64,
        "B's job waited behind {overtaking} of A's jobs with {WORKERS} workers"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. A pool of its own for deliveries.

async fn black_hole_deliveries_never_delay_other_jobs(backend: Backend) {
    const HOLES: usize = 20;
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let bill = app.billing().await;
    let token = bill.org.approver_token.clone();
    let hole = BlackHole::start().await;
    for n in 0..HOLES {
        let url = format!("http://127.0.0.1:{}/hole/{n}", hole.port);
        register(&app, &token, &url, 30).await;
    }
    app.draft(&bill, "into-the-void").await;
    let running = workers(&app.app, 2, 2);
    until(
        "deliveries hanging on the black hole",
        Duration::from_secs(60),
        || async { hole.accepted.load(Ordering::SeqCst) },
        |n| *n >= 2,
    )
    .await;

    let other = app.org().await.org_id;
    let submitted = Instant::now();
    let job = app
        .app
        .submit_job(echo(other, json!({"note": "after the flood"})))
        .await
        .unwrap()
        .id;
    // Far below the endpoints' 30 s timeout: a correctness bound, not a performance assert.
    until(
        "the other organisation's job completed",
        Duration::from_secs(10),
        || job_state(&app, other, job),
        |s| *s == JobState::Completed,
    )
    .await;
    let waited = submitted.elapsed();
    let hanging = hole.accepted.load(Ordering::SeqCst);
    let _ = running.shutdown(Duration::from_millis(100)).await;
    figures(
        "fair work: black-hole deliveries",
        backend,
        &[
            ("black-hole endpoints", HOLES.to_string()),
            ("connections hanging", hanging.to_string()),
            (
                "other job completed after",
                format!("{} ms", waited.as_millis()),
            ),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// 3. At most 4 deliveries of one endpoint in flight.

async fn at_most_four_deliveries_of_one_endpoint_are_in_flight(backend: Backend) {
    const EVENTS: usize = 16;
    let app = spawn_allowing(backend, "127.0.0.1").await;
    let bill = app.billing().await;
    let token = bill.org.approver_token.clone();
    let receiver = SlowReceiver::start().await;
    let url = format!("http://127.0.0.1:{}/slow/one", receiver.port);
    let endpoint = register(&app, &token, &url, 10).await;
    for n in 0..EVENTS {
        app.draft(&bill, &format!("busy-{n}")).await;
    }
    let running = workers(&app.app, 1, 8);
    until(
        "every delivery answered",
        Duration::from_secs(60),
        || async { receiver.done("one") },
        |n| *n >= EVENTS,
    )
    .await;
    assert!(running.shutdown(Duration::from_secs(10)).await);
    let items = attempts(&app, &token, endpoint).await;
    let max = receiver.max("one");
    figures(
        "fair work: deliveries in flight per endpoint",
        backend,
        &[
            ("deliveries", EVENTS.to_string()),
            ("delivery workers", "8".to_owned()),
            ("most in flight to the endpoint", max.to_string()),
            ("attempts recorded", items.len().to_string()),
        ],
    );
    assert!(
        max <= 4,
        "{max} deliveries of one endpoint were in flight at once"
    );
    // A delivery that waited for a slot used no attempt: one attempt each, all delivered.
    assert_eq!(items.len(), EVENTS, "{items:?}");
    assert!(
        items
            .iter()
            .all(|i| i["attempt"] == 1 && i["delivered"] == true),
        "{items:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Error kinds, not resolver text.

/// What an attempt or a job may never show: an address, or a resolver's or a socket's words.
fn assert_leaks_nothing(what: &str, value: &Value) {
    let text = value.to_string();
    for leak in [
        "127.0.0.1",
        "::1",
        "os error",
        "lookup",
        "name or service",
        "name resolution",
        "resolved to",
        "error trying to connect",
        "dns error",
    ] {
        assert!(!text.contains(leak), "{what} shows {leak:?}: {text}");
    }
}

async fn a_failed_attempt_records_a_kind_and_no_address(backend: Backend) {
    let app = spawn_allowing(backend, "127.0.0.1, localhost, nonexistent.invalid").await;
    let bill = app.billing().await;
    let token = bill.org.approver_token.clone();
    // A port nothing listens on: bound, then released.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    // `localhost` resolves to a loopback address, which workers with the default policy refuse.
    let by_name = register(&app, &token, &format!("http://localhost:{closed}/x"), 5).await;
    app.draft(&bill, "refused").await;
    let strict = App::new(Arc::clone(app.app.store()), AppConfig::default());
    let refusing = workers(&strict, 1, 1);
    let first = until(
        "a refused attempt",
        Duration::from_secs(60),
        || attempts(&app, &token, by_name),
        |i| !i.is_empty(),
    )
    .await;
    assert!(refusing.shutdown(Duration::from_secs(10)).await);

    let hole = BlackHole::start().await;
    let receiver = SlowReceiver::start().await;
    let unresolvable = register(&app, &token, "http://nonexistent.invalid/x", 5).await;
    let silent = register(&app, &token, &format!("http://127.0.0.1:{}/", hole.port), 1).await;
    let failing = register(
        &app,
        &token,
        &format!("http://127.0.0.1:{}/fail", receiver.port),
        5,
    )
    .await;
    // TLS to a listener that speaks plain HTTP: the handshake fails.
    let plain = register(
        &app,
        &token,
        &format!("https://127.0.0.1:{}/fail", receiver.port),
        5,
    )
    .await;
    app.draft(&bill, "failing").await;
    let allowing = workers(&app.app, 1, 4);
    let mut seen = BTreeMap::new();
    for (name, endpoint) in [
        ("by_name", by_name),
        ("unresolvable", unresolvable),
        ("silent", silent),
        ("failing", failing),
        ("plain", plain),
    ] {
        let items = until(
            "attempts",
            Duration::from_secs(60),
            || attempts(&app, &token, endpoint),
            |i| i.len() >= 2,
        )
        .await;
        seen.insert(name, items);
    }
    let _ = allowing.shutdown(Duration::from_secs(5)).await;
    let kinds: BTreeMap<&str, Vec<String>> = seen
        .iter()
        .map(|(name, items)| {
            let kinds = items
                .iter()
                .map(|i| i["error_kind"].as_str().unwrap_or("none").to_owned())
                .collect();
            (*name, kinds)
        })
        .collect();
    figures(
        "fair work: attempt error kinds",
        backend,
        &[("kinds by endpoint", format!("{kinds:?}"))],
    );

    assert_eq!(first[0]["error_kind"], "address_not_allowed", "{first:?}");
    assert!(first[0]["status_code"].is_null());
    // Later attempts by the allowing workers reach the address and find nothing listening.
    assert!(
        seen["by_name"]
            .iter()
            .any(|i| i["error_kind"] == "connect_failed"),
        "{:?}",
        seen["by_name"]
    );
    assert!(
        seen["unresolvable"]
            .iter()
            .all(|i| i["error_kind"] == "dns_failure")
    );
    assert!(seen["silent"].iter().all(|i| i["error_kind"] == "timeout"));
    assert!(
        seen["failing"]
            .iter()
            .all(|i| i["error_kind"] == "http_status" && i["status_code"] == 500),
        "{:?}",
        seen["failing"]
    );
    assert!(
        seen["plain"].iter().all(|i| i["error_kind"] == "tls"),
        "{:?}",
        seen["plain"]
    );
    for (name, items) in &seen {
        for item in items {
            assert_leaks_nothing(name, item);
        }
        let job = items[0]["job_id"].as_str().unwrap();
        let job = expect_status(
            app.get(&format!("/v1/jobs/{job}"), &token).await,
            StatusCode::OK,
        )
        .await;
        assert_leaks_nothing(name, &job["last_error"]);
        let code = job["last_error"]["code"].as_str().unwrap_or_default();
        assert!(
            [
                "address_not_allowed",
                "dns_failure",
                "timeout",
                "connect_failed",
                "tls",
                "http_status"
            ]
            .contains(&code)
                || code.starts_with("http_5"),
            "{job}"
        );
    }
}
