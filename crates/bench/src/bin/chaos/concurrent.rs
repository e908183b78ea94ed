//! The calm scenarios: `storm` (many identical requests per key, released together) and
//! `race` (two payloads per key, released together), with their own check.

use crate::checker::{DbInvoice, Verdict};
use crate::ctx::{Ctx, prefix};
use crate::driver::{Driver, Outcome};
use crate::workload::{CREATE, Fixture, KeyRecord, Records, Step, draft, step_of};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// S2: many identical requests per key, released together.
pub(crate) async fn storm(ctx: &Ctx, d: Arc<Driver>, f: Arc<Fixture>) -> (Records, u64, u64) {
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
pub(crate) async fn race(ctx: &Ctx, d: Arc<Driver>, f: Arc<Fixture>) -> (Records, u64, u64) {
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
pub(crate) fn check_concurrent(
    records: &BTreeMap<String, KeyRecord>,
    db: &[DbInvoice],
    v: &mut Verdict,
) {
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
