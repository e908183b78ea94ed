//! One unit of work of each scenario.

use crate::fixture::{Fixture, draft};
use serde_json::{Value, json};

/// One unit of work of the scenario; returns whether every request in it succeeded.
pub(crate) async fn step(f: &Fixture, scenario: &str, n: u64) -> bool {
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
pub(crate) async fn ok(res: reqwest::Result<reqwest::Response>) -> bool {
    match res {
        Ok(r) if r.status() == 200 => r.bytes().await.is_ok(),
        _ => false,
    }
}

pub(crate) async fn create(f: &Fixture, key: &str, n: u64) -> Option<Value> {
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
