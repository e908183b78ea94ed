//! The tenancy scenarios of the fault campaign (docs/RELIABILITY.md, "Tenancy"; the contract's
//! "Tenancy: bounds, fairness and authority over money"):
//!
//! - `noisy`: organisation A floods (an agent revising one invoice at its rate limit, 20
//!   black-hole webhook endpoints, a settlement flood, slow request bodies from one address)
//!   while organisation B works normally; B's latencies quiet and under the flood, and both
//!   organisations' job waits from the jobs API.
//! - `anonflood`: wrong sign-ins with distinct 254-character emails and parallel invitation
//!   accepts with bogus tokens from other loopback addresses, while a legitimate sign-in is
//!   attempted; the server process's peak resident memory.
//! - `slowheads`: slow request heads from 1,100 addresses fill the connection cap while a
//!   prompt client asks every 250 ms; its answers must come within a second.
//!
//! The shared parts here; `noisy` in noisy.rs, with what it measures (measure.rs) and A's
//! flood (flood.rs); `anonflood` in anonflood.rs; `slowheads` in slowheads.rs; the report's
//! tables in tables.rs.

mod anonflood;
mod flood;
mod measure;
mod noisy;
mod slowheads;
mod tables;

pub(crate) use anonflood::anonflood;
pub(crate) use noisy::noisy;
pub(crate) use slowheads::slowheads;
pub(crate) use tables::tables;

use crate::args::Args;
use crate::driver::Driver;
use crate::process::{Helper, Server, peer_command, record_pid, spawn_helper};
use crate::workload::Records;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a tenancy scenario hands back to `run()`.
pub(crate) struct TenancyRun {
    pub(crate) records: Records,
    pub(crate) driver: Arc<Driver>,
    pub(crate) servers: Vec<Server>,
    pub(crate) helpers: Vec<Helper>,
}

impl TenancyRun {
    /// A scenario that checks no lifecycle: one server, no records.
    fn of_server(server: Server) -> TenancyRun {
        let driver = Driver::new(vec![server.base()], true, Duration::from_secs(10));
        TenancyRun {
            records: Arc::default(),
            driver: Arc::new(driver),
            servers: vec![server],
            helpers: Vec::new(),
        }
    }
}

/// Reports scenario `name`: its summary printed and first among the notes, each failure noted,
/// its figures under `name` and the summary as the tenancy effect; failures fail the run.
fn report(
    name: &str,
    summary: &str,
    failed: &[String],
    figures: Value,
    v: &mut crate::checker::Verdict,
    extra: &mut std::collections::BTreeMap<String, Value>,
) {
    eprintln!("{name}: {summary}");
    v.notes.insert(0, summary.to_owned());
    for f in failed {
        v.note(format!("{name} failed: {f}"));
    }
    extra.insert(name.into(), figures);
    extra.insert(
        "effects.tenancy".into(),
        serde_json::json!({"summary": summary}),
    );
    if !failed.is_empty() {
        extra.insert("scenario_failed".into(), serde_json::json!(failed));
    }
}

/// The `p`-th percentile (0–100) of `v` (sorted here), nearest rank; 0 when empty.
fn percentile(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

fn ms(us: u64) -> f64 {
    (us as f64 / 100.0).round() / 10.0
}

/// A client whose connections come from the loopback address `from` (Linux routes all of
/// 127/8 to `lo`, so the server sees `from` as the client's address).
fn client_from(from: [u8; 4], keep_alive: bool, timeout: Duration) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(2))
        .local_address(std::net::IpAddr::from(from));
    if !keep_alive {
        b = b.pool_max_idle_per_host(0);
    }
    b.build().unwrap()
}

/// Status (0: a transport error) and how long one request took.
async fn timed(req: reqwest::RequestBuilder) -> (u16, u64, Value) {
    let t = Instant::now();
    match req.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let body = r.json::<Value>().await.unwrap_or(Value::Null);
            (status, t.elapsed().as_micros() as u64, body)
        }
        Err(_) => (0, t.elapsed().as_micros() as u64, Value::Null),
    }
}

fn code_of(status: u16, body: &Value) -> String {
    match body["code"].as_str() {
        Some(c) if status >= 400 => format!("{status} {c}"),
        _ => status.to_string(),
    }
}

fn start_peer(args: &Args) -> Helper {
    let db = format!("{}/{}-{}-peer.db", args.work, args.label, args.backend);
    spawn_helper(args, peer_command(args, 0, &db, None), "peer")
}

fn env_of(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// `tauros bootstrap-approver`: a second organisation and its first approver.
fn bootstrap_org(args: &Args, org: &str, email: &str, password: &str) {
    let mut child = Command::new(&args.bin)
        .arg("bootstrap-approver")
        .arg("--org")
        .arg(org)
        .arg("--email")
        .arg(email)
        .arg("--password-stdin")
        .env("DATABASE_URL", &args.db_url)
        .env("TAUROS_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn bootstrap-approver");
    record_pid(args, child.id());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "bootstrap-approver {org}: {status}");
}
