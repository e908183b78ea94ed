//! `resend`: webhook deliveries failed while the receiver was down, each resent three times at
//! once; each must arrive exactly once, with the webhook-id of its event.

use crate::checker::{Verdict, receiver_deliveries};
use crate::counters::Counters;
use crate::ctx::{Ctx, ScenarioRun};
use crate::driver::Driver;
use crate::nemesis::with_nemesis;
use crate::process::{Helper, Server, free_port, spawn_receiver};
use crate::workload::{Records, fixture, setup_post};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `resend`: a webhook receiver down past every delivery's retry budget, then resent.
pub(crate) async fn resend(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
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
    s.start(http, true).await;
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
    records = with_nemesis(ctx, driver.clone(), f.clone(), 2, load_for, |_| async {}).await;
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
                let (client, token, answers) = (http.clone(), f.human.clone(), answers.clone());
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
        let got = receiver_deliveries(http, &hooks).await;
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
    let got = receiver_deliveries(http, &hooks).await;
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
    ScenarioRun {
        records,
        driver,
        servers,
        helpers,
    }
}
