//! `refuse`: the peer refuses a seeded fraction of the issues.

use super::{
    DeadEndRun, approved_ids, check_final, events_of, finished, human_path, issuer_env, keys,
    lifecycle_keys, op, org_of, peer_arm, peer_clear, pick, settled, standing, start_peer, summary,
    wait_all,
};
use crate::checker::{Verdict, db_invoices};
use crate::counters::Counters;
use crate::ctx::{Ctx, prefix};
use crate::driver::Driver;
use crate::process::{Server, free_port};
use crate::workload::{APPROVE, CREATE, Records, SUBMIT, Step, fixture};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// `refuse`: under a load of approvals, the peer refuses a seeded fraction (`refuse_422`
/// armed per operation key). Each refused invoice stops at `rejected` (one `issue_rejected`),
/// every other one is issued once; then the fault is cleared and a human issues again or
/// cancels each rejected one.
pub(crate) async fn refuse(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> DeadEndRun {
    let args = &ctx.args;
    let q = args.quick;
    let pre = prefix(args);
    let port = free_port();
    let peer = start_peer(args, port, None);
    let mut s = Server::new(args, "serve", issuer_env(&peer.url, 2, None));
    s.start(http, true).await;
    let base = s.base();
    let driver = Arc::new(Driver::new(
        vec![base.clone()],
        true,
        Duration::from_secs(20),
    ));
    let f = Arc::new(fixture(&driver, 3, &args.label).await);
    let token = f.human.clone();
    let records: Records = Arc::default();
    let n = if q { 24 } else { 80 };
    let all = keys(&pre, "r", n);
    lifecycle_keys(&driver, &f, &records, &all, &[CREATE, SUBMIT], 4).await;
    let db = db_invoices(&args.db_url, &pre).await.expect("read");
    let org = org_of(&db).expect("an invoice");
    let created: Vec<String> = {
        let r = records.lock().unwrap();
        all.iter()
            .filter_map(|k| r.get(k))
            .filter(|r| r.steps[SUBMIT] == Step::Acked)
            .filter_map(|r| r.invoice_id.clone())
            .collect()
    };
    let refused = pick(ctx, &created, 4);
    for id in &refused {
        peer_arm(
            http,
            &peer.url,
            json!({"mode": "refuse_422", "op_key": op(org, id, 1), "reason": "chaos: customer tax id missing"}),
        )
        .await;
    }
    ctx.faults
        .add("refuse_422 armed (per key)", refused.len() as u64);
    lifecycle_keys(&driver, &f, &records, &all, &[APPROVE], 4).await;
    let ids = approved_ids(&records, &all);
    let mid = wait_all(http, &base, &token, &ids, settled, Duration::from_secs(40)).await;
    let mut rejected = Vec::new();
    for (id, inv) in &mid {
        let st = standing(inv);
        if st == "approved/rejected" {
            rejected.push(id.clone());
            if !refused.contains(id) {
                v.wrong += 1;
                v.note(format!(
                    "{id}: rejected but the peer was not told to refuse it"
                ));
            }
            let n = events_of(http, &base, &token, id, "issue_rejected").await;
            if n != 1 {
                v.wrong += 1;
                v.note(format!("{id}: {n} issue_rejected events"));
            }
        } else if refused.contains(id) {
            v.wrong += 1;
            v.note(format!("{id}: refused by the peer, but {st}"));
        } else if st != "issued" {
            v.lost += 1;
            v.note(format!("{id}: not refused, yet {st}"));
        }
    }
    let stopped_mid: BTreeMap<String, u64> = mid.values().fold(BTreeMap::new(), |mut m, inv| {
        *m.entry(standing(inv)).or_default() += 1;
        m
    });
    // The cause is fixed: the faults are cleared, and a human takes each one.
    peer_clear(http, &peer.url).await;
    let answers = Counters::default();
    let reissued = human_path(ctx, http, &base, &token, &rejected, &answers, v).await;
    let finals = wait_all(http, &base, &token, &ids, finished, Duration::from_secs(40)).await;
    let db = db_invoices(&args.db_url, &pre).await.expect("read");
    let waited: HashSet<String> = rejected.iter().cloned().collect();
    let figs = check_final(
        http,
        &peer.url,
        &db,
        &finals,
        &reissued,
        &waited,
        &HashSet::new(),
        v,
    )
    .await;
    // Refused means nothing stored: the peer's effects are exactly the local issues.
    let local: u64 = db.iter().map(|i| i.issued as u64).sum();
    if figs["peer_effects"].as_u64() != Some(local) {
        v.wrong += 1;
        v.note(format!(
            "peer effects {} ≠ local issues {local}",
            figs["peer_effects"]
        ));
    }
    let line = summary(
        &figs,
        &[
            ("approved", ids.len().to_string()),
            ("refused", refused.len().to_string()),
            ("stopped", format!("{stopped_mid:?}")),
            ("human", format!("{:?}", answers.snapshot())),
            ("local issues", local.to_string()),
        ],
    );
    let mut figs = figs;
    figs["summary"] = json!(line);
    figs["mid"] = json!(stopped_mid);
    figs["human"] = json!(answers.snapshot());
    extra.insert("effects.dead_ends".into(), figs);
    DeadEndRun {
        records,
        driver,
        servers: vec![s],
        helpers: vec![peer],
        check_url: args.db_url.clone(),
    }
}
