//! The workload: the setup through the API (a human session, agents with their customers and
//! destinations), what clients were told per key, and the lifecycle load (create → submit →
//! approve) of retrying workers.

use crate::driver::{Driver, Outcome};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------------------
// Setup: a human session, agents with their customers and destinations, all through the API.

pub(crate) struct Agent {
    pub(crate) key: String,
    pub(crate) customer: String,
    pub(crate) destination: String,
}

pub(crate) struct Fixture {
    pub(crate) human: String,
    pub(crate) agents: Vec<Agent>,
}

pub(crate) async fn setup_post(d: &Driver, path: &str, token: &str, body: Value) -> Value {
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
pub(crate) const DEMO_EMAIL: &str = "demo@tauros.local";
pub(crate) const DEMO_PASSWORD: &str = "tauros-demo-password";

pub(crate) async fn fixture(d: &Driver, agents: usize, label: &str) -> Fixture {
    fixture_as(d, DEMO_EMAIL, DEMO_PASSWORD, agents, label).await
}

/// A fixture whose human is the approver signing in with `email` and `password`.
pub(crate) async fn fixture_as(
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

pub(crate) fn draft(a: &Agent, key: &str, variant: &str) -> Value {
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
pub(crate) enum Step {
    #[default]
    NotAttempted,
    Acked,
    Refused,
    Indeterminate,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct KeyRecord {
    pub(crate) agent: usize,
    pub(crate) invoice_id: Option<String>,
    pub(crate) revision: Option<(String, String)>,
    pub(crate) steps: [Step; 3],
    pub(crate) uncertain: [bool; 3],
    /// For the storm and race workloads: every invoice id and payload variant acknowledged.
    pub(crate) ids_seen: HashSet<String>,
    pub(crate) variants_acked: HashSet<String>,
    pub(crate) fresh: u64,
    /// When its latest step ended (µs since the driver's epoch).
    pub(crate) last_us: u64,
}

pub(crate) type Records = Arc<Mutex<BTreeMap<String, KeyRecord>>>;

pub(crate) const CREATE: usize = 0;
pub(crate) const SUBMIT: usize = 1;
pub(crate) const APPROVE: usize = 2;

pub(crate) fn step_of(outcome: &Outcome) -> Step {
    match outcome {
        Outcome::Ok { .. } => Step::Acked,
        Outcome::Mismatch | Outcome::Refused(..) => Step::Refused,
        Outcome::Indeterminate => Step::Indeterminate,
    }
}

/// Runs (or re-runs) one step of a key's lifecycle; updates its record.
pub(crate) async fn lifecycle_step(
    d: &Driver,
    f: &Fixture,
    records: &Records,
    key: &str,
    step: usize,
) {
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
pub(crate) const KEYS_PER_WORKER: usize = 10_000;

/// W workers, each with its own keys, until `KEYS_PER_WORKER` keys or the deadline.
pub(crate) async fn lifecycle_load(
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
pub(crate) async fn final_retries(d: &Driver, f: &Fixture, records: &Records) -> u64 {
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
