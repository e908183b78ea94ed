//! The reference peer (`tauros peer`, docs/PEER.md) as a real child process over real HTTP:
//! deduplication by key, the recovery query, exactly one effect under concurrency, each fault
//! mode, and operations kept across a restart. It has no Tauros database, so these tests run
//! once. A test waits for a paused request by the line the peer prints, never by sleeping.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
use tokio::sync::mpsc;
use uuid::Uuid;

/// How long a test waits for the peer to start, print or exit before it fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// A temporary directory for one test's peer database, removed when dropped (after the peer,
/// which tests declare later).
pub(crate) struct PeerDir(PathBuf);

impl PeerDir {
    pub(crate) fn new() -> PeerDir {
        let dir = std::env::temp_dir().join(format!("tauros-peer-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        PeerDir(dir)
    }
}

impl Drop for PeerDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `tauros peer`; killed when dropped, so a failing test leaves no process.
pub(crate) struct Peer {
    child: Option<Child>,
    pub(crate) base: String,
    stdout: mpsc::UnboundedReceiver<String>,
    client: reqwest::Client,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn invoice(number: u32) -> Value {
    json!({
        "invoice_id": "0190f3c4-8a1b-7c2d-9e3f-405162738495",
        "number": format!("INV-2026-{number:06}"),
        "currency": "EUR",
        "total_minor": 12_500,
        "lines": [{"description": "Consulting", "quantity": "5", "unit_amount": "25.00"}],
    })
}

impl Peer {
    /// Starts `tauros peer` on a free port over `dir`'s database and reads the address it
    /// prints. `TEST_LOG=1` shows its log.
    pub(crate) async fn start(dir: &PeerDir) -> Peer {
        Peer::start_with(dir, &[]).await
    }

    /// [`Peer::start`] with extra command-line arguments (e.g. `--key-retention-seconds`).
    pub(crate) async fn start_with(dir: &PeerDir, args: &[&str]) -> Peer {
        let logs = std::env::var_os("TEST_LOG").is_some_and(|v| !v.is_empty() && v != "0");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
            .arg("peer")
            .arg("--bind")
            .arg("127.0.0.1:0")
            .arg("--database")
            .arg(dir.0.join("peer.db"))
            .env_remove("TAUROS_PEER_BIND")
            .env_remove("TAUROS_PEER_DATABASE")
            .env_remove("TAUROS_PEER_KEY_RETENTION_SECONDS")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if logs {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start tauros peer");
        let (tx, stdout) = mpsc::unbounded_channel();
        let pipe = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut peer = Peer {
            child: Some(child),
            base: String::new(),
            stdout,
            client: reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .unwrap(),
        };
        let line = peer.printed("peer listening on ").await;
        peer.base = line["peer listening on ".len()..].to_owned();
        assert!(peer.base.starts_with("http://127.0.0.1:"), "{line}");
        peer
    }

    /// The next line on stdout that starts with `prefix` (earlier lines are skipped).
    async fn printed(&mut self, prefix: &str) -> String {
        loop {
            let line = tokio::time::timeout(DEADLINE, self.stdout.recv())
                .await
                .unwrap_or_else(|_| panic!("the peer prints {prefix:?} in time"))
                .unwrap_or_else(|| panic!("stdout closed before {prefix:?}"));
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, key: &str, body: &Value) -> reqwest::Result<Response> {
        self.client
            .post(self.url("/invoices"))
            .header("Idempotency-Key", key)
            .json(body)
            .send()
            .await
    }

    async fn recover(&self, key: &str) -> reqwest::Result<Response> {
        self.client
            .get(self.url(&format!("/invoices/{key}")))
            .send()
            .await
    }

    pub(crate) async fn arm(&self, fault: Value) -> Value {
        let res = self
            .client
            .post(self.url("/faults"))
            .json(&fault)
            .send()
            .await
            .unwrap();
        status(res, StatusCode::CREATED).await
    }

    pub(crate) async fn control(&self, method: reqwest::Method, path: &str) -> Value {
        let res = self
            .client
            .request(method, self.url(path))
            .send()
            .await
            .unwrap();
        status(res, StatusCode::OK).await
    }

    /// Makes the peer hold `body` under `key` (`PUT /records/{key}`), as a restored backup on
    /// the other side would.
    pub(crate) async fn plant(&self, key: &str, body: &Value) -> Value {
        let res = self
            .client
            .put(self.url(&format!("/records/{key}")))
            .json(body)
            .send()
            .await
            .unwrap();
        status(res, StatusCode::OK).await
    }

    pub(crate) async fn stats(&self) -> Value {
        self.control(reqwest::Method::GET, "/stats").await
    }

    /// SIGTERM, then the exit status (within the deadline).
    pub(crate) async fn stop(mut self) -> ExitStatus {
        let child = self.child.take().unwrap();
        let pid = child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let mut child = child;
        let waited =
            tokio::time::timeout(DEADLINE, tokio::task::spawn_blocking(move || child.wait())).await;
        match waited {
            Ok(status) => status.unwrap().unwrap(),
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                panic!("the peer did not exit after SIGTERM");
            }
        }
    }
}

/// Asserts the status and returns the JSON body (`Null` when empty).
async fn status(res: Response, expected: StatusCode) -> Value {
    let got = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(got, expected, "unexpected status; body: {text}");
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

fn replayed(res: &Response) -> Option<&str> {
    res.headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap())
}

fn operations(stats: &Value) -> Vec<(String, i64)> {
    stats["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["op_key"].as_str().unwrap().to_owned(),
                o["effects"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn ops(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_key_with_the_same_body_replays_and_with_another_body_is_refused() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let first = peer.post("inv-1:issue:v1", &invoice(1)).await.unwrap();
    assert_eq!(replayed(&first), None);
    let answer = status(first, StatusCode::CREATED).await;
    Uuid::parse_str(answer["peer_id"].as_str().unwrap()).unwrap();
    assert_eq!(answer["op_key"], "inv-1:issue:v1");
    assert!(answer["received_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        answer["request"],
        invoice(1),
        "the request it holds under the key"
    );
    assert_eq!(answer.as_object().unwrap().len(), 4);

    // The same object, members in another order and spaced differently: a replay.
    let reordered = r#"{ "total_minor": 12500, "number": "INV-2026-000001",
        "lines": [{"unit_amount": "25.00", "quantity": "5", "description": "Consulting"}],
        "currency": "EUR", "invoice_id": "0190f3c4-8a1b-7c2d-9e3f-405162738495" }"#;
    let again = peer
        .client
        .post(peer.url("/invoices"))
        .header("Idempotency-Key", "inv-1:issue:v1")
        .header("Content-Type", "application/json")
        .body(reordered)
        .send()
        .await
        .unwrap();
    assert_eq!(replayed(&again), Some("true"));
    assert_eq!(status(again, StatusCode::OK).await, answer);

    let other = peer.post("inv-1:issue:v1", &invoice(2)).await.unwrap();
    assert_eq!(
        status(other, StatusCode::UNPROCESSABLE_ENTITY).await,
        json!({"error": "key_reused_with_different_request"})
    );

    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 3);
    assert_eq!(stats["recovers"], 0);
    assert_eq!(stats["effects"], 1);
    assert_eq!(operations(&stats), ops(&[("inv-1:issue:v1", 1)]));
    let calls: Vec<&Value> = stats["calls"].as_array().unwrap().iter().collect();
    assert_eq!(calls.len(), 3);
    assert!(
        calls
            .iter()
            .all(|c| c["kind"] == "execute" && c["op_key"] == "inv-1:issue:v1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_and_bodies_are_refused_with_400_and_commit_nothing() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let send = |key: Option<Vec<u8>>, body: &'static str| {
        let mut req = peer
            .client
            .post(peer.url("/invoices"))
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(key) = key {
            req = req.header(
                "Idempotency-Key",
                reqwest::header::HeaderValue::from_bytes(&key).unwrap(),
            );
        }
        req.send()
    };
    let ok_body = r#"{"number": "INV-2026-000001"}"#;
    let missing = send(None, ok_body).await.unwrap();
    assert_eq!(
        status(missing, StatusCode::BAD_REQUEST).await,
        json!({"error": "missing_idempotency_key"})
    );
    for key in [
        b"".to_vec(),
        b"two words".to_vec(),
        vec![b'k'; 256],
        "cl\u{e9}".as_bytes().to_vec(),
    ] {
        let res = send(Some(key.clone()), ok_body).await.unwrap();
        assert_eq!(
            status(res, StatusCode::BAD_REQUEST).await,
            json!({"error": "malformed_idempotency_key"}),
            "{key:?}"
        );
    }
    let twice = peer
        .client
        .post(peer.url("/invoices"))
        .header("Idempotency-Key", "a")
        .header("Idempotency-Key", "b")
        .body(ok_body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        status(twice, StatusCode::BAD_REQUEST).await,
        json!({"error": "malformed_idempotency_key"})
    );
    for (body, code) in [
        ("{\"number\": ", "body_not_json"),
        ("[1, 2]", "body_not_an_object"),
        ("\"INV-1\"", "body_not_an_object"),
        ("", "body_not_json"),
    ] {
        let res = send(Some(b"k".to_vec()), body).await.unwrap();
        assert_eq!(
            status(res, StatusCode::BAD_REQUEST).await,
            json!({"error": code}),
            "{body:?}"
        );
    }
    // The longest key, and a body just under the 1 MiB limit, are accepted.
    let longest = "k".repeat(255);
    let big = json!({"notes": "x".repeat(1024 * 1024 - 32)});
    let res = peer.post(&longest, &big).await.unwrap();
    status(res, StatusCode::CREATED).await;

    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 11);
    assert_eq!(stats["effects"], 1);
    assert_eq!(operations(&stats), ops(&[(&longest, 1)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_answers_200_for_a_stored_key_and_404_absent_for_an_unknown_one() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let key = "org/7:inv-1?issue#v1";
    let answer = status(
        peer.post(key, &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    // The key is one path segment, percent-encoded.
    let found = peer.recover("org%2F7%3Ainv-1%3Fissue%23v1").await.unwrap();
    assert_eq!(replayed(&found), None);
    assert_eq!(status(found, StatusCode::OK).await, answer);
    let unknown = peer.recover("never-sent").await.unwrap();
    assert_eq!(
        status(unknown, StatusCode::NOT_FOUND).await,
        json!({"error": "absent"})
    );
    let malformed = peer.recover("two%20words").await.unwrap();
    assert_eq!(
        status(malformed, StatusCode::BAD_REQUEST).await,
        json!({"error": "malformed_op_key"})
    );
    // A 404 from a wrong route is not an answer about a key.
    let wrong = peer
        .client
        .get(peer.url("/invoice/never-sent"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        status(wrong, StatusCode::NOT_FOUND).await,
        json!({"error": "no_route"})
    );

    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 1);
    assert_eq!(stats["recovers"], 3);
    assert_eq!(stats["effects"], 1);
    let recovered: Vec<&Value> = stats["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "recover")
        .map(|c| &c["op_key"])
        .collect();
    assert_eq!(recovered, [&json!(key), &json!("never-sent"), &Value::Null]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_concurrent_identical_posts_make_one_effect() {
    let dir = PeerDir::new();
    let mut peer = Peer::start(&dir).await;
    let fire = |peer: &Peer, key: &'static str| {
        (0..16)
            .map(|_| {
                let request = peer
                    .client
                    .post(peer.url("/invoices"))
                    .header("Idempotency-Key", key)
                    .json(&invoice(1));
                tokio::spawn(async move {
                    let res = request.send().await.unwrap();
                    let code = res.status();
                    (code, res.json::<Value>().await.unwrap())
                })
            })
            .collect::<Vec<_>>()
    };
    async fn settle(tasks: Vec<tokio::task::JoinHandle<(StatusCode, Value)>>) {
        let mut answers = Vec::new();
        for task in tasks {
            answers.push(task.await.unwrap());
        }
        let created = answers
            .iter()
            .filter(|(code, _)| *code == StatusCode::CREATED)
            .count();
        assert_eq!(created, 1, "{answers:?}");
        assert!(
            answers
                .iter()
                .all(
                    |(code, body)| (*code == StatusCode::CREATED || *code == StatusCode::OK)
                        && *body == answers[0].1
                ),
            "{answers:?}"
        );
    }

    // As they come.
    settle(fire(&peer, "together")).await;

    // All sixteen held at the commit point, then let go at once.
    peer.arm(json!({"mode": "pause_before_commit", "times": 16}))
        .await;
    let tasks = fire(&peer, "held");
    for _ in 0..16 {
        peer.printed("peer paused before commit held").await;
    }
    let released = peer.control(reqwest::Method::POST, "/faults/release").await;
    assert_eq!(released, json!({"released": 16}));
    settle(tasks).await;

    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 32);
    assert_eq!(stats["effects"], 2);
    assert_eq!(operations(&stats), ops(&[("together", 1), ("held", 1)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_before_commit_holds_the_request_until_released() {
    let dir = PeerDir::new();
    let mut peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "pause_before_commit", "op_key": "held"}))
        .await;
    // Another key is not held.
    let other = peer.post("other", &invoice(2)).await.unwrap();
    status(other, StatusCode::CREATED).await;

    let request = peer
        .client
        .post(peer.url("/invoices"))
        .header("Idempotency-Key", "held")
        .json(&invoice(1));
    let held = tokio::spawn(async move { request.send().await.unwrap() });
    assert_eq!(
        peer.printed("peer paused").await,
        "peer paused before commit held"
    );
    let faults = peer.control(reqwest::Method::GET, "/faults").await;
    assert_eq!(faults, json!({"armed": [], "paused": ["held"]}));
    // Paused before the commit: nothing is stored yet.
    let absent = peer.recover("held").await.unwrap();
    status(absent, StatusCode::NOT_FOUND).await;
    assert_eq!(peer.stats().await["effects"], 1);

    let released = peer.control(reqwest::Method::POST, "/faults/release").await;
    assert_eq!(released, json!({"released": 1}));
    let answer = status(held.await.unwrap(), StatusCode::CREATED).await;
    let stored = peer.recover("held").await.unwrap();
    assert_eq!(status(stored, StatusCode::OK).await, answer);
    let faults = peer.control(reqwest::Method::GET, "/faults").await;
    assert_eq!(faults, json!({"armed": [], "paused": []}));
    assert_eq!(
        operations(&peer.stats().await),
        ops(&[("other", 1), ("held", 1)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_reply_after_commit_closes_the_connection_with_the_operation_stored() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    let lost = peer.post("k", &invoice(1)).await;
    let error = lost.expect_err("no answer at all");
    assert!(!error.is_timeout(), "closed, not slow: {error:?}");
    assert!(error.status().is_none(), "{error:?}");

    // It was committed: recovery finds it and a retry is a replay of the same operation.
    let stored = status(peer.recover("k").await.unwrap(), StatusCode::OK).await;
    let retry = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(replayed(&retry), Some("true"));
    assert_eq!(status(retry, StatusCode::OK).await, stored);
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 2);
    assert_eq!(stats["recovers"], 1);
    assert_eq!(stats["effects"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_after_commit_answers_a_body_that_is_not_json_with_the_operation_stored() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "garbage_after_commit"})).await;
    let garbled = peer.post("g", &invoice(1)).await.unwrap();
    assert_eq!(garbled.status(), StatusCode::CREATED);
    assert_eq!(
        garbled.headers()["content-type"].to_str().unwrap(),
        "text/html"
    );
    let text = garbled.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    // The operation is stored: recovery finds it, and the next post is a replay.
    let stored = status(peer.recover("g").await.unwrap(), StatusCode::OK).await;
    let again = peer.post("g", &invoice(1)).await.unwrap();
    assert_eq!(status(again, StatusCode::OK).await, stored);
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 2);
    assert_eq!(stats["effects"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_after_commit_answers_500_with_the_operation_stored() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "error_after_commit", "times": 2}))
        .await;
    let failed = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(
        status(failed, StatusCode::INTERNAL_SERVER_ERROR).await,
        json!({"error": "injected_error_after_commit"})
    );
    // The second application falls on the retry, a replay: still 500, still one effect.
    let again = peer.post("k", &invoice(1)).await.unwrap();
    status(again, StatusCode::INTERNAL_SERVER_ERROR).await;
    let faults = peer.control(reqwest::Method::GET, "/faults").await;
    assert_eq!(faults["armed"], json!([]));

    let stored = status(peer.recover("k").await.unwrap(), StatusCode::OK).await;
    let third = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(status(third, StatusCode::OK).await, stored);
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 3);
    assert_eq!(stats["effects"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_unknown_answers_503_whatever_is_stored() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let answer = status(
        peer.post("stored", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    peer.arm(json!({"mode": "recover_unknown", "times": 2}))
        .await;
    for key in ["stored", "never-sent"] {
        let res = peer.recover(key).await.unwrap();
        assert_eq!(
            status(res, StatusCode::SERVICE_UNAVAILABLE).await,
            json!({"error": "injected_recover_unknown"})
        );
    }
    let truth = peer.recover("stored").await.unwrap();
    assert_eq!(status(truth, StatusCode::OK).await, answer);
    assert_eq!(peer.stats().await["recovers"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lie_absent_answers_404_for_a_stored_key() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let answer = status(
        peer.post("stored", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    peer.arm(json!({"mode": "lie_absent"})).await;
    let lie = peer.recover("stored").await.unwrap();
    assert_eq!(
        status(lie, StatusCode::NOT_FOUND).await,
        json!({"error": "absent"}),
        "the lie looks exactly like the truth"
    );
    // A caller that believed it and executes again under the same key: absorbed.
    let again = peer.post("stored", &invoice(1)).await.unwrap();
    assert_eq!(status(again, StatusCode::OK).await, answer);
    let truth = peer.recover("stored").await.unwrap();
    assert_eq!(status(truth, StatusCode::OK).await, answer);
    assert_eq!(peer.stats().await["effects"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_peer_outlasts_a_client_timeout_and_the_retry_makes_the_only_effect() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    // Far longer than the client waits; the peer is killed before it wakes.
    peer.arm(json!({"mode": "slow", "millis": 120_000})).await;
    let gave_up = peer
        .client
        .post(peer.url("/invoices"))
        .header("Idempotency-Key", "k")
        .json(&invoice(1))
        .timeout(Duration::from_millis(300))
        .send()
        .await
        .expect_err("the client gives up first");
    assert!(gave_up.is_timeout(), "{gave_up:?}");
    // The slow request has not committed; the retry (the fault is used up) commits.
    let retry = peer.post("k", &invoice(1)).await.unwrap();
    status(retry, StatusCode::CREATED).await;
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 2);
    assert_eq!(stats["effects"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_connections_closes_connections_until_cleared_or_used_up() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "refuse_connections", "times": 3}))
        .await;
    let refused = peer.post("k", &invoice(1)).await.expect_err("refused");
    assert!(!refused.is_timeout(), "{refused:?}");
    peer.recover("k").await.expect_err("refused");
    // The control routes still answer; the refused requests never reached a handler.
    let stats = peer.stats().await;
    assert_eq!(
        (stats["executes"].clone(), stats["recovers"].clone()),
        (json!(0), json!(0))
    );
    let faults = peer.control(reqwest::Method::GET, "/faults").await;
    assert_eq!(
        faults["armed"],
        json!([{"mode": "refuse_connections", "times": 1}])
    );
    let cleared = peer.control(reqwest::Method::DELETE, "/faults").await;
    assert_eq!(cleared, json!({"cleared": 1, "released": 0}));
    status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;

    // Used up: one refused, the next one answered.
    peer.arm(json!({"mode": "refuse_connections"})).await;
    peer.recover("k").await.expect_err("refused");
    status(peer.recover("k").await.unwrap(), StatusCode::OK).await;
    let stats = peer.stats().await;
    assert_eq!(
        (stats["executes"].clone(), stats["recovers"].clone()),
        (json!(1), json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dedupe_makes_a_second_effect_under_a_known_key() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let first = status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    peer.arm(json!({"mode": "no_dedupe"})).await;
    let second = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(replayed(&second), None);
    let second = status(second, StatusCode::CREATED).await;
    assert_ne!(second["peer_id"], first["peer_id"], "a second effect");
    let stats = peer.stats().await;
    assert_eq!(stats["effects"], 2);
    assert_eq!(operations(&stats), ops(&[("k", 2)]));

    // Used up: the peer deduplicates again, and recovery names the first operation.
    let third = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(status(third, StatusCode::OK).await, first);
    assert_eq!(
        status(peer.recover("k").await.unwrap(), StatusCode::OK).await,
        first
    );
    assert_eq!(peer.stats().await["effects"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_peer_keeps_its_operations() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let answer = status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    let exit = peer.stop().await;
    assert!(exit.success(), "SIGTERM stops the peer cleanly: {exit:?}");

    let peer = Peer::start(&dir).await;
    let stored = peer.recover("k").await.unwrap();
    assert_eq!(status(stored, StatusCode::OK).await, answer);
    let retry = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(status(retry, StatusCode::OK).await, answer);
    let other = peer.post("k", &invoice(2)).await.unwrap();
    status(other, StatusCode::UNPROCESSABLE_ENTITY).await;
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 3, "calls are kept too");
    assert_eq!(stats["recovers"], 1);
    assert_eq!(stats["effects"], 1);
    assert!(peer.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_validated_listed_replaced_and_cleared() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    for bad in [
        r#"{"mode": "explode"}"#,
        r#"{"mode": "slow"}"#,
        r#"{"mode": "slow", "millis": 600001}"#,
        r#"{"mode": "lie_absent", "millis": 5}"#,
        r#"{"mode": "lie_absent", "times": 0}"#,
        r#"{"mode": "lie_absent", "when": "now"}"#,
        r#"{"mode": "lie_absent", "op_key": "two words"}"#,
        r#"{"mode": "refuse_connections", "op_key": "k"}"#,
        r#"{"mode": "#,
    ] {
        let res = peer
            .client
            .post(peer.url("/faults"))
            .body(bad)
            .send()
            .await
            .unwrap();
        let body = status(res, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert_eq!(body["error"], "invalid_fault", "{bad}");
        assert!(body["detail"].is_string(), "{bad}");
    }
    assert_eq!(
        peer.control(reqwest::Method::GET, "/faults").await,
        json!({"armed": [], "paused": []})
    );

    peer.arm(json!({"mode": "error_after_commit", "times": 3, "op_key": "a"}))
        .await;
    peer.arm(json!({"mode": "slow", "millis": 5})).await;
    // Arming the same mode and key again replaces it.
    let listed = peer
        .arm(json!({"mode": "error_after_commit", "op_key": "a"}))
        .await;
    assert_eq!(
        listed,
        json!({"armed": [
            {"mode": "slow", "times": 1, "millis": 5},
            {"mode": "error_after_commit", "times": 1, "op_key": "a"},
        ], "paused": []})
    );
    let cleared = peer.control(reqwest::Method::DELETE, "/faults").await;
    assert_eq!(cleared, json!({"cleared": 2, "released": 0}));
    let status_now = peer.post("a", &invoice(1)).await.unwrap();
    status(status_now, StatusCode::CREATED).await;
    assert_eq!(
        peer.control(reqwest::Method::GET, "/faults").await,
        json!({"armed": [], "paused": []})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuse_422_refuses_with_its_reason_and_records_nothing() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    peer.arm(json!({"mode": "refuse_422", "reason": "customer tax id missing"}))
        .await;
    let refused = peer.post("k", &invoice(1)).await.unwrap();
    assert_eq!(
        status(refused, StatusCode::UNPROCESSABLE_ENTITY).await,
        json!({"error": "refused", "reason": "customer tax id missing"})
    );
    let absent = peer.recover("k").await.unwrap();
    assert_eq!(
        status(absent, StatusCode::NOT_FOUND).await,
        json!({"error": "absent"}),
        "a refusal records nothing"
    );
    // Used up: the next one commits. Without a reason, the peer gives its own.
    status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    peer.arm(json!({"mode": "refuse_422", "op_key": "other"}))
        .await;
    let refused = peer.post("other", &invoice(2)).await.unwrap();
    assert_eq!(
        status(refused, StatusCode::UNPROCESSABLE_ENTITY).await["reason"],
        "the peer refused the invoice"
    );
    for bad in [
        json!({"mode": "refuse_422", "reason": ""}),
        json!({"mode": "lie_absent", "reason": "no"}),
        json!({"mode": "refuse_422", "reason": "x".repeat(501)}),
    ] {
        let res = peer
            .client
            .post(peer.url("/faults"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(
            status(res, StatusCode::UNPROCESSABLE_ENTITY).await["error"],
            "invalid_fault",
            "{bad}"
        );
    }
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 3);
    assert_eq!(stats["effects"], 1);
    assert_eq!(operations(&stats), ops(&[("k", 1)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_past_the_retention_window_is_forgotten_even_after_a_restart() {
    let dir = PeerDir::new();
    // A window of zero: every key is forgotten as soon as it is committed.
    let peer = Peer::start_with(&dir, &["--key-retention-seconds", "0"]).await;
    status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    let forgotten = peer.recover("k").await.unwrap();
    assert_eq!(
        status(forgotten, StatusCode::NOT_FOUND).await,
        json!({"error": "absent"})
    );
    // An execute under the forgotten key is a new effect (even with another body).
    status(
        peer.post("k", &invoice(2)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(peer.stats().await["effects"], 2);
    assert!(peer.stop().await.success());
    // The same file with the default (long) window: the last record is remembered again.
    let peer = Peer::start(&dir).await;
    let held = status(peer.recover("k").await.unwrap(), StatusCode::OK).await;
    assert_eq!(held["request"], invoice(2));
    let stats = peer.stats().await;
    assert_eq!(stats["effects"], 2);
    assert_eq!(operations(&stats), ops(&[("k", 2)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planted_record_replaces_what_the_peer_holds_under_the_key() {
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::CREATED,
    )
    .await;
    let planted = peer.plant("k", &invoice(7)).await;
    assert_eq!(planted["request"], invoice(7));
    let held = status(peer.recover("k").await.unwrap(), StatusCode::OK).await;
    assert_eq!(held, planted);
    // The original request under the key is now another body.
    status(
        peer.post("k", &invoice(1)).await.unwrap(),
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    // A planted new key counts its effect.
    peer.plant("new", &invoice(8)).await;
    let stats = peer.stats().await;
    assert_eq!(stats["effects"], 2);
    assert_eq!(stats["executes"], 2, "planting is not an execute");
}
