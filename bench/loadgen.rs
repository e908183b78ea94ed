//! Load generator for `scripts/bench`: keep-alive HTTP/1.1 connections, one task per
//! connection, latencies in an HDR histogram. Prints one JSON line per run.
//!
//! Setup goes through the public API (sign in as the demo approver, create a fresh agent,
//! customer and destination), so the measured requests are exactly what clients send.
//!
//! ```text
//! cargo run --release --example loadgen -- --base-url http://127.0.0.1:8080 \
//!     --scenario create --concurrency 32 --seconds 10
//! ```
//!
//! `--scenario fixture` only sets up (one invoice) and prints what an external client (`wrk`
//! in `scripts/bench`) needs to send the same GET and replay: the agent key, the invoice id,
//! its idempotency key and its body.
//!
//! `--ticks process PID` and `--ticks cluster POSTMASTER` only print the CPU clock ticks so far
//! of a process, or of PostgreSQL's whole process tree, the same counts a run charges (wrk's
//! runs in `scripts/bench` read them this way).
//!
//! `--scenario floor` measures the stack's floor instead (bench/floor.rs): `GET /inv/{id}`
//! with the bearer `--token`, over the invoice ids in the file `--ids` (one a line), in
//! rotation like `get`; no setup through Tauros's API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

struct Args {
    base_url: String,
    email: String,
    password: String,
    scenario: String,
    concurrency: usize,
    seconds: f64,
    /// Invoices created up front for `replay` and `get`.
    pool: usize,
    /// The server whose CPU time the measured window is charged.
    server_pid: Option<u32>,
    /// PostgreSQL's postmaster: the database's CPU over the window is its whole process tree's
    /// ([`cluster_ticks`]), backends that start or end inside the window included.
    db_postmaster: Option<u32>,
    /// `floor` only: the floor's bearer token and a file of invoice ids, one a line.
    token: String,
    ids: String,
}

fn parse_args() -> Args {
    let mut args = Args {
        base_url: "http://127.0.0.1:8080".into(),
        email: "demo@tauros.local".into(),
        password: "tauros-demo-password".into(),
        scenario: "create".into(),
        concurrency: 8,
        seconds: 10.0,
        pool: 200,
        server_pid: None,
        db_postmaster: None,
        token: String::new(),
        ids: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base-url" => args.base_url = value,
            "--email" => args.email = value,
            "--password" => args.password = value,
            "--scenario" => args.scenario = value,
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency"),
            "--seconds" => args.seconds = value.parse().expect("--seconds"),
            "--pool" => args.pool = value.parse().expect("--pool"),
            "--token" => args.token = value,
            "--ids" => args.ids = value,
            "--server-pid" => args.server_pid = Some(value.parse().expect("--server-pid")),
            "--db-postmaster" => {
                args.db_postmaster = Some(value.parse().expect("--db-postmaster"));
            }
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

/// The actors and records one run needs.
struct Fixture {
    client: reqwest::Client,
    base: String,
    human: String,
    agent: String,
    customer: String,
    destination: String,
    /// Keys and ids of invoices created up front.
    invoices: Vec<(String, String)>,
    run: String,
}

async fn post(client: &reqwest::Client, url: String, token: &str, body: &Value) -> Value {
    let res = client
        .post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .expect("request");
    let status = res.status();
    let body: Value = res.json().await.expect("json");
    assert!(status.is_success(), "setup failed: {status} {body}");
    body
}

fn draft(f: &Fixture, n: u64) -> Value {
    json!({
        "customer_id": f.customer,
        "payment_destination_id": f.destination,
        "currency": "EUR",
        "due_date": "2099-12-31",
        "lines": [
            {"description": "Discovery workshop", "quantity": "1", "unit_amount": "400"},
            {"description": format!("Implementation days, batch {n}"), "quantity": "2", "unit_amount": "400.00"}
        ],
        "reasoning": "Monthly retainer agreed in the signed statement of work."
    })
}

async fn fixture(args: &Args) -> Fixture {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency + 4)
        .build()
        .unwrap();
    let base = args.base_url.trim_end_matches('/').to_owned();
    if args.scenario == "floor" {
        let ids = std::fs::read_to_string(&args.ids).expect("--ids: a file of invoice ids");
        let invoices: Vec<(String, String)> = ids
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(args.pool.max(1))
            .map(|id| (String::new(), id.trim().to_owned()))
            .collect();
        assert!(!invoices.is_empty(), "--ids names no invoice");
        return Fixture {
            client,
            base,
            human: String::new(),
            agent: args.token.clone(),
            customer: String::new(),
            destination: String::new(),
            invoices,
            run: String::new(),
        };
    }
    let session = client
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"email": args.email, "password": args.password}))
        .send()
        .await
        .expect("sign in")
        .json::<Value>()
        .await
        .unwrap();
    let human = session["token"].as_str().expect("signed in").to_owned();
    let agent = post(
        &client,
        format!("{base}/v1/agents"),
        &human,
        &json!({"name": "Load agent"}),
    )
    .await;
    let agent_id = agent["agent"]["id"].as_str().unwrap().to_owned();
    let agent_key = agent["api_key"].as_str().unwrap().to_owned();
    let customer = post(
        &client,
        format!("{base}/v1/customers"),
        &human,
        &json!({"agent_id": agent_id, "name": "Load customer", "email": "load@example.com"}),
    )
    .await;
    let destination = post(
        &client,
        format!("{base}/v1/payment-destinations"),
        &agent_key,
        &json!({"label": "Load", "currency": "EUR", "network": "iban", "address": "DE89370400440532013000"}),
    )
    .await;
    let mut f = Fixture {
        client,
        base,
        human,
        agent: agent_key,
        customer: customer["id"].as_str().unwrap().to_owned(),
        destination: destination["id"].as_str().unwrap().to_owned(),
        invoices: Vec::new(),
        run: agent_id,
    };
    if matches!(args.scenario.as_str(), "replay" | "get" | "fixture") {
        for n in 0..args.pool as u64 {
            let key = format!("{}-pool-{n}", f.run);
            let res = f
                .client
                .post(format!("{}/v1/invoices", f.base))
                .bearer_auth(&f.agent)
                .header("idempotency-key", &key)
                .json(&draft(&f, n))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            let id = res["invoice"]["id"]
                .as_str()
                .expect("pool invoice")
                .to_owned();
            f.invoices.push((key, id));
        }
    }
    f
}

/// One unit of work of the scenario; returns whether every request in it succeeded.
async fn step(f: &Fixture, scenario: &str, n: u64) -> bool {
    let c = &f.client;
    match scenario {
        "create" => create(f, &format!("{}-{n}", f.run), n).await.is_some(),
        "replay" => {
            let (key, _) = &f.invoices[n as usize % f.invoices.len()];
            let idx = key
                .rsplit('-')
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let res = c
                .post(format!("{}/v1/invoices", f.base))
                .bearer_auth(&f.agent)
                .header("idempotency-key", key)
                .json(&draft(f, idx))
                .send()
                .await;
            ok(res).await
        }
        // The same GET of an invoice in rotation; the floor's route is its own.
        "get" | "floor" => {
            let (_, id) = &f.invoices[n as usize % f.invoices.len()];
            let path = if scenario == "get" {
                "v1/invoices"
            } else {
                "inv"
            };
            let res = c
                .get(format!("{}/{path}/{id}", f.base))
                .bearer_auth(&f.agent)
                .send()
                .await;
            ok(res).await
        }
        "lifecycle" => {
            let Some(invoice) = create(f, &format!("{}-life-{n}", f.run), n).await else {
                return false;
            };
            let id = invoice["id"].as_str().unwrap_or_default();
            let submit = c
                .post(format!("{}/v1/invoices/{id}/submit", f.base))
                .bearer_auth(&f.agent)
                .send()
                .await;
            if !ok(submit).await {
                return false;
            }
            let body = json!({
                "revision_id": invoice["current_revision"]["id"],
                "payload_hash": invoice["current_revision"]["payload_hash"],
            });
            let approve = c
                .post(format!("{}/v1/invoices/{id}/approve", f.base))
                .bearer_auth(&f.human)
                .json(&body)
                .send()
                .await;
            ok(approve).await
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// A 200 whose body was read in full (so the connection can be reused).
async fn ok(res: reqwest::Result<reqwest::Response>) -> bool {
    match res {
        Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
        _ => false,
    }
}

async fn create(f: &Fixture, key: &str, n: u64) -> Option<Value> {
    let res = f
        .client
        .post(format!("{}/v1/invoices", f.base))
        .bearer_auth(&f.agent)
        .header("idempotency-key", key)
        .json(&draft(f, n))
        .send()
        .await
        .ok()?;
    if res.status() != 201 {
        return None;
    }
    let body: Value = res.json().await.ok()?;
    Some(body["invoice"].clone())
}

#[tokio::main]
async fn main() {
    let mut raw = std::env::args().skip(1);
    if raw.next().as_deref() == Some("--ticks") {
        let (what, pid) = (raw.next(), raw.next().and_then(|p| p.parse().ok()));
        let ticks = match (what.as_deref(), pid) {
            (Some("process"), Some(pid)) => cpu_ticks(pid),
            (Some("cluster"), Some(pid)) => cluster_ticks(pid),
            _ => panic!("usage: loadgen --ticks process|cluster PID"),
        };
        println!("{ticks}");
        return;
    }
    let args = parse_args();
    let fixture = Arc::new(fixture(&args).await);
    if args.scenario == "fixture" {
        let (key, id) = &fixture.invoices[0];
        println!(
            "{}",
            json!({
                "agent_key": fixture.agent,
                "invoice_id": id,
                "idempotency_key": key,
                "body": draft(&fixture, 0).to_string(),
            })
        );
        return;
    }
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // The server's peak resident set is measured over the window from here (scripts/bench
    // reads VmHWM after the run): the setup's sign-in hashes a password with 19 MiB of
    // Argon2 memory that is returned at once, which is not what load costs.
    if let Some(server) = args.server_pid {
        let _ = std::fs::write(format!("/proc/{server}/clear_refs"), "5");
    }
    let server_before = args.server_pid.map(cpu_ticks);
    let db_before = args.db_postmaster.map(cluster_ticks);
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (f, counter, errors, scenario) = (
            Arc::clone(&fixture),
            Arc::clone(&counter),
            Arc::clone(&errors),
            args.scenario.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                if !step(&f, &scenario, n).await {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                hist.saturating_record(t.elapsed().as_micros() as u64);
            }
            hist
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for t in tasks {
        hist.add(t.await.unwrap()).unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Clock ticks are 1/100 s: 10,000 µs each.
    let per_op = |ticks: u64| (ticks as f64 * 10_000.0) / hist.len().max(1) as f64;
    let server_cpu_us = args
        .server_pid
        .zip(server_before)
        .map(|(p, before)| per_op(cpu_ticks(p).saturating_sub(before)));
    let db_cpu_us = args
        .db_postmaster
        .zip(db_before)
        .map(|(p, before)| per_op(cluster_ticks(p).saturating_sub(before)));
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{}",
        json!({
            "scenario": args.scenario,
            "concurrency": args.concurrency,
            "operations": hist.len(),
            "errors": errors.load(Ordering::Relaxed),
            "seconds": elapsed,
            "throughput": hist.len() as f64 / elapsed,
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "p999_ms": ms(0.999),
            "server_cpu_us": server_cpu_us,
            "db_cpu_us": db_cpu_us,
        })
    );
}

/// User plus system CPU time of process `pid` so far, in clock ticks (0 once it is gone).
fn cpu_ticks(pid: u32) -> u64 {
    let fields = stat_fields(pid);
    fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0)
}

/// The CPU time of PostgreSQL so far, in clock ticks: the postmaster's own, its reaped
/// children's (`cutime` + `cstime`: a backend that ended is counted there once reaped) and its
/// live children's. Its difference over a window is the cluster's CPU over it, whichever
/// backends started or ended inside it (a fixed list of backend pids taken at the start misses
/// the ones that start later and loses the ones that end, down to negative figures).
fn cluster_ticks(postmaster: u32) -> u64 {
    let own = stat_fields(postmaster);
    let mut total: u64 = own.iter().skip(11).take(4).sum();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return total;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let fields = stat_fields(pid);
        // The parent is field 4 of the whole line: 2 after the name.
        if fields.get(1) == Some(&u64::from(postmaster)) {
            total += fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
        }
    }
    total
}

/// The numeric fields of `/proc/{pid}/stat` after the command name, as numbers (a field that
/// is not one reads 0); empty once the process is gone.
fn stat_fields(pid: u32) -> Vec<u64> {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Vec::new();
    };
    // The fields after the command name (which may hold spaces) in parentheses.
    // utime, stime, cutime and cstime are fields 14 to 17 of the whole line: 12 to 15 after
    // the name (index 11 to 14 here); the state (index 0) is a letter and reads 0.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0))
        .collect()
}
