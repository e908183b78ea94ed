//! The bank feed of the HA scenario and its check: every issued invoice paid in full, once.

use crate::checker::Verdict;
use crate::driver::{Driver, Outcome};
use serde_json::{Value, json};
use sqlx::Connection;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A payment the feed reported for one invoice: what it sent and how it was answered.
#[derive(Clone, Debug)]
pub(super) struct Paid {
    amount_minor: String,
    /// A 2xx answered (the first delivery or a redelivery).
    acknowledged: bool,
    /// Deliveries of its event (1, or 2 when redelivered).
    deliveries: u32,
}

/// The bank feed: pays every issued invoice of the fixture in full, once per invoice, through
/// the retrying driver (an event id per invoice, so a retry is a redelivery), and redelivers
/// every fifth event once more. Runs until `last_pass` is set, then pays what is still unpaid
/// once more and returns.
pub(super) async fn feed_payments(
    driver: Arc<Driver>,
    human: String,
    key: String,
    payments: Arc<Mutex<BTreeMap<String, Paid>>>,
    last_pass: Arc<AtomicBool>,
    seed: u64,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    loop {
        let finishing = last_pass.load(Ordering::Relaxed);
        let mut cursor: Option<String> = None;
        for _page in 0..200 {
            let mut url = format!("{}/v1/invoices?state=issued&limit=100", driver.base());
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let Ok(res) = client.get(&url).bearer_auth(&human).send().await else {
                break;
            };
            if !res.status().is_success() {
                break; // a failover: the next round reads again
            }
            let Ok(page) = res.json::<Value>().await else {
                break;
            };
            for inv in page["items"].as_array().cloned().unwrap_or_default() {
                let id = inv["id"].as_str().unwrap_or("").to_owned();
                if id.is_empty() || payments.lock().unwrap().contains_key(&id) {
                    continue;
                }
                let rev = &inv["current_revision"];
                let amount = match &rev["total_minor"] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let body = json!({
                    "source": "ha-bank", "event_id": format!("evt-{seed}-{id}"),
                    "payment_id": format!("pay-{seed}-{id}"), "invoice_id": id,
                    "amount_minor": rev["total_minor"], "currency": rev["currency"],
                    "status": "confirmed",
                    "occurred_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                });
                let redeliver = payments.lock().unwrap().len().is_multiple_of(5);
                let mut paid = Paid {
                    amount_minor: amount,
                    acknowledged: false,
                    deliveries: 0,
                };
                for _ in 0..if redeliver { 2 } else { 1 } {
                    paid.deliveries += 1;
                    let (outcome, _) = driver
                        .call(
                            "settle",
                            "/v1/settlement-events",
                            &key,
                            None,
                            Some(&body),
                            Duration::from_secs(30),
                        )
                        .await;
                    paid.acknowledged |= matches!(outcome, Outcome::Ok { .. });
                }
                payments.lock().unwrap().insert(id, paid);
            }
            match page["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        if finishing {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Per invoice: its payments, their recorded events, its `payment_applied` events, the
/// amount paid, its state.
type PaymentRow = (i64, i64, i64, Option<String>, Option<String>);

/// The settlement check on the new primary: every payment the feed had acknowledged is there
/// exactly once (one payment, one recorded event however often it was delivered, one
/// `payment_applied`), for its amount, and its invoice is paid; one only attempted is there at
/// most once.
pub(super) async fn check_payments(
    url: &str,
    paid: &BTreeMap<String, Paid>,
    v: &mut Verdict,
) -> Value {
    let mut conn = match sqlx::PgConnection::connect(url).await {
        Ok(conn) => conn,
        Err(e) => {
            v.note(format!("settlement check: cannot connect: {e}"));
            v.wrong += 1;
            return json!({"error": e.to_string()});
        }
    };
    let (mut acknowledged, mut lost, mut duplicated, mut wrong, mut redelivered) = (0, 0, 0, 0, 0);
    for (id, p) in paid {
        if p.deliveries > 1 {
            redelivered += 1;
        }
        let row: Option<PaymentRow> = sqlx::query_as(
            "select (select count(*) from payments p where p.invoice_id = i.id and p.source = 'ha-bank'),
                    (select count(*) from settlement_events e where e.org_id = i.org_id
                       and e.source = 'ha-bank' and e.source_event_id like 'evt-%-' || i.id::text),
                    (select count(*) from invoice_events e where e.org_id = i.org_id
                       and e.invoice_id = i.id and e.action = 'payment_applied'),
                    (select min(p.amount_minor) from payments p where p.invoice_id = i.id and p.source = 'ha-bank'),
                    i.state
             from invoices i where i.id = $1::uuid",
        )
        .bind(id)
        .fetch_optional(&mut conn)
        .await
        .unwrap_or(None);
        let Some((payments, events, applied, amount, state)) = row else {
            if p.acknowledged {
                lost += 1;
                v.note(format!("settlement: invoice {id} is gone"));
            }
            continue;
        };
        if p.acknowledged {
            acknowledged += 1;
            if payments == 0 || events == 0 || applied == 0 {
                lost += 1;
                v.note(format!(
                    "settlement: acknowledged payment of {id} lost ({payments} payments, {events} events, {applied} applied)"
                ));
                continue;
            }
        }
        if payments > 1 || events > 1 || applied > 1 {
            duplicated += 1;
            v.note(format!(
                "settlement: {id} has {payments} payments, {events} events, {applied} applied"
            ));
        } else if payments == 1
            && (amount.as_deref() != Some(p.amount_minor.as_str())
                || state.as_deref() != Some("paid"))
        {
            wrong += 1;
            v.note(format!(
                "settlement: {id} paid {amount:?} (sent {}), state {state:?}",
                p.amount_minor
            ));
        }
    }
    let _ = conn.close().await;
    v.lost += lost;
    v.duplicated += duplicated;
    v.wrong += wrong;
    json!({
        "payments_sent": paid.len(),
        "acknowledged": acknowledged,
        "redelivered": redelivered,
        "lost": lost,
        "duplicated": duplicated,
        "wrong": wrong,
    })
}
