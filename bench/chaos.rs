//! The fault campaign of `scripts/chaos` (docs/RELIABILITY.md): a client driver that retries
//! with the same `Idempotency-Key`, a nemesis (kill -9, PostgreSQL crash and backend
//! termination, dropped responses, a full disk), and a checker that compares what clients were
//! told with what the database (and the reference peer, and a webhook receiver) holds.
//!
//! ```text
//! chaos run --scenario kill --backend postgres --db-url postgres://… --seed 7 [--quick] …
//! chaos report results.jsonl [--doc docs/RELIABILITY.md --command "scripts/chaos --seed 7"]
//! chaos proxy --listen 127.0.0.1:9000 --upstream 127.0.0.1:8080 --drop-percent 10 --seed 7
//! ```
//!
//! `run` prints one JSON line (the figures) on stdout; everything else goes to stderr. Every
//! loop is bounded by a count and a deadline; the fault schedule comes from the seed. Every
//! child process it starts is written to `--pids` (so the script can end them by id) and is
//! killed when the run ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "chaos/dead_ends.rs"]
mod dead_ends;
#[path = "chaos/ha.rs"]
mod ha;
#[path = "chaos/tenancy.rs"]
mod tenancy;

// ------------------------------------------------------------------------------------------
// Arguments

#[derive(Clone, Default)]
struct Args {
    scenario: String,
    backend: String,
    seed: u64,
    quick: bool,
    bin: String,
    db_url: String,
    pg_dir: String,
    pg_script: String,
    work: String,
    label: String,
    fill_dir: String,
    expect_loss: bool,
    pids: String,
    receiver: String,
}

fn parse_run(mut it: impl Iterator<Item = String>) -> Args {
    let mut a = Args {
        bin: "target/release/tauros".into(),
        pg_script: "scripts/pg-tmp".into(),
        receiver: "scripts/webhook-receiver".into(),
        work: "/tmp".into(),
        seed: 1,
        ..Args::default()
    };
    while let Some(flag) = it.next() {
        if flag == "--quick" {
            a.quick = true;
            continue;
        }
        if flag == "--expect-loss" {
            a.expect_loss = true;
            continue;
        }
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--scenario" => a.scenario = v,
            "--backend" => a.backend = v,
            "--seed" => a.seed = v.parse().expect("--seed"),
            "--bin" => a.bin = v,
            "--db-url" => a.db_url = v,
            "--pg-dir" => a.pg_dir = v,
            "--pg-script" => a.pg_script = v,
            "--work" => a.work = v,
            "--label" => a.label = v,
            "--fill-dir" => a.fill_dir = v,
            "--pids" => a.pids = v,
            "--receiver" => a.receiver = v,
            other => panic!("unknown flag {other}"),
        }
    }
    if a.label.is_empty() {
        a.label.clone_from(&a.scenario);
    }
    a
}

// ------------------------------------------------------------------------------------------
// A seeded generator (SplitMix64): the fault schedule and the drop decisions come from it.

#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}

// ------------------------------------------------------------------------------------------
// Counters

#[derive(Default)]
struct Counters(Mutex<BTreeMap<String, u64>>);

impl Counters {
    fn add(&self, key: &str, n: u64) {
        *self.0.lock().unwrap().entry(key.to_owned()).or_default() += n;
    }
    fn get(&self, key: &str) -> u64 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0)
    }
    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.0.lock().unwrap().clone()
    }
}

// ------------------------------------------------------------------------------------------
// Processes: the service (and its replicas), the peer, the webhook receiver.

fn record_pid(args: &Args, pid: u32) {
    if args.pids.is_empty() {
        return;
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.pids)
    {
        let _ = writeln!(f, "{pid}");
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

struct Server {
    name: String,
    port: u16,
    env: Vec<(String, String)>,
    child: Option<Child>,
    starts: u32,
    args: Args,
}

impl Server {
    fn new(args: &Args, name: &str, env: Vec<(String, String)>) -> Server {
        Server {
            name: name.to_owned(),
            port: free_port(),
            env,
            child: None,
            starts: 0,
            args: args.clone(),
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts the process (the first start of the first replica seeds the demo).
    fn spawn(&mut self, demo: bool) {
        let log = format!("{}/{}-{}.log", self.args.work, self.args.label, self.name);
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut cmd = Command::new(&self.args.bin);
        cmd.arg("serve")
            .arg("--bind")
            .arg(format!("127.0.0.1:{}", self.port));
        if demo {
            cmd.arg("--demo");
        }
        cmd.env("DATABASE_URL", &self.args.db_url)
            .env("TAUROS_LOG", "warn")
            .env("TAUROS_RATE_LIMIT_PER_SECOND", "0")
            .env("TAUROS_SIGN_IN_FAILURES", "0")
            .env("TAUROS_SHUTDOWN_GRACE_SECONDS", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn tauros serve");
        record_pid(&self.args, child.id());
        self.child = Some(child);
        self.starts += 1;
    }

    /// Waits (bounded) until `/readyz` answers 200; false when it never does.
    async fn wait_ready(&mut self, client: &reqwest::Client, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                return false;
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.base())).send().await
                && r.status() == 200
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    async fn start(&mut self, client: &reqwest::Client, demo: bool) {
        for _ in 0..5 {
            self.spawn(demo);
            if self.wait_ready(client, Duration::from_secs(30)).await {
                return;
            }
            self.kill();
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!(
            "{} did not start (see its log in {})",
            self.name, self.args.work
        );
    }

    /// SIGKILL (std's `Child::kill`), and reap it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The running process's id.
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A helper child that prints its address on stdout (the peer, the webhook receiver).
struct Helper {
    child: Child,
    url: String,
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reference peer (`tauros peer`) on loopback `port` (0: any) with its records in `db`,
/// forgetting keys after `retention` seconds when given.
fn peer_command(args: &Args, port: u16, db: &str, retention: Option<u64>) -> Command {
    let mut cmd = Command::new(&args.bin);
    cmd.arg("peer")
        .arg("--bind")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--database")
        .arg(db)
        .env("TAUROS_LOG", "warn");
    if let Some(r) = retention {
        cmd.arg("--key-retention-seconds").arg(r.to_string());
    }
    cmd
}

/// The webhook receiver (`scripts/webhook-receiver`) on loopback `port` (0: any).
fn spawn_receiver(args: &Args, port: u16) -> Helper {
    let mut cmd = Command::new("python3");
    cmd.arg(&args.receiver).arg(port.to_string());
    spawn_helper(args, cmd, "receiver")
}

fn spawn_helper(args: &Args, mut cmd: Command, marker: &str) -> Helper {
    use std::io::BufRead;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn helper");
    record_pid(args, child.id());
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let mut sent = false;
        while let Some(Ok(line)) = lines.next() {
            if !sent {
                let _ = tx.send(line);
                sent = true;
            }
        }
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("helper printed its address");
    let at = line
        .find("http://")
        .unwrap_or_else(|| panic!("{marker}: {line}"));
    Helper {
        child,
        url: line[at..].trim().to_owned(),
    }
}

// ------------------------------------------------------------------------------------------
// The client driver

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// A 2xx; `replayed` from the `Idempotent-Replayed` header or the body's `replayed`.
    Ok { body: Value, replayed: bool },
    /// 409 `idempotency_conflict`.
    Mismatch,
    /// Any other definite refusal (4xx): status and code.
    Refused(u16, String),
    /// Retries exhausted on transport errors, timeouts or 5xx: it may or may not have happened.
    Indeterminate,
}

struct Driver {
    client: reqwest::Client,
    bases: Mutex<Vec<String>>,
    rr: AtomicUsize,
    counters: Counters,
    /// Microseconds since `epoch` of the latest 2xx.
    last_ok_us: AtomicU64,
    epoch: Instant,
    max_attempts: u32,
    op_budget: Duration,
    /// Whether a 5xx was ever a 500 (a bug: faults should give 503).
    statuses_5xx: Counters,
    /// Every answer: (end µs since `epoch`, status; 0 for a transport error), for the
    /// windows of the HA scenario (bench/chaos/ha.rs).
    answers: Mutex<Vec<(u64, u16)>>,
}

impl Driver {
    fn new(bases: Vec<String>, keep_alive: bool, op_budget: Duration) -> Driver {
        let mut b = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(1));
        if !keep_alive {
            b = b.pool_max_idle_per_host(0);
        }
        Driver {
            client: b.build().unwrap(),
            bases: Mutex::new(bases),
            rr: AtomicUsize::new(0),
            counters: Counters::default(),
            last_ok_us: AtomicU64::new(0),
            epoch: Instant::now(),
            max_attempts: 40,
            op_budget,
            statuses_5xx: Counters::default(),
            answers: Mutex::default(),
        }
    }

    fn base(&self) -> String {
        let bases = self.bases.lock().unwrap();
        bases[self.rr.fetch_add(1, Ordering::Relaxed) % bases.len()].clone()
    }

    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    fn answered(&self, status: u16) {
        let at = self.now_us();
        self.answers.lock().unwrap().push((at, status));
    }

    /// Waits (bounded) for the first 2xx after `since`; its delay, or None.
    async fn first_ok_after(&self, since: Instant, within: Duration) -> Option<Duration> {
        let since_us = since.duration_since(self.epoch).as_micros() as u64;
        let end = Instant::now() + within;
        while Instant::now() < end {
            let last = self.last_ok_us.load(Ordering::Relaxed);
            if last > since_us {
                return Some(Duration::from_micros(last - since_us));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    /// One command, retried with the same key (and body) on connection errors, timeouts,
    /// 5xx and 409 in-flight, with backoff, bounded by attempts and time. Returns the final
    /// outcome and whether any attempt was indeterminate.
    async fn call(
        &self,
        command: &str,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: Option<&Value>,
        budget: Duration,
    ) -> (Outcome, bool) {
        let end = Instant::now() + budget;
        let mut uncertain = false;
        let mut backoff = Duration::from_millis(25);
        for attempt in 0..self.max_attempts {
            if attempt > 0 {
                self.counters.add("retries", 1);
            }
            self.counters.add(&format!("req.{command}"), 1);
            let mut req = self
                .client
                .post(format!("{}{path}", self.base()))
                .bearer_auth(token);
            if let Some(key) = key {
                req = req.header("idempotency-key", key);
            }
            req = match body {
                Some(b) => req.json(b),
                None => req,
            };
            match req.send().await {
                Err(_) => {
                    self.counters.add("resp.transport", 1);
                    self.answered(0);
                    uncertain = true;
                }
                Ok(res) => {
                    let status = res.status().as_u16();
                    self.answered(status);
                    let replayed_header = res
                        .headers()
                        .get("idempotent-replayed")
                        .and_then(|v| v.to_str().ok())
                        == Some("true");
                    match res.bytes().await {
                        Err(_) => {
                            self.counters.add("resp.transport", 1);
                            uncertain = true;
                        }
                        Ok(bytes) => {
                            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            let code = body["code"].as_str().unwrap_or("").to_owned();
                            if (200..300).contains(&status) {
                                self.last_ok_us.store(self.now_us(), Ordering::Relaxed);
                                let replayed =
                                    replayed_header || body["replayed"].as_bool() == Some(true);
                                if replayed {
                                    self.counters.add(&format!("replayed.{command}"), 1);
                                }
                                self.counters.add(
                                    if replayed {
                                        "resp.replayed"
                                    } else {
                                        "resp.fresh"
                                    },
                                    1,
                                );
                                return (Outcome::Ok { body, replayed }, uncertain);
                            } else if status == 409 && code == "idempotency_conflict" {
                                self.counters.add("resp.409_mismatch", 1);
                                return (Outcome::Mismatch, uncertain);
                            } else if status == 409
                                && (code.contains("in_progress") || code.contains("in_flight"))
                            {
                                self.counters.add("resp.409_inflight", 1);
                            } else if status >= 500 || status == 429 {
                                self.counters.add("resp.5xx", 1);
                                self.statuses_5xx.add(&format!("{status} {code}"), 1);
                                uncertain = true;
                            } else {
                                self.counters.add("resp.other_4xx", 1);
                                self.counters.add(&format!("refused.{status} {code}"), 1);
                                return (Outcome::Refused(status, code), uncertain);
                            }
                        }
                    }
                }
            }
            if Instant::now() + backoff > end {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(800));
        }
        self.counters.add("final.indeterminate_attempt", 1);
        (Outcome::Indeterminate, true)
    }
}

// ------------------------------------------------------------------------------------------
// Setup: a human session, agents with their customers and destinations, all through the API.

struct Agent {
    key: String,
    customer: String,
    destination: String,
}

struct Fixture {
    human: String,
    agents: Vec<Agent>,
}

async fn setup_post(d: &Driver, path: &str, token: &str, body: Value) -> Value {
    let (outcome, _) = d
        .call(
            "setup",
            path,
            token,
            None,
            Some(&body),
            Duration::from_secs(30),
        )
        .await;
    match outcome {
        Outcome::Ok { body, .. } => body,
        other => panic!("setup {path} failed: {other:?}"),
    }
}

/// The demo approver's sign-in.
const DEMO_EMAIL: &str = "demo@tauros.local";
const DEMO_PASSWORD: &str = "tauros-demo-password";

async fn fixture(d: &Driver, agents: usize, label: &str) -> Fixture {
    fixture_as(d, DEMO_EMAIL, DEMO_PASSWORD, agents, label).await
}

/// A fixture whose human is the approver signing in with `email` and `password`.
async fn fixture_as(
    d: &Driver,
    email: &str,
    password: &str,
    agents: usize,
    label: &str,
) -> Fixture {
    let session = d
        .client
        .post(format!("{}/v1/sessions", d.base()))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .expect("sign in")
        .json::<Value>()
        .await
        .expect("session");
    let human = session["token"].as_str().expect("signed in").to_owned();
    let mut out = Vec::new();
    for n in 0..agents {
        let agent = setup_post(
            d,
            "/v1/agents",
            &human,
            json!({"name": format!("Chaos {label} {n}")}),
        )
        .await;
        let agent_id = agent["agent"]["id"].as_str().unwrap().to_owned();
        let key = agent["api_key"].as_str().unwrap().to_owned();
        let customer = setup_post(
            d,
            "/v1/customers",
            &human,
            json!({"agent_id": agent_id, "name": format!("Chaos customer {n}"), "email": "chaos@example.com"}),
        )
        .await;
        let destination = setup_post(
            d,
            "/v1/payment-destinations",
            &key,
            json!({"label": "Chaos", "currency": "EUR", "network": "iban", "address": "DE89370400440532013000"}),
        )
        .await;
        out.push(Agent {
            key,
            customer: customer["id"].as_str().unwrap().to_owned(),
            destination: destination["id"].as_str().unwrap().to_owned(),
        });
    }
    d.counters.0.lock().unwrap().clear();
    Fixture { human, agents: out }
}

fn draft(a: &Agent, key: &str, variant: &str) -> Value {
    json!({
        "customer_id": a.customer,
        "payment_destination_id": a.destination,
        "currency": "EUR",
        "due_date": "2099-12-31",
        "lines": [
            {"description": format!("Chaos {key} variant {variant}"), "quantity": "1", "unit_amount": "400"},
            {"description": "Implementation days", "quantity": "2", "unit_amount": "400.00"}
        ],
        "reasoning": "Chaos campaign: the signed statement of work."
    })
}

// ------------------------------------------------------------------------------------------
// What clients were told, per key (the lifecycle workload: create → submit → approve).

#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Step {
    #[default]
    NotAttempted,
    Acked,
    Refused,
    Indeterminate,
}

#[derive(Clone, Debug, Default)]
struct KeyRecord {
    agent: usize,
    invoice_id: Option<String>,
    revision: Option<(String, String)>,
    steps: [Step; 3],
    uncertain: [bool; 3],
    /// For the storm and race workloads: every invoice id and payload variant acknowledged.
    ids_seen: HashSet<String>,
    variants_acked: HashSet<String>,
    fresh: u64,
    /// When its latest step ended (µs since the driver's epoch).
    last_us: u64,
}

type Records = Arc<Mutex<BTreeMap<String, KeyRecord>>>;

const CREATE: usize = 0;
const SUBMIT: usize = 1;
const APPROVE: usize = 2;

fn step_of(outcome: &Outcome) -> Step {
    match outcome {
        Outcome::Ok { .. } => Step::Acked,
        Outcome::Mismatch | Outcome::Refused(..) => Step::Refused,
        Outcome::Indeterminate => Step::Indeterminate,
    }
}

/// Runs (or re-runs) one step of a key's lifecycle; updates its record.
async fn lifecycle_step(d: &Driver, f: &Fixture, records: &Records, key: &str, step: usize) {
    let rec = records
        .lock()
        .unwrap()
        .get(key)
        .cloned()
        .unwrap_or_default();
    let agent = &f.agents[rec.agent];
    let budget = d.op_budget;
    let (outcome, uncertain) = match step {
        CREATE => {
            let body = draft(agent, key, "A");
            d.call(
                "create",
                "/v1/invoices",
                &agent.key,
                Some(key),
                Some(&body),
                budget,
            )
            .await
        }
        SUBMIT => {
            let Some(id) = rec.invoice_id.clone() else {
                return;
            };
            d.call(
                "submit",
                &format!("/v1/invoices/{id}/submit"),
                &agent.key,
                None,
                None,
                budget,
            )
            .await
        }
        _ => {
            let (Some(id), Some((revision, hash))) = (rec.invoice_id.clone(), rec.revision.clone())
            else {
                return;
            };
            let body = json!({"revision_id": revision, "payload_hash": hash});
            d.call(
                "approve",
                &format!("/v1/invoices/{id}/approve"),
                &f.human,
                None,
                Some(&body),
                budget,
            )
            .await
        }
    };
    let mut all = records.lock().unwrap();
    let rec = all.entry(key.to_owned()).or_default();
    rec.last_us = d.now_us();
    rec.uncertain[step] |= uncertain;
    // A definite answer after an indeterminate one never downgrades an acknowledgement.
    if rec.steps[step] != Step::Acked {
        rec.steps[step] = step_of(&outcome);
    }
    if let Outcome::Ok { body, .. } = &outcome
        && step == CREATE
    {
        let inv = &body["invoice"];
        rec.invoice_id = inv["id"].as_str().map(str::to_owned);
        if let (Some(r), Some(h)) = (
            inv["current_revision"]["id"].as_str(),
            inv["current_revision"]["payload_hash"].as_str(),
        ) {
            rec.revision = Some((r.to_owned(), h.to_owned()));
        }
    }
}

/// At most this many keys per worker (the deadline usually comes first).
const KEYS_PER_WORKER: usize = 10_000;

/// W workers, each with its own keys, until `KEYS_PER_WORKER` keys or the deadline.
async fn lifecycle_load(
    d: Arc<Driver>,
    f: Arc<Fixture>,
    records: Records,
    prefix: String,
    workers: usize,
    until: Instant,
    stop: Arc<AtomicBool>,
) {
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (d, f, records, prefix, stop) = (
            d.clone(),
            f.clone(),
            records.clone(),
            prefix.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..KEYS_PER_WORKER {
                if Instant::now() >= until || stop.load(Ordering::Relaxed) {
                    break;
                }
                let key = format!("{prefix}-w{w}-{i}");
                records.lock().unwrap().insert(
                    key.clone(),
                    KeyRecord {
                        agent: (w + i) % f.agents.len(),
                        ..KeyRecord::default()
                    },
                );
                for step in [CREATE, SUBMIT, APPROVE] {
                    lifecycle_step(&d, &f, &records, &key, step).await;
                    if records.lock().unwrap()[&key].steps[step] != Step::Acked {
                        break;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Retries every key whose last outcome was indeterminate (same key, same body), once more,
/// after the faults are over. Returns how many steps it retried.
async fn final_retries(d: &Driver, f: &Fixture, records: &Records) -> u64 {
    let pending: Vec<(String, usize)> = records
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(k, r)| {
            r.steps
                .iter()
                .position(|s| *s == Step::Indeterminate)
                .map(|s| (k.clone(), s))
        })
        .collect();
    let n = pending.len() as u64;
    for (key, step) in pending {
        lifecycle_step(d, f, records, &key, step).await;
    }
    n
}

// ------------------------------------------------------------------------------------------
// The checker: what the database holds, per key of this run.

#[derive(Clone, Debug, Default)]
struct DbInvoice {
    key: String,
    state: String,
    id: String,
    org: String,
    revisions: i64,
    created: i64,
    submitted: i64,
    approved: i64,
    issued: i64,
    decisions: i64,
    lines: String,
}

async fn db_invoices(url: &str, prefix: &str) -> anyhow::Result<Vec<DbInvoice>> {
    use sqlx::Row;
    let pg = url.starts_with("postgres");
    let hex = |c: &str| {
        if pg {
            format!("replace(cast({c} as text), '-', '')")
        } else {
            format!("lower(hex({c}))")
        }
    };
    // Each part is found by its invoice's key, (org_id, invoice_id): the org leads every
    // index of these tables (migration 0018), and without it SQLite scanned each table once
    // per invoice and per count.
    let ev = |a: &str| {
        format!(
            "(select count(*) from invoice_events e \
              where e.org_id = i.org_id and e.invoice_id = i.id and e.action = '{a}')"
        )
    };
    let sql = format!(
        "select i.idempotency_key, i.state, {}, {},
           (select count(*) from invoice_revisions r where r.org_id = i.org_id and r.invoice_id = i.id),
           {}, {}, {}, {},
           (select count(*) from decisions d where d.org_id = i.org_id and d.invoice_id = i.id),
           coalesce((select r.lines from invoice_revisions r
                     where r.org_id = i.org_id and r.invoice_id = i.id and r.number = 1), '')
         from invoices i where i.idempotency_key like '{prefix}-%'",
        hex("i.id"),
        hex("i.org_id"),
        ev("create_draft"),
        ev("submit"),
        ev("approve"),
        ev("issue"),
    );
    macro_rules! read {
        ($rows:expr) => {
            $rows
                .iter()
                .map(|r| DbInvoice {
                    key: r.get(0),
                    state: r.get(1),
                    id: r.get(2),
                    org: r.get(3),
                    revisions: r.get(4),
                    created: r.get(5),
                    submitted: r.get(6),
                    approved: r.get(7),
                    issued: r.get(8),
                    decisions: r.get(9),
                    lines: r.get(10),
                })
                .collect()
        };
    }
    for attempt in 0..20 {
        let result: anyhow::Result<Vec<DbInvoice>> = async {
            if pg {
                let pool = sqlx::PgPool::connect(url).await?;
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .fetch_all(&pool)
                    .await?;
                pool.close().await;
                Ok(read!(rows))
            } else {
                let pool = sqlx::SqlitePool::connect(url).await?;
                let rows = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .fetch_all(&pool)
                    .await?;
                pool.close().await;
                Ok(read!(rows))
            }
        }
        .await;
        match result {
            Ok(v) => return Ok(v),
            Err(e) if attempt < 19 => {
                eprintln!("checker: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!()
}

fn uuid_of(hex: &str) -> String {
    uuid::Uuid::parse_str(hex)
        .map(|u| u.to_string())
        .unwrap_or_default()
}

#[derive(Default, Debug)]
struct Verdict {
    figures: BTreeMap<String, Value>,
    lost: u64,
    duplicated: u64,
    unexpected: u64,
    recovered: u64,
    wrong: u64,
    notes: Vec<String>,
}

impl Verdict {
    fn note(&mut self, s: String) {
        if self.notes.len() < 20 {
            eprintln!("checker: {s}");
            self.notes.push(s);
        }
    }
}

/// The lifecycle check: every acknowledged step is present exactly once, nothing present was
/// never attempted, and indeterminate steps may go either way (present ones are "recovered").
fn check_lifecycle(records: &BTreeMap<String, KeyRecord>, db: &[DbInvoice], v: &mut Verdict) {
    let mut by_key: HashMap<&str, Vec<&DbInvoice>> = HashMap::new();
    for inv in db {
        by_key.entry(inv.key.as_str()).or_default().push(inv);
    }
    let names = ["create", "submit", "approve"];
    let mut expected = [0u64; 3];
    let mut found = [0u64; 3];
    for (key, rec) in records {
        let rows = by_key.get(key.as_str()).cloned().unwrap_or_default();
        if rows.len() > 1 {
            v.duplicated += 1;
            v.note(format!("{key}: {} invoices", rows.len()));
        }
        let row = rows.first();
        let counts = [
            row.map_or(0, |r| r.created),
            row.map_or(0, |r| r.submitted),
            row.map_or(0, |r| r.approved.max(r.decisions)),
        ];
        if let Some(r) = row
            && (r.revisions != 1 || r.decisions > 1 || r.approved > 1 || r.issued > 1)
        {
            v.duplicated += 1;
            v.note(format!(
                "{key}: revisions {} decisions {} approve events {} issue events {}",
                r.revisions, r.decisions, r.approved, r.issued
            ));
        }
        if let (Some(r), Some(id)) = (row, &rec.invoice_id)
            && uuid_of(&r.id) != *id
        {
            v.wrong += 1;
            v.note(format!("{key}: told {id}, stored {}", uuid_of(&r.id)));
        }
        for s in 0..3 {
            let present = counts[s] > 0;
            if present {
                found[s] += 1;
            }
            if counts[s] > 1 {
                v.duplicated += 1;
                v.note(format!("{key}: {} {} events", counts[s], names[s]));
            }
            match rec.steps[s] {
                Step::Acked => {
                    expected[s] += 1;
                    if !present {
                        v.lost += 1;
                        v.note(format!("{key}: {} acknowledged but missing", names[s]));
                    } else if rec.uncertain[s] {
                        v.recovered += 1;
                    }
                }
                Step::Indeterminate => {
                    if present {
                        v.recovered += 1;
                    }
                }
                Step::NotAttempted | Step::Refused => {
                    if present && !(s == CREATE && rec.steps[s] == Step::Refused) {
                        v.unexpected += 1;
                        v.note(format!(
                            "{key}: {} present but {:?}",
                            names[s], rec.steps[s]
                        ));
                    }
                }
            }
        }
    }
    for key in by_key.keys() {
        if !records.contains_key(*key) {
            v.unexpected += 1;
            v.note(format!("{key}: an invoice nobody asked for"));
        }
    }
    for s in 0..3 {
        v.figures.insert(
            format!("effects.{}", names[s]),
            json!({"acked": expected[s], "found": found[s]}),
        );
    }
    let indeterminate: u64 = records
        .values()
        .map(|r| {
            r.steps
                .iter()
                .filter(|s| **s == Step::Indeterminate)
                .count() as u64
        })
        .sum();
    v.figures
        .insert("final_indeterminate".into(), json!(indeterminate));
}

// ------------------------------------------------------------------------------------------
// Scenarios

struct Ctx {
    args: Args,
    rng: Mutex<Rng>,
    faults: Counters,
    recovery_ms: Mutex<Vec<u64>>,
    started: Instant,
}

impl Ctx {
    fn rand_ms(&self, lo: u64, hi: u64) -> Duration {
        self.rng.lock().unwrap().millis(lo, hi)
    }
    fn below(&self, n: u64) -> u64 {
        self.rng.lock().unwrap().below(n)
    }
    fn recovered_in(&self, d: Option<Duration>) {
        match d {
            Some(d) => self.recovery_ms.lock().unwrap().push(d.as_millis() as u64),
            None => self.faults.add("no_recovery_within_bound", 1),
        }
    }
}

fn prefix(args: &Args) -> String {
    format!("chaos-{}-{}-{}", args.label, args.backend, args.seed)
}

fn base_env() -> Vec<(String, String)> {
    Vec::new()
}

/// S2: many identical requests per key, released together.
async fn storm(ctx: &Ctx, d: Arc<Driver>, f: Arc<Fixture>) -> (Records, u64, u64) {
    let (keys, dup, batch) = if ctx.args.quick {
        (100, 8, 10)
    } else {
        (200, 16, 10)
    };
    let records: Records = Arc::default();
    let pre = prefix(&ctx.args);
    let end = Instant::now() + Duration::from_secs(if ctx.args.quick { 40 } else { 90 });
    for chunk in 0..keys / batch {
        if Instant::now() > end {
            ctx.faults.add("time_bound_hit", 1);
            break;
        }
        let barrier = Arc::new(tokio::sync::Barrier::new(batch * dup));
        let mut tasks = Vec::new();
        for k in 0..batch {
            let n = chunk * batch + k;
            let key = format!("{pre}-{n}");
            let agent = n % f.agents.len();
            records.lock().unwrap().insert(
                key.clone(),
                KeyRecord {
                    agent,
                    ..KeyRecord::default()
                },
            );
            for _ in 0..dup {
                let (d, f, records, key, barrier) = (
                    d.clone(),
                    f.clone(),
                    records.clone(),
                    key.clone(),
                    barrier.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let a = &f.agents[agent];
                    let body = draft(a, &key, "A");
                    barrier.wait().await;
                    let (o, u) = d
                        .call(
                            "create",
                            "/v1/invoices",
                            &a.key,
                            Some(&key),
                            Some(&body),
                            d.op_budget,
                        )
                        .await;
                    let mut all = records.lock().unwrap();
                    let rec = all.get_mut(&key).unwrap();
                    rec.uncertain[CREATE] |= u;
                    if let Outcome::Ok { body, replayed } = &o {
                        if !replayed {
                            rec.fresh += 1;
                        }
                        if let Some(id) = body["invoice"]["id"].as_str() {
                            rec.ids_seen.insert(id.to_owned());
                            rec.invoice_id = Some(id.to_owned());
                        }
                    }
                    if rec.steps[CREATE] != Step::Acked {
                        rec.steps[CREATE] = step_of(&o);
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    let n = records.lock().unwrap().len() as u64;
    (records, n * (dup as u64 - 1), 0)
}

/// S3: per key, half the requests carry payload A and half payload B, released together.
async fn race(ctx: &Ctx, d: Arc<Driver>, f: Arc<Fixture>) -> (Records, u64, u64) {
    let (keys, each, batch) = if ctx.args.quick {
        (50, 8, 10)
    } else {
        (100, 8, 10)
    };
    let records: Records = Arc::default();
    let pre = prefix(&ctx.args);
    let end = Instant::now() + Duration::from_secs(if ctx.args.quick { 40 } else { 90 });
    for chunk in 0..keys / batch {
        if Instant::now() > end {
            ctx.faults.add("time_bound_hit", 1);
            break;
        }
        let barrier = Arc::new(tokio::sync::Barrier::new(batch * each));
        let mut tasks = Vec::new();
        for k in 0..batch {
            let n = chunk * batch + k;
            let key = format!("{pre}-{n}");
            let agent = n % f.agents.len();
            records.lock().unwrap().insert(
                key.clone(),
                KeyRecord {
                    agent,
                    ..KeyRecord::default()
                },
            );
            for j in 0..each {
                let variant = if j % 2 == 0 { "A" } else { "B" };
                let (d, f, records, key, barrier) = (
                    d.clone(),
                    f.clone(),
                    records.clone(),
                    key.clone(),
                    barrier.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let a = &f.agents[agent];
                    let body = draft(a, &key, variant);
                    barrier.wait().await;
                    let (o, u) = d
                        .call(
                            "create",
                            "/v1/invoices",
                            &a.key,
                            Some(&key),
                            Some(&body),
                            d.op_budget,
                        )
                        .await;
                    let mut all = records.lock().unwrap();
                    let rec = all.get_mut(&key).unwrap();
                    rec.uncertain[CREATE] |= u;
                    if let Outcome::Ok { body, replayed } = &o {
                        if !replayed {
                            rec.fresh += 1;
                        }
                        rec.variants_acked.insert(variant.to_owned());
                        if let Some(id) = body["invoice"]["id"].as_str() {
                            rec.ids_seen.insert(id.to_owned());
                            rec.invoice_id = Some(id.to_owned());
                        }
                    }
                    if rec.steps[CREATE] != Step::Acked {
                        rec.steps[CREATE] = step_of(&o);
                    }
                }));
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    let n = records.lock().unwrap().len() as u64;
    // Per key: the winner, its 3 identical duplicates, and 4 conflicting requests.
    (records, n * (each as u64 / 2 - 1), n * each as u64 / 2)
}

/// The storm/race check on top of the lifecycle one: one fresh answer and one invoice id per
/// key, and the stored content is the acknowledged payload (never a mix).
fn check_concurrent(records: &BTreeMap<String, KeyRecord>, db: &[DbInvoice], v: &mut Verdict) {
    let by_key: HashMap<&str, &DbInvoice> = db.iter().map(|i| (i.key.as_str(), i)).collect();
    let mut fresh_total = 0;
    for (key, rec) in records {
        fresh_total += rec.fresh;
        if rec.ids_seen.len() > 1 {
            v.wrong += 1;
            v.note(format!(
                "{key}: {} different invoice ids answered",
                rec.ids_seen.len()
            ));
        }
        if rec.fresh > 1 {
            v.duplicated += 1;
            v.note(format!("{key}: {} fresh answers", rec.fresh));
        }
        if rec.variants_acked.len() > 1 {
            v.wrong += 1;
            v.note(format!("{key}: both payloads acknowledged"));
        }
        if let (Some(inv), Some(variant)) =
            (by_key.get(key.as_str()), rec.variants_acked.iter().next())
        {
            let a = inv.lines.contains("variant A");
            let b = inv.lines.contains("variant B");
            if a == b || (a && variant != "A") || (b && variant != "B") {
                v.wrong += 1;
                v.note(format!(
                    "{key}: stored lines do not match the acknowledged payload {variant}"
                ));
            }
        }
    }
    v.figures
        .insert("fresh_per_key_total".into(), json!(fresh_total));
}

/// Runs the lifecycle load with a nemesis alongside; returns the records.
async fn with_nemesis<N, Fut>(
    ctx: &Ctx,
    d: Arc<Driver>,
    f: Arc<Fixture>,
    workers: usize,
    load_for: Duration,
    nemesis: N,
) -> Records
where
    N: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let records: Records = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + load_for;
    let load = tokio::spawn(lifecycle_load(
        d.clone(),
        f.clone(),
        records.clone(),
        prefix(&ctx.args),
        workers,
        until,
        stop.clone(),
    ));
    nemesis(stop.clone()).await;
    // The nemesis is done (or out of time): the load runs to its own deadline.
    load.await.unwrap();
    let retried = final_retries(&d, &f, &records).await;
    ctx.faults.add("final_retries", retried);
    records
}

/// Sends SIGSTOP or SIGCONT (`what`) to `pid`.
fn signal(pid: u32, what: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{what}"))
        .arg(pid.to_string())
        .status();
}

/// How many jobs a worker of process `pid` holds (`running`, its `host:pid/n` in `worker`).
async fn running_jobs_of(url: &str, pid: u32) -> i64 {
    let sql =
        format!("select count(*) from jobs where state = 'running' and worker like '%:{pid}/%'");
    let result: anyhow::Result<i64> = async {
        if url.starts_with("postgres") {
            let pool = sqlx::PgPool::connect(url).await?;
            let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_one(&pool)
                .await?;
            pool.close().await;
            Ok(n)
        } else {
            let pool = sqlx::SqlitePool::connect(url).await?;
            let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_one(&pool)
                .await?;
            pool.close().await;
            Ok(n)
        }
    }
    .await;
    result.unwrap_or(0)
}

async fn pg_terminate(ctx: &Ctx, url: &str) -> u64 {
    use sqlx::Row;
    let Ok(pool) = sqlx::PgPool::connect(url).await else {
        return 0;
    };
    let pids: Vec<i32> = sqlx::query(
        "select pid from pg_stat_activity where datname = current_database() \
         and pid <> pg_backend_pid() and backend_type = 'client backend' order by pid",
    )
    .fetch_all(&pool)
    .await
    .map(|rows| rows.iter().map(|r| r.get::<i32, _>(0)).collect())
    .unwrap_or_default();
    let mut n = 0;
    let want = 1 + ctx.below(3);
    for _ in 0..want {
        if pids.is_empty() {
            break;
        }
        let pid = pids[ctx.below(pids.len() as u64) as usize];
        if sqlx::query("select pg_terminate_backend($1)")
            .bind(pid)
            .execute(&pool)
            .await
            .is_ok()
        {
            n += 1;
        }
    }
    pool.close().await;
    n
}

fn pg_ctl(ctx: &Ctx, what: &str) -> bool {
    Command::new(&ctx.args.pg_script)
        .arg(what)
        .arg(&ctx.args.pg_dir)
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

async fn pg_checkpoint(url: &str) {
    if let Ok(pool) = sqlx::PgPool::connect(url).await {
        let _ = sqlx::query("checkpoint").execute(&pool).await;
        pool.close().await;
    }
}

/// The webhook receiver's deliveries at `url`.
async fn receiver_deliveries(client: &reqwest::Client, url: &str) -> Vec<Value> {
    match client.get(url).send().await {
        Ok(r) => r.json::<Value>().await.map_or_else(
            |_| Vec::new(),
            |v| v["deliveries"].as_array().cloned().unwrap_or_default(),
        ),
        Err(_) => Vec::new(),
    }
}

async fn peer_operations(client: &reqwest::Client, peer: &str) -> Vec<(String, u64)> {
    let Ok(r) = client.get(format!("{peer}/stats")).send().await else {
        return Vec::new();
    };
    let v: Value = r.json().await.unwrap_or(Value::Null);
    v["operations"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|o| {
            (
                o["op_key"].as_str().unwrap_or("").to_owned(),
                o["effects"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Issued effects at the peer and webhook deliveries, per invoice: exactly one each.
/// The event types the replicas scenario subscribes to (and checks).
const ALL_EVENTS: [&str; 3] = ["invoice.created", "invoice.approved", "invoice.issued"];

async fn check_effects(
    client: &reqwest::Client,
    peer: &str,
    hooks: &str,
    events: &[&str],
    db: &[DbInvoice],
    v: &mut Verdict,
) {
    let ops = peer_operations(client, peer).await;
    let mut by_op: HashMap<String, u64> = HashMap::new();
    for (k, e) in &ops {
        *by_op.entry(k.clone()).or_default() += e;
    }
    let mut expected_ops = HashSet::new();
    let (mut issued, mut at_peer) = (0u64, 0u64);
    for inv in db {
        let (Ok(org), Ok(id)) = (
            uuid::Uuid::parse_str(&inv.org),
            uuid::Uuid::parse_str(&inv.id),
        ) else {
            continue;
        };
        let op = tauros_domain::effect::operation_key(org, "invoice.issue", &id.to_string(), 1)
            .to_string();
        expected_ops.insert(op.clone());
        let effects = by_op.get(&op).copied().unwrap_or(0);
        if effects > 0 {
            at_peer += 1;
        }
        if inv.issued > 0 {
            issued += 1;
            if effects == 0 {
                v.lost += 1;
                v.note(format!("{}: issued locally, absent at the peer", inv.key));
            }
        } else if inv.state == "approved" && inv.approved > 0 {
            v.lost += 1;
            v.note(format!("{}: approved but never issued", inv.key));
        }
        if effects > 1 {
            v.duplicated += 1;
            v.note(format!("{}: {effects} effects at the peer", inv.key));
        }
        if effects > 0 && inv.issued == 0 {
            v.unexpected += 1;
            v.note(format!("{}: at the peer but not issued locally", inv.key));
        }
    }
    for op in by_op.keys() {
        if !expected_ops.contains(op) {
            v.unexpected += 1;
            v.note(format!("peer holds {op}, no invoice of this run"));
        }
    }
    v.figures.insert(
        "effects.issue".into(),
        json!({"issued": issued, "at_peer": at_peer, "peer_operations": ops.len()}),
    );
    // Webhooks: one distinct webhook-id per (invoice, event type); redeliveries of the same
    // id are at-least-once delivery (the receiver deduplicates by webhook-id) and counted.
    let deliveries = receiver_deliveries(client, hooks).await;
    let mut ids: HashMap<(String, String), HashSet<String>> = HashMap::new();
    let mut raw = 0u64;
    for dlv in &deliveries {
        raw += 1;
        let inv = dlv["invoice_id"].as_str().unwrap_or("").to_owned();
        let ty = dlv["type"].as_str().unwrap_or("").to_owned();
        let id = dlv["webhook_id"].as_str().unwrap_or("").to_owned();
        ids.entry((inv, ty)).or_default().insert(id);
    }
    let mut expected = 0u64;
    let mut known = HashSet::new();
    for inv in db {
        let id = uuid_of(&inv.id);
        for (ty, present) in [
            ("invoice.created", inv.created > 0),
            ("invoice.approved", inv.approved > 0),
            ("invoice.issued", inv.issued > 0),
        ] {
            known.insert((id.clone(), ty.to_owned()));
            if !present || !events.contains(&ty) {
                continue;
            }
            expected += 1;
            match ids
                .get(&(id.clone(), ty.to_owned()))
                .map_or(0, HashSet::len)
            {
                0 => {
                    v.lost += 1;
                    v.note(format!("{}: no {ty} webhook", inv.key));
                }
                1 => {}
                n => {
                    v.duplicated += 1;
                    v.note(format!("{}: {n} distinct {ty} webhooks", inv.key));
                }
            }
        }
    }
    for k in ids.keys() {
        if !known.contains(k) {
            v.unexpected += 1;
            v.note(format!("webhook {} for {} nobody caused", k.1, k.0));
        }
    }
    let distinct: u64 = ids.values().map(|s| s.len() as u64).sum();
    v.figures.insert(
        "effects.webhooks".into(),
        json!({"expected": expected, "distinct": distinct, "deliveries": raw, "redelivered": raw.saturating_sub(distinct)}),
    );
}

/// Waits (bounded) until every approved invoice of the run is issued and the webhook count
/// stops moving.
async fn settle(client: &reqwest::Client, url: &str, pre: &str, hooks: &str, within: Duration) {
    let end = Instant::now() + within;
    let mut last = usize::MAX;
    let mut stable = 0;
    while Instant::now() < end {
        let db = db_invoices(url, pre).await.unwrap_or_default();
        let pending = db
            .iter()
            .filter(|i| i.state == "approved" || (i.approved > 0 && i.issued == 0))
            .count();
        let n = receiver_deliveries(client, hooks).await.len();
        if pending == 0 && n == last {
            stable += 1;
            if stable >= 3 {
                return;
            }
        } else {
            stable = 0;
        }
        last = n;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    eprintln!("settle: bound reached");
}

// ------------------------------------------------------------------------------------------
// The TCP proxy that drops responses after the server has committed (S7).

async fn proxy(
    listener: tokio::net::TcpListener,
    upstream: String,
    percent: u64,
    seed: u64,
    dropped: Arc<Counters>,
) {
    let mut n = 0u64;
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        n += 1;
        // The decision for the n-th connection comes from the seed.
        let drop_it = Rng::new(seed, n).below(100) < percent;
        let upstream = upstream.clone();
        let dropped = dropped.clone();
        tokio::spawn(async move {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                return;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let up = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut cr, &mut sw).await;
                let _ = sw.shutdown().await;
            });
            let mut buf = vec![0u8; 16 * 1024];
            let mut first = true;
            while let Ok(k) = sr.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                if first && drop_it {
                    // The server has answered, so it has committed: drop the answer unread.
                    let status = String::from_utf8_lossy(&buf[..k.min(12)]).into_owned();
                    let status = status.split(' ').nth(1).unwrap_or("?").to_owned();
                    dropped.add(&format!("responses dropped ({status})"), 1);
                    up.abort();
                    return;
                }
                first = false;
                if cw.write_all(&buf[..k]).await.is_err() {
                    break;
                }
            }
            let _ = cw.shutdown().await;
            up.abort();
        });
    }
}

// ------------------------------------------------------------------------------------------
// One run

async fn run(args: Args) -> Value {
    let ctx = Ctx {
        rng: Mutex::new(Rng::new(args.seed, 0xC4A0)),
        args: args.clone(),
        faults: Counters::default(),
        recovery_ms: Mutex::default(),
        started: Instant::now(),
    };
    let q = args.quick;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut v = Verdict::default();
    let pre = prefix(&args);
    let mut duplicates_attempted = 0;
    let mut conflicts_attempted = 0;
    let records: Records;
    let driver: Arc<Driver>;
    // Processes live until the end of the run.
    let mut servers: Vec<Server> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
    let mut extra: BTreeMap<String, Value> = BTreeMap::new();
    let mut check_url = args.db_url.clone();

    match args.scenario.as_str() {
        "storm" | "race" => {
            let mut s = Server::new(&args, "serve", base_env());
            s.start(&http, true).await;
            driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(30)));
            servers.push(s);
            let f = Arc::new(fixture(&driver, if q { 10 } else { 20 }, &args.label).await);
            let (r, dups, conflicts) = if args.scenario == "storm" {
                storm(&ctx, driver.clone(), f).await
            } else {
                race(&ctx, driver.clone(), f).await
            };
            records = r;
            duplicates_attempted = dups;
            conflicts_attempted = conflicts;
        }
        "kill" => {
            let mut s = Server::new(&args, "serve", base_env());
            s.start(&http, true).await;
            driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(20)));
            let f = Arc::new(fixture(&driver, 8, &args.label).await);
            let kills = if q { 4 } else { 10 };
            let load_for = Duration::from_secs(if q { 16 } else { 45 });
            let server = Arc::new(tokio::sync::Mutex::new(s));
            let srv = server.clone();
            let (ctx_ref, d2) = (&ctx, driver.clone());
            records = with_nemesis(
                &ctx,
                driver.clone(),
                f,
                8,
                load_for,
                move |stop| async move {
                    let end = Instant::now() + load_for - Duration::from_secs(2);
                    for _ in 0..kills {
                        tokio::time::sleep(if q {
                            ctx_ref.rand_ms(1000, 3000)
                        } else {
                            ctx_ref.rand_ms(1000, 5000)
                        })
                        .await;
                        if Instant::now() > end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let mut s = srv.lock().await;
                        s.kill();
                        let killed_at = Instant::now();
                        ctx_ref.faults.add("kill -9", 1);
                        s.start(&d2.client, false).await;
                        drop(s);
                        ctx_ref.recovered_in(
                            d2.first_ok_after(killed_at, Duration::from_secs(20))
                                .await
                                .map(|x| x + Duration::ZERO),
                        );
                    }
                },
            )
            .await;
            let s = Arc::try_unwrap(server).ok().unwrap().into_inner();
            servers.push(s);
        }
        "pgcrash" => {
            let mut s = Server::new(&args, "serve", base_env());
            s.start(&http, true).await;
            driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(25)));
            servers.push(s);
            let f = Arc::new(fixture(&driver, 8, &args.label).await);
            // Setup is durable before the first crash, also with synchronous_commit=off.
            pg_checkpoint(&args.db_url).await;
            let crashes = if args.expect_loss {
                if q { 4 } else { 5 }
            } else if q {
                2
            } else {
                4
            };
            let terminations = if q { 3 } else { 6 };
            let load_for = Duration::from_secs(if q { 20 } else { 45 });
            let (ctx_ref, d2, url) = (&ctx, driver.clone(), args.db_url.clone());
            records = with_nemesis(
                &ctx,
                driver.clone(),
                f,
                8,
                load_for,
                move |stop| async move {
                    let end = Instant::now() + load_for - Duration::from_secs(3);
                    let mut plan: Vec<bool> = (0..crashes).map(|_| true).collect();
                    plan.extend((0..terminations).map(|_| false));
                    // A seeded order of crashes and terminations.
                    for i in (1..plan.len()).rev() {
                        let j = ctx_ref.below(i as u64 + 1) as usize;
                        plan.swap(i, j);
                    }
                    // A crash costs about 2.5 s (stop, down, restart, the pool's recovery):
                    // leave room for every planned one before the load's deadline.
                    let busy = 3000 + 2500 * crashes as u64;
                    let gap = (load_for.as_millis() as u64).saturating_sub(busy)
                        / (plan.len() as u64 + 1);
                    let gap = gap.max(300);
                    for crash in plan {
                        tokio::time::sleep(ctx_ref.rand_ms(gap / 2, gap)).await;
                        if Instant::now() > end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        if crash {
                            if !pg_ctl(ctx_ref, "crash") {
                                ctx_ref.faults.add("pg_crash_failed", 1);
                                continue;
                            }
                            ctx_ref.faults.add("pg stop -m immediate", 1);
                            tokio::time::sleep(ctx_ref.rand_ms(300, 1500)).await;
                            if !pg_ctl(ctx_ref, "restart") {
                                panic!("PostgreSQL did not restart");
                            }
                            let back = Instant::now();
                            ctx_ref.recovered_in(
                                d2.first_ok_after(back, Duration::from_secs(30)).await,
                            );
                        } else {
                            let n = pg_terminate(ctx_ref, &url).await;
                            ctx_ref.faults.add("pg_terminate_backend", n);
                        }
                    }
                },
            )
            .await;
        }
        "drop" => {
            let mut s = Server::new(&args, "serve", base_env());
            s.start(&http, true).await;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let at = listener.local_addr().unwrap();
            let dropped: Arc<Counters> = Arc::default();
            let upstream = format!("127.0.0.1:{}", s.port);
            tokio::spawn(proxy(listener, upstream, 10, args.seed, dropped.clone()));
            // Setup straight to the server; the measured traffic through the proxy, one
            // connection per request, so each dropped answer is one request's.
            let setup = Driver::new(vec![s.base()], true, Duration::from_secs(20));
            let f = Arc::new(fixture(&setup, 8, &args.label).await);
            driver = Arc::new(Driver::new(
                vec![format!("http://{at}")],
                false,
                Duration::from_secs(20),
            ));
            servers.push(s);
            let load_for = Duration::from_secs(if q { 10 } else { 30 });
            records = with_nemesis(&ctx, driver.clone(), f, 8, load_for, |_| async {}).await;
            for (k, n) in dropped.snapshot() {
                ctx.faults.add(&k, n);
            }
        }
        "replicas" => {
            let peer_db = format!("{}/{}-peer.db", args.work, args.label);
            let peer = spawn_helper(&args, peer_command(&args, 0, &peer_db, None), "peer");
            let receiver = spawn_receiver(&args, 0);
            let hooks = format!("{}/chaos", receiver.url);
            let env: Vec<(String, String)> = [
                ("TAUROS_ISSUER", "http".to_owned()),
                ("TAUROS_ISSUER_URL", format!("{}/invoices", peer.url)),
                ("TAUROS_ISSUER_TIMEOUT_SECONDS", "3".to_owned()),
                ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1".to_owned()),
                ("TAUROS_WORKERS", "2".to_owned()),
                ("TAUROS_JOB_POLL_MS", "100".to_owned()),
                ("TAUROS_JOB_LEASE_SECONDS", "3".to_owned()),
                ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "2".to_owned()),
                ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "2".to_owned()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            let mut replicas = Vec::new();
            for r in 0..3 {
                let mut s = Server::new(&args, &format!("replica{r}"), env.clone());
                s.start(&http, r == 0).await;
                replicas.push(s);
            }
            let bases: Vec<String> = replicas.iter().map(Server::base).collect();
            driver = Arc::new(Driver::new(bases, true, Duration::from_secs(20)));
            let f = Arc::new(fixture(&driver, 6, &args.label).await);
            setup_post(
                &driver,
                "/v1/webhook-endpoints",
                &f.human,
                json!({"url": hooks, "events": ["invoice.created", "invoice.approved", "invoice.issued"], "description": "chaos"}),
            )
            .await;
            driver.counters.0.lock().unwrap().clear();
            let kills = if q { 3 } else { 8 };
            let load_for = Duration::from_secs(if q { 16 } else { 45 });
            let reps = Arc::new(tokio::sync::Mutex::new(replicas));
            let (ctx_ref, d2, reps2) = (&ctx, driver.clone(), reps.clone());
            records = with_nemesis(
                &ctx,
                driver.clone(),
                f,
                6,
                load_for,
                move |stop| async move {
                    let end = Instant::now() + load_for - Duration::from_secs(2);
                    for _ in 0..kills {
                        tokio::time::sleep(ctx_ref.rand_ms(1000, if q { 3000 } else { 4000 }))
                            .await;
                        if Instant::now() > end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let r = ctx_ref.below(3) as usize;
                        let mut all = reps2.lock().await;
                        all[r].kill();
                        ctx_ref.faults.add("kill -9 (replica)", 1);
                        let down_at = Instant::now();
                        tokio::time::sleep(ctx_ref.rand_ms(200, 1500)).await;
                        all[r].start(&d2.client, false).await;
                        ctx_ref
                            .recovery_ms
                            .lock()
                            .unwrap()
                            .push(down_at.elapsed().as_millis() as u64);
                    }
                },
            )
            .await;
            settle(
                &http,
                &args.db_url,
                &pre,
                &hooks,
                Duration::from_secs(if q { 40 } else { 90 }),
            )
            .await;
            let db = db_invoices(&args.db_url, &pre)
                .await
                .expect("read the database");
            check_effects(&http, &peer.url, &hooks, &ALL_EVENTS, &db, &mut v).await;
            servers.extend(Arc::try_unwrap(reps).ok().unwrap().into_inner());
            helpers.push(peer);
            helpers.push(receiver);
        }
        "paused" => {
            // Fencing (docs/RELIABILITY.md, "paused worker"): two serving replicas with
            // workers and a short lease; the driver talks to B only. A is frozen (SIGSTOP)
            // while it holds an issue job, past its lease, so B's upkeep rescues the job and B
            // issues the invoice; then A is thawed (SIGCONT) and must stop its handler, not
            // finish it. Before each freeze the peer is made slow for a few calls, so an issue
            // is in flight when A freezes.
            const LEASE_S: u64 = 2;
            // Files per backend: both runs share the work directory and the label.
            let peer_db = format!("{}/{}-{}-peer.db", args.work, args.label, args.backend);
            let peer = spawn_helper(&args, peer_command(&args, 0, &peer_db, None), "peer");
            let receiver = spawn_receiver(&args, 0);
            let hooks = format!("{}/chaos", receiver.url);
            let env: Vec<(String, String)> = [
                ("TAUROS_ISSUER", "http".to_owned()),
                ("TAUROS_ISSUER_URL", format!("{}/invoices", peer.url)),
                ("TAUROS_ISSUER_TIMEOUT_SECONDS", "5".to_owned()),
                ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1".to_owned()),
                ("TAUROS_WORKERS", "2".to_owned()),
                ("TAUROS_JOB_POLL_MS", "100".to_owned()),
                ("TAUROS_JOB_LEASE_SECONDS", LEASE_S.to_string()),
                ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "1".to_owned()),
                ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "2".to_owned()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
            let (a_name, b_name) = (
                format!("replicaA-{}", args.backend),
                format!("replicaB-{}", args.backend),
            );
            let mut b = Server::new(&args, &b_name, env.clone());
            b.start(&http, true).await;
            let mut a = Server::new(&args, &a_name, env);
            a.start(&http, false).await;
            let a_pid = a.pid().expect("replica A runs");
            driver = Arc::new(Driver::new(vec![b.base()], true, Duration::from_secs(20)));
            let f = Arc::new(fixture(&driver, 4, &args.label).await);
            setup_post(
                &driver,
                "/v1/webhook-endpoints",
                &f.human,
                json!({"url": hooks, "events": ["invoice.issued"], "description": "chaos"}),
            )
            .await;
            driver.counters.0.lock().unwrap().clear();
            let pauses = if q { 3 } else { 6 };
            let load_for = Duration::from_secs(if q { 18 } else { 45 });
            let caught = Arc::new(AtomicU64::new(0));
            let (ctx_ref, url, caught2) = (&ctx, args.db_url.clone(), caught.clone());
            let (faults_url, slow_http) = (format!("{}/faults", peer.url), http.clone());
            records = with_nemesis(
                &ctx,
                driver.clone(),
                f,
                1,
                load_for,
                move |stop| async move {
                    let freeze = Duration::from_secs(LEASE_S) + Duration::from_millis(2500);
                    let end = Instant::now() + load_for - freeze;
                    for _ in 0..pauses {
                        tokio::time::sleep(ctx_ref.rand_ms(300, 1200)).await;
                        if Instant::now() > end || stop.load(Ordering::Relaxed) {
                            break;
                        }
                        // Freeze A while it holds a job (bounded wait for one): the next few
                        // peer calls are slow, so issues stay in flight.
                        let _ = slow_http
                            .post(&faults_url)
                            .json(&json!({"mode": "slow", "millis": 1500, "times": 6}))
                            .send()
                            .await;
                        let wait = Instant::now() + Duration::from_secs(3);
                        let mut holds = 0;
                        while Instant::now() < wait {
                            holds = running_jobs_of(&url, a_pid).await;
                            if holds > 0 {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        signal(a_pid, "STOP");
                        ctx_ref.faults.add("SIGSTOP past the lease", 1);
                        if holds > 0 {
                            caught2.fetch_add(1, Ordering::Relaxed);
                        }
                        let frozen = Instant::now();
                        tokio::time::sleep(freeze).await;
                        signal(a_pid, "CONT");
                        ctx_ref
                            .recovery_ms
                            .lock()
                            .unwrap()
                            .push(frozen.elapsed().as_millis() as u64);
                    }
                },
            )
            .await;
            settle(
                &http,
                &args.db_url,
                &pre,
                &hooks,
                Duration::from_secs(if q { 30 } else { 90 }),
            )
            .await;
            let db = db_invoices(&args.db_url, &pre)
                .await
                .expect("read the database");
            check_effects(&http, &peer.url, &hooks, &["invoice.issued"], &db, &mut v).await;
            // A's own account: each thawed handler stopped (fencing), none finished late.
            let log = std::fs::read_to_string(format!("{}/{}-{a_name}.log", args.work, args.label))
                .unwrap_or_default();
            let stopped = log
                .lines()
                .filter(|l| l.contains("handler stopped, its outcome is not reported"))
                .count() as u64;
            let late = log
                .lines()
                .filter(|l| l.contains("late result of a lost lease ignored"))
                .count() as u64;
            let caught = caught.load(Ordering::Relaxed);
            v.notes.insert(0, format!(
                "fencing: {caught} freezes caught A holding a job, {stopped} handlers of A stopped, {late} late results ignored"
            ));
            extra.insert(
                "fencing".into(),
                json!({"pauses_with_a_job": caught, "handlers_stopped": stopped, "late_results": late}),
            );
            if caught > 0 && stopped == 0 {
                v.wrong += 1;
                v.note(format!(
                    "A was frozen holding a job {caught} times, and no handler of it stopped"
                ));
            }
            servers.push(a);
            servers.push(b);
            helpers.push(peer);
            helpers.push(receiver);
        }
        "resend" => {
            // A webhook receiver down past every delivery's retry budget, then resent: each
            // failed delivery is resent three times at once, and must arrive exactly once, with
            // the webhook-id of its event (docs/WEBHOOKS.md, "Resending a delivery").
            let port = free_port();
            let hooks_base = format!("http://127.0.0.1:{port}");
            let hooks = format!("{hooks_base}/chaos");
            let env: Vec<(String, String)> = [
                ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1"),
                ("TAUROS_WEBHOOK_MAX_ATTEMPTS", "2"),
                ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "1"),
                ("TAUROS_WORKERS", "2"),
                ("TAUROS_JOB_POLL_MS", "100"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            let mut s = Server::new(&args, "serve", env);
            s.start(&http, true).await;
            driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(20)));
            let f = Arc::new(fixture(&driver, 4, &args.label).await);
            let endpoint = setup_post(
                &driver,
                "/v1/webhook-endpoints",
                &f.human,
                json!({"url": hooks, "events": ["invoice.created"], "description": "chaos resend"}),
            )
            .await;
            let endpoint = endpoint["endpoint"]["id"].as_str().unwrap().to_owned();
            driver.counters.0.lock().unwrap().clear();
            let load_for = Duration::from_secs(if q { 3 } else { 8 });
            records =
                with_nemesis(&ctx, driver.clone(), f.clone(), 2, load_for, |_| async {}).await;
            // Every delivery fails at connect twice, then is failed (bounded wait).
            let list = |path: String| {
                let (client, token) = (http.clone(), f.human.clone());
                async move {
                    let mut items = Vec::new();
                    let mut cursor = String::new();
                    for _ in 0..1000 {
                        let page: Value = client
                            .get(format!("{path}{cursor}"))
                            .bearer_auth(&token)
                            .send()
                            .await
                            .expect("list")
                            .json()
                            .await
                            .expect("json");
                        items.extend(page["items"].as_array().cloned().unwrap_or_default());
                        match page["next_cursor"].as_str() {
                            Some(next) => cursor = format!("&cursor={next}"),
                            None => break,
                        }
                    }
                    items
                }
            };
            let deliveries = format!(
                "{}/v1/webhook-endpoints/{endpoint}/deliveries?limit=100",
                s.base()
            );
            let jobs = format!("{}/v1/jobs?kind=webhook.deliver.v1&limit=100", s.base());
            let end = Instant::now() + Duration::from_secs(180);
            loop {
                let waiting = list(jobs.clone())
                    .await
                    .iter()
                    .filter(|j| {
                        matches!(
                            j["state"].as_str(),
                            Some("available" | "scheduled" | "retryable" | "running")
                        )
                    })
                    .count();
                if waiting == 0 || Instant::now() > end {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let attempts = list(deliveries.clone()).await;
            let mut failed: BTreeMap<String, String> = BTreeMap::new();
            for a in &attempts {
                if a["delivery_status"] == "failed" {
                    failed.insert(
                        a["delivery_id"].as_str().unwrap().to_owned(),
                        a["event_id"].as_str().unwrap().to_owned(),
                    );
                }
            }
            let events: HashSet<String> = attempts
                .iter()
                .map(|a| a["event_id"].as_str().unwrap().to_owned())
                .collect();
            // The receiver comes back on the endpoint's port; every failed delivery is resent
            // three times at once.
            let receiver = spawn_receiver(&args, port);
            ctx.faults
                .add("receiver down (deliveries failed)", failed.len() as u64);
            let answers = Arc::new(Counters::default());
            let ids: Vec<&String> = failed.keys().collect();
            // 16 deliveries (48 requests) at a time: the point is each delivery's three
            // resends at once, not the connection limits (64 per client address since #25:
            // more connections from this one address would be closed unanswered).
            for chunk in ids.chunks(16) {
                let mut tasks = Vec::new();
                for delivery in chunk {
                    for _ in 0..3 {
                        let (client, token, answers) =
                            (http.clone(), f.human.clone(), answers.clone());
                        let url = format!(
                            "{}/v1/webhook-endpoints/{endpoint}/deliveries/{delivery}/resend",
                            s.base()
                        );
                        tasks.push(tokio::spawn(async move {
                            let status = match client.post(url).bearer_auth(&token).send().await {
                                Ok(r) => r.status().as_u16().to_string(),
                                Err(_) => "transport".to_owned(),
                            };
                            answers.add(&format!("resend {status}"), 1);
                        }));
                    }
                }
                for t in tasks {
                    t.await.unwrap();
                }
            }
            let resent = answers.get("resend 202");
            // Bounded wait until the receiver holds every failed delivery's event.
            let wanted: HashSet<&String> = failed.values().collect();
            let end = Instant::now() + Duration::from_secs(if q { 40 } else { 90 });
            while Instant::now() < end {
                let got = receiver_deliveries(&http, &hooks).await;
                let ids: HashSet<&str> = got
                    .iter()
                    .filter_map(|d| d["webhook_id"].as_str())
                    .collect();
                if wanted.iter().all(|w| ids.contains(w.as_str())) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            // Let a second cycle show itself if one had started (it would be a duplicate).
            tokio::time::sleep(Duration::from_secs(2)).await;
            let got = receiver_deliveries(&http, &hooks).await;
            let mut seen: HashMap<String, u64> = HashMap::new();
            for d in &got {
                *seen
                    .entry(d["webhook_id"].as_str().unwrap_or("").to_owned())
                    .or_default() += 1;
            }
            for w in &wanted {
                match seen.get(w.as_str()) {
                    None => {
                        v.lost += 1;
                        v.note(format!("resent delivery of event {w} never arrived"));
                    }
                    Some(n) if *n > 1 => {
                        v.duplicated += 1;
                        v.note(format!("event {w} arrived {n} times after one resend"));
                    }
                    _ => {}
                }
            }
            for id in seen.keys() {
                if !events.contains(id) {
                    v.unexpected += 1;
                    v.note(format!(
                        "webhook-id {id} was never a delivery of this endpoint"
                    ));
                }
            }
            if resent != failed.len() as u64 {
                v.wrong += 1;
                v.note(format!(
                    "{} failed deliveries but {resent} resends answered 202 (one each expected)",
                    failed.len()
                ));
            }
            extra.insert(
                "effects.resend".into(),
                json!({
                    "deliveries": events.len(),
                    "failed": failed.len(),
                    "resends": failed.len() * 3,
                    "answers": answers.snapshot(),
                    "received": got.len(),
                    "distinct": seen.len(),
                }),
            );
            servers.push(s);
            helpers.push(receiver);
        }
        "diskfull" => {
            let mut s = Server::new(&args, "serve", base_env());
            s.start(&http, true).await;
            driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(15)));
            let f = Arc::new(fixture(&driver, 4, &args.label).await);
            let server = Arc::new(tokio::sync::Mutex::new(s));
            let srv = server.clone();
            let load_for = Duration::from_secs(if q { 14 } else { 30 });
            let (ctx_ref, d2, fill) = (&ctx, driver.clone(), args.fill_dir.clone());
            let full_figures: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
            let ff = full_figures.clone();
            records = with_nemesis(&ctx, driver.clone(), f, 4, load_for, move |_stop| async move {
                let rounds = if q { 1 } else { 2 };
                for round in 0..rounds {
                    tokio::time::sleep(ctx_ref.rand_ms(2000, 3000)).await;
                    let path = format!("{fill}/filler");
                    let bytes = fill_disk(&path);
                    ctx_ref.faults.add("disk full", 1);
                    let before = d2.counters.snapshot();
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    let after = d2.counters.snapshot();
                    let delta = |k: &str| after.get(k).unwrap_or(&0) - before.get(k).unwrap_or(&0);
                    let alive = srv.lock().await.alive();
                    ff.lock().unwrap().insert(
                        format!("full{round}"),
                        json!({"filler_bytes": bytes, "5xx": delta("resp.5xx"), "2xx": delta("resp.fresh") + delta("resp.replayed"), "server_alive": alive}),
                    );
                    let _ = std::fs::remove_file(&path);
                    let freed = Instant::now();
                    if !alive {
                        ctx_ref.faults.add("server died on a full disk", 1);
                        srv.lock().await.start(&d2.client, false).await;
                    }
                    ctx_ref.recovered_in(d2.first_ok_after(freed, Duration::from_secs(20)).await);
                }
            })
            .await;
            extra.insert("disk".into(), json!(full_figures.lock().unwrap().clone()));
            // Nothing corrupt: SQLite's own check over the whole file.
            let ok = sqlite_integrity(&args.db_url).await;
            extra.insert("integrity_check".into(), json!(ok));
            if ok != "ok" {
                v.wrong += 1;
                v.note(format!("integrity_check: {ok}"));
            }
            let s = Arc::try_unwrap(server).ok().unwrap().into_inner();
            servers.push(s);
        }
        "refuse" | "peerday" | "restore" => {
            // The dead ends of issuing (bench/chaos/dead_ends.rs).
            let r = match args.scenario.as_str() {
                "refuse" => dead_ends::refuse(&ctx, &http, &mut v, &mut extra).await,
                "peerday" => dead_ends::peerday(&ctx, &http, &mut v, &mut extra).await,
                _ => dead_ends::restore(&ctx, &http, &mut v, &mut extra).await,
            };
            records = r.records;
            driver = r.driver;
            servers.extend(r.servers);
            helpers.extend(r.helpers);
            check_url = r.check_url;
        }
        "ha" => {
            // Failovers of a pg_auto_failover formation (bench/chaos/ha.rs, scripts/ha).
            let r = ha::ha(&ctx, &http, &mut v, &mut extra).await;
            records = r.records;
            driver = r.driver;
            servers.extend(r.servers);
            helpers.extend(r.helpers);
            check_url = r.check_url;
        }
        "noisy" | "anonflood" => {
            // The tenancy scenarios (bench/chaos/tenancy.rs).
            let r = if args.scenario == "noisy" {
                tenancy::noisy(&ctx, &http, &mut v, &mut extra).await
            } else {
                tenancy::anonflood(&ctx, &http, &mut v, &mut extra).await
            };
            records = r.records;
            driver = r.driver;
            servers.extend(r.servers);
            helpers.extend(r.helpers);
        }
        other => panic!("unknown scenario {other}"),
    }

    // The checker.
    let db = db_invoices(&check_url, &pre)
        .await
        .expect("read the database");
    let recs = records.lock().unwrap().clone();
    check_lifecycle(&recs, &db, &mut v);
    if matches!(args.scenario.as_str(), "storm" | "race") {
        check_concurrent(&recs, &db, &mut v);
    }
    // Every 500 is a bug (faults must answer 503); report them apart.
    let five: BTreeMap<String, u64> = driver.statuses_5xx.snapshot();
    let internal: u64 = five
        .iter()
        .filter(|(k, _)| k.starts_with("500"))
        .map(|(_, n)| *n)
        .sum();
    drop(servers);
    drop(helpers);
    let counters = driver.counters.snapshot();
    let mut rec_ms = ctx.recovery_ms.lock().unwrap().clone();
    rec_ms.sort_unstable();
    // A 500 is a bug under any fault (the contract is 503 and a retry); the storm and the race
    // inject no fault, so any 5xx there is one.
    let five_total: u64 = five.values().sum();
    let calm = matches!(args.scenario.as_str(), "storm" | "race");
    let passed = if args.expect_loss {
        v.lost > 0
    } else {
        v.lost == 0
            && v.duplicated == 0
            && v.unexpected == 0
            && v.wrong == 0
            && internal == 0
            && !(calm && five_total > 0)
            && !extra.contains_key("scenario_failed")
    };
    let mut out = json!({
        "scenario": args.label,
        "kind": args.scenario,
        "backend": args.backend,
        "seed": args.seed,
        "quick": args.quick,
        "expect_loss": args.expect_loss,
        "seconds": ctx.started.elapsed().as_secs_f64(),
        "keys": recs.len(),
        "duplicates_attempted": duplicates_attempted,
        "conflicts_attempted": conflicts_attempted,
        "requests": counters.iter().filter(|(k, _)| k.starts_with("req.")).map(|(k, n)| (k[4..].to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "responses": counters.iter().filter(|(k, _)| k.starts_with("resp.")).map(|(k, n)| (k[5..].to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "refused": counters.iter().filter(|(k, _)| k.starts_with("refused.")).map(|(k, n)| (k[8..].to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "replayed_by_command": counters.iter().filter(|(k, _)| k.starts_with("replayed.")).map(|(k, n)| (k[9..].to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "retries": driver.counters.get("retries"),
        "status_5xx": five,
        "http_500": internal,
        "faults": ctx.faults.snapshot(),
        "recovery_ms": rec_ms,
        "lost": v.lost,
        "duplicated": v.duplicated,
        "unexpected": v.unexpected,
        "recovered": v.recovered,
        "wrong": v.wrong,
        "notes": v.notes,
        "passed": passed,
    });
    for (k, val) in v.figures {
        out[k] = val;
    }
    for (k, val) in extra {
        out[k] = val;
    }
    out
}

/// Fills the file system holding `path` until it refuses a write; the bytes written.
fn fill_disk(path: &str) -> u64 {
    let Ok(mut f) = std::fs::File::create(path) else {
        return 0;
    };
    let chunk = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    for _ in 0..1_000_000 {
        match f.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let _ = f.sync_all();
    total
}

async fn sqlite_integrity(url: &str) -> String {
    use sqlx::Row;
    let Ok(pool) = sqlx::SqlitePool::connect(url).await else {
        return "cannot open".into();
    };
    let r = sqlx::query("pragma integrity_check")
        .fetch_all(&pool)
        .await
        .map(|rows| {
            rows.iter()
                .map(|r| r.get::<String, _>(0))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|e| e.to_string());
    pool.close().await;
    r
}

// ------------------------------------------------------------------------------------------
// The report: one table from the JSON lines, optionally written into docs/RELIABILITY.md.

fn report(path: &str, doc: Option<&str>, command: &str, marker: &str) -> bool {
    let text = std::fs::read_to_string(path).expect("results");
    let runs: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let map_str = |v: &Value| {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let mut t = String::new();
    t.push_str("| scenario | backend | requests by command | keys | dup / conflict attempted | fresh | replayed | 409 mismatch | 409 in-flight | other 4xx | 5xx (500s) | transport | faults injected | recovery ms (min / max) |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in &runs {
        let resp = &r["responses"];
        let rec: Vec<u64> = r["recovery_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let faults = map_str(&r["faults"]);
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} |\n",
            r["scenario"].as_str().unwrap_or(""),
            r["backend"].as_str().unwrap_or(""),
            map_str(&r["requests"]),
            n(r, "keys"),
            n(r, "duplicates_attempted"),
            n(r, "conflicts_attempted"),
            n(resp, "fresh"),
            n(resp, "replayed"),
            n(resp, "409_mismatch"),
            n(resp, "409_inflight"),
            n(resp, "other_4xx"),
            n(resp, "5xx"),
            n(r, "http_500"),
            n(resp, "transport"),
            if faults.is_empty() {
                "—".into()
            } else {
                faults
            },
            if rec.is_empty() {
                "—".into()
            } else {
                format!("{} / {}", rec.first().unwrap(), rec.last().unwrap())
            },
        ));
    }
    t.push('\n');
    t.push_str("| scenario | backend | effects: acknowledged / found | issued at peer · webhooks | lost | duplicated | unexpected | recovered | wrong | indeterminate left | seconds | verdict |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut ok = true;
    for r in &runs {
        let eff = |k: &str| {
            let e = &r[format!("effects.{k}")];
            format!("{k} {}/{}", n(e, "acked"), n(e, "found"))
        };
        let extra = if r["effects.issue"].is_object() {
            let i = &r["effects.issue"];
            let w = &r["effects.webhooks"];
            format!(
                "issued {}, at peer {} · webhooks {} expected, {} distinct, {} redelivered",
                n(i, "issued"),
                n(i, "at_peer"),
                n(w, "expected"),
                n(w, "distinct"),
                n(w, "redelivered")
            )
        } else if r["effects.resend"].is_object() {
            let e = &r["effects.resend"];
            format!(
                "webhooks: {} deliveries, {} failed, {} resends ({}), {} received, {} distinct",
                n(e, "deliveries"),
                n(e, "failed"),
                n(e, "resends"),
                map_str(&e["answers"]),
                n(e, "received"),
                n(e, "distinct")
            )
        } else if r["effects.dead_ends"].is_object() {
            r["effects.dead_ends"]["summary"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        } else if r["effects.tenancy"].is_object() {
            r["effects.tenancy"]["summary"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        } else if r["integrity_check"].is_string() {
            format!(
                "integrity_check: {}",
                r["integrity_check"].as_str().unwrap_or("")
            )
        } else {
            "—".into()
        };
        let passed = r["passed"].as_bool() == Some(true);
        ok &= passed;
        let verdict = match (r["expect_loss"].as_bool() == Some(true), passed) {
            (true, true) => "control: loss detected ✓",
            (true, false) => "**control FAILED: no loss seen**",
            (false, true) => "pass",
            (false, false) => "**FAIL**",
        };
        t.push_str(&format!(
            "| {} | {} | {}, {}, {} | {} | {} | {} | {} | {} | {} | {} | {:.0} | {} |\n",
            r["scenario"].as_str().unwrap_or(""),
            r["backend"].as_str().unwrap_or(""),
            eff("create"),
            eff("submit"),
            eff("approve"),
            extra,
            n(r, "lost"),
            n(r, "duplicated"),
            n(r, "unexpected"),
            n(r, "recovered"),
            n(r, "wrong"),
            n(r, "final_indeterminate"),
            r["seconds"].as_f64().unwrap_or(0.0),
            verdict
        ));
    }
    t.push_str(&tenancy::tables(&runs));
    t.push_str(&ha::tables(&runs));
    println!("{t}");
    if let Some(doc) = doc {
        let old = std::fs::read_to_string(doc).unwrap_or_default();
        // `chaos` for scripts/chaos, `ha` for scripts/ha: each writes only its own block.
        let (start, end) = (
            format!("<!-- {marker}:begin -->"),
            format!("<!-- {marker}:end -->"),
        );
        let (start, end) = (start.as_str(), end.as_str());
        if let (Some(a), Some(b)) = (old.find(start), old.find(end)) {
            let secs: f64 = runs.iter().filter_map(|r| r["seconds"].as_f64()).sum();
            let body = format!(
                "{start}\n```sh\n{command}\n```\n\n{} runs, {:.0} s of scenarios, seed {}.\n\n{t}{end}",
                runs.len(),
                secs,
                runs.first().map_or(0, |r| n(r, "seed")),
            );
            let new = format!("{}{}{}", &old[..a], body, &old[b + end.len()..]);
            std::fs::write(doc, new).expect("write the doc");
            eprintln!("chaos: figures written to {doc}");
        }
    }
    ok
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let mut it = std::env::args().skip(1);
    match it.next().as_deref() {
        Some("run") => {
            let args = parse_run(it);
            let out = run(args).await;
            println!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Some("report") => {
            let path = it.next().expect("results file");
            let (mut doc, mut command) = (None, String::from("scripts/chaos"));
            let mut marker = String::from("chaos");
            while let Some(flag) = it.next() {
                let v = it.next().expect("a value");
                match flag.as_str() {
                    "--doc" => doc = Some(v),
                    "--command" => command = v,
                    "--marker" => marker = v,
                    other => panic!("unknown flag {other}"),
                }
            }
            if report(&path, doc.as_deref(), &command, &marker) {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
        Some("proxy") => {
            let (mut listen, mut upstream, mut percent, mut seed) =
                (String::from("127.0.0.1:0"), String::new(), 10, 1);
            while let Some(flag) = it.next() {
                let v = it.next().expect("a value");
                match flag.as_str() {
                    "--listen" => listen = v,
                    "--upstream" => upstream = v,
                    "--drop-percent" => percent = v.parse().expect("--drop-percent"),
                    "--seed" => seed = v.parse().expect("--seed"),
                    other => panic!("unknown flag {other}"),
                }
            }
            let l = tokio::net::TcpListener::bind(&listen)
                .await
                .expect("listen");
            println!("proxy listening on http://{}", l.local_addr().unwrap());
            proxy(l, upstream, percent, seed, Arc::default()).await;
            std::process::ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: chaos run --scenario S … | chaos report FILE [--doc F] | chaos proxy …"
            );
            std::process::ExitCode::from(2)
        }
    }
}
