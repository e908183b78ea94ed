//! The checker: what the database (and the reference peer, and the webhook receiver) holds,
//! per key of this run, against what clients were told.

use crate::workload::{CREATE, KeyRecord, Step};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------------------------------
// The checker: what the database holds, per key of this run.

#[derive(Clone, Debug, Default)]
pub(crate) struct DbInvoice {
    pub(crate) key: String,
    pub(crate) state: String,
    pub(crate) id: String,
    pub(crate) org: String,
    pub(crate) revisions: i64,
    pub(crate) created: i64,
    pub(crate) submitted: i64,
    pub(crate) approved: i64,
    pub(crate) issued: i64,
    pub(crate) decisions: i64,
    pub(crate) lines: String,
}

pub(crate) async fn db_invoices(url: &str, prefix: &str) -> anyhow::Result<Vec<DbInvoice>> {
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
           coalesce((select r.canonical_payload from invoice_revisions r
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

pub(crate) fn uuid_of(hex: &str) -> String {
    uuid::Uuid::parse_str(hex)
        .map(|u| u.to_string())
        .unwrap_or_default()
}

#[derive(Default, Debug)]
pub(crate) struct Verdict {
    pub(crate) figures: BTreeMap<String, Value>,
    pub(crate) lost: u64,
    pub(crate) duplicated: u64,
    pub(crate) unexpected: u64,
    pub(crate) recovered: u64,
    pub(crate) wrong: u64,
    pub(crate) notes: Vec<String>,
}

impl Verdict {
    pub(crate) fn note(&mut self, s: String) {
        if self.notes.len() < 20 {
            eprintln!("checker: {s}");
            self.notes.push(s);
        }
    }
}

/// The lifecycle check: every acknowledged step is present exactly once, nothing present was
/// never attempted, and indeterminate steps may go either way (present ones are "recovered").
pub(crate) fn check_lifecycle(
    records: &BTreeMap<String, KeyRecord>,
    db: &[DbInvoice],
    v: &mut Verdict,
) {
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

/// The webhook receiver's deliveries at `url`.
pub(crate) async fn receiver_deliveries(client: &reqwest::Client, url: &str) -> Vec<Value> {
    match client.get(url).send().await {
        Ok(r) => r.json::<Value>().await.map_or_else(
            |_| Vec::new(),
            |v| v["deliveries"].as_array().cloned().unwrap_or_default(),
        ),
        Err(_) => Vec::new(),
    }
}

pub(crate) async fn peer_operations(client: &reqwest::Client, peer: &str) -> Vec<(String, u64)> {
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
pub(crate) const ALL_EVENTS: [&str; 3] = ["invoice.created", "invoice.approved", "invoice.issued"];

pub(crate) async fn check_effects(
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

/// Waits (bounded) until every approved invoice of the run is issued, each webhook of
/// `events` the database says happened has arrived (a delivery may wait out a killed replica's
/// lease), and the webhook count stops moving. Only the bound ends a wait with webhooks missing:
/// the checker then counts them lost.
pub(crate) async fn settle(
    client: &reqwest::Client,
    url: &str,
    pre: &str,
    hooks: &str,
    events: &[&str],
    within: Duration,
) {
    let end = Instant::now() + within;
    let mut last = usize::MAX;
    let mut stable = 0;
    while Instant::now() < end {
        let db = db_invoices(url, pre).await.unwrap_or_default();
        let pending = db
            .iter()
            .filter(|i| i.state == "approved" || (i.approved > 0 && i.issued == 0))
            .count();
        let expected: usize = db
            .iter()
            .map(|i| {
                [
                    ("invoice.created", i.created > 0),
                    ("invoice.approved", i.approved > 0),
                    ("invoice.issued", i.issued > 0),
                ]
                .iter()
                .filter(|(ty, happened)| *happened && events.contains(ty))
                .count()
            })
            .sum();
        let deliveries = receiver_deliveries(client, hooks).await;
        let arrived: HashSet<&str> = deliveries
            .iter()
            .filter_map(|d| d["webhook_id"].as_str())
            .collect();
        let n = deliveries.len();
        if pending == 0 && arrived.len() >= expected && n == last {
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
