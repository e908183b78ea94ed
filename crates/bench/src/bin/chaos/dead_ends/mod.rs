//! The dead-end scenarios of the fault campaign (docs/RELIABILITY.md, docs/EFFECTS.md runbook):
//! `refuse` (the peer refuses a seeded fraction), `peerday` (the peer is down for a simulated
//! day and forgets keys) and `restore` (Tauros restored from a backup under a running peer).
//! Each ends with every invoice issued once or waiting visibly for a human, then takes the
//! human path (issue again or cancel) and checks the peer's effects per operation version.
//!
//! The shared parts here; each scenario in its file (refuse.rs, peerday.rs, restore.rs).

mod peerday;
mod refuse;
mod restore;

pub(crate) use peerday::peerday;
pub(crate) use refuse::refuse;
pub(crate) use restore::restore;

use crate::args::Args;
use crate::checker::{DbInvoice, Verdict, peer_operations, uuid_of};
use crate::counters::Counters;
use crate::ctx::Ctx;
use crate::driver::Driver;
use crate::process::{Helper, Server, peer_command, spawn_helper};
use crate::workload::{APPROVE, CREATE, Fixture, KeyRecord, Records, Step, lifecycle_step};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Operation versions looked at per invoice (v1, and one more per "issue again").
const VERSIONS: u32 = 6;

/// What a dead-end scenario hands back to `run()`.
pub(crate) struct DeadEndRun {
    pub(crate) records: Records,
    pub(crate) driver: Arc<Driver>,
    pub(crate) servers: Vec<Server>,
    pub(crate) helpers: Vec<Helper>,
    /// The database the final lifecycle check reads (the restored one for `restore`).
    pub(crate) check_url: String,
}

pub(crate) fn issuer_env(
    peer: &str,
    workers: usize,
    retention: Option<&str>,
) -> Vec<(String, String)> {
    let mut env = vec![
        ("TAUROS_ISSUER", "http".to_owned()),
        ("TAUROS_ISSUER_URL", format!("{peer}/invoices")),
        ("TAUROS_ISSUER_TIMEOUT_SECONDS", "2".to_owned()),
        ("TAUROS_WORKERS", workers.to_string()),
        // Deliveries have a pool of their own: "no worker" means neither pool.
        ("TAUROS_WEBHOOK_WORKERS", workers.min(2).to_string()),
        ("TAUROS_JOB_POLL_MS", "100".to_owned()),
        ("TAUROS_JOB_LEASE_SECONDS", "3".to_owned()),
    ];
    if let Some(r) = retention {
        env.push(("TAUROS_ISSUER_KEY_RETENTION", r.to_owned()));
    }
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The reference peer on a fixed port and a file of its own (so it can be restarted on both).
fn start_peer(args: &Args, port: u16, retention: Option<u64>) -> Helper {
    let db = format!("{}/{}-{}-peer.db", args.work, args.label, args.backend);
    for attempt in 0..5 {
        let cmd = peer_command(args, port, &db, retention);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spawn_helper(args, cmd, "peer")
        })) {
            Ok(h) => return h,
            Err(_) if attempt < 4 => std::thread::sleep(Duration::from_millis(500)),
            Err(e) => std::panic::resume_unwind(e),
        }
    }
    unreachable!()
}

async fn peer_arm(http: &reqwest::Client, peer: &str, fault: Value) {
    let r = http
        .post(format!("{peer}/faults"))
        .json(&fault)
        .send()
        .await
        .expect("arm a fault");
    assert_eq!(r.status().as_u16(), 201, "arming {fault}");
}

async fn peer_clear(http: &reqwest::Client, peer: &str) {
    let _ = http.delete(format!("{peer}/faults")).send().await;
}

/// The peer's stored answer under `op` (a recovery query), if it holds one.
async fn peer_record(http: &reqwest::Client, peer: &str, op: &str) -> Option<Value> {
    let r = http
        .get(format!("{peer}/invoices/{op}"))
        .send()
        .await
        .ok()?;
    if r.status().as_u16() != 200 {
        return None;
    }
    r.json().await.ok()
}

/// Runs `steps` of the lifecycle for `keys`, `concurrency` keys at a time; a step runs only
/// when the one before it was acknowledged.
pub(crate) async fn lifecycle_keys(
    d: &Arc<Driver>,
    f: &Arc<Fixture>,
    records: &Records,
    keys: &[String],
    steps: &[usize],
    concurrency: usize,
) {
    {
        let mut all = records.lock().unwrap();
        for (i, k) in keys.iter().enumerate() {
            all.entry(k.clone()).or_insert_with(|| KeyRecord {
                agent: i % f.agents.len(),
                ..KeyRecord::default()
            });
        }
    }
    let keys = Arc::new(keys.to_vec());
    let steps = Arc::new(steps.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (d, f, records, keys, steps, next) = (
            d.clone(),
            f.clone(),
            records.clone(),
            keys.clone(),
            steps.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                for &s in steps.iter() {
                    if s > CREATE && records.lock().unwrap()[key].steps[s - 1] != Step::Acked {
                        break;
                    }
                    lifecycle_step(&d, &f, &records, key, s).await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

pub(crate) fn keys(pre: &str, set: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{pre}-{set}{i}")).collect()
}

/// The invoice ids of `keys` whose approval was acknowledged.
pub(crate) fn approved_ids(records: &Records, keys: &[String]) -> Vec<String> {
    let all = records.lock().unwrap();
    keys.iter()
        .filter_map(|k| all.get(k))
        .filter(|r| r.steps[APPROVE] == Step::Acked)
        .filter_map(|r| r.invoice_id.clone())
        .collect()
}

async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> Value {
    for _ in 0..20 {
        if let Ok(r) = http.get(url).bearer_auth(token).send().await
            && r.status().as_u16() == 200
            && let Ok(v) = r.json::<Value>().await
        {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("GET {url} failed");
}

/// Where an invoice stands: `issued`, `cancelled`, `approved/<issuing status>`, or its state.
pub(crate) fn standing(inv: &Value) -> String {
    let state = inv["state"].as_str().unwrap_or("?");
    match (state, inv["issuing"]["status"].as_str()) {
        ("approved", Some(s)) => format!("approved/{s}"),
        _ => state.to_owned(),
    }
}

/// Stops for a human: the invoice waits, visibly, for issue-again or cancel.
fn waits_for_human(inv: &Value) -> bool {
    matches!(
        standing(inv).as_str(),
        "approved/rejected" | "approved/conflict" | "approved/needs_review"
    )
}

/// Polls the invoices (bounded) until `done` holds for each; their last answers.
pub(crate) async fn wait_all(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    ids: &[String],
    done: fn(&Value) -> bool,
    within: Duration,
) -> BTreeMap<String, Value> {
    let end = Instant::now() + within;
    let mut out = BTreeMap::new();
    loop {
        for id in ids {
            if out.get(id).is_some_and(done) {
                continue;
            }
            let inv = get_json(http, &format!("{base}/v1/invoices/{id}"), token).await;
            out.insert(id.clone(), inv);
        }
        if out.values().all(done) || Instant::now() > end {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn settled(inv: &Value) -> bool {
    matches!(standing(inv).as_str(), "issued" | "cancelled") || waits_for_human(inv)
}

fn finished(inv: &Value) -> bool {
    matches!(standing(inv).as_str(), "issued" | "cancelled")
}

async fn events_of(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    action: &str,
) -> usize {
    let v = get_json(
        http,
        &format!("{base}/v1/invoices/{id}/events?limit=100"),
        token,
    )
    .await;
    v["items"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|e| e["action"] == action).count())
}

/// The human path: issue again (202) or cancel (200). Returns the status.
async fn human(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    id: &str,
    issue_again: bool,
    answers: &Counters,
) -> u16 {
    let (path, body) = if issue_again {
        (format!("{base}/v1/invoices/{id}/issue"), json!({}))
    } else {
        (
            format!("{base}/v1/invoices/{id}/cancel"),
            json!({"reason": "Chaos campaign: the human path cancels it."}),
        )
    };
    let status = match http.post(path).bearer_auth(token).json(&body).send().await {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    };
    let what = if issue_again { "issue again" } else { "cancel" };
    answers.add(&format!("{what} {status}"), 1);
    status
}

fn org_of(db: &[DbInvoice]) -> Option<uuid::Uuid> {
    db.first().and_then(|i| uuid::Uuid::parse_str(&i.org).ok())
}

fn op(org: uuid::Uuid, id: &str, version: u32) -> String {
    tauros_domain::effect::operation_key(org, "invoice.issue", id, version).to_string()
}

/// The final check, per invoice and operation version (docs/RELIABILITY.md, "What counts as a
/// duplicate"): at most one effect per version; no more versions at the peer than 1 plus the
/// human's issue-agains of that invoice (Tauros never executes a new version by itself); an
/// issued invoice has its effect at the peer; a cancelled one keeps its number void and has
/// nothing at the peer unless it stopped for a human first; every operation at the peer
/// belongs to an invoice of the run (or, for `restore`, to one the restore erased).
#[allow(clippy::too_many_arguments)]
async fn check_final(
    http: &reqwest::Client,
    peer: &str,
    db: &[DbInvoice],
    finals: &BTreeMap<String, Value>,
    reissued: &HashSet<String>,
    waited: &HashSet<String>,
    erased: &HashSet<String>,
    v: &mut Verdict,
) -> Value {
    let ops = peer_operations(http, peer).await;
    let mut by_op: HashMap<String, u64> = HashMap::new();
    for (k, e) in &ops {
        *by_op.entry(k.clone()).or_default() += e;
    }
    let Some(org) = org_of(db) else {
        v.note("no invoice in the database".into());
        v.lost += 1;
        return json!({});
    };
    let mut expected = HashSet::new();
    for id in erased {
        for k in 1..=VERSIONS {
            expected.insert(op(org, id, k));
        }
    }
    let (mut issued, mut cancelled, mut waiting, mut second) = (0u64, 0u64, 0u64, 0u64);
    let mut cancelled_with_record = 0u64;
    for inv in db {
        let id = uuid_of(&inv.id);
        let mut versions = 0u64;
        for k in 1..=VERSIONS {
            let key = op(org, &id, k);
            let e = by_op.get(&key).copied().unwrap_or(0);
            expected.insert(key);
            if e > 1 {
                v.duplicated += 1;
                v.note(format!("{}: {e} effects under v{k} at the peer", inv.key));
            }
            if e > 0 {
                versions += 1;
            }
        }
        let allowed = 1 + u64::from(reissued.contains(&id));
        if versions > allowed {
            v.duplicated += 1;
            v.note(format!(
                "{}: {versions} versions at the peer, the human asked for {}",
                inv.key,
                allowed - 1
            ));
        }
        let Some(fin) = finals.get(&id) else { continue };
        match standing(fin).as_str() {
            "issued" => {
                issued += 1;
                if versions == 0 {
                    v.lost += 1;
                    v.note(format!("{}: issued locally, nothing at the peer", inv.key));
                }
                if versions == 2 {
                    second += 1;
                }
            }
            "cancelled" => {
                cancelled += 1;
                if fin["number"].is_string() && fin["number_void"] != true {
                    v.wrong += 1;
                    v.note(format!("{}: cancelled with a number not void", inv.key));
                }
                if versions > 0 {
                    cancelled_with_record += 1;
                    if !waited.contains(&id) {
                        v.unexpected += 1;
                        v.note(format!(
                            "{}: cancelled, never stopped for a human, yet at the peer",
                            inv.key
                        ));
                    }
                }
            }
            s if waits_for_human(fin) => {
                waiting += 1;
                v.note(format!("{}: still waiting for a human ({s})", inv.key));
            }
            "approved" => {
                v.lost += 1;
                v.note(format!(
                    "{}: approved, never issued, no stop shown",
                    inv.key
                ));
            }
            _ => {}
        }
    }
    for k in by_op.keys() {
        if !expected.contains(k) {
            v.unexpected += 1;
            v.note(format!("the peer holds {k}, no invoice of this run"));
        }
    }
    let effects: u64 = by_op.values().sum();
    json!({
        "issued": issued,
        "cancelled": cancelled,
        "waiting": waiting,
        "peer_operations": ops.len(),
        "peer_effects": effects,
        "issued_with_two_versions": second,
        "cancelled_with_a_record_at_the_peer": cancelled_with_record,
    })
}

fn pick(ctx: &Ctx, ids: &[String], one_in: u64) -> HashSet<String> {
    let mut out: HashSet<String> = ids
        .iter()
        .filter(|_| ctx.below(one_in) == 0)
        .cloned()
        .collect();
    if out.is_empty()
        && let Some(first) = ids.get(ctx.below(ids.len() as u64) as usize)
    {
        out.insert(first.clone());
    }
    out
}

/// The human path over `ids` (all waiting): a seeded third cancelled, the rest issued again.
async fn human_path(
    ctx: &Ctx,
    http: &reqwest::Client,
    base: &str,
    token: &str,
    ids: &[String],
    answers: &Counters,
    v: &mut Verdict,
) -> HashSet<String> {
    let mut reissued = HashSet::new();
    for id in ids {
        let again = ctx.below(3) != 0;
        let status = human(http, base, token, id, again, answers).await;
        if status != if again { 202 } else { 200 } {
            v.wrong += 1;
            v.note(format!("{id}: the human path answered {status}"));
        }
        if again {
            reissued.insert(id.clone());
        }
    }
    reissued
}

fn summary(figs: &Value, parts: &[(&str, String)]) -> String {
    let mut s: Vec<String> = parts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    s.push(format!(
        "end: issued {}, cancelled {}, waiting {}; peer effects {} in {} operations",
        figs["issued"],
        figs["cancelled"],
        figs["waiting"],
        figs["peer_effects"],
        figs["peer_operations"]
    ));
    s.join("; ")
}
