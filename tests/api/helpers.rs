//! `spawn_app()`: a real server on 127.0.0.1:0 over a fresh database of the chosen backend,
//! and a small typed client for the routes the tests use; the fixtures and raw-SQL helpers the
//! test files share.
//!
//! PostgreSQL databases live on the server `TAUROS_TEST_POSTGRES_URL` names, or on a
//! throwaway cluster the first PostgreSQL test starts (see [`postgres`]). Every test's database
//! is removed when its [`TestApp`] is dropped. `TEST_LOG=1` prints the servers' logs (filter:
//! `TAUROS_LOG`, default `tauros=debug,tower_http=debug,info`) with each test's output. The
//! fixtures of getting paid (settlement keys, issued invoices, settlement events) are in
//! [`settlement`].

pub mod postgres;
pub mod settlement;

use reqwest::{RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Once};
use tauros_api::{ConnectionLimits, HttpConfig, router, serve};
use tauros_app::{App, AppConfig};
use tauros_store::{self as store, DynStore};
use uuid::Uuid;

/// Which database a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// This backend's migrations, `migrations/<backend>`.
    pub fn migrations_dir(self) -> std::path::PathBuf {
        let dir = match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        };
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join(dir)
    }
}

/// `$body` with `$conn` a fresh connection to `$url`, on whichever backend it names (the two
/// connection types differ, so each branch is its own copy of `$body`).
macro_rules! on_connection {
    ($url:expr, |$conn:ident| $body:expr) => {
        if $url.starts_with("sqlite") {
            let mut $conn = <sqlx::SqliteConnection as sqlx::Connection>::connect($url)
                .await
                .unwrap();
            $body
        } else {
            let mut $conn = <sqlx::PgConnection as sqlx::Connection>::connect($url)
                .await
                .unwrap();
            $body
        }
    };
}

/// A running Tauros over its own database.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub app: App,
    pub backend: Backend,
    pub database_url: String,
    _cleanup: Cleanup,
}

/// What a test leaves behind, removed when its [`TestApp`] is dropped (also when it panics).
enum Cleanup {
    /// A SQLite database's temporary directory.
    Dir(PathBuf),
    /// A PostgreSQL database on [`postgres::admin_url`]'s server.
    Database(String),
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self {
            Cleanup::Dir(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Database(name) => postgres::drop_database(name),
        }
    }
}

/// A fresh database URL for one test, and what removes it again.
async fn fresh_database(backend: Backend) -> (String, Cleanup) {
    match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!("tauros-test-{}", Uuid::new_v4().simple()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            (
                format!("sqlite://{}/t.db?mode=rwc", dir.display()),
                Cleanup::Dir(dir),
            )
        }
        Backend::Postgres => {
            let (url, name) = postgres::create_database().await;
            (url, Cleanup::Database(name))
        }
    }
}

/// With `TEST_LOG` set (to anything but `0`), the servers' tracing output goes to the test
/// writer: shown with a failing test's output, or with `--nocapture`. The filter is
/// `TAUROS_LOG`, as for the binary. Installed once per test binary.
fn init_test_log() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        if std::env::var_os("TEST_LOG").is_none_or(|v| v.is_empty() || v == "0") {
            return;
        }
        let filter = std::env::var("TAUROS_LOG")
            .unwrap_or_else(|_| "tauros=debug,tower_http=debug,info".to_owned());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .try_init();
    });
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, AppConfig::default(), HttpConfig::default()).await
}

pub async fn spawn_app_with(backend: Backend, config: AppConfig, http: HttpConfig) -> TestApp {
    let (database_url, cleanup) = fresh_database(backend).await;
    spawn_app_at(
        backend,
        database_url,
        cleanup,
        store::PoolSettings::new(8),
        config,
        http,
    )
    .await
}

/// A server on the PostgreSQL database `name` of the test server, reached through `url`
/// (a formation's several hosts: tests/api/operations/formation.rs) with `settings`; the
/// database is dropped from the test server when the app is dropped.
pub async fn spawn_app_on(url: String, name: &str, settings: store::PoolSettings) -> TestApp {
    let cleanup = Cleanup::Database(name.to_owned());
    spawn_app_at(
        Backend::Postgres,
        url,
        cleanup,
        settings,
        AppConfig::default(),
        HttpConfig::default(),
    )
    .await
}

async fn spawn_app_at(
    backend: Backend,
    database_url: String,
    cleanup: Cleanup,
    settings: store::PoolSettings,
    config: AppConfig,
    http: HttpConfig,
) -> TestApp {
    init_test_log();
    let store: DynStore = store::connect(&database_url, settings)
        .await
        .expect("open store");
    store.migrate().await.expect("migrate");
    let app = App::new(Arc::clone(&store), config);
    let http = HttpConfig {
        metrics_on_main: true,
        ..http
    };
    let addr = serve_router(router(app.clone(), &http), http.limits).await;
    TestApp {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        app,
        backend,
        database_url,
        _cleanup: cleanup,
    }
}

/// Applies the migrations of `backend` up to `last` (inclusive) to the database at `url`: an
/// older schema, for the tests of a migration over data written before it.
pub async fn migrate_up_to(backend: Backend, url: &str, last: i64) {
    let mut before = sqlx::migrate::Migrator::new(backend.migrations_dir())
        .await
        .expect("migrations");
    before.migrations = std::borrow::Cow::Owned(
        before
            .migrations
            .iter()
            .filter(|m| m.version <= last)
            .cloned()
            .collect(),
    );
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("open");
            before.run(&pool).await.expect("the older migrations");
            pool.close().await;
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("open");
            before.run(&pool).await.expect("the older migrations");
            pool.close().await;
        }
    }
}

/// A running Tauros over a fresh database migrated up to `last` only (an older schema, for
/// the tests of a migration over existing data: `app.app.store().migrate()` runs the rest).
pub async fn spawn_app_migrated_to(backend: Backend, last: i64) -> TestApp {
    init_test_log();
    let (database_url, cleanup) = fresh_database(backend).await;
    migrate_up_to(backend, &database_url, last).await;
    let store: DynStore = store::connect(&database_url, store::PoolSettings::new(8))
        .await
        .expect("open store");
    let app = App::new(Arc::clone(&store), AppConfig::default());
    let http = HttpConfig {
        metrics_on_main: true,
        ..HttpConfig::default()
    };
    let addr = serve_router(router(app.clone(), &http), http.limits).await;
    TestApp {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        app,
        backend,
        database_url,
        _cleanup: cleanup,
    }
}

/// Serves `router` the way `tauros serve` does (connection limits, client address) on a free
/// port of 127.0.0.1 until the test's runtime ends; returns the address.
pub async fn serve_router(router: axum::Router, limits: ConnectionLimits) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve(listener, router, limits, std::future::pending()));
    addr
}

/// A seeded organisation: its approver (signed in) and the approver's agent.
pub struct Org {
    pub org_id: Uuid,
    pub approver_token: String,
    pub approver_id: Uuid,
    pub agent_id: Uuid,
    pub agent_key: String,
}

pub const PASSWORD: &str = "correct horse battery staple";

impl TestApp {
    /// The same database served by a new process: fresh connections, so no statement prepared
    /// before a migration (PostgreSQL refuses a cached `select *` whose columns changed).
    pub async fn restarted(self) -> TestApp {
        let TestApp {
            backend,
            database_url,
            _cleanup,
            ..
        } = self;
        spawn_app_at(
            backend,
            database_url,
            _cleanup,
            store::PoolSettings::new(8),
            AppConfig::default(),
            HttpConfig::default(),
        )
        .await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str, token: &str) -> Response {
        self.client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
    }

    /// `POST path` with a bearer token and a JSON body, not sent yet (for [`parallel`]).
    pub fn post_request(&self, path: &str, token: &str, body: &Value) -> RequestBuilder {
        self.client
            .post(self.url(path))
            .bearer_auth(token)
            .json(body)
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> Response {
        self.post_request(path, token, &body)
            .send()
            .await
            .expect("request")
    }

    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Response {
        self.client
            .patch(self.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    pub async fn delete(&self, path: &str, token: &str) -> Response {
        self.client
            .delete(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
    }

    pub async fn post_public(&self, path: &str, body: Value) -> Response {
        self.client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    /// Signs in and returns the session token.
    pub async fn sign_in(&self, email: &str, password: &str) -> String {
        let res = self
            .post_public(
                "/v1/sessions",
                json!({"email": email, "password": password}),
            )
            .await;
        let body = expect_status(res, StatusCode::CREATED).await;
        body["token"].as_str().expect("token").to_owned()
    }

    /// Bootstraps an organisation with a unique name and email, signs the approver in, and
    /// creates one agent for them.
    pub async fn org(&self) -> Org {
        let tag = Uuid::new_v4().simple().to_string();
        let email = format!("approver-{tag}@example.com");
        let outcome = self
            .app
            .bootstrap_approver(&format!("Org {tag}"), &email, PASSWORD.into())
            .await
            .expect("bootstrap");
        let approver_token = self.sign_in(&email, PASSWORD).await;
        let (agent_id, agent_key) = self.agent(&approver_token, "Agent A").await;
        Org {
            org_id: outcome.org_id,
            approver_id: outcome.user_id,
            approver_token,
            agent_id,
            agent_key,
        }
    }

    /// Creates an agent owned by the human `token`; returns (agent id, API key).
    pub async fn agent(&self, token: &str, name: &str) -> (Uuid, String) {
        let res = self.post("/v1/agents", token, json!({"name": name})).await;
        let body = expect_status(res, StatusCode::CREATED).await;
        (
            uuid_of(&body["agent"]["id"]),
            body["api_key"].as_str().expect("key").to_owned(),
        )
    }

    /// Invites a human of `role` into the org of `approver_token` and accepts the invitation;
    /// returns (user id, session token).
    pub async fn human(&self, approver_token: &str, role: &str) -> (Uuid, String) {
        let email = format!("{role}-{}@example.com", Uuid::new_v4().simple());
        let res = self
            .post(
                "/v1/users",
                approver_token,
                json!({"email": email, "role": role}),
            )
            .await;
        let body = expect_status(res, StatusCode::CREATED).await;
        let token = body["invitation_token"]
            .as_str()
            .expect("invitation")
            .to_owned();
        let res = self
            .post_public(
                "/v1/invitations/accept",
                json!({"invitation_token": token, "password": PASSWORD}),
            )
            .await;
        let body = expect_status(res, StatusCode::CREATED).await;
        (
            body["user"]["id"]
                .as_str()
                .expect("id")
                .parse()
                .expect("uuid"),
            body["token"].as_str().expect("token").to_owned(),
        )
    }
}

/// Asserts the status and returns the JSON body (Null when empty).
pub async fn expect_status(res: Response, status: StatusCode) -> Value {
    let got = res.status();
    let text = res.text().await.expect("body");
    assert_eq!(got, status, "unexpected status; body: {text}");
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).expect("JSON body")
    }
}

/// A problem+json answer as tests read it: its typed members, and the whole body for the
/// members one kind of problem adds (`body["…"]`).
#[derive(Debug)]
pub struct Problem {
    pub status: u16,
    pub code: String,
    pub detail: String,
    /// Every offending field; the server leaves `errors` out when there is none.
    pub errors: Vec<FieldProblem>,
    pub body: Value,
}

/// One entry of a problem's `errors[]` (`ProblemField` in crates/api/src/http/problem.rs):
/// exactly these members, so a test that reads them also checks the entry's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldProblem {
    pub field: String,
    pub code: String,
    pub detail: String,
}

/// The typed members of a problem body, read strictly (a missing or mistyped member fails).
#[derive(Deserialize)]
struct ProblemMembers {
    status: u16,
    code: String,
    detail: String,
    #[serde(default)]
    errors: Vec<FieldProblem>,
}

impl Problem {
    /// Reads `body` as a problem; panics naming the body when a member is missing or mistyped.
    pub fn from_body(body: Value) -> Problem {
        let members: ProblemMembers = serde_json::from_value(body.clone())
            .unwrap_or_else(|e| panic!("a problem body ({e}): {body}"));
        Problem {
            status: members.status,
            code: members.code,
            detail: members.detail,
            errors: members.errors,
            body,
        }
    }

    /// The `field` of every entry of `errors[]`, in order.
    pub fn fields(&self) -> Vec<&str> {
        self.errors.iter().map(|e| e.field.as_str()).collect()
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.body.fmt(f)
    }
}

/// Asserts a problem+json answer with `status` and `code`; returns it typed.
pub async fn expect_problem(res: Response, status: StatusCode, code: &str) -> Problem {
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let request_id = res
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = expect_status(res, status).await;
    assert_eq!(content_type, "application/problem+json", "body: {body}");
    assert_eq!(body["code"], code, "body: {body}");
    assert_eq!(body["status"], status.as_u16(), "body: {body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "body: {body}"
    );
    assert_eq!(
        body["request_id"].as_str(),
        request_id.as_deref(),
        "request id in body and header"
    );
    Problem::from_body(body)
}

/// Runs each named test function on both backends: `name::sqlite` and `name::postgres`. The
/// functions take a [`TestApp`] with the default configuration, or, after `backend:`, the
/// [`Backend`] (to start their own with [`spawn_app_with`]).
macro_rules! both_backends {
    // Tests that start their own server (with their own configuration) take the backend.
    (backend: $($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::helpers::Backend::Sqlite).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::helpers::Backend::Postgres).await;
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::helpers::spawn_app($crate::helpers::Backend::Sqlite).await).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::helpers::spawn_app($crate::helpers::Backend::Postgres).await).await;
                }
            }
        )*
    };
}
pub(crate) use both_backends;

/// The lines a child process writes to `pipe`, as they come (read on a thread of their own);
/// with `echo`, each is also printed with that prefix (shown with the test's output).
pub fn child_lines(
    pipe: impl std::io::Read + Send + 'static,
    echo: Option<&'static str>,
) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if let Some(prefix) = echo {
                eprintln!("{prefix}: {line}");
            }
            let _ = tx.send(line);
        }
    });
    rx
}

/// The address a `tauros serve` child logs in its `tauros listening` line (its stderr).
pub fn listening_address(log: &std::sync::mpsc::Receiver<String>) -> String {
    loop {
        let line = log
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the server logs its address");
        if line.contains("tauros listening") {
            let address = line
                .split("address=")
                .nth(1)
                .and_then(|r| r.split_whitespace().next());
            return address.expect("address in the log line").to_owned();
        }
    }
}

/// Prints a scenario's figures (`figures [area: scenario] on Backend: name value, …`) and
/// appends the same line to `target/scenario-figures.txt`, which `scripts/test` prints after
/// the test run, so the figures are seen on a passing run too (cargo captures a passing test's
/// output).
pub fn figures(scenario: &str, backend: Backend, pairs: &[(&str, String)]) {
    use std::io::Write;
    let body = pairs
        .iter()
        .map(|(name, value)| format!("{name} {value}"))
        .collect::<Vec<_>>()
        .join(", ");
    let line = format!("figures [{scenario}] on {backend:?}: {body}");
    println!("{line}");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/scenario-figures.txt");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// Sends every request at once (each on its own task) and returns the responses in order.
pub async fn parallel(requests: Vec<reqwest::RequestBuilder>) -> Vec<Response> {
    let barrier = Arc::new(tokio::sync::Barrier::new(requests.len()));
    let handles: Vec<_> = requests
        .into_iter()
        .map(|req| {
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                req.send().await.expect("request")
            })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

/// How many answers had each status, by code: `{200: 1, 409: 7}`. What a race may be asserted
/// on, as the order in which parallel requests are let in is the scheduler's.
pub fn tally(
    statuses: impl IntoIterator<Item = StatusCode>,
) -> std::collections::BTreeMap<u16, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for status in statuses {
        *counts.entry(status.as_u16()).or_default() += 1;
    }
    counts
}

/// An organisation ready for invoices: the approver's agent has a customer and an active EUR
/// IBAN destination.
pub struct Billing {
    pub org: Org,
    pub customer_id: Uuid,
    pub destination_id: Uuid,
}

pub const IBAN: &str = "DE89370400440532013000";

impl TestApp {
    /// Creates a customer of `agent_id` as the human `token` (who must own the agent).
    pub async fn customer(&self, token: &str, agent_id: Uuid, name: &str) -> Uuid {
        let res = self
            .post(
                "/v1/customers",
                token,
                json!({"agent_id": agent_id, "name": name, "email": "billing@example.com"}),
            )
            .await;
        uuid_of(&expect_status(res, StatusCode::CREATED).await["id"])
    }

    /// Registers an active destination as the agent `key`.
    pub async fn destination(
        &self,
        key: &str,
        currency: &str,
        network: &str,
        address: &str,
    ) -> Uuid {
        let body = json!({"label": "Account", "currency": currency, "network": network, "address": address});
        let res = self.post("/v1/payment-destinations", key, body).await;
        uuid_of(&expect_status(res, StatusCode::CREATED).await["id"])
    }

    /// An org whose agent has one customer and one EUR destination.
    pub async fn billing(&self) -> Billing {
        let org = self.org().await;
        let customer_id = self
            .customer(&org.approver_token, org.agent_id, "Acme Inc")
            .await;
        let destination_id = self.destination(&org.agent_key, "EUR", "iban", IBAN).await;
        Billing {
            org,
            customer_id,
            destination_id,
        }
    }

    /// A second agent of `b`'s organisation and owner, with its own customer and EUR
    /// destination.
    pub async fn second_agent(&self, b: &Billing) -> Billing {
        let (agent_id, agent_key) = self.agent(&b.org.approver_token, "Agent B").await;
        let customer_id = self
            .customer(&b.org.approver_token, agent_id, "Beta Ltd")
            .await;
        let destination_id = self.destination(&agent_key, "EUR", "iban", IBAN).await;
        Billing {
            org: Org {
                org_id: b.org.org_id,
                approver_token: b.org.approver_token.clone(),
                approver_id: b.org.approver_id,
                agent_id,
                agent_key,
            },
            customer_id,
            destination_id,
        }
    }

    /// `POST /v1/payment-destinations` with `Idempotency-Key: key`, not sent yet.
    pub fn create_destination_request(
        &self,
        token: &str,
        key: &str,
        body: &Value,
    ) -> RequestBuilder {
        self.post_request("/v1/payment-destinations", token, body)
            .header("idempotency-key", key)
    }

    /// Deactivates a destination as `token`; returns the destination.
    pub async fn deactivate(&self, token: &str, destination: Uuid) -> Value {
        let path = format!("/v1/payment-destinations/{destination}/deactivate");
        expect_status(self.post(&path, token, json!({})).await, StatusCode::OK).await
    }

    /// Changes the organisation's settings as the approver `token`; returns them.
    pub async fn set_org(&self, token: &str, settings: Value) -> Value {
        expect_status(
            self.patch("/v1/organisation", token, settings).await,
            StatusCode::OK,
        )
        .await
    }

    /// Changes settings as `token`; when that is a proposal (turning `four_eyes` off while it
    /// is on), `confirmer` (another approver) confirms it. Answers the organisation.
    pub async fn set_org_confirmed(&self, token: &str, confirmer: &str, settings: Value) -> Value {
        let res = self.patch("/v1/organisation", token, settings).await;
        if res.status() != StatusCode::ACCEPTED {
            return expect_status(res, StatusCode::OK).await;
        }
        let change = expect_status(res, StatusCode::ACCEPTED).await;
        let path = format!(
            "/v1/organisation/changes/{}/confirm",
            change["change"]["id"].as_str().expect("change id")
        );
        let done =
            expect_status(self.post(&path, confirmer, json!({})).await, StatusCode::OK).await;
        done["organisation"].clone()
    }

    /// `POST /v1/invoices` with `Idempotency-Key: key`, not sent yet.
    pub fn create_invoice_request(
        &self,
        agent_key: &str,
        key: &str,
        body: &Value,
    ) -> RequestBuilder {
        self.post_request("/v1/invoices", agent_key, body)
            .header("idempotency-key", key)
    }

    /// `POST /v1/invoices` with `Idempotency-Key: key`.
    pub async fn create_invoice(&self, agent_key: &str, key: &str, body: &Value) -> Response {
        self.create_invoice_request(agent_key, key, body)
            .send()
            .await
            .expect("request")
    }

    /// `POST /v1/invoices` with `Idempotency-Key: key` and this exact text as its JSON body
    /// (malformed JSON, or numbers a `Value` cannot hold).
    pub async fn create_invoice_text(&self, agent_key: &str, key: &str, text: &str) -> Response {
        self.post_text("/v1/invoices", agent_key, text)
            .header("idempotency-key", key)
            .send()
            .await
            .expect("request")
    }

    /// `POST path` with a bearer token and this exact text declared as JSON, not sent yet.
    pub fn post_text(&self, path: &str, token: &str, text: &str) -> RequestBuilder {
        self.client
            .post(self.url(path))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(text.to_owned())
    }

    /// `POST /v1/invoices/{id}/{action}` (`submit`, `approve`, …), not sent yet.
    pub fn command_request(
        &self,
        token: &str,
        id: &str,
        action: &str,
        body: &Value,
    ) -> RequestBuilder {
        self.post_request(&format!("/v1/invoices/{id}/{action}"), token, body)
    }

    /// `POST /v1/invoices/{id}/{action}` (`submit`, `approve`, …).
    pub async fn command(&self, token: &str, id: &str, action: &str, body: Value) -> Response {
        self.command_request(token, id, action, &body)
            .send()
            .await
            .expect("request")
    }

    /// Approves the revision `invoice` shows (its current one when it was read), no reason.
    pub async fn approve(&self, token: &str, invoice: &Value) -> Response {
        let body = TestApp::decision_body(invoice, None);
        self.command(token, id_of(invoice), "approve", body).await
    }

    /// Creates a draft and returns the command envelope's invoice.
    pub async fn draft(&self, b: &Billing, key: &str) -> Value {
        let res = self
            .create_invoice(&b.org.agent_key, key, &invoice_body(b))
            .await;
        expect_status(res, StatusCode::CREATED).await["invoice"].clone()
    }

    /// Creates and submits a draft; returns the pending invoice.
    pub async fn pending(&self, b: &Billing, key: &str) -> Value {
        let invoice = self.draft(b, key).await;
        let res = self
            .command(&b.org.agent_key, id_of(&invoice), "submit", json!({}))
            .await;
        expect_status(res, StatusCode::OK).await["invoice"].clone()
    }

    /// `GET /v1/invoices/{id}` as `token`, which must answer 200.
    pub async fn invoice(&self, token: &str, id: &str) -> Value {
        let res = self.get(&format!("/v1/invoices/{id}"), token).await;
        expect_status(res, StatusCode::OK).await
    }

    /// The `action` of every event of an invoice, oldest first.
    pub async fn event_actions(&self, token: &str, id: &str) -> Vec<String> {
        let res = self.get(&format!("/v1/invoices/{id}/events"), token).await;
        expect_status(res, StatusCode::OK).await["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|e| e["action"].as_str().expect("action").to_owned())
            .collect()
    }

    /// Every decision on an invoice, oldest first.
    pub async fn decisions(&self, token: &str, id: &str) -> Vec<Value> {
        let res = self
            .get(&format!("/v1/invoices/{id}/decisions"), token)
            .await;
        expect_status(res, StatusCode::OK).await["items"]
            .as_array()
            .expect("items")
            .clone()
    }

    /// `GET /v1/invoices/{id}/verify` as `token`, which must answer 200; returns the report.
    pub async fn verify(&self, token: &str, id: &str) -> Value {
        let res = self.get(&format!("/v1/invoices/{id}/verify"), token).await;
        expect_status(res, StatusCode::OK).await
    }

    /// `{revision_id, payload_hash}` of an invoice's current revision, plus `reason`.
    pub fn decision_body(invoice: &Value, reason: Option<&str>) -> Value {
        let mut body = json!({
            "revision_id": invoice["current_revision"]["id"],
            "payload_hash": invoice["current_revision"]["payload_hash"],
        });
        if let Some(r) = reason {
            body["reason"] = json!(r);
        }
        body
    }
}

/// The standard fixture, the invoice the HTTP exercises propose (`fixtures/exercises/`):
/// "Discovery workshop" 1 × 400 and "Implementation days" 2 × 400 EUR, due in 30 days.
pub fn invoice_body(b: &Billing) -> Value {
    invoice_body_for(b.customer_id, b.destination_id)
}

/// The same fixture for any customer and EUR destination.
pub fn invoice_body_for(customer_id: Uuid, destination_id: Uuid) -> Value {
    let due = (chrono::Utc::now() + chrono::Duration::days(30))
        .date_naive()
        .to_string();
    json!({
        "customer_id": customer_id,
        "payment_destination_id": destination_id,
        "currency": "EUR",
        "due_date": due,
        "lines": [
            {"description": "Discovery workshop", "quantity": "1", "unit_amount": "400"},
            {"description": "Implementation days", "quantity": "2", "unit_amount": "400.00"}
        ],
        "reasoning": "Monthly retainer agreed in the signed statement of work."
    })
}

/// The `field` of every entry of a problem's `errors[]`, in order.
pub fn error_fields(problem: &Value) -> Vec<&str> {
    problem["errors"]
        .as_array()
        .expect("errors[]")
        .iter()
        .map(|e| e["field"].as_str().expect("field"))
        .collect()
}

/// An invoice's (or any record's) `id`.
pub fn id_of(record: &Value) -> &str {
    record["id"].as_str().expect("id")
}

/// A JSON string member that holds a UUID.
pub fn uuid_of(value: &Value) -> Uuid {
    value.as_str().expect("a string").parse().expect("a UUID")
}

/// The email of the human signed in with `token`, from `GET /v1/me` (200 required).
pub async fn email_of(app: &TestApp, token: &str) -> String {
    let me = expect_status(app.get("/v1/me", token).await, StatusCode::OK).await;
    me["email"].as_str().expect("email").to_owned()
}

/// The status and JSON body of an answer, without the request id (the one member two
/// otherwise identical answers may differ in).
pub async fn without_request_id(res: Response) -> (StatusCode, Value) {
    let status = res.status();
    let mut body: Value = serde_json::from_str(&res.text().await.expect("body")).expect("JSON");
    body.as_object_mut()
        .expect("an object")
        .remove("request_id");
    (status, body)
}

impl TestApp {
    /// The text `/metrics` serves.
    pub async fn metrics(&self) -> String {
        let res = self.client.get(self.url("/metrics")).send().await;
        res.expect("request").text().await.expect("body")
    }

    /// The actions of the org audit trail of one subject, oldest first (through the store).
    pub async fn audit_actions(&self, org_id: Uuid, subject: Uuid) -> Vec<String> {
        let mut conn = self
            .app
            .store()
            .reader(tauros_store::Lane::Unattributed)
            .await
            .expect("reader");
        conn.audit_for_subject(org_id, subject)
            .await
            .expect("audit trail")
            .into_iter()
            .map(|e| e.action)
            .collect()
    }

    /// Rows of the invoices' read model (`invoice_reads`, migration 0019) that differ from
    /// what its definition (`invoice_reads_source`, the joined read) says now, either way: 0
    /// when every write kept it current. `invoice_reads` is only written by triggers.
    pub async fn read_model_differences(&self) -> i64 {
        self.sql_count(
            "select (select count(*) from (select * from invoice_reads_source
                 except select * from invoice_reads) stale)
             + (select count(*) from (select * from invoice_reads
                 except select * from invoice_reads_source) extra)",
        )
        .await
    }

    /// Derives the read model's row of the invoice `id` (an SQL literal: [`sql_uuid`]) again
    /// from its definition, after a test edited the tables behind the app's back (no write of
    /// the app fired the triggers that keep it current).
    pub async fn rederive_read_model(&self, id: &str) {
        self.sql_script(&format!(
            "delete from invoice_reads where invoice_id = {id};
             insert into invoice_reads select * from invoice_reads_source where invoice_id = {id};"
        ))
        .await;
    }

    /// `select count(*) …` (or any integer) on this test's database.
    pub async fn sql_count(&self, sql: &str) -> i64 {
        self.sql_scalar(sql).await
    }

    /// One value from raw SQL on this test's database, on either backend.
    pub async fn sql_scalar<T>(&self, sql: &str) -> T
    where
        T: Send
            + Unpin
            + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>
            + for<'r> sqlx::Decode<'r, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>,
    {
        sql_scalar(&self.database_url, sql).await
    }

    /// Every row of raw SQL on this test's database, on either backend.
    pub async fn sql_rows<T>(&self, sql: &str) -> Vec<T>
    where
        T: Send
            + Unpin
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        on_connection!(&self.database_url, |conn| sqlx::query_as(sql)
            .fetch_all(&mut conn)
            .await
            .unwrap())
    }

    /// Runs a script of statements (no binds) on this test's database; panics on an error.
    pub async fn sql_script(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        on_connection!(&self.database_url, |conn| {
            sqlx::raw_sql(sql).execute(&mut conn).await.expect("script");
        });
    }

    /// Runs one raw SQL statement on this test's database; returns whether it was accepted.
    pub async fn sql_exec(&self, sql: &str) -> bool {
        sql_exec(&self.database_url, sql).await
    }

    /// Row counts of the invoice tables, in the order invoices, revisions, decisions, events:
    /// what a refusal must leave as it was.
    pub async fn invoice_rows(&self) -> [i64; 4] {
        [
            self.sql_count("select count(*) from invoices").await,
            self.sql_count("select count(*) from invoice_revisions")
                .await,
            self.sql_count("select count(*) from decisions").await,
            self.sql_count("select count(*) from invoice_events").await,
        ]
    }
}

/// One value from raw SQL against a test database (for row counts and tampering tests), on
/// either backend.
async fn sql_scalar<T>(database_url: &str, sql: &str) -> T
where
    T: Send
        + Unpin
        + for<'r> sqlx::Decode<'r, sqlx::Sqlite>
        + sqlx::Type<sqlx::Sqlite>
        + for<'r> sqlx::Decode<'r, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>,
{
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    on_connection!(database_url, |conn| sqlx::query_scalar(sql)
        .fetch_one(&mut conn)
        .await
        .unwrap())
}

/// Runs one raw SQL statement; returns whether the database accepted it.
async fn sql_exec(database_url: &str, sql: &str) -> bool {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    on_connection!(database_url, |conn| sqlx::query(sql)
        .execute(&mut conn)
        .await
        .is_ok())
}

/// A UUID literal in the backend's own spelling (SQLite stores UUIDs as 16-byte blobs).
pub fn sql_uuid(database_url: &str, id: &str) -> String {
    if database_url.starts_with("sqlite") {
        format!("x'{}'", id.replace('-', ""))
    } else {
        format!("'{id}'")
    }
}

/// A fresh, empty database of `backend` (no migration applied yet), removed when the returned
/// guard is dropped: for tests of a migration on data written before it.
pub async fn empty_database(backend: Backend) -> (String, impl Drop) {
    fresh_database(backend).await
}

/// A client whose connections come from `127.0.0.{n}` (Linux routes all of 127/8 to `lo`):
/// another client address for the server's per-address limits.
pub fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, n)))
        .build()
        .expect("client")
}

/// Polls `read` until `done` holds for what it returns, or fails the test after `within`
/// (a correctness deadline, not a performance assert).
pub async fn until<T, F, Fut>(
    what: &str,
    within: std::time::Duration,
    mut read: F,
    done: impl Fn(&T) -> bool,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
    T: std::fmt::Debug,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        let value = read().await;
        if done(&value) {
            return value;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within {within:?}: {value:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
